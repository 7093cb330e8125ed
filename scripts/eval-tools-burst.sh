#!/usr/bin/env bash
# Planning for a declared tool burst (docs/results/placement.md, "Planning for a declared
# burst"): every workload of workloads/tools-burst is profiled on the simulator (standalone,
# MeanField and co-tenant campaigns, 20 x N each), fitted (monotone GBDT), and planned three
# ways, each measured steady and during the burst:
#   blind:  the burst ignored (--ignore-tools), with the co-tenant-aware surrogate;
#   no-cotenant: the burst planned for with a surrogate fitted without the co-tenant campaign;
#   corun:  the burst planned for with the surrogate fitted on all three campaigns.
# Deterministic by seed; prints a Markdown table and keeps the JSON under out/eval/tools-burst.
set -euo pipefail
corun=${1:-build/dev/corun}
out=out/eval/tools-burst
rm -rf "$out"
mkdir -p "$out"
for w in workloads/tools-burst/*.yaml; do
  case "$w" in *.tools.yaml) continue ;; esac
  name=$(basename "$w" .yaml)
  n=$(grep -c '^  - name:' "$w")
  budget=$((20 * n))
  ds="$out/$name.db"
  "$corun" profile "$w" --plan standalone --repeats 3 --out "$ds" --quiet >/dev/null
  "$corun" profile "$w" --plan meanfield --budget "$budget" --out "$ds" --quiet >/dev/null
  cp "$ds" "$out/$name-nocotenant.db"
  "$corun" profile "$w" --plan cotenant --budget "$budget" --out "$ds" --quiet >/dev/null
  "$corun" fit "$ds" --regressor gbdt --monotone --out "$out/$name.json" >/dev/null
  "$corun" fit "$out/$name-nocotenant.db" --regressor gbdt --monotone \
    --out "$out/$name-nocotenant.json" >/dev/null
  # Exit code 1 is a measured breach or an infeasible plan: the JSON says which.
  "$corun" plan "$w" --surrogate "$out/$name.json" --measure --ignore-tools --json \
    >"$out/$name.blind.plan.json" || [[ $? == 1 ]]
  "$corun" plan "$w" --surrogate "$out/$name-nocotenant.json" --measure --json \
    >"$out/$name.nocotenant.plan.json" || [[ $? == 1 ]]
  "$corun" plan "$w" --surrogate "$out/$name.json" --measure --json \
    >"$out/$name.corun.plan.json" || [[ $? == 1 ]]
done
python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("| workload | plan | tools' SM share | burst (calls, length, mean SM) | room | feasible at margins | utility steady | violations steady | utility during burst | violations during burst |")
print("|---|---|---:|---|---|---|---:|---:|---:|---:|")
for f in sorted(out.glob("*.corun.plan.json")):
    name = f.name[: -len(".corun.plan.json")]
    for how in ("blind", "nocotenant", "corun"):
        j = json.loads((out / f"{name}.{how}.plan.json").read_text())
        t, m = j["tools"], j["measured"]
        burst = f"{t['calls']}, {t['makespan_ms']:.0f} ms every {t['every_s']:g} s, {t['sm_util']:.2f}"
        label = {"blind": "burst ignored", "nocotenant": "planned, no co-tenant campaign",
                 "corun": "planned (corun)"}[how]
        room = "-" if how == "blind" else ("yes" if t["room"] is True else "no")
        print(f"| {name} | {label} | {t['gpu_share']:g} | {burst} | {room} | "
              f"{'yes' if j['feasible'] else 'no'} | {m['utility']:.3f} | {m['sla_violations']} | "
              f"{m['during_tools']['utility']:.3f} | {m['during_tools']['sla_violations']} |")
PY
