#!/usr/bin/env bash
# `make eval`: reproduces the result documents under docs/results/ from the simulator.
# Each evaluation prints its JSON rows to out/eval/ and rewrites its Markdown document.
set -euo pipefail
corun=${1:-build/dev/corun}
mkdir -p out/eval
ran=0
if "$corun" eval placement --help >/dev/null 2>&1; then
  echo "== eval placement (docs/results/placement.md)"
  "$corun" eval placement workloads/tools --json --markdown docs/results/placement.md \
    >out/eval/placement.json
  ran=$((ran + 1))
fi
echo "eval: $ran evaluation(s) reproduced; JSON in out/eval/"
