"""A client for the HTTP/JSON API of `corun serve` (docs/serve.md, docs/openapi.yaml).

Standard library only (urllib, json), Python 3.11. Every route of the API has one method; an
answer with status 4xx or 5xx raises CorunError carrying the server's error code, message and
the field to blame, so that a caller can tell a duplicate registration from a bad knob value.

    client = CorunClient.from_files(port_file="/tmp/s.port", token_file="/tmp/s/token")
    client.register_model({"name": "cam0", "model": "yolo11s", "demand": {"fps": 30}})
    plan = client.wait_for_plan()
    client.post_telemetry({"model": "cam0", "plan_id": plan["id"], "latency_ms_p95": 41.5})

A client object holds no connection; it is safe to share between threads.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, TypedDict

JsonObject = dict[str, Any]
"""A JSON object as `json` decodes it (schemas in docs/openapi.yaml)."""


class Health(TypedDict, total=False):
    """`GET /healthz` (schema Health)."""

    status: str
    models: int
    plan_id: int
    replanning: bool
    replan_pending: bool
    device: str
    last_plan_error: str


class TelemetryAck(TypedDict):
    """`POST /v1/telemetry` (schema TelemetryAck)."""

    accepted: int
    breaches: int
    plan_id: int


class ReplanAck(TypedDict):
    """`POST /v1/replan` (schema ReplanAck)."""

    requested: bool
    plan_id: int


class CorunError(Exception):
    """An error answer of the server: `{"error": {"code", "message", "field"}}`.

    Attributes:
        status: the HTTP status (400..599).
        code: the server's error code (`duplicate_model`, `invalid_spec`, ...; docs/serve.md,
            "Errors"), or `http_STATUS` when the body was not a corun error.
        message: the server's reason.
        field: the field to blame (`name`, `demand.fps`, `[3].throughput`), or None.
        method, path: the request that failed.
    """

    def __init__(self, status: int, code: str, message: str, field: str | None, method: str,
                 path: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.method = method
        self.path = path
        where = f" (field {field})" if field else ""
        super().__init__(f"{method} {path} -> {status} {code}{where}: {message}")


class CorunUnreachable(CorunError):
    """No HTTP answer at all: connection refused, reset or timed out (status 0)."""


class CorunClient:
    """One `corun serve` endpoint.

    Args:
        base_url: e.g. "http://127.0.0.1:8080".
        token: the bearer token for mutating requests (POST, PUT, DELETE); reads need none.
        timeout_s: per-request socket timeout in seconds.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8080", token: str | None = None,
                 timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    @classmethod
    def from_files(cls, port_file: str | Path, token_file: str | Path | None = None,
                   host: str = "127.0.0.1", timeout_s: float = 30.0) -> CorunClient:
        """A client for a server started with `--port-file` (and `--token-file`)."""
        port = int(Path(port_file).read_text().strip())
        token = Path(token_file).read_text().strip() if token_file else None
        return cls(f"http://{host}:{port}", token, timeout_s)

    # -- plumbing -----------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None, *, raw_body: bytes | None = None,
                 content_type: str = "application/json", auth: bool = False,
                 text: bool = False) -> Any:
        """Sends one request; returns the decoded JSON answer (or text), raises on 4xx/5xx."""
        data = raw_body
        if data is None and body is not None:
            data = json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers=headers)
        # A POST without a body still says so (the server reads Content-Length: 0).
        if data is None and method in ("POST", "PUT"):
            req.data = b""
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            raise self._error(e.code, e.read(), method, path) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            raise CorunUnreachable(0, "unreachable", str(reason), None, method, path) from None
        if text:
            return payload.decode()
        return json.loads(payload) if payload else None

    @staticmethod
    def _error(status: int, payload: bytes, method: str, path: str) -> CorunError:
        try:
            err = json.loads(payload)["error"]
            return CorunError(status, str(err["code"]), str(err.get("message", "")),
                              err.get("field"), method, path)
        except (ValueError, KeyError, TypeError):
            return CorunError(status, f"http_{status}", payload.decode(errors="replace")[:200],
                              None, method, path)

    @staticmethod
    def _name(name: str) -> str:
        # Names are letters, digits, '_', '-', '.'; quote anything else rather than send it raw.
        return urllib.parse.quote(name, safe="")

    # -- routes -------------------------------------------------------------------------------

    def health(self) -> Health:
        """`GET /healthz`: model count, plan in force, whether a re-plan runs or waits."""
        return self._request("GET", "/healthz")

    def metrics(self) -> str:
        """`GET /metrics`: Prometheus text exposition."""
        return self._request("GET", "/metrics", text=True)

    def openapi(self) -> JsonObject:
        """`GET /v1/openapi.json`: the OpenAPI 3 description of the API this server speaks."""
        return self._request("GET", "/v1/openapi.json")

    def list_models(self) -> list[JsonObject]:
        """`GET /v1/models`: the registered entries, in registration order."""
        return self._request("GET", "/v1/models")["models"]

    def register_model(self, entry: JsonObject) -> JsonObject:
        """`POST /v1/models`: registers a workload `models` entry; returns it as stored."""
        return self._request("POST", "/v1/models", entry, auth=True)["model"]

    def get_model(self, name: str) -> JsonObject:
        """`GET /v1/models/NAME`."""
        return self._request("GET", f"/v1/models/{self._name(name)}")["model"]

    def remove_model(self, name: str) -> str:
        """`DELETE /v1/models/NAME`; returns the removed name."""
        return self._request("DELETE", f"/v1/models/{self._name(name)}", auth=True)["removed"]

    def update_demand(self, name: str, demand: JsonObject) -> JsonObject:
        """`PUT /v1/models/NAME/demand`: replaces the demand; returns the updated entry."""
        return self._request("PUT", f"/v1/models/{self._name(name)}/demand", demand,
                             auth=True)["model"]

    def post_telemetry(self, samples: JsonObject | list[JsonObject]) -> TelemetryAck:
        """`POST /v1/telemetry`: one sample or a list (at most 256)."""
        return self._request("POST", "/v1/telemetry", samples, auth=True)

    def telemetry(self) -> JsonObject:
        """`GET /v1/telemetry`: {"models": {NAME: summary}, "flush_interval_ms": ...}."""
        return self._request("GET", "/v1/telemetry")

    def plan(self) -> JsonObject:
        """`GET /v1/plan`: the plan in force (CorunError `no_plan` before the first)."""
        return self._request("GET", "/v1/plan")

    def plan_history(self, limit: int | None = None) -> list[JsonObject]:
        """`GET /v1/plan/history?limit=N`: the last plans, oldest first."""
        query = "" if limit is None else "?" + urllib.parse.urlencode({"limit": limit})
        return self._request("GET", "/v1/plan/history" + query)["plans"]

    def replan(self) -> ReplanAck:
        """`POST /v1/replan`: asks for a new plan (it appears in `plan()`)."""
        return self._request("POST", "/v1/replan", auth=True)

    def what_if(self, entry: JsonObject) -> JsonObject:
        """`POST /v1/whatif`: could the node take `entry` with every SLA held? Changes nothing.

        Returns the WhatIf answer: `fits`, `gpu`, `utility_before`, `utility_after`,
        `utility_gain`, `breaks` (the SLAs that would break, with reasons) and `plan`.
        """
        return self._request("POST", "/v1/whatif", entry)

    def place_tools(self, scenario: JsonObject, policy: str | None = None) -> JsonObject:
        """`POST /v1/tools/place`: where should each call of a tool DAG run (`gpu_now`,
        `gpu_queue`, `cpu`) next to the models of the plan in force? Changes nothing.

        `scenario` is a placement scenario (docs/placement.md) as JSON, without `co_running`;
        `policy` one of all-gpu, heft, dmda, bandit, brute-force, agent (default). Returns the
        ToolPlacement answer: `mapping`, `makespan_ms`, `executions`, `tools`, `plan_id` and,
        next to registered models, `corunners` with every SLA's predicted `headroom` during the
        tools' burst. CorunError `no_plan` (503) while no plan covers the registered models.
        """
        body: JsonObject = {"scenario": scenario}
        if policy is not None:
            body["policy"] = policy
        return self._request("POST", "/v1/tools/place", body)

    def capacity(self, models: list[JsonObject] | None = None,
                 max_gpus: int | None = None) -> JsonObject:
        """`POST /v1/capacity`: how many GPUs of the served device do these models need (the
        registered models when `models` is None)? Changes nothing.

        Returns the Capacity answer: `gpus_needed` (None when no node of up to `max_gpus`, 8 by
        default, holds every SLA as predicted), `tried_up_to`, and on that node `placement`
        (model -> GPU) and `predicted_utility`. CorunError `no_models` (404) with neither.
        """
        body: JsonObject = {}
        if models is not None:
            body["models"] = models
        if max_gpus is not None:
            body["max_gpus"] = max_gpus
        return self._request("POST", "/v1/capacity", body if body else None)

    # -- helpers ------------------------------------------------------------------------------

    def wait_for_decision(self, after: int = 0, timeout_s: float = 30.0,
                          poll_s: float = 0.05) -> JsonObject:
        """Polls `plan()` until a decision numbered > after is published.

        A plan's `id` changes only when what runs changes; its `decision` counts every
        re-plan, so this also returns after a re-plan that kept every configuration.

        Raises:
            TimeoutError: none came within timeout_s.
        """
        return self._poll_plan(lambda p: p.get("decision", p["id"]) > after, timeout_s, poll_s,
                               f"no decision after {after} within {timeout_s} s")

    def wait_for_plan(self, after_id: int = 0, timeout_s: float = 30.0,
                      poll_s: float = 0.05) -> JsonObject:
        """Polls `plan()` until a plan with id > after_id is in force (what runs changed).

        Raises:
            TimeoutError: none appeared within timeout_s.
        """
        return self._poll_plan(lambda p: p["id"] > after_id, timeout_s, poll_s,
                               f"no plan after id {after_id} within {timeout_s} s")

    def _poll_plan(self, done: Callable[[JsonObject], bool], timeout_s: float, poll_s: float,
                   timeout_message: str) -> JsonObject:
        """Polls `plan()` until `done` holds for it (`no_plan` counts as not yet)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                p = self.plan()
                if done(p):
                    return p
            except CorunError as e:
                if e.code != "no_plan":
                    raise
            if time.monotonic() >= deadline:
                raise TimeoutError(timeout_message)
            time.sleep(poll_s)
