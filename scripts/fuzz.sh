#!/usr/bin/env bash
# Runs every libFuzzer target of the fuzz preset for SECONDS each (default 60): first the
# regression inputs of fuzz/regressions/TARGET/ (each once), then fuzzing from the seeds
# (fuzz/seeds/TARGET/, and workloads/ for the workload parser) into a corpus kept under
# out/fuzz/corpus/TARGET/, so that a later run starts where this one stopped.
#
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]      # BUILD_DIR defaults to build/fuzz
#
# A crash, a leak, a sanitizer report or a hang (10 s per input) stops the target; the input is
# written to out/fuzz/TARGET-crash-* (or -leak-, -timeout-) and the script exits 1. Reproduce
# with `build/fuzz/fuzz/TARGET FILE`; once fixed, the input goes to fuzz/regressions/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
build=${2:-build/fuzz}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi

# Sanitizer reports with their stack, so that a failure in CI can be read from the log alone.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
status=0
for target in workload json_body surrogate dataset; do
  bin=$build/fuzz/fuzz_$target
  if [[ ! -x $bin ]]; then
    echo "fuzz: $bin is missing (cmake --preset fuzz && cmake --build --preset fuzz)" >&2
    exit 2
  fi
  corpus=out/fuzz/corpus/$target
  mkdir -p "$corpus"
  log=out/fuzz/$target.log
  flags=(-timeout=10 -rss_limit_mb=2048 -seed=1 "-artifact_prefix=out/fuzz/$target-")

  regressions=(fuzz/regressions/$target/*)
  if [[ -e ${regressions[0]} ]]; then
    if ! "$bin" "${flags[@]}" "${regressions[@]}" >"$log" 2>&1; then
      echo "fuzz: $target: a regression input fails again (log: $log)" >&2
      tail -20 "$log" >&2
      status=1
      continue
    fi
  fi

  seeds=(fuzz/seeds/$target)
  [[ $target == workload ]] && seeds=(workloads examples)
  if "$bin" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 \
       "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    size=$(find "$corpus" -type f | wc -l)
    echo "fuzz: $target: ${runs:-?} inputs in ${seconds} s, no failure; corpus $size inputs"
  else
    echo "fuzz: $target: FAILED (log: $log; inputs: out/fuzz/$target-*)" >&2
    grep -E "^==[0-9]+==|SUMMARY|runtime error|deadly signal|Test unit written" "$log" | head -20 >&2 || true
    status=1
  fi
done
exit $status
