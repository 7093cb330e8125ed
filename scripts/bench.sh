#!/usr/bin/env bash
# Runs every Google Benchmark program of a release build and keeps the JSON under out/bench/.
set -euo pipefail
build=${1:-build/release}
mkdir -p out/bench
for b in "$build"/bench_*; do
  [[ -x $b ]] || continue
  name=$(basename "$b")
  echo "== $name"
  "$b" --benchmark_out="out/bench/$name.json" --benchmark_out_format=json
done
