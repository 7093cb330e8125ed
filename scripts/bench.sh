#!/usr/bin/env bash
# Runs every Google Benchmark program of a release build and keeps the JSON under out/bench/.
set -euo pipefail
build=${1:-build/release}
mkdir -p out/bench
found=0
for b in "$build"/bench/bench_*; do
  [[ -x $b ]] || continue
  found=$((found + 1))
  name=$(basename "$b")
  echo "== $name"
  "$b" --benchmark_out="out/bench/$name.json" --benchmark_out_format=json
done
if ((found == 0)); then
  echo "bench.sh: no benchmark programs under $build/bench (configure with CORUN_BUILD_BENCH=ON)" >&2
  exit 1
fi
