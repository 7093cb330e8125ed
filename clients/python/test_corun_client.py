"""Tests of corun_client.py and serving_loop.py against a real `corun serve`.

Each test starts its own server (`--state TMP --port 0 --port-file F --token-file T`) from the
binary named by the CORUN_BINARY environment variable (CTest sets it), so that tests do not
share state. Every wait is bounded.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from corun_client import CorunClient, CorunError, CorunUnreachable
import serving_loop

CORUN = os.environ.get("CORUN_BINARY", "")
TOKEN = "python-client-test-token-0123456789"

CAM0 = {"name": "cam0", "model": "yolo11n",
        "knobs": {"imgsz": [320, 640], "skip_rate": [0, 0.5]},
        "demand": {"fps": 30}, "sla": {"latency_ms_p95": 50}}
CHAT = {"name": "chat", "model": "qwen2.5-0.5b",
        "knobs": {"precision": ["fp16", "awq"], "request_concurrency": [1, 2]},
        "demand": {"rps": 1, "prompt_tokens": 256, "output_tokens": 64},
        "sla": {"ttft_ms_p95": 800, "tpot_ms_p95": 60}}


@unittest.skipUnless(CORUN and Path(CORUN).exists(), "set CORUN_BINARY to the corun binary")
class ServerTest(unittest.TestCase):
    """A fresh `corun serve` per test."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="corun-py-")
        tmp = Path(self.tmp.name)
        (tmp / "token").write_text(TOKEN + "\n")
        port_file = tmp / "port"
        self.log = open(tmp / "serve.log", "wb")
        self.server = subprocess.Popen(
            [CORUN, "serve", "--state", str(tmp / "state"), "--port", "0", "--port-file",
             str(port_file), "--token-file", str(tmp / "token"), "--solver", "greedy",
             "--min-replan-ms", "20", "--flush-ms", "100"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.server.poll() is not None or time.monotonic() > deadline:
                self.fail("corun serve did not start: " + (tmp / "serve.log").read_text())
            time.sleep(0.02)
        self.client = CorunClient.from_files(port_file, tmp / "token", timeout_s=10)
        self.anonymous = CorunClient(self.client.base_url, None, timeout_s=10)

    def tearDown(self) -> None:
        self.server.send_signal(signal.SIGTERM)
        try:
            self.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.log.close()
        self.tmp.cleanup()

    def assertCorunError(self, call, status: int, code: str, field: str | None = None):
        with self.assertRaises(CorunError) as ctx:
            call()
        e = ctx.exception
        self.assertEqual((e.status, e.code), (status, code), str(e))
        if field is not None:
            self.assertEqual(e.field, field, str(e))
        return e

    # -- routes -------------------------------------------------------------------------------

    def test_health_and_metrics(self) -> None:
        h = self.client.health()
        self.assertEqual(h["status"], "ok")
        self.assertEqual(h["models"], 0)
        self.assertEqual(h["plan_id"], 0)
        self.assertEqual(h["device"], "rtx3090")
        self.client.register_model(CAM0)
        metrics = self.client.metrics()
        self.assertIn("# TYPE corun_serve_models gauge", metrics)
        self.assertIn("corun_serve_models 1\n", metrics)
        self.assertIn('corun_serve_requests_total{route="models",code="201"} 1', metrics)

    def test_openapi_names_every_method_of_this_client(self) -> None:
        spec = self.client.openapi()
        self.assertEqual(spec["openapi"], "3.0.3")
        self.assertEqual(spec["paths"]["/healthz"]["get"]["operationId"], "getHealth")
        # Every route this client calls is in the server's own description, and vice versa.
        documented = {(method.upper(), path) for path, ops in spec["paths"].items()
                      for method in ops if method != "parameters"}
        called = {("GET", "/healthz"), ("GET", "/metrics"), ("GET", "/v1/openapi.json"),
                  ("GET", "/v1/models"), ("POST", "/v1/models"), ("GET", "/v1/models/{name}"),
                  ("DELETE", "/v1/models/{name}"), ("PUT", "/v1/models/{name}/demand"),
                  ("POST", "/v1/telemetry"), ("GET", "/v1/telemetry"), ("GET", "/v1/plan"),
                  ("GET", "/v1/plan/history"), ("POST", "/v1/replan"),
                  ("POST", "/v1/whatif"), ("POST", "/v1/tools/place"),
                  ("POST", "/v1/capacity")}
        self.assertEqual(documented, called)

    def test_register_list_get_remove(self) -> None:
        self.assertEqual(self.client.register_model(CAM0), CAM0)
        self.assertEqual(self.client.list_models(), [CAM0])
        self.assertEqual(self.client.get_model("cam0"), CAM0)
        self.assertCorunError(lambda: self.client.register_model(CAM0), 409, "duplicate_model",
                              "name")
        self.assertEqual(self.client.remove_model("cam0"), "cam0")
        self.assertEqual(self.client.list_models(), [])
        self.assertCorunError(lambda: self.client.get_model("cam0"), 404, "unknown_model", "name")
        self.assertCorunError(lambda: self.client.remove_model("cam0"), 404, "unknown_model")

    def test_what_if_answers_and_changes_nothing(self) -> None:
        self.client.register_model(CAM0)
        before = self.client.wait_for_plan()
        answer = self.client.what_if(dict(CAM0, name="cam9"))
        self.assertEqual(answer["model"], "cam9")
        self.assertEqual(answer["gpu"], 0)
        self.assertIn("cam9", answer["plan"]["models"])
        self.assertAlmostEqual(answer["utility_gain"],
                               answer["utility_after"] - answer["utility_before"])
        self.assertEqual([m["name"] for m in self.client.list_models()], ["cam0"])
        self.assertEqual(self.client.plan()["id"], before["id"])
        self.assertCorunError(lambda: self.client.what_if(CAM0), 409, "duplicate_model", "name")
        bad = dict(CAM0, name="cam9", knobs={"imgsize": [320]})
        self.assertCorunError(lambda: self.client.what_if(bad), 422, "invalid_spec",
                              "knobs.imgsize")

    def test_capacity_of_the_registered_models_and_of_a_list(self) -> None:
        self.assertCorunError(lambda: self.client.capacity(), 404, "no_models")
        self.client.register_model(CAM0)
        answer = self.client.capacity()
        self.assertEqual(answer["gpus_needed"], 1)
        self.assertEqual(answer["placement"], {"cam0": "gpu0"})
        # A detector no GPU serves in 10 microseconds: none of up to 2 GPUs holds it.
        fast = dict(CAM0, name="fast", sla={"latency_ms_p95": 0.01})
        answer = self.client.capacity([fast], max_gpus=2)
        self.assertIsNone(answer["gpus_needed"])
        self.assertEqual(answer["tried_up_to"], 2)
        self.assertCorunError(lambda: self.client.capacity([CAM0], max_gpus=9), 400,
                              "out_of_range", "max_gpus")
        self.assertEqual([m["name"] for m in self.client.list_models()], ["cam0"])

    def test_place_tools_next_to_the_plan_and_changes_nothing(self) -> None:
        self.client.register_model(CAM0)
        before = self.client.wait_for_plan()
        dag = {"name": "note", "kind": "serial", "vram_budget_gb": 8,
               "tools": [{"id": "hear", "tool": "asr"},
                         {"id": "sum", "tool": "summarize", "after": ["hear"]}]}
        answer = self.client.place_tools(dag, policy="heft")
        self.assertEqual(set(answer["mapping"]), {"hear", "sum"})
        self.assertEqual(answer["plan_id"], before["id"])
        self.assertEqual(answer["corunners"]["models"], 1)
        self.assertEqual(self.client.plan()["id"], before["id"])
        bad = dict(dag, tools=[{"id": "hear", "tool": "asrr"}])
        e = self.assertCorunError(lambda: self.client.place_tools(bad), 422, "invalid_spec",
                                  "scenario.tools[0].tool")
        self.assertIn("did you mean 'asr'", e.message)

    def test_invalid_entries_name_the_field(self) -> None:
        bad = dict(CAM0, knobs={"imgsize": [320]})
        e = self.assertCorunError(lambda: self.client.register_model(bad), 422, "invalid_spec",
                                  "knobs.imgsize")
        self.assertIn("did you mean 'imgsz'", e.message)
        self.assertIn("(field knobs.imgsize)", str(e))
        self.assertCorunError(lambda: self.client.register_model(["not", "an", "object"]), 400,
                              "bad_type")
        self.assertEqual(self.client.list_models(), [])

    def test_mutations_need_the_token(self) -> None:
        self.assertCorunError(lambda: self.anonymous.register_model(CAM0), 401, "missing_token")
        wrong = CorunClient(self.client.base_url, "x" * 32)
        self.assertCorunError(lambda: wrong.register_model(CAM0), 401, "bad_token")
        self.assertEqual(self.anonymous.list_models(), [])  # reads are open

    def test_update_demand(self) -> None:
        self.client.register_model(CAM0)
        updated = self.client.update_demand("cam0", {"fps": 60})
        self.assertEqual(updated["demand"], {"fps": 60})
        self.assertEqual(self.client.get_model("cam0")["demand"], {"fps": 60})
        self.assertCorunError(lambda: self.client.update_demand("cam0", {"fps": -1}), 422,
                              "invalid_spec", "demand.fps")
        self.assertCorunError(lambda: self.client.update_demand("nope", {"fps": 5}), 404,
                              "unknown_model")

    def test_plan_history_and_replan(self) -> None:
        self.assertCorunError(self.client.plan, 404, "no_plan")
        self.client.register_model(CAM0)
        self.client.register_model(CHAT)
        # The first plan may predate the second registration; its re-plan follows.
        plan = self.client.wait_for_plan()
        while set(plan["models"]) != {"cam0", "chat"}:
            plan = self.client.wait_for_plan(after_id=plan["id"])
        self.assertTrue(plan["feasible"])
        self.assertEqual(set(plan["models"]), {"cam0", "chat"})
        self.assertIn(plan["models"]["cam0"]["config"]["imgsz"], (320, 640))
        self.assertIn(plan["models"]["chat"]["config"]["precision"], ("fp16", "awq"))
        ack = self.client.replan()
        self.assertTrue(ack["requested"])
        after = self.client.wait_for_decision(after=ack["decision"])
        self.assertGreater(after["decision"], ack["decision"])
        # Nothing changed: the plan keeps its id unless the re-plan changed what runs.
        self.assertGreaterEqual(after["id"], ack["plan_id"])
        history = self.client.plan_history()
        self.assertEqual(history[-1]["id"], self.client.plan()["id"])
        self.assertEqual([p["id"] for p in history], sorted(p["id"] for p in history))
        self.assertEqual(len(self.client.plan_history(limit=1)), 1)
        self.assertCorunError(lambda: self.client.plan_history(limit=0), 400, "bad_parameter",
                              "limit")

    def test_telemetry(self) -> None:
        self.client.register_model(CAM0)
        plan = self.client.wait_for_plan()
        ack = self.client.post_telemetry({"model": "cam0", "plan_id": plan["id"],
                                          "latency_ms_p95": 20.0, "throughput": 30.0})
        self.assertEqual(ack, {"accepted": 1, "breaches": 0, "plan_id": plan["id"]})
        # 1000 ms is over the 50 ms SLA: a breach, counted on what was observed.
        ack = self.client.post_telemetry([
            {"model": "cam0", "plan_id": plan["id"], "latency_ms_p95": 1000.0},
            {"model": "cam0", "plan_id": plan["id"], "latency_ms_p95": 10.0}])
        self.assertEqual((ack["accepted"], ack["breaches"]), (2, 1))
        summary = self.client.telemetry()["models"]["cam0"]
        self.assertEqual((summary["samples"], summary["breaches"]), (3, 1))
        self.assertEqual(summary["last"]["latency_ms_p95"], 10.0)
        self.assertCorunError(
            lambda: self.client.post_telemetry([{"model": "cam0", "throughput": 1},
                                                {"model": "cam0", "thruput": 1}]),
            400, "unknown_field", "[1].thruput")
        self.assertCorunError(lambda: self.client.post_telemetry({"model": "cam0"}), 400,
                              "missing_field")
        self.assertCorunError(
            lambda: self.client.post_telemetry({"model": "cam9", "throughput": 1}), 404,
            "unknown_model", "model")
        self.assertCorunError(lambda: self.client.post_telemetry([]), 400, "empty_batch")

    def test_unreachable_server(self) -> None:
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dead = CorunClient(f"http://127.0.0.1:{port}", TOKEN, timeout_s=2)
        with self.assertRaises(CorunUnreachable) as ctx:
            dead.health()
        self.assertEqual(ctx.exception.status, 0)

    # -- the serving loop ---------------------------------------------------------------------

    def test_serving_loop(self) -> None:
        out = io.StringIO()
        steps = serving_loop.run(self.client, CORUN, steps=4, interval_s=0.0, out=out)
        self.assertEqual(steps, 4)
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[:3], ["register cam0  -> 201", "register cam1  -> 201",
                                     "register chat  -> 201"])
        self.assertIn("step  2: cam0 demand -> 60 fps", lines)
        self.assertEqual(sum(1 for line in lines if line.startswith("step ") and "plan" in line),
                         4)
        # Every step applied a plan for all three models.
        for line in lines:
            if line.startswith("step ") and "plan" in line:
                for name in ("cam0[", "cam1[", "chat["):
                    self.assertIn(name, line)
        # What the loop did reached the server: the demand, one sample per model and step,
        # and the demand's re-plan.
        self.assertEqual(self.client.get_model("cam0")["demand"], {"fps": 60})
        summaries = self.client.telemetry()["models"]
        self.assertEqual({n: s["samples"] for n, s in summaries.items()},
                         {"cam0": 4, "cam1": 4, "chat": 4})
        deadline = time.monotonic() + 30
        # Events that arrive while a re-plan is pending fold into it: the reason lists them.
        while not any("demand cam0" in p["reason"].split(", ")
                      for p in self.client.plan_history()):
            self.assertLess(time.monotonic(), deadline, "no re-plan for the demand change")
            time.sleep(0.05)
        # A rerun registers nothing new: the server kept the models.
        again = io.StringIO()
        serving_loop.run(self.client, CORUN, steps=1, interval_s=0.0, out=again)
        self.assertIn("register cam0  -> 409", again.getvalue())


class KnobTextTest(unittest.TestCase):
    def test_values_are_written_as_corun_writes_them(self) -> None:
        self.assertEqual(serving_loop.knob_text(640.0), "640")
        self.assertEqual(serving_loop.knob_text(0.33), "0.33")
        self.assertEqual(serving_loop.knob_text("awq"), "awq")
        config, running = serving_loop.apply_plan(
            {"models": {"cam0": {"config": {"imgsz": 480.0, "skip_rate": 0.5}},
                        "cam1": {"index": -1}}}, ["cam0", "cam1"])
        self.assertEqual(config, "cam0.imgsz=480,cam0.skip_rate=0.5")
        self.assertEqual(running, ["cam0"])


if __name__ == "__main__":
    unittest.main()
