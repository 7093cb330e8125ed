#!/usr/bin/env python3
"""Markdown tables of `corun eval scheduler --transitions aware,ignore --json` outputs.

Usage: scripts/transitions-table.py SET=FILE.json [SET=FILE.json ...]

For each set: one row per scenario and mode (the eval's rows, unedited) and the summary's
medians and totals per mode. This is how docs/results/transitions.md is written.
"""
import json
import sys


def pct(x):
    return "-" if x is None else f"{x:.2f}"


def table(name, path):
    with open(path) as f:
        j = json.load(f)
    out = [f"## workloads/{name}", "",
           "| scenario | transitions | viol | restarts | reloads | downtime s | utility | "
           "gap_oracle % | gap_hindsight % |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = sorted(j["rows"], key=lambda r: (r["scenario"], r.get("transitions", "")))
    for r in rows:
        out.append(f"| {r['scenario']} | {r.get('transitions', 'aware')} | {r['sla_violations']} | "
                   f"{r['restarts']} | {r['reloads']} | {r['downtime_s']:.1f} | "
                   f"{r['mean_measured_utility']:.3f} | {pct(r['gap_to_oracle_pct'])} | "
                   f"{pct(r['gap_to_hindsight_pct'])} |")
    out += ["", "| mode | median utility | violations | restarts | downtime s | "
            "median gap_oracle % | median gap_hindsight % |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for key, s in sorted(j["summary"].items()):
        mode = "ignore" if key.endswith("/ignore-transitions") else "aware"
        out.append(f"| {mode} | {s['median_net_utility']:.3f} | {s['sla_violations']} | "
                   f"{s['restarts']} | {s['downtime_s']:.1f} | "
                   f"{pct(s['median_gap_to_oracle_pct'])} | "
                   f"{pct(s['median_gap_to_hindsight_pct'])} |")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for arg in argv[1:]:
        name, sep, path = arg.partition("=")
        if not sep:
            print(f"transitions-table: '{arg}': expected SET=FILE.json", file=sys.stderr)
            return 2
        print(table(name, path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
