#!/usr/bin/env python3
"""Connection flood against a running `corun serve` (docs/results/serve.md, "Connection floods").

Opens IDLE connections that send nothing, SLOW connections whose telemetry body stops after a
few of its declared bytes and HEADERS connections whose header section never ends, then, while
all of them stay open, sends N sequential `GET /healthz` and N `GET /v1/plan` requests (each on a
new connection, 10 s timeout) and prints latency percentiles as JSON. Loopback only; standard
library only.

usage: scripts/serve-flood.py PORT [--idle 256] [--slow 64] [--headers 64] [--requests 200]
"""
import argparse
import json
import socket
import time


def percentile(values, p):
    v = sorted(values)
    rank = max(1, -(-len(v) * p // 100))  # nearest rank
    return v[int(rank) - 1]


def get(port, path, timeout_s):
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        status = 0
    return status, (time.monotonic() - t0) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--idle", type=int, default=256)
    ap.add_argument("--slow", type=int, default=64)
    ap.add_argument("--headers", type=int, default=64)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=10)
    a = ap.parse_args()
    held = []
    slow_body = (b"POST /v1/telemetry HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{\"model\":")
    for n, prefix in ((a.idle, b""), (a.slow, slow_body), (a.headers, b"GET /healthz HTTP/1.1\r\nX-Slow: a")):
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout)
            if prefix:
                s.sendall(prefix)
            held.append(s)
    out = {"idle": a.idle, "slow_bodies": a.slow, "slow_headers": a.headers}
    for path in ("/healthz", "/v1/plan"):
        ms, failed = [], 0
        for _ in range(a.requests):
            status, t = get(a.port, path, a.timeout)
            ms.append(t)
            failed += status != 200
        out[path] = {"requests": a.requests, "not_200": failed,
                     "p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2),
                     "max_ms": round(max(ms), 2)}
    for s in held:
        s.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
