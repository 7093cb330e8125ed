#!/usr/bin/env python3
"""corun serve's /metrics read by a real Prometheus.

1. `promtool check metrics` accepts the exposition of a running `corun serve`.
2. A real `prometheus` (temporary config and TSDB, loopback, free port, 1 s scrape interval)
   scrapes it, and its HTTP API answers `corun_serve_models` with the registered model count.
3. The Grafana dashboard (deploy/grafana/corun-dashboard.json) uses every metric family the
   server exports and no other, and Prometheus accepts each of its queries.
Every wait is bounded (30 s); nothing is timed beyond that bound. Exit 77 (skipped) when
prometheus or promtool is not installed (scripts/install-deps.sh installs Debian's package).

Usage: prometheus_test.py CORUN_BINARY
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

SKIP = 77
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy/grafana/corun-dashboard.json"
TOKEN = "prometheus-test-token-0123456789"
WAIT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, probe, proc: subprocess.Popen, log: Path):
    """Calls probe() until it returns something truthy; fails after WAIT_S or if proc exits."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            value = probe()
            if value:
                return value
        except OSError:
            pass
        if proc.poll() is not None:
            sys.exit(f"FAIL: {what}: the process exited ({proc.returncode}):\n{log.read_text()}")
        if time.monotonic() > deadline:
            sys.exit(f"FAIL: {what} within {WAIT_S:.0f} s\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


def register(base: str, entry: dict) -> None:
    """POST /v1/models with the test's token; fails unless the model is registered."""
    req = urllib.request.Request(
        base + "/v1/models", data=json.dumps(entry).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 201, r.status


def checked_exposition(promtool: str, base: str, what: str) -> bytes:
    """GET /metrics, which `promtool check metrics` must accept."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        exposition = r.read()
    check = subprocess.run([promtool, "check", "metrics"], input=exposition,
                           capture_output=True, check=False)
    if check.returncode != 0:
        sys.exit(f"FAIL: promtool check metrics on {what}:\n" + check.stdout.decode() +
                 check.stderr.decode() + "\n" + exposition.decode())
    print(f"promtool check metrics on {what}: ok")
    return exposition


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    corun = sys.argv[1]
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print("SKIP: prometheus/promtool not installed (Debian package prometheus)")
        return SKIP
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="corun-prom-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            # corun serve with one model, so that per-model series exist, reading its stack
            # telemetry from the Prometheus below (so that every metric family is exported).
            (tmp / "token").write_text(TOKEN + "\n")
            serve_log = tmp / "serve.log"
            prom_port = free_port()
            serve = subprocess.Popen(
                [corun, "serve", "--state", str(tmp / "state"), "--port", "0", "--port-file",
                 str(tmp / "port"), "--token-file", str(tmp / "token"), "--solver", "greedy",
                 "--prometheus", f"http://127.0.0.1:{prom_port}", "--window", "2s"],
                stdout=serve_log.open("wb"), stderr=subprocess.STDOUT)
            procs.append(serve)
            port = int(wait_for("corun serve's port file",
                                lambda: (tmp / "port").read_text().strip(), serve, serve_log))
            base = f"http://127.0.0.1:{port}"
            entry = {"name": "cam0", "model": "yolo11n", "knobs": {"imgsz": [320, 640]},
                     "demand": {"fps": 30}, "sla": {"latency_ms_p95": 50}}
            register(base, entry)

            # 1. The exposition format, as Prometheus' own linter reads it.
            exposition = checked_exposition(promtool, base, "one GPU")

            # 2. A real scrape.
            config = tmp / "prometheus.yml"
            config.write_text(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: corun\n    scrape_interval: 1s\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
            prom_log = tmp / "prometheus.log"
            prom = subprocess.Popen(
                [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                stdout=prom_log.open("wb"), stderr=subprocess.STDOUT)
            procs.append(prom)
            query = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode(
                {"query": "corun_serve_models"})

            def sample():
                with urllib.request.urlopen(query, timeout=5) as r:
                    body = json.load(r)
                return body["data"]["result"] if body.get("status") == "success" else None

            result = wait_for("Prometheus to hold a corun_serve_models sample", sample, prom,
                              prom_log)
            series = result[0]
            if series["metric"].get("job") != "corun" or series["value"][1] != "1":
                sys.exit(f"FAIL: unexpected sample {series}")
            print(f"prometheus scraped corun_serve_models = {series['value'][1]} "
                  f"(instance {series['metric'].get('instance')})")

            # 3. The dashboard against what the server exports and what Prometheus parses.
            families = set(re.findall(rb"^# TYPE (corun_serve_\w+) ", exposition, re.M))
            families = {f.decode() for f in families}
            exprs = [t["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"]
                     for t in panel["targets"]]
            used = set()
            for e in exprs:
                for name in re.findall(r"corun_serve_\w+", e):
                    used.add(re.sub(r"_(bucket|sum|count)$", "", name)
                             if name.startswith("corun_serve_decision_latency") else name)
            if used != families:
                sys.exit(f"FAIL: dashboard metrics {sorted(used ^ families)} differ from "
                         f"the exported families {sorted(families)}")
            for e in exprs:
                promql = e.replace("$instance", ".*").replace("$__rate_interval", "1m")
                url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode(
                    {"query": promql})
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        status = json.load(r)["status"]
                except urllib.error.HTTPError as err:
                    sys.exit(f"FAIL: Prometheus refused the dashboard query {promql}: "
                             f"{err.read().decode()}")
                if status != "success":
                    sys.exit(f"FAIL: dashboard query {promql}: {status}")
            print(f"dashboard: {len(exprs)} queries accepted, {len(families)} metric families")

            # 4. A node of two GPUs: every GPU's exposition joined, a gpu label on each sample,
            # each family once; the linter reads it as it reads one GPU's.
            node_log = tmp / "node.log"
            node = subprocess.Popen(
                [corun, "serve", "--state", str(tmp / "node"), "--gpus", "2", "--port", "0",
                 "--port-file", str(tmp / "node-port"), "--token-file", str(tmp / "token"),
                 "--solver", "greedy"],
                stdout=node_log.open("wb"), stderr=subprocess.STDOUT)
            procs.append(node)
            node_port = int(wait_for("the node's port file",
                                     lambda: (tmp / "node-port").read_text().strip(), node,
                                     node_log))
            node_base = f"http://127.0.0.1:{node_port}"
            register(node_base, entry)
            node_exposition = checked_exposition(promtool, node_base, "a node of 2 GPUs")
            if b'gpu="1"' not in node_exposition:
                sys.exit("FAIL: the node's exposition has no sample of GPU 1")
            return 0
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    sys.exit(main())
