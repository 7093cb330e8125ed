#!/usr/bin/env bash
# `make eval`: reruns the evaluations behind docs/results/ on the simulator and keeps their JSON
# under out/eval/ (deterministic: the same commands print the same numbers as the documents).
set -euo pipefail
corun=${1:-build/dev/corun}
mkdir -p out/eval
echo "== eval placement: 13 scenarios (docs/results/placement.md)"
"$corun" eval placement workloads/tools --json --html out/eval/placement.html \
  >out/eval/placement.json
echo "== eval placement: 100 generated scenarios"
"$corun" eval placement --random 100 --random-seed 1000 --threads 2 --json \
  >out/eval/placement-random.json
echo "== plans that leave room for a declared tool burst (docs/results/placement.md)"
scripts/eval-tools-burst.sh "$corun" >out/eval/tools-burst.md
echo "== tools profile"
"$corun" tools profile --json >out/eval/tools-profile.json
echo "== eval surrogate: MeanField vs joint and pairwise, N = 2..6 (docs/results/surrogate.md)"
"$corun" eval surrogate workloads/paper-n6.yaml workloads/mix-l4.yaml workloads/mix-a100.yaml \
  --n 2..6 --seeds 3 --json --markdown docs/results/surrogate.md --html out/eval/surrogate.html \
  >out/eval/surrogate.json
echo "== eval scheduler: 8 scenarios, GA, learning off and on (docs/results/scheduler.md)"
"$corun" eval scheduler --scenarios workloads/scenarios --solvers ga --learning off,on \
  --out out/eval/scheduler --quiet --json --markdown docs/results/scheduler.md \
  --html out/eval/scheduler.html \
  --title "Online scheduler: learning off and on, eight scenarios" >out/eval/scheduler.json
echo "== eval scheduler: 5 new mixes (docs/results/mixes.md)"
"$corun" eval scheduler --scenarios workloads/mixes --solvers ga --learning off,on \
  --out out/eval/mixes --no-exhaustive --quiet --json --markdown docs/results/mixes.md \
  --html out/eval/mixes.html \
  --title "Online scheduler on five new mixes (written before corun ran on them)" \
  >out/eval/mixes.json
echo "== eval scheduler: drift the planner is not told about (docs/results/drift.md)"
"$corun" eval scheduler --scenarios workloads/drift --solvers ga --learning off,on \
  --out out/eval/drift --no-exhaustive --quiet --json --markdown docs/results/drift.md \
  --html out/eval/drift.html \
  --title "Online scheduler under drift the planner is not told about" >out/eval/drift.json
echo "== eval scheduler with exploration, --explore 1 (docs/results/explore-*.md)"
"$corun" eval scheduler --scenarios workloads/scenarios --solvers ga --learning on --explore 1 \
  --out out/eval/scheduler --quiet --json --markdown docs/results/explore-scheduler.md \
  --html out/eval/explore-scheduler.html \
  --title "Online scheduler with exploration (--explore 1): eight scenarios" \
  >out/eval/explore-scheduler.json
"$corun" eval scheduler --scenarios workloads/mixes --solvers ga --learning on --explore 1 \
  --out out/eval/mixes --no-exhaustive --quiet --json --markdown docs/results/explore-mixes.md \
  --html out/eval/explore-mixes.html \
  --title "Online scheduler with exploration (--explore 1): five new mixes" \
  >out/eval/explore-mixes.json
"$corun" eval scheduler --scenarios workloads/drift --solvers ga --learning on --explore 1 \
  --out out/eval/drift --no-exhaustive --quiet --json --markdown docs/results/explore-drift.md \
  --html out/eval/explore-drift.html \
  --title "Online scheduler with exploration (--explore 1): drift" >out/eval/explore-drift.json
echo "== make run's report (reuses out/run/random-churn when it is there)"
# Exit code 1 is a measured SLA breach: the run still wrote its report.
"$corun" run workloads/scenarios/random-churn.yaml --quiet >out/eval/run.txt || [[ $? == 1 ]]
echo "== eval cluster: 200 arrivals over 4 nodes x 8 A100 (docs/results/cluster.md)"
"$corun" eval cluster workloads/cluster/a100-mix.yaml --nodes 4 --gpus 8 --arrivals 200 --seed 1 \
  --json >out/eval/cluster.json
echo "== eval cluster at bin-packing's GPU count: at most 1 and 2 GPUs in use (docs/results/cluster.md)"
for budget in 1 2; do
  "$corun" eval cluster workloads/cluster/a100-mix.yaml --nodes 4 --gpus 8 --arrivals 200 \
    --seed 1 --gpu-budget "$budget" --json >"out/eval/cluster-budget$budget.json"
done
echo "== screenshots of the pages (docs/results/*.png), with headless Chromium"
# Chromium is large (about 290 MB installed): installed here, for `make eval` only.
if CORUN_EXTRA_PACKAGES=chromium scripts/install-deps.sh; then
  scripts/screenshot.sh out/run/random-churn/report.html docs/results/run-report.png
  # Every page an evaluation above wrote (--html out/eval/NAME.html) -> docs/results/NAME.png.
  for page in out/eval/*.html; do
    scripts/screenshot.sh "$page" "docs/results/$(basename "$page" .html).png"
  done
else
  echo "eval: chromium could not be installed; screenshots skipped" >&2
fi
echo "eval: JSON and HTML pages in out/eval/"
