#!/usr/bin/env python3
"""The pages people read: `corun run`'s report.html and the `corun eval ... --html` pages.

1. `corun run` on a small timeline (an LLM with a TTFT, a TPOT and a throughput SLA, a camera
   with a latency SLA that departs, a drift event): report.html names every model and every SLA
   of the workload with its limit, charts the LLM's TTFT and TPOT, and has the configuration
   timeline, the GPU state over time and the events.
2. `corun eval placement workloads/tools --html` and `corun eval scheduler --html` (one short
   scenario, one solver, no references): every scenario and policy or solver appears with its
   plots inline.
3. Every page is self-contained: no <script>, and nothing a browser would fetch (no src/href,
   no <link>, no CSS url() or @import, no http(s) address besides the SVG namespace).

Parsed with Python's html.parser, so a page that is not well-formed enough to parse fails.

Usage: html_pages_test.py CORUN_BINARY
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]
SVG_NS = "http://www.w3.org/2000/svg"

# Two models, three intervals. The SLA limits are odd numbers so that finding them on the page
# cannot be a coincidence of the charts' tick labels.
WORKLOAD = """\
name: pages
device: rtx3090
models:
  - name: chat
    model: qwen2.5-0.5b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 2]}
    demand: {rps: 1, prompt_tokens: 256, output_tokens: 64}
    sla: {ttft_ms_p95: 777, tpot_ms_p95: 61, min_throughput: 13}
  - name: cam0
    model: yolo11n
    knobs: {imgsz: [320, 640]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 53}
timeline:
  duration_s: 30
  interval_s: 10
  events:
    - {at_s: 10, power_cap_w: 250}
    - {at_s: 20, depart: cam0}
"""

# Each SLA of WORKLOAD as the models table writes it.
SLAS = {
    "chat": ["TTFT p95 \u2264 777 ms", "TPOT p95 \u2264 61 ms", "throughput \u2265 13 tokens/s"],
    "cam0": ["latency p95 \u2264 53 ms"],
}

# Attributes through which a browser loads something.
FETCHING = {"src", "href", "xlink:href", "srcset", "data", "poster", "action", "background",
            "formaction", "manifest"}
FETCHING_TAGS = {"script", "link", "iframe", "frame", "object", "embed", "img", "audio",
                 "video", "source", "track", "base", "form", "input"}

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)


class Page(HTMLParser):
    """Collects a page's text, its tags, and the rows of its tables as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "style":
            self._in_style = True

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.style += data
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def parse(path: Path) -> tuple[Page, str]:
    raw = path.read_text(encoding="utf-8")
    page = Page()
    page.feed(raw)
    page.close()
    return page, raw


def check_self_contained(name: str, page: Page, raw: str) -> None:
    for tag, attrs in page.tags:
        check(tag not in FETCHING_TAGS, f"{name}: <{tag}> loads or runs something")
        for key, value in attrs.items():
            check(key.lower() not in FETCHING, f"{name}: <{tag} {key}={value!r}> refers outside")
            check(not key.lower().startswith("on"), f"{name}: <{tag} {key}> is a script")
            if key == "xmlns":
                check(value == SVG_NS, f"{name}: unexpected namespace {value!r}")
            elif key == "style" and value:
                check("url(" not in value, f"{name}: <{tag} style> has url()")
    check("url(" not in page.style and "@import" not in page.style,
          f"{name}: the style sheet loads something")
    check("<script" not in raw.lower(), f"{name}: has <script>")
    stripped = raw.replace(SVG_NS, "")
    for scheme in ("http://", "https://", "file://"):
        check(scheme not in stripped, f"{name}: refers to {scheme}")


def run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=240)


def check_report(corun: str, tmp: Path) -> None:
    workload = tmp / "pages.yaml"
    workload.write_text(WORKLOAD)
    out = tmp / "run"
    r = run([corun, "run", str(workload), "--quiet", "--out", str(out)])
    # 1 = a measured SLA breach: the report is written all the same.
    if r.returncode not in (0, 1):
        sys.exit(f"FAIL: corun run exited {r.returncode}:\n{r.stderr}")
    page, raw = parse(out / "report.html")
    check_self_contained("report.html", page, raw)
    text = page.all_text()
    for model, slas in SLAS.items():
        rows = [row for row in page.rows if row and row[0] == model]
        check(bool(rows), f"report.html: no table row for model {model}")
        row_text = " | ".join(" | ".join(row) for row in rows)
        for sla in slas:
            check(sla in row_text, f"report.html: SLA '{sla}' of {model} missing from its row")
    for title in ("chat: TTFT p95 (ms)", "chat: TPOT p95 (ms)", "cam0: latency p95 (ms)"):
        check(title in text, f"report.html: no chart '{title}'")
    for section in ("Configuration timeline", "GPU state over time", "Events"):
        check(section in text, f"report.html: no section '{section}'")
    # The GPU state: every quantity over time (a series each) and in absolute values.
    for series in ("SM busy", "DRAM bandwidth", "VRAM (of device)", "power (of TDP)",
                   "SM clock (of boost)"):
        check(series in text, f"report.html: no GPU series '{series}'")
    for quantity in ("SM busy (%)", "DRAM bandwidth (%)", "VRAM used (GB)", "board power (W)",
                     "SM clock (MHz)"):
        check(any(row and row[0] == quantity for row in page.rows),
              f"report.html: no row for '{quantity}'")
    # The configuration timeline names the knobs and shows the camera leaving: in the table of
    # every interval, cam0 (the third column) is off from t = 20 s.
    check("precision, request_concurrency" in text, "report.html: chat's knobs not named")
    after = [row for row in page.rows if len(row) == 3 and row[0] == "20"]
    check(bool(after) and after[0][2] == "off", f"report.html: cam0 not off at 20 s: {after}")
    check("power cap 250 W" in text, "report.html: the power-cap drift is not among the events")
    check("depart cam0" in text, "report.html: the departure is not among the events")
    # Objective, configuration timeline, GPU state, one per SLA latency metric (chat's TTFT and
    # TPOT, cam0's latency) and the prediction error.
    svgs = sum(1 for tag, _ in page.tags if tag == "svg")
    check(svgs == 7, f"report.html: {svgs} inline plots, expected 7")


def check_eval_pages(corun: str, tmp: Path) -> None:
    placement = tmp / "placement.html"
    r = run([corun, "eval", "placement", str(SRC / "workloads/tools"), "--policies",
             "all-gpu,heft,bandit", "--html", str(placement)])
    if r.returncode != 0:
        sys.exit(f"FAIL: corun eval placement exited {r.returncode}:\n{r.stderr}")
    page, raw = parse(placement)
    check_self_contained("placement.html", page, raw)
    text = page.all_text()
    for scenario in sorted(p.stem for p in (SRC / "workloads/tools").glob("*.yaml")):
        check(any(scenario in " ".join(row) for row in page.rows),
              f"placement.html: scenario {scenario} not in a table")
    header = next((row for row in page.rows if "oracle ms" in row), [])
    for policy in ("all-gpu", "heft", "bandit"):
        check(policy in header, f"placement.html: no column for policy {policy}")
        check(any(row and row[0] == policy for row in page.rows),
              f"placement.html: no summary row for policy {policy}")
    check(any(tag == "svg" for tag, _ in page.tags), "placement.html: no inline plot")
    check("makespan" in text, "placement.html: the plot is missing")

    # The scheduler page from one short scenario (three intervals, GA only, no references).
    workload = tmp / "pages.yaml"
    scheduler = tmp / "scheduler.html"
    r = run([corun, "eval", "scheduler", str(workload), "--solvers", "ga", "--learning", "off",
             "--no-oracle", "--no-exhaustive", "--quiet", "--out", str(tmp / "sched"),
             "--html", str(scheduler)])
    if r.returncode != 0:
        sys.exit(f"FAIL: corun eval scheduler exited {r.returncode}:\n{r.stderr}")
    page, raw = parse(scheduler)
    check_self_contained("scheduler.html", page, raw)
    check(any(row and row[0] == "pages" and "ga" in row for row in page.rows),
          "scheduler.html: no row for scenario 'pages' and solver ga")
    svgs = sum(1 for tag, _ in page.tags if tag == "svg")
    check(svgs == 2, f"scheduler.html: {svgs} inline plots, expected 2")
    check("--html" in page.all_text(), "scheduler.html: does not say how it was produced")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    corun = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="corun-pages-") as d:
        tmp = Path(d)
        check_report(corun, tmp)
        check_eval_pages(corun, tmp)
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("ok: report.html, placement.html and scheduler.html are complete and self-contained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
