#!/usr/bin/env python3
"""A serving stack's side of `corun serve`, in Python (examples/serving-loop, rewritten).

Registers three models, then in a loop applies the plan in force, "serves" one interval on the
`sim` testbed (`corun measure`, standing in for the real model servers) and reports what it
observed as telemetry, tagged with the plan id. Halfway through, the first camera's frame rate
doubles: the stack reports the new demand and picks up the re-plan.

    corun serve --state /tmp/corun-demo --port 0 --port-file /tmp/corun-demo.port &
    python3 clients/python/serving_loop.py --port-file /tmp/corun-demo.port \\
        --token-file /tmp/corun-demo/token --corun build/dev/corun --steps 12
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from corun_client import CorunClient, CorunError

# The models this stack hosts: the same entries a workload file's `models` list would hold.
MODELS: list[dict[str, Any]] = [
    {"name": "cam0", "model": "yolo11s",
     "knobs": {"imgsz": [320, 480, 640], "skip_rate": [0, 0.33, 0.5]},
     "demand": {"fps": 30}, "sla": {"latency_ms_p95": 60}},
    {"name": "cam1", "model": "yolo11n",
     "knobs": {"imgsz": [320, 480, 640], "skip_rate": [0, 0.33, 0.5]},
     "demand": {"fps": 30}, "sla": {"latency_ms_p95": 50}},
    {"name": "chat", "model": "qwen2.5-1.5b",
     "knobs": {"precision": ["fp16", "awq"], "request_concurrency": [1, 2, 4],
               "prefill_chunk": [512, 2048]},
     "demand": {"rps": 1.5, "prompt_tokens": 512, "output_tokens": 128},
     "sla": {"ttft_ms_p95": 800, "tpot_ms_p95": 60}, "weight": 2},
]


def knob_text(value: Any) -> str:
    """A plan's knob value as corun writes it: 640.0 -> "640", 0.33 -> "0.33", "awq"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def apply_plan(plan: dict[str, Any], names: list[str]) -> tuple[str, list[str]]:
    """The `--config` flag of `corun measure` for the plan's knob values, and the models it
    runs (those with a configuration)."""
    assignments: list[str] = []
    running: list[str] = []
    for name in names:
        entry = plan["models"].get(name)
        if entry is None or "config" not in entry:
            continue
        running.append(name)
        assignments += [f"{name}.{k}={knob_text(v)}" for k, v in entry["config"].items()]
    return ",".join(assignments), running


def measure(corun: str, workload: Path, config: str, running: list[str], seed: int) -> dict:
    """One interval on the sim testbed: `corun measure --json` (exit 1 = a failed config)."""
    cmd = [corun, "measure", str(workload), "--json", "--window", "1", "--seed", str(seed),
           "--models", ",".join(running)]
    if config:
        cmd += ["--config", config]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"corun measure failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def samples_from(measurement: dict, plan_id: int) -> tuple[list[dict[str, Any]], str]:
    """Telemetry samples of a measurement, and a one-line summary of what was seen."""
    samples: list[dict[str, Any]] = []
    seen: list[str] = []
    for m in measurement["models"]:
        if m.get("error"):
            seen.append(f"{m['name']} error: {m['error']}")
            continue
        s: dict[str, Any] = {"model": m["name"], "plan_id": plan_id,
                             "throughput": m["throughput"]}
        if m.get("ttft_ms_p95") is not None:
            s["ttft_ms_p95"] = m["ttft_ms_p95"]
            s["tpot_ms_p95"] = m.get("tpot_ms_p95") or 0
            seen.append(f"{m['name']} ttft {m['ttft_ms_p95']:.1f} ms")
        else:
            s["latency_ms_p95"] = m["latency_ms_p95"]
            seen.append(f"{m['name']} p95 {m['latency_ms_p95']:.1f} ms")
        samples.append(s)
    return samples, " ".join(seen)


def run(client: CorunClient, corun: str, steps: int, interval_s: float,
        out=sys.stdout) -> int:
    """The loop; returns the number of steps served."""
    # 1. Register (a 409 means a previous run registered it: the server kept it).
    for entry in MODELS:
        try:
            client.register_model(entry)
            status = 201
        except CorunError as e:
            if e.code != "duplicate_model":
                raise
            status = 409
        print(f"register {entry['name']:<5} -> {status}", file=out)

    # The stack's own view of its models, to run them on the sim testbed. JSON is YAML, so the
    # workload file is the registrations as they were sent.
    device = client.health().get("device", "rtx3090")
    models = [dict(m) for m in MODELS]
    names = [m["name"] for m in models]
    # Start serving once a plan covers every model this stack hosts (registrations that arrive
    # while a search runs are planned by the next one).
    plan = client.wait_for_plan()
    while not set(names) <= set(plan["models"]):
        plan = client.wait_for_plan(after_id=plan["id"])
    with tempfile.TemporaryDirectory(prefix="serving-loop-") as tmp:
        workload = Path(tmp) / "workload.yaml"
        workload.write_text(json.dumps({"device": device, "models": models}))
        for step in range(steps):
            if step == steps // 2:
                client.update_demand("cam0", {"fps": 60})
                models[0]["demand"] = {"fps": 60}
                workload.write_text(json.dumps({"device": device, "models": models}))
                print(f"step {step:2d}: cam0 demand -> 60 fps", file=out)
            # 2. The plan in force (wait for the first one).
            plan = client.wait_for_plan()
            # 3. Apply it, 4. serve one interval, report what was observed.
            config, running = apply_plan(plan, names)
            measured = measure(corun, workload, config, running, 1000 + step)
            samples, seen = samples_from(measured, plan["id"])
            ack = client.post_telemetry(samples)
            applied = " ".join(f"{n}[{plan['models'][n].get('settings', '')}]" for n in running)
            print(f"step {step:2d}: plan {plan['id']} ({plan.get('reason', '')}): {applied} | "
                  f"{seen} | breaches {ack['breaches']}", file=out)
            time.sleep(interval_s)
    return steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, help="server port (or --port-file)")
    p.add_argument("--port-file", help="the file corun serve --port-file wrote")
    p.add_argument("--token-file", required=True, help="the server's bearer token file")
    p.add_argument("--corun", default="corun", help="the corun binary (runs the sim testbed)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--interval-ms", type=int, default=300)
    args = p.parse_args(argv)
    if args.port is None and args.port_file is None:
        p.error("give --port or --port-file")
    port = args.port if args.port is not None else int(Path(args.port_file).read_text().strip())
    token = Path(args.token_file).read_text().strip()
    client = CorunClient(f"http://{args.host}:{port}", token)
    try:
        run(client, args.corun, args.steps, args.interval_ms / 1000.0)
    except CorunError as e:
        print(f"serving-loop: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
