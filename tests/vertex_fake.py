"""A fake Vertex AI region for the provider tests: a small simulator of the documented model behind a real HTTP
server on 127.0.0.1, so the providers run through the real ``googleapiclient`` transport (discovery document,
URI templates, JSON encoding, the client's own retries of 429 / 5xx / dropped connections).

What it simulates, and where each behaviour is stated:

* long-running operations (aiplatform.v1 ``GoogleLongrunningOperation``): a create returns an operation named under
  its resource (``.../models/<id>/operations/<n>``, ``.../endpoints/<e>/operations/<n>``); ``operations.get``
  reports ``done`` with ``error`` or ``response`` once the operation's (simulated) duration has passed on the
  test's clock; ``operations.list`` lists a parent's operations ("Lists operations that match the specified
  filter"). An operation outlives any client: nothing a caller stops stops it;
* caller-chosen ids: ``UploadModelRequest.modelId`` ("will become the final component of the model resource name")
  and ``DeployedModel.id``; an id already taken, by a resource or by a create still running, is 409
  ALREADY_EXISTS (AIP-133's rule for a create with a user-specified id); without an id the server picks one, so a
  retried create makes a second copy;
* a deployment appears in the endpoint's ``deployedModels`` when its operation succeeds; its dedicated replicas
  consume their ``SPECIFIC_RESERVATION``'s machines from the start (a deployment that does not fit fails
  RESOURCE_EXHAUSTED, as a reservation with no free VM cannot start a replica); an undeploy frees them;
* ``models.delete`` is refused while a deployment uses the model ("A model cannot be deleted if any Endpoint
  resource has a DeployedModel based on the model"); an undeploy of a model with traffic is refused unless the
  request's split unassigns it (UndeployModelRequest.trafficSplit);
* every request's parameters and body are validated against ``aiplatform.v1.json`` (tests/discovery.py) and every
  response against its schema, so what the providers send is what the real client puts on the wire.

Faults (:meth:`FakeVertexServer.fault`): ``lost`` applies the request and then drops the connection without an
answer (the response is lost after the server applied it; the client retries), ``503`` applies it and answers 503,
``429`` refuses it unapplied with 429 (quota), each for the next N calls of a method.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.discovery import DiscoveryDocument

Body = dict[str, Any]
_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1."


class ApiError(Exception):
    """An error answer: HTTP status, google.rpc status name, message."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message

    def body(self) -> Body:
        return {"error": {"code": self.status, "status": self.reason, "message": self.message}}


class Clock:
    """The test's time: the providers' waiter sleeps on it, and operations finish by it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += seconds

    def __call__(self) -> float:
        return self.now


@dataclass
class _Op:
    name: str
    metadata_type: str
    done_at: float
    #: Runs when the operation finishes: returns the response body (with its @type), or raises ApiError (the error).
    finish: Callable[[], Body]
    done: bool = False
    result: Body = field(default_factory=dict)


class VertexSim:
    """One region of one project: models, endpoints, operations and reservations (a deployment on a resource pool of a custom container refused, as Vertex does)."""

    def __init__(
        self,
        doc: DiscoveryDocument,
        clock: Clock,
        *,
        reservations: Mapping[str, int] | None = None,
        upload_seconds: float = 120,
        deploy_seconds: float = 900,
        teardown_seconds: float = 60,
    ):
        self.doc, self.clock = doc, clock
        self.upload_seconds, self.deploy_seconds, self.teardown_seconds = (
            upload_seconds,
            deploy_seconds,
            teardown_seconds,
        )
        self.reservations: dict[str, int] = dict(reservations or {})
        self.models: dict[str, Body] = {}
        self.endpoints: dict[str, Body] = {}
        self.operations: dict[str, _Op] = {}
        #: Deployments whose operation is running: endpoint -> {deployed id: DeployedModel}.
        self.deploying: dict[str, dict[str, Body]] = {}
        self.calls: list[tuple[str, Body, Any]] = []
        self.lock = threading.RLock()
        self._seq = 0

    # ---- helpers for tests --------------------------------------------------------------------------------

    def add_endpoint(self, name: str) -> None:
        self.endpoints[name] = {
            "name": name,
            "displayName": name.rsplit("/", 1)[-1],
            "deployedModels": [],
            "trafficSplit": {},
        }

    def methods(self) -> list[str]:
        return [c[0] for c in self.calls]

    def count(self, method: str) -> int:
        return sum(1 for c in self.calls if c[0] == method)

    def deployed(self, endpoint: str) -> list[Body]:
        return self.endpoints[endpoint]["deployedModels"]

    def machines_in_use(self, reservation: str) -> int:
        live = [d for e in self.endpoints.values() for d in e["deployedModels"]]
        running = [d for dep in self.deploying.values() for d in dep.values()]
        return sum(_machines(d, reservation) for d in live + running)

    # ---- dispatch -----------------------------------------------------------------------------------------

    def handle(self, method: str, params: Mapping[str, Any], body: Any) -> Body:
        with self.lock:
            errors = self.doc.validate_parameters(method, params)
            schema = self.doc.request_schema(method)
            if schema is not None:
                errors += self.doc.validate(schema, body)
            if errors:
                raise ApiError(400, "INVALID_ARGUMENT", "; ".join(errors))
            self.calls.append((method, dict(params), copy.deepcopy(body)))
            self._advance()
            handler = getattr(self, "_" + method.split(".", 2)[2].replace(".", "_"))
            response: Body = handler(dict(params), copy.deepcopy(body))
            out = self.doc.response_schema(method)
            if out is not None:
                problems = self.doc.validate(out, response, allow_read_only=True)
                assert problems == [], (method, problems)
            return copy.deepcopy(response)

    def _advance(self) -> None:
        for op in sorted(self.operations.values(), key=lambda o: (o.done_at, o.name)):
            if not op.done and op.done_at <= self.clock():
                try:
                    op.result = {"response": op.finish()}
                except ApiError as err:
                    op.result = {"error": {"code": _RPC_CODE[err.reason], "message": err.message}}
                op.done = True

    def _start(self, parent: str, metadata_type: str, seconds: float, finish: Callable[[], Body]) -> Body:
        self._seq += 1
        op = _Op(f"{parent}/operations/{self._seq}", metadata_type, self.clock() + seconds, finish)
        self.operations[op.name] = op
        return self._op_body(op)

    def _op_body(self, op: _Op) -> Body:
        body: Body = {
            "name": op.name,
            "done": op.done,
            "metadata": {"@type": _TYPE + op.metadata_type, "genericMetadata": {}},
        }
        return {**body, **op.result} if op.done else body

    def running(self, parent: str, metadata_type: str) -> list[_Op]:
        return [
            o
            for o in self.operations.values()
            if not o.done and o.metadata_type == metadata_type and o.name.startswith(parent + "/operations/")
        ]

    # ---- operations ---------------------------------------------------------------------------------------

    def _get_op(self, params: Body, _body: Any) -> Body:
        if params["name"] not in self.operations:
            raise ApiError(404, "NOT_FOUND", params["name"])
        return self._op_body(self.operations[params["name"]])

    def _list_ops(self, params: Body, _body: Any) -> Body:
        prefix = params["name"] + "/operations/"
        return {"operations": [self._op_body(o) for n, o in sorted(self.operations.items()) if n.startswith(prefix)]}

    _models_operations_get = _endpoints_operations_get = _get_op
    _models_operations_list = _endpoints_operations_list = _list_ops

    # ---- models -------------------------------------------------------------------------------------------

    def _models_upload(self, params: Body, body: Body) -> Body:
        if "modelId" in body:
            name = f"{params['parent']}/models/{body['modelId']}"
            if name in self.models or self.running(name, "UploadModelOperationMetadata"):
                raise ApiError(409, "ALREADY_EXISTS", f"Model {name} already exists")
        else:
            self._seq += 1
            name = f"{params['parent']}/models/{1000 + self._seq}"
        model = {**body["model"], "name": name, "versionId": "1"}

        def finish() -> Body:
            self.models[name] = model
            return {"@type": _TYPE + "UploadModelResponse", "model": name}

        return self._start(name, "UploadModelOperationMetadata", self.upload_seconds, finish)

    def _model(self, name: str) -> Body:
        if name not in self.models:
            raise ApiError(404, "NOT_FOUND", f"Model {name} not found")
        return self.models[name]

    def _models_get(self, params: Body, _body: Any) -> Body:
        return self._model(params["name"])

    def _models_patch(self, params: Body, body: Body) -> Body:
        model = self._model(params["name"])
        for path in params["updateMask"].split(","):
            model[path] = body[path]
        return model

    def _models_delete(self, params: Body, _body: Any) -> Body:
        name = params["name"]
        self._model(name)
        users = [
            d["id"]
            for e in self.endpoints.values()
            for d in [*e["deployedModels"], *self.deploying.get(e["name"], {}).values()]
            if d["model"] == name
        ]
        if users:
            raise ApiError(
                400, "FAILED_PRECONDITION", f"Model {name} is deployed ({', '.join(users)}); undeploy it first"
            )

        def finish() -> Body:
            self.models.pop(name, None)
            return {"@type": "type.googleapis.com/google.protobuf.Empty"}

        return self._start(name, "DeleteOperationMetadata", self.teardown_seconds, finish)

    # ---- endpoints ----------------------------------------------------------------------------------------

    def _endpoint(self, name: str) -> Body:
        if name not in self.endpoints:
            raise ApiError(404, "NOT_FOUND", f"Endpoint {name} not found")
        return self.endpoints[name]

    def _endpoints_get(self, params: Body, _body: Any) -> Body:
        return self._endpoint(params["name"])

    def _endpoints_deployModel(self, params: Body, body: Body) -> Body:
        name = params["endpoint"]
        endpoint = self._endpoint(name)
        deployed = dict(body["deployedModel"])
        model = self._model(deployed["model"])
        if "sharedResources" in deployed and "containerSpec" in model:
            # Vertex AI "Share resources across deployments", Limitations: "custom containers aren't supported".
            raise ApiError(400, "FAILED_PRECONDITION", "custom containers aren't supported on a DeploymentResourcePool")
        running = self.deploying.setdefault(name, {})
        if "id" in deployed:
            if deployed["id"] in running or any(d["id"] == deployed["id"] for d in endpoint["deployedModels"]):
                raise ApiError(409, "ALREADY_EXISTS", f"DeployedModel {deployed['id']} already exists in {name}")
        else:
            self._seq += 1
            deployed["id"] = str(7_000_000_000 + self._seq)
        reservation = _reservation(deployed)
        fits = reservation is None or (
            self.machines_in_use(reservation) + _machines(deployed, reservation)
            <= self.reservations.get(reservation, 0)
        )
        running[deployed["id"]] = deployed
        deployed_id = deployed["id"]

        def finish() -> Body:
            running.pop(deployed_id, None)
            if not fits:
                raise ApiError(429, "RESOURCE_EXHAUSTED", f"no free machine in reservation {reservation}")
            endpoint["deployedModels"].append(deployed)
            return {"@type": _TYPE + "DeployModelResponse", "deployedModel": deployed}

        return self._start(name, "DeployModelOperationMetadata", self.deploy_seconds, finish)

    def _endpoints_undeployModel(self, params: Body, body: Body) -> Body:
        name = params["endpoint"]
        endpoint = self._endpoint(name)
        deployed_id = body["deployedModelId"]
        if not any(d["id"] == deployed_id for d in endpoint["deployedModels"]):
            raise ApiError(404, "NOT_FOUND", f"DeployedModel {deployed_id} not found in {name}")
        split: Mapping[str, int] = body["trafficSplit"] if "trafficSplit" in body else endpoint["trafficSplit"]
        if split.get(deployed_id, 0):
            raise ApiError(400, "FAILED_PRECONDITION", f"DeployedModel {deployed_id} still has traffic")
        _check_split(split, {d["id"] for d in endpoint["deployedModels"]} - {deployed_id})
        endpoint["trafficSplit"] = dict(split)
        endpoint["deployedModels"] = [d for d in endpoint["deployedModels"] if d["id"] != deployed_id]  # frees machines

        def finish() -> Body:
            return {"@type": _TYPE + "UndeployModelResponse"}

        return self._start(name, "UndeployModelOperationMetadata", self.teardown_seconds, finish)

    def _endpoints_mutateDeployedModel(self, params: Body, body: Body) -> Body:
        endpoint = self._endpoint(params["endpoint"])
        target = next(d for d in endpoint["deployedModels"] if d["id"] == body["deployedModel"]["id"])
        for path in body["updateMask"].split(","):
            head, _, leaf = path.partition(".")
            if leaf:
                target[head][leaf] = body["deployedModel"][head][leaf]
            else:
                target[head] = body["deployedModel"][head]

        def finish() -> Body:
            return {"@type": _TYPE + "MutateDeployedModelResponse", "deployedModel": target}

        return self._start(params["endpoint"], "MutateDeployedModelOperationMetadata", 10, finish)

    def _endpoints_patch(self, params: Body, body: Body) -> Body:
        endpoint = self._endpoint(params["name"])
        if "trafficSplit" in body:
            _check_split(body["trafficSplit"], {d["id"] for d in endpoint["deployedModels"]})
        for path in params["updateMask"].split(","):
            head, _, leaf = path.partition(".")
            if leaf:
                endpoint.setdefault(head, {})[leaf] = body[head][leaf]
            else:
                endpoint[head] = body[head]
        return endpoint


_RPC_CODE = {
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "INVALID_ARGUMENT": 3,
}


def _reservation(deployed: Mapping[str, Any]) -> str | None:
    affinity = deployed.get("dedicatedResources", {}).get("machineSpec", {}).get("reservationAffinity", {})
    if affinity.get("reservationAffinityType") != "SPECIFIC_RESERVATION":
        return None
    return str(affinity["values"][0])


def _machines(deployed: Mapping[str, Any], reservation: str) -> int:
    """One replica is one machine (the pools fill their machine); a deployment starts its minReplicaCount."""
    return int(deployed["dedicatedResources"]["minReplicaCount"]) if _reservation(deployed) == reservation else 0


def _check_split(split: Mapping[str, int], deployed: set[str]) -> None:
    if not set(split) <= deployed:
        raise ApiError(400, "INVALID_ARGUMENT", f"traffic split names {sorted(set(split) - deployed)}, not deployed")
    if split and sum(split.values()) != 100:
        raise ApiError(400, "INVALID_ARGUMENT", f"traffic split sums to {sum(split.values())}, not 100")


# ---- the HTTP server ---------------------------------------------------------------------------------------


_VERB_RE = re.compile(r"^(?P<path>.*?)(?::(?P<verb>[A-Za-z]+))?$")


@dataclass
class _Fault:
    method: str
    kind: str  # "lost" | "503" | "429"
    times: int


class FakeVertexServer:
    """``VertexSim`` behind ``http://127.0.0.1:<port>``, routed the way the discovery document's paths are."""

    def __init__(self, sim: VertexSim):
        self.sim = sim
        self.faults: list[_Fault] = []
        #: Every HTTP request as (HTTP method, discovery method, fault applied or "").
        self.requests: list[tuple[str, str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                server._serve(self)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeVertexServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def fault(self, method: str, kind: str, times: int = 1) -> None:
        self.faults.append(_Fault(method, kind, times))

    def _take_fault(self, method: str) -> str:
        for f in self.faults:
            if f.method == method and f.times > 0:
                f.times -= 1
                return f.kind
        return ""

    def route(self, http_method: str, path: str) -> tuple[str, str]:
        """(discovery method, its path parameter's value) for an HTTP request path (``/v1/...``)."""
        m = _VERB_RE.match(path.removeprefix("/v1/"))
        assert m is not None
        name, verb = m.group("path"), m.group("verb")
        segments = name.split("/")
        if verb is None:
            if len(segments) % 2:  # a collection: list, or create (POST)
                collection, parent = ".".join(segments[::2]), "/".join(segments[:-1])
                verb = {"GET": "list", "POST": "create"}[http_method]
                method = f"{collection}.{verb}"
                return method, parent
            verb = {"GET": "get", "PATCH": "patch", "DELETE": "delete"}[http_method]
            return ".".join(segments[::2]) + f".{verb}", name
        if len(segments) % 2:  # models:upload: the verb is on the collection
            return ".".join(segments[::2]) + f".{verb}", "/".join(segments[:-1])
        return ".".join(segments[::2]) + f".{verb}", name

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        url = urlparse(h.path)
        method, target = self.route(h.command, url.path)
        spec = self.sim.doc.method(method)
        (path_param,) = [k for k, v in spec.get("parameters", {}).items() if v.get("location") == "path"]
        params: Body = {path_param: target}
        params.update({k: v[0] for k, v in parse_qs(url.query).items() if k not in ("alt", "prettyPrint")})
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length)) if length else None
        fault = self._take_fault(method)
        self.requests.append((h.command, method, fault))
        if fault == "429":
            return self._answer(h, 429, ApiError(429, "RESOURCE_EXHAUSTED", "quota exceeded; retry").body())
        try:
            status, answer = 200, self.sim.handle(method, params, body)
        except ApiError as err:
            status, answer = err.status, err.body()
        if fault == "lost":
            # Applied, then the connection drops before any byte of the answer: the client cannot know.
            h.close_connection = True
            h.connection.shutdown(2)
            return None
        if fault == "503":
            return self._answer(h, 503, ApiError(503, "UNAVAILABLE", "backend unavailable").body())
        return self._answer(h, status, answer)

    @staticmethod
    def _answer(h: BaseHTTPRequestHandler, status: int, body: Body) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=UTF-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


@contextmanager
def fake_vertex(doc: DiscoveryDocument, **sim_kwargs: Any) -> Iterator[tuple[FakeVertexServer, Clock]]:
    clock = Clock()
    with FakeVertexServer(VertexSim(doc, clock, **sim_kwargs)) as server:
        yield server, clock
