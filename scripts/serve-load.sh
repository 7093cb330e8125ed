#!/usr/bin/env bash
# Load test of `corun serve` over loopback (docs/results/serve.md): starts a server on a fresh
# state with workloads/paper-n3.yaml, drives it with corun_serve_load while a re-plan is
# requested every 100 ms, and keeps the JSON under out/bench/. Bounded: two runs of 10 s.
set -euo pipefail
build=${1:-build/release}
corun=$build/corun
load=$build/corun_serve_load
seconds=${SERVE_LOAD_SECONDS:-10}
mkdir -p out/bench
state=$(mktemp -d)
cleanup() {
  if [[ -n ${pid:-} ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$state"
}
trap cleanup EXIT
"$corun" serve --state "$state/db" --workload workloads/paper-n3.yaml --port 0 \
  --port-file "$state/port" --min-replan-ms 0 2>"$state/serve.log" &
pid=$!
for _ in $(seq 100); do [[ -s $state/port ]] && break; sleep 0.1; done
[[ -s $state/port ]] || { cat "$state/serve.log"; exit 1; }
port=$(cat "$state/port")
models=chat,cam0,cam1  # the models of workloads/paper-n3.yaml
echo "== serve load: 5600 requests/s target (5040 telemetry posts/s + 560 plan queries/s), 4 connections, ${seconds}s, re-plan every 100 ms"
"$load" --port "$port" --token-file "$state/db/token" --models "$models" --connections 4 \
  --rate 5600 --seconds "$seconds" --replan-ms 100 | tee out/bench/serve-load-5600.json
echo "== serve load: as fast as possible, 4 connections, ${seconds}s, re-plan every 100 ms"
"$load" --port "$port" --token-file "$state/db/token" --models "$models" --connections 4 \
  --rate 0 --seconds "$seconds" --replan-ms 100 | tee out/bench/serve-load-max.json
# The server's own view: decision latency histogram, requests by route and status.
curl -s "http://127.0.0.1:$port/metrics" >out/bench/serve-metrics.txt || true
grep -E '^corun_serve_(decision_latency_seconds_(sum|count)|replans_total|telemetry_samples_total)' \
  out/bench/serve-metrics.txt || true
