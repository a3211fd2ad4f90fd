"""Pulumi dynamic providers for what pulumi-gcp 10.2.0 cannot express on Vertex AI.

pulumi-gcp 10.2.0 has ``gcp.vertex.AiEndpoint``, ``AiEndpointIamMember`` and ``AiEndpointWithModelGardenDeployment``
(checked with ``inspect``), but no resource that uploads a custom-container Model from Cloud Storage, none that deploys
a Model to an *existing* endpoint, and none that sets an endpoint's traffic split across deployed models
(``AiEndpoint.traffic_split`` would need the deployed model ids, which exist only after deployment: a dependency
cycle). No deployment resource pool is used: a deployed model on one (``sharedResources``) cannot run a custom
container (Vertex AI "Share resources across deployments", Limitations), and co-hosting runs in one dedicated
deployed model instead (the co-host server).

Two dynamic resources fill the gap, each a thin state machine over the official client library
(``googleapiclient.discovery.build("aiplatform", "v1", static_discovery=True)`` against the regional endpoint,
Application Default Credentials). Request bodies come from :mod:`components.vertex.requests`, i.e. exactly the
discovery shapes the tests validate:

* :class:`DeployedModel` - ``models.upload`` + ``endpoints.deployModel`` (create), ``mutateDeployedModel`` /
  ``models.patch`` (update), ``endpoints.undeployModel`` + ``models.delete`` (delete);
* :class:`EndpointTraffic` - ``endpoints.patch`` of ``trafficSplit`` (+ ``clientConnectionConfig``).

:class:`DeploymentResourcePoolProvider` remains only to delete the pools earlier versions created (Pulumi deletes a
dynamic resource through the provider pickled in its state).

Every network call goes through :class:`VertexTransport` (one method), so unit tests drive the providers with a
fake that records and validates the calls. Long-running operations are polled with bounded, growing intervals.

Serialisation: Pulumi pickles the provider object (dill) into each resource's ``__provider`` input. The provider
classes live in this importable module, so dill pickles them *by reference* (module + class name) plus the
instance state, which is only the small frozen :class:`PollPolicy` and ``None`` hooks: the value is identical
across runs and processes (tests/test_vertex_component.py checks both). ``serialize_as_secret_always`` is off:
the pickle holds no credential (ADC is read in the provider process at call time).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    UpdateResult,
)
from pulumi.runtime import rpc as _rpc

from ..dynamic_provider import PickledProvider
from . import requests as rq

log = logging.getLogger(__name__)

#: googleapiclient's own retry of 429/5xx and connection errors per call (randomised exponential backoff,
#: ``HttpRequest.execute(num_retries=...)``): 5 rides out a minute-scale regional blip during a long apply.
HTTP_RETRIES = 5
#: Bound on ``models.upload``: Vertex ingests the container image at upload ("stored internally"); a CUDA vLLM
#: image is several GB. 30 min bounds a stuck copy; it is a limit, not an estimate.
UPLOAD_TIMEOUT_S = 1800
#: Added to the container's ``deploymentTimeout`` (its 2 h maximum when unset) for the deploy operation: GPU VM
#: provisioning happens before the container's own clock can start. 15 min bounds it, not an estimate.
PROVISIONING_MARGIN_S = 900
#: Bound on undeploy and model deletion: replicas drain and VMs are released; 30 min bounds a stuck teardown.
TEARDOWN_TIMEOUT_S = 1800

UNKNOWN = _rpc.UNKNOWN  # what preview passes for values known only after apply
PROVIDER_KEY = "__provider"

Body = dict[str, Any]


# ---- transport ------------------------------------------------------------------------------------------


class NotFound(Exception):
    """The addressed resource does not exist (HTTP 404)."""


class Conflict(Exception):
    """The caller-chosen id is taken (HTTP 409 ALREADY_EXISTS): by this resource's own earlier request whose response
    was lost (the client library retried the POST), or by a create still running."""


class VertexTransport(Protocol):
    """The only network interface of the providers: one discovery method call, returning the JSON response.

    ``method`` is the dotted discovery path (``projects.locations.models.upload``), ``params`` its path/query
    parameters, ``body`` the request body (None for methods without one). Raises :class:`NotFound` on 404 and
    :class:`Conflict` on 409."""

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Body: ...


TransportFactory = Callable[[str], VertexTransport]


def regional_endpoint(region: str) -> str:
    """Vertex resources live in a region and the global host does not serve them (Vertex AI locations page:
    "You specify the location for a Vertex AI API request by using the appropriate regional endpoint")."""
    return f"https://{region}-aiplatform.googleapis.com"


class DiscoveryTransport:
    """google-api-python-client over the aiplatform v1 discovery document shipped with the library.

    ``static_discovery=True`` uses the packaged document, the one the tests validate against, so no discovery
    fetch happens at runtime and the client's request shapes cannot drift from the validated ones. One instance
    per provider call: httplib2 connections are not thread-safe and the dynamic-provider server runs calls on a
    thread pool.

    ``api_endpoint`` (default: the regional host) and ``retry_sleep`` exist for the tests' local Vertex server:
    the client's own retry of 429/5xx/connection errors (``HttpRequest.execute(num_retries=...)``) then sleeps
    on the test's clock instead of real seconds."""

    def __init__(
        self,
        region: str,
        credentials: Any = None,
        api_endpoint: str | None = None,
        retry_sleep: Callable[[float], None] | None = None,
    ):
        from googleapiclient import discovery  # imported lazily: the offline plan never needs it

        if credentials is None:
            import google.auth

            credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        self.region = region
        self._retry_sleep = retry_sleep
        self._service = discovery.build(
            "aiplatform",
            "v1",
            credentials=credentials,
            static_discovery=True,
            cache_discovery=False,
            client_options={"api_endpoint": api_endpoint or regional_endpoint(region)},
        )

    def request(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Any:
        """The unsent ``googleapiclient.http.HttpRequest`` (uri, method, body) for one call."""
        *resources, verb = method.split(".")
        node = self._service
        for name in resources:
            node = getattr(node, name)()
        kwargs = dict(params)
        if body is not None:
            kwargs["body"] = dict(body)
        req = getattr(node, verb)(**kwargs)
        if self._retry_sleep is not None:
            req._sleep = self._retry_sleep  # HttpRequest's own backoff sleep (googleapiclient/http.py)
        return req

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Body:
        from googleapiclient.errors import HttpError

        try:
            return self.request(method, params, body).execute(num_retries=HTTP_RETRIES) or {}
        except HttpError as err:
            if err.resp.status == 404:
                raise NotFound(f"{method} {dict(params)}: {err}") from err
            if err.resp.status == 409:
                raise Conflict(f"{method} {dict(params)}: {err}") from err
            raise


# ---- long-running operations ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PollPolicy:
    """How long-running operations are polled: growing intervals, capped."""

    #: First wait: model operations take minutes; 10 s still returns fast from quick ones (patches, no-ops).
    first_interval_s: float = 10.0
    #: Cap: 60 s keeps a 2 h deployment to ~130 reads, negligible against the per-minute read quota.
    max_interval_s: float = 60.0
    #: Growth per poll: reaches the cap after five polls (~2 min) instead of hammering a slow operation.
    growth: float = 1.5


class OperationError(RuntimeError):
    """A long-running operation finished with an error, or did not finish within its bound."""


class OperationTimeout(OperationError):
    """An operation still running when the provider's wait ended. It is left running (never cancelled): the
    next ``pulumi up`` finds it by the resource's caller-chosen ids and waits on it instead of starting another."""


def operation_method(operation_name: str, verb: str = "get") -> str:
    """The discovery method of an operation name: ``projects/p/locations/l/models/m/operations/o`` ->
    ``projects.locations.models.operations.get`` (each resource collection has its own operations methods, and
    the client checks ``name`` against that method's pattern)."""
    segments = operation_name.split("/")
    if len(segments) % 2 or "operations" not in segments[::2]:
        raise OperationError(f"not an operation name: {operation_name!r}")
    return ".".join(segments[::2]) + f".{verb}"


def _operation_result(op: Mapping[str, Any], what: str) -> Body:
    if "error" in op:
        err = op["error"]
        raise OperationError(f"{what} failed: operation {op.get('name')}: code {err.get('code')}: {err.get('message')}")
    return dict(op.get("response") or {})


#: Pages of an operations listing read at most: a parent's operations are its few creates, deploys and patches;
#: 20 pages bound a runaway listing instead of looping on a server that always returns a token.
MAX_OPERATION_PAGES = 20


def pending_operations(t: VertexTransport, parent: str, metadata_type: str) -> list[Body]:
    """The not-done operations of ``parent`` (a model, an endpoint, a resource pool) whose metadata is
    ``metadata_type`` (``DeployModelOperationMetadata``...): ``<collection>.operations.list``, the documented way to
    find an operation without its name ("Lists operations that match the specified filter", aiplatform.v1). The
    filter is applied here (``done`` and the metadata's ``@type``), not server-side: aiplatform.v1 does not state
    which fields its "standard list filter" accepts. A parent that does not exist (yet) has none."""
    method = ".".join(parent.split("/")[::2]) + ".operations.list"
    out: list[Body] = []
    token = None
    for _ in range(MAX_OPERATION_PAGES):
        params: dict[str, Any] = {"name": parent}
        if token:
            params["pageToken"] = token
        try:
            page = t.call(method, params)
        except NotFound:
            return out
        out += [
            op
            for op in page.get("operations", [])
            if not op.get("done") and str(op.get("metadata", {}).get("@type", "")).endswith("." + metadata_type)
        ]
        token = page.get("nextPageToken")
        if not token:
            break
    return sorted(out, key=lambda op: str(op.get("name")))


class Waiter:
    def __init__(
        self, transport: VertexTransport, policy: PollPolicy, sleep: Callable[[float], None], clock: Callable[[], float]
    ):
        self.transport, self.policy, self.sleep, self.clock = transport, policy, sleep, clock

    def wait(self, op: Mapping[str, Any], timeout_s: float, what: str, resume_hint: str = "") -> Body:
        """The operation's response once done. On timeout :class:`OperationTimeout`: the operation keeps running
        server-side (nothing is cancelled), and ``resume_hint`` says how the next ``pulumi up`` picks it up."""
        name = op.get("name", "")
        deadline = self.clock() + timeout_s
        interval = self.policy.first_interval_s
        while not op.get("done"):
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise OperationTimeout(
                    f"{what}: operation {name} not done after {timeout_s:.0f} s; it keeps running server-side "
                    f"(not cancelled). {resume_hint or 'Run `pulumi up` again: it waits on this operation.'} "
                    f"Its state: `gcloud ai operations describe {name.rsplit('/', 1)[-1]} --region "
                    f"{_region_of(name)}`."
                )
            self.sleep(min(interval, remaining))
            interval = min(interval * self.policy.growth, self.policy.max_interval_s)
            op = self.transport.call(operation_method(name), {"name": name})
        return _operation_result(op, what)

    def until(self, probe: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll ``probe`` with the same growing intervals until it holds; :class:`OperationTimeout` after
        ``timeout_s`` (for a create whose operation cannot be listed: its resource appears when it is done)."""
        deadline = self.clock() + timeout_s
        interval = self.policy.first_interval_s
        while not probe():
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise OperationTimeout(f"{what}: still not there after {timeout_s:.0f} s; run `pulumi up` again")
            self.sleep(min(interval, remaining))
            interval = min(interval * self.policy.growth, self.policy.max_interval_s)


def _region_of(name: str) -> str:
    parts = name.split("/")
    return parts[3] if len(parts) > 3 and parts[2] == "locations" else "<region>"


# ---- diff helpers ---------------------------------------------------------------------------------------


def normalized(value: Any) -> Any:
    """Pulumi hands dynamic providers every number as a float (protobuf ``Struct``); every number these bodies
    carry is an integer (int32 fields, percentages, seconds), so integral floats become ints again before they
    are compared or sent (``2.0`` is not a proto3-JSON int32 a strict parser must accept)."""
    if isinstance(value, Mapping):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalized(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _normalize_props(method: Callable[..., Any]) -> Callable[..., Any]:
    """Apply :func:`normalized` to every property-bag argument of a provider method."""

    def wrapper(self: Any, *args: Any) -> Any:
        return method(self, *(normalized(a) if isinstance(a, Mapping) else a for a in args))

    wrapper.__name__, wrapper.__doc__, wrapper.__qualname__ = method.__name__, method.__doc__, method.__qualname__
    return wrapper


def changed_paths(olds: Mapping[str, Any], news: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """Dotted paths under ``keys`` whose values differ. Objects are compared field by field; lists as a whole
    (an element-wise diff of e.g. args would not change the decision). Unknown values (preview) differ."""
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for k in sorted(set(a) | set(b)):
                walk(a.get(k), b.get(k), f"{path}.{k}")
        elif a != b or b == UNKNOWN:
            out.append(path)

    for key in keys:
        walk(olds.get(key), news.get(key), key)
    return out


def _matches(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p + ".") for p in prefixes)


def _is_unknown(value: Any) -> bool:
    if value == UNKNOWN:
        return True
    if isinstance(value, Mapping):
        return any(_is_unknown(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_is_unknown(v) for v in value)
    return False


def _diff(
    olds: Mapping[str, Any],
    news: Mapping[str, Any],
    keys: Sequence[str],
    updatable: Sequence[str],
    extra_change: bool = False,
    delete_before_replace: bool = False,
) -> DiffResult:
    paths = changed_paths(olds, news, keys)
    replaces = sorted({p.split(".", 1)[0] for p in paths if not _matches(p, updatable)})
    provider_changed = olds.get(PROVIDER_KEY) != news.get(PROVIDER_KEY)
    # A provider-only change is an update that calls nothing: the state then carries the new pickle.
    return DiffResult(
        changes=bool(paths) or provider_changed or extra_change,
        replaces=replaces,
        delete_before_replace=delete_before_replace and bool(replaces),
    )


# ---- providers --------------------------------------------------------------------------------------------


class _VertexProvider(PickledProvider[TransportFactory, PollPolicy]):
    """Shared plumbing: transport per call, operation waiting, deterministic pickling."""

    def __init__(
        self,
        transport_factory: TransportFactory | None = None,
        poll: PollPolicy = PollPolicy(),
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ):
        super().__init__(transport_factory, poll, sleep, clock)

    def _transport(self, region: str) -> VertexTransport:
        return (self._transport_factory or DiscoveryTransport)(region)

    def _waiter(self, transport: VertexTransport) -> Waiter:
        return Waiter(transport, self._poll, self.sleeper(), self.monotonic())


@dataclass(frozen=True)
class DeployTimeouts:
    """Bounds of the DeployedModel operations (seconds); see the module constants for each reason."""

    upload_seconds: int = UPLOAD_TIMEOUT_S
    deploy_seconds: int = rq.MAX_DEPLOYMENT_TIMEOUT_S + PROVISIONING_MARGIN_S
    teardown_seconds: int = TEARDOWN_TIMEOUT_S

    @classmethod
    def for_container(cls, container: rq.ContainerSpec) -> DeployTimeouts:
        """Deploy bound = the container's own deployment timeout (2 h when unset) + provisioning margin."""
        limit = container.deployment_timeout_seconds or rq.MAX_DEPLOYMENT_TIMEOUT_S
        return cls(deploy_seconds=limit + PROVISIONING_MARGIN_S)

    @classmethod
    def for_deployment_timeout(cls, model: Mapping[str, Any]) -> DeployTimeouts:
        """The same bounds from a live Model (``containerSpec.deploymentTimeout``, ``"<n>s"``): for a read by id."""
        raw = str(model.get("containerSpec", {}).get("deploymentTimeout", "")).removesuffix("s")
        limit = int(float(raw)) if raw else rq.MAX_DEPLOYMENT_TIMEOUT_S
        return cls(deploy_seconds=limit + PROVISIONING_MARGIN_S)


#: How a replaced deployed model makes way for its successor. ``create_first`` (Pulumi's default): the new one is
#: deployed beside the old, so its machines must fit the reservation meanwhile (the planner and the rule
#: ``vertex.reservation_holds_max_plus_replacement`` count them). ``delete_first``: the old one is undeployed
#: first (Pulumi's deleteBeforeReplace) and its traffic share moves to the other pools; the pool serves nothing
#: until its successor is up.
CREATE_FIRST, DELETE_FIRST = "create_first", "delete_first"
REPLACEMENT_ORDERS = (CREATE_FIRST, DELETE_FIRST)

_DEPLOYED_ID_RE = re.compile(r"^(projects/([^/]+)/locations/([^/]+)/endpoints/[^/]+)/deployedModels/([0-9]{1,10})\Z")
_TRAFFIC_ID_RE = re.compile(r"^(projects/([^/]+)/locations/([^/]+)/endpoints/[^/]+)/trafficSplit\Z")

#: The Model fields the upload request sets (requests.upload_model_request), read back for refresh and import.
_MODEL_FIELDS = ("displayName", "labels", "artifactUri", "containerSpec", "description")
#: The DeployedModel fields requests.deployed_model() sets, read back likewise (``model`` and ``id`` are inputs
#: of their own).
_DEPLOYED_FIELDS = (
    "displayName",
    "enableAccessLogging",
    "dedicatedResources",
    "disableContainerLogging",
    "serviceAccount",
)


def _last(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def rebalanced(split: Mapping[str, int], removed: str) -> dict[str, int]:
    """The split without ``removed``, the others scaled to 100 (largest remainder, ties by id): what a
    ``delete_first`` replacement sends when it undeploys a model that still holds traffic. Empty when no other
    deployment holds any."""
    rest = {k: v for k, v in split.items() if k != removed and v > 0}
    total = sum(rest.values())
    if not total:
        return {}
    exact = {k: v * 100 / total for k, v in rest.items()}
    out = {k: int(x) for k, x in exact.items()}
    for k in sorted(rest, key=lambda k: (-(exact[k] - out[k]), k))[: 100 - sum(out.values())]:
        out[k] += 1
    return dict(sorted(out.items()))


class DeployedModelProvider(_VertexProvider):
    """Upload one Model and deploy it to an existing endpoint (without traffic: see EndpointTraffic), both under
    caller-chosen ids (``model_id``, ``deployed_model_id``: requests.creation_ids).

    Every create is *find or create*, so an interrupted, retried or resumed create never makes a second copy:
    the model is looked up by its id (``models.get``), an upload still running under that id is waited on
    (``models.operations.list``), and only then uploaded; the deployment likewise (the endpoint's
    ``deployedModels`` by id, its running ``DeployModel`` operations, then ``deployModel``). A POST whose response
    was lost after Vertex applied it comes back from the client library's retry as 409 ALREADY_EXISTS, which is
    answered the same way. A deployment that outlives the wait is left running: the next ``pulumi up`` creates
    again, finds the model, waits on the running deployment and records it."""

    INPUTS = (
        "project",
        "region",
        "endpoint",
        "model_id",
        "deployed_model_id",
        "upload_model_request",
        "deployed_model",
        "timeouts",
        "replacement",
    )
    UPDATABLE = (
        *(f"deployed_model.{p}" for p in rq.MUTABLE_DEPLOYED_MODEL_PATHS),
        *(f"upload_model_request.{p}" for p in rq.UPLOAD_IN_PLACE_PATHS),
        "timeouts",
        "replacement",
    )

    @_normalize_props
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures: list[CheckFailure] = []
        dm = news.get("deployed_model")
        if isinstance(dm, Mapping) and not _is_unknown(dm):
            if "sharedResources" in dm:
                # Vertex AI "Share resources across deployments", Limitations: "custom containers aren't supported"
                # on a deployment resource pool, and every model this provider uploads has a containerSpec.
                failures.append(
                    CheckFailure(
                        "deployed_model",
                        "sharedResources: a custom container cannot run on a deployment resource pool (Vertex AI, "
                        "Share resources across deployments: custom containers aren't supported); use "
                        "dedicatedResources",
                    )
                )
            elif "dedicatedResources" not in dm:
                failures.append(CheckFailure("deployed_model", "dedicatedResources is required"))
            for key in ("model", "id"):
                if key in dm:
                    failures.append(CheckFailure("deployed_model", f"{key!r} is set by the provider"))
        upload = news.get("upload_model_request")
        if isinstance(upload, Mapping) and "modelId" in upload:
            failures.append(CheckFailure("upload_model_request", "'modelId' is set by the provider from model_id"))
        for key in (
            "project",
            "region",
            "endpoint",
            "model_id",
            "deployed_model_id",
            "upload_model_request",
            "deployed_model",
        ):
            if news.get(key) in (None, ""):
                failures.append(CheckFailure(key, "required"))
        for key, checker in (("model_id", rq.check_model_id), ("deployed_model_id", rq.check_deployed_model_id)):
            value = news.get(key)
            if isinstance(value, str) and value and value != UNKNOWN:
                try:
                    checker(value)
                except rq.VertexRequestError as err:
                    failures.append(CheckFailure(key, str(err)))
        if news.get("replacement", CREATE_FIRST) not in REPLACEMENT_ORDERS:
            failures.append(CheckFailure("replacement", f"one of {', '.join(REPLACEMENT_ORDERS)}"))
        return CheckResult(news, failures)

    @_normalize_props
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return _diff(
            olds,
            news,
            self.INPUTS,
            self.UPDATABLE,
            delete_before_replace=news.get("replacement", CREATE_FIRST) == DELETE_FIRST,
        )

    @_normalize_props
    def create(self, props: dict[str, Any]) -> CreateResult:
        t = self._transport(props["region"])
        w = self._waiter(t)
        model_name = rq.model_name(props["project"], props["region"], props["model_id"])
        deployed_id = props["deployed_model_id"]
        resume = (
            f"Run `pulumi up` again: the create finds model {props['model_id']} and deployed model {deployed_id} by "
            "their ids and waits on this operation instead of starting another."
        )
        self._ensure_model(t, w, props, model_name, resume)
        try:
            self._ensure_deployed(t, w, props, model_name, resume)
        except OperationTimeout:
            raise  # still running: nothing to clean up, the next create resumes it
        except Exception as err:
            raise OperationError(f"{err}; {self._clean_up(t, w, props, model_name)}") from err
        outs = {**props, "model_name": model_name}
        return CreateResult(rq.deployed_model_resource_id(props["endpoint"], deployed_id), outs)

    # -- create, step by step --

    def _find_model(self, t: VertexTransport, model_name: str, props: Mapping[str, Any]) -> bool:
        try:
            live = t.call("projects.locations.models.get", {"name": model_name})
        except NotFound:
            return False
        want = props["upload_model_request"]["model"]
        for field in ("artifactUri",):
            if live.get(field) != want.get(field):
                raise OperationError(
                    f"model {model_name} exists but its {field} is {live.get(field)!r}, not {want.get(field)!r}: it "
                    "is not this pool's model (ids are derived from the stack, pool and release; was it made by "
                    "hand?)"
                )
        if live.get("containerSpec", {}).get("imageUri") != want["containerSpec"]["imageUri"]:
            raise OperationError(
                f"model {model_name} exists with image {live.get('containerSpec', {}).get('imageUri')!r}, not "
                f"{want['containerSpec']['imageUri']!r}: it is not this pool's model"
            )
        return True

    def _ensure_model(
        self, t: VertexTransport, w: Waiter, props: Mapping[str, Any], model_name: str, resume: str
    ) -> None:
        timeout = props["timeouts"]["upload_seconds"]
        if self._find_model(t, model_name, props):
            return
        for op in pending_operations(t, model_name, "UploadModelOperationMetadata"):
            w.wait(op, timeout, f"upload {props['model_id']} (already running)", resume)
        if self._find_model(t, model_name, props):
            return
        body = {**props["upload_model_request"], "modelId": props["model_id"]}
        try:
            op = t.call(
                "projects.locations.models.upload",
                {"parent": rq.location_name(props["project"], props["region"])},
                body,
            )
        except Conflict:
            # The id is taken: our own upload, applied although its response was lost (the client retried the
            # POST), or one still running. Wait on its operation when it can be listed, else for the model.
            for pending in pending_operations(t, model_name, "UploadModelOperationMetadata"):
                w.wait(pending, timeout, f"upload {props['model_id']} (already running)", resume)
            w.until(lambda: self._find_model(t, model_name, props), timeout, f"upload {props['model_id']}")
            return
        w.wait(op, timeout, f"upload {props['model_id']}", resume)

    @staticmethod
    def _live_deployment(t: VertexTransport, endpoint: str, deployed_id: str) -> Body | None:
        live = t.call("projects.locations.endpoints.get", {"name": endpoint})
        return next((d for d in live.get("deployedModels", []) if d.get("id") == deployed_id), None)

    def _ensure_deployed(
        self, t: VertexTransport, w: Waiter, props: Mapping[str, Any], model_name: str, resume: str
    ) -> None:
        endpoint, deployed_id = props["endpoint"], props["deployed_model_id"]
        timeout = props["timeouts"]["deploy_seconds"]

        def found() -> bool:
            live = self._live_deployment(t, endpoint, deployed_id)
            if live is not None and _last(str(live.get("model", ""))) != props["model_id"]:
                raise OperationError(
                    f"deployed model {deployed_id} of {endpoint} serves {live.get('model')}, not {model_name}: "
                    "another deployment holds this pool's id"
                )
            return live is not None

        def wait_running() -> None:
            # Deploy operations carry no deployed-model id in their metadata (DeployModelOperationMetadata), and
            # this component deploys to one endpoint one model at a time: a running deploy is waited on whoever
            # started it, and its outcome read from the endpoint, never from the operation.
            for op in pending_operations(t, endpoint, "DeployModelOperationMetadata"):
                try:
                    w.wait(op, timeout, f"deploy on {endpoint} (already running)", resume)
                except OperationTimeout:
                    raise
                except OperationError as err:
                    log.warning("a running deployment on %s failed: %s", endpoint, err)

        if found():
            return
        wait_running()
        if found():
            return
        body = rq.deploy_model_request(model_name, props["deployed_model"], deployed_id)
        try:
            op = t.call("projects.locations.endpoints.deployModel", {"endpoint": endpoint}, body)
        except Conflict:
            wait_running()
        else:
            w.wait(op, timeout, f"deploy {deployed_id} ({props['model_id']})", resume)
        if not found():
            raise OperationError(f"deploy {deployed_id}: done, but {endpoint} has no deployed model {deployed_id}")

    def _clean_up(self, t: VertexTransport, w: Waiter, props: Mapping[str, Any], model_name: str) -> str:
        """After a failed deployment: remove exactly what this resource's ids name (its deployment if Vertex left
        one, then its model), and say what is left if that fails."""
        timeout = props["timeouts"]["teardown_seconds"]
        left: list[str] = []
        removed: list[str] = []
        try:
            if self._live_deployment(t, props["endpoint"], props["deployed_model_id"]) is not None:
                op = t.call(
                    "projects.locations.endpoints.undeployModel",
                    {"endpoint": props["endpoint"]},
                    rq.undeploy_model_request(props["deployed_model_id"], None),
                )
                w.wait(op, timeout, f"undeploy {props['deployed_model_id']}")
                removed.append(f"deployed model {props['deployed_model_id']}")
        except NotFound:
            pass
        except Exception as err:
            left.append(
                f"deployed model {props['deployed_model_id']} on {props['endpoint']} ({err}): `gcloud ai endpoints "
                f"undeploy-model {_last(props['endpoint'])} --deployed-model-id {props['deployed_model_id']} "
                f"--region {props['region']}`"
            )
        try:
            op = t.call("projects.locations.models.delete", {"name": model_name})
            w.wait(op, timeout, f"delete {model_name}")
            removed.append(f"model {props['model_id']}")
        except NotFound:
            pass
        except Exception as err:
            left.append(
                f"model {model_name} ({err}): `gcloud ai models delete {props['model_id']} --region {props['region']}`"
            )
        if left:
            return "left behind: " + "; ".join(left) + (f" (removed {', '.join(removed)})" if removed else "")
        return f"removed what this create made: {', '.join(removed) or 'nothing was left'}"

    @_normalize_props
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        t = self._transport(news["region"])
        w = self._waiter(t)
        paths = changed_paths(olds, news, self.INPUTS)
        mask = [p for p in rq.MUTABLE_DEPLOYED_MODEL_PATHS if any(_matches(q, (f"deployed_model.{p}",)) for q in paths)]
        if mask:
            body = rq.mutate_deployed_model_request(olds["deployed_model_id"], news["deployed_model"], mask)
            op = t.call("projects.locations.endpoints.mutateDeployedModel", {"endpoint": news["endpoint"]}, body)
            w.wait(op, news["timeouts"]["deploy_seconds"], f"mutate deployed model {olds['deployed_model_id']}")
        if any(_matches(p, ("upload_model_request.model.labels",)) for p in paths):
            body, update_mask = rq.model_labels_patch(news["upload_model_request"]["model"].get("labels", {}))
            t.call("projects.locations.models.patch", {"name": self._model_name(olds), "updateMask": update_mask}, body)
        # upload_model_request.serviceAccount, timeouts, replacement: recorded only (nothing live to change).
        return UpdateResult({**news, "model_name": self._model_name(olds)})

    @staticmethod
    def _model_name(props: Mapping[str, Any]) -> str:
        return props.get("model_name") or rq.model_name(props["project"], props["region"], props["model_id"])

    @_normalize_props
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        t = self._transport(props["region"])
        w = self._waiter(t)
        deployed_id = props["deployed_model_id"]
        timeout = props["timeouts"]["teardown_seconds"]
        try:
            endpoint = t.call("projects.locations.endpoints.get", {"name": props["endpoint"]})
        except NotFound:
            endpoint = {}
        if any(d.get("id") == deployed_id for d in endpoint.get("deployedModels", [])):
            split = {k: int(v) for k, v in endpoint.get("trafficSplit", {}).items()}
            remaining = None
            if split.get(deployed_id, 0) > 0:
                remaining = {k: v for k, v in split.items() if k != deployed_id}
                if props.get("replacement") == DELETE_FIRST:
                    # Delete-first replacement: its share moves to the others until EndpointTraffic sets the split
                    # with the successor's id.
                    remaining = rebalanced(split, deployed_id)
                elif remaining and sum(remaining.values()) != 100:
                    raise OperationError(
                        f"deployed model {deployed_id} still serves {split[deployed_id]} % of {props['endpoint']}; "
                        "move its traffic to the other deployments first (set its pool weight to 0 and apply)"
                    )
            op = t.call(
                "projects.locations.endpoints.undeployModel",
                {"endpoint": props["endpoint"]},
                rq.undeploy_model_request(deployed_id, remaining),
            )
            w.wait(op, timeout, f"undeploy {deployed_id}")
        try:
            op = t.call("projects.locations.models.delete", {"name": self._model_name(props)})
            w.wait(op, timeout, f"delete {self._model_name(props)}")
        except NotFound:
            pass

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh, import and pending-create recovery. Where the resource is comes from the id alone
        (``projects/<p>/locations/<r>/endpoints/<e>/deployedModels/<id>``), whether it exists from the live endpoint
        and model: gone when the endpoint, the deployment or its model is gone. With recorded bodies (a refresh, a
        pending create's inputs) they stay, only the live replica bounds replacing theirs: a hand-made change of the
        bounds shows as drift and the next update undoes it, while Vertex's normalisation of a container spec or its
        autoscaling defaults never reads as drift (which would replace the deployment). By id alone (``props`` empty:
        an import) the bodies are the live ones; what Vertex does not return (the uploading account, the timeouts,
        the replacement order) is left out or defaulted."""
        m = _DEPLOYED_ID_RE.match(id_)
        if m is None:
            raise OperationError(
                f"not a deployed model id: {id_!r} (projects/<p>/locations/<r>/endpoints/<e>/deployedModels/<id>)"
            )
        endpoint, project, region, deployed_id = m.group(1), m.group(2), m.group(3), m.group(4)
        t = self._transport(region)
        try:
            live = self._live_deployment(t, endpoint, deployed_id)
        except NotFound:
            return ReadResult("", {})
        if live is None:
            return ReadResult("", {})
        model_id = _last(str(live.get("model", "")))
        model_name = rq.model_name(project, region, model_id)
        try:
            model = t.call("projects.locations.models.get", {"name": model_name})
        except NotFound:
            return ReadResult("", {})
        recorded_upload = props.get("upload_model_request")
        recorded = props.get("deployed_model")
        if recorded_upload and recorded:
            # A refresh: the recorded bodies stay (Vertex may normalise a container spec or fill in defaults, which
            # would read as drift and replace the deployment); the live replica bounds replace the recorded ones.
            upload: Body = dict(recorded_upload)
            deployed: Body = dict(recorded)
            live_resources = live.get("dedicatedResources")
            if live_resources and "dedicatedResources" in recorded:
                resources = dict(recorded["dedicatedResources"])
                for key in ("minReplicaCount", "maxReplicaCount"):
                    if key in live_resources:
                        resources[key] = int(live_resources[key])
                deployed["dedicatedResources"] = resources
        else:
            # By id alone (import, a pending create): what the live model and deployment say.
            upload = {"model": {k: model[k] for k in _MODEL_FIELDS if k in model}}
            deployed = {k: live[k] for k in _DEPLOYED_FIELDS if k in live}
            if recorded_upload and "serviceAccount" in recorded_upload:
                upload["serviceAccount"] = recorded_upload["serviceAccount"]
        timeouts = props.get("timeouts") or asdict(DeployTimeouts.for_deployment_timeout(model))
        inputs = {
            "project": project,
            "region": region,
            "endpoint": endpoint,
            "model_id": model_id,
            "deployed_model_id": deployed_id,
            "upload_model_request": normalized(upload),
            "deployed_model": normalized(deployed),
            "timeouts": timeouts,
            "replacement": props.get("replacement", CREATE_FIRST),
        }
        outs = {**inputs, "model_name": model_name}
        # With a recorded state the inputs stay the program's (a refresh shows drift against them); with none
        # (import, a pending create) the live ones become the inputs.
        return ReadResult(id_, outs, None if props.get("upload_model_request") else inputs)


class EndpointTrafficProvider(_VertexProvider):
    """The endpoint's whole traffic split (and inference timeout), set in one ``endpoints.patch``."""

    INPUTS = ("project", "region", "endpoint", "weights", "deployed_model_ids", "inference_timeout_seconds")
    UPDATABLE = ("weights", "deployed_model_ids", "inference_timeout_seconds")

    @_normalize_props
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        weights, ids = news.get("weights"), news.get("deployed_model_ids")
        if (
            isinstance(weights, Mapping)
            and isinstance(ids, Mapping)
            and not _is_unknown(weights)
            and not _is_unknown(ids)
        ):
            try:
                rq.traffic_split({k: int(v) for k, v in weights.items()}, ids)
            except rq.VertexRequestError as err:
                failures.append(CheckFailure("weights", str(err)))
        return CheckResult(news, failures)

    @_normalize_props
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        drift = False
        if not _is_unknown(news.get("weights")) and not _is_unknown(news.get("deployed_model_ids")):
            drift = self._split(news) != olds.get("traffic_split")
        return _diff(olds, news, self.INPUTS, self.UPDATABLE, extra_change=drift)

    @_normalize_props
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"{props['endpoint']}/trafficSplit", self._apply(props))

    @_normalize_props
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self._apply(news))

    @_normalize_props
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # No traffic anywhere, so the deployments can then be undeployed in any order.
        body, mask = rq.endpoint_patch(None)
        try:
            self._transport(props["region"]).call(
                "projects.locations.endpoints.patch", {"name": props["endpoint"], "updateMask": mask}, body
            )
        except NotFound:
            pass

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """The live split (drift shows against the recorded ``traffic_split``). By id alone
        (``<endpoint>/trafficSplit``: import, a pending create) the pools come from the live deployments: each
        deployment's model carries its pool's role in the ``POOL_LABEL_KEY`` label (components/vertex/endpoint.py),
        its weight is its share of the split, the inference timeout the endpoint's ``clientConnectionConfig``."""
        m = _TRAFFIC_ID_RE.match(id_)
        if m is None:
            raise OperationError(f"not an endpoint traffic id: {id_!r} (<endpoint name>/trafficSplit)")
        endpoint_name, project, region = m.group(1), m.group(2), m.group(3)
        t = self._transport(region)
        try:
            endpoint = t.call("projects.locations.endpoints.get", {"name": endpoint_name})
        except NotFound:
            return ReadResult("", {})
        live = {k: int(v) for k, v in sorted(endpoint.get("trafficSplit", {}).items())}
        if props.get("weights"):
            return ReadResult(id_, {**props, "traffic_split": live})
        ids: dict[str, str] = {}
        for d in endpoint.get("deployedModels", []):
            model = t.call(
                "projects.locations.models.get", {"name": rq.model_name(project, region, _last(str(d["model"])))}
            )
            role = model.get("labels", {}).get(rq.POOL_LABEL_KEY)
            if role is None:
                raise OperationError(
                    f"deployed model {d['id']} of {endpoint_name}: its model has no {rq.POOL_LABEL_KEY} label, so "
                    "its pool is unknown (not deployed by this program)"
                )
            ids[role] = str(d["id"])
        timeout = endpoint.get("clientConnectionConfig", {}).get("inferenceTimeout")
        inputs = {
            "project": project,
            "region": region,
            "endpoint": endpoint_name,
            "weights": {role: live.get(i, 0) for role, i in sorted(ids.items())},
            "deployed_model_ids": dict(sorted(ids.items())),
            "inference_timeout_seconds": int(float(timeout.removesuffix("s"))) if timeout else None,
        }
        return ReadResult(id_, {**inputs, "traffic_split": live}, inputs)

    @staticmethod
    def _split(props: Mapping[str, Any]) -> dict[str, int]:
        return rq.traffic_split({k: int(v) for k, v in props["weights"].items()}, props["deployed_model_ids"])

    def _apply(self, props: dict[str, Any]) -> dict[str, Any]:
        split = self._split(props)
        timeout = props.get("inference_timeout_seconds")
        body, mask = rq.endpoint_patch(split, int(timeout) if timeout is not None else None)
        self._transport(props["region"]).call(
            "projects.locations.endpoints.patch", {"name": props["endpoint"], "updateMask": mask}, body
        )
        return {**props, "traffic_split": split}


#: A deployment resource pool's resource name, as the retired provider's resources are identified.
_POOL_ID_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)/deploymentResourcePools/([^/]+)\Z")


class DeploymentResourcePoolProvider(_VertexProvider):
    """Retired: the deployment resource pool earlier versions created for Vertex co-hosting (a pool takes no custom
    container: Vertex AI "Share resources across deployments", Limitations). It stays importable under this name
    because Pulumi keeps a dynamic resource's provider *pickled in the state* (by module and class name, see the
    module docstring) and deletes or refreshes the resource through it: a stack whose state still holds a pool
    can then delete it on its next ``pulumi up`` (the program no longer declares one). It can never create or
    change one."""

    @_normalize_props
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult(
            news,
            [
                CheckFailure(
                    "resource_pool",
                    "deployment resource pools are retired: a custom container cannot run on one (Vertex AI, Share "
                    "resources across deployments: custom containers aren't supported)",
                )
            ],
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        raise OperationError("deployment resource pools are retired: one is never created")

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        raise OperationError("deployment resource pools are retired: one is never changed, only deleted")

    @_normalize_props
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """``deploymentResourcePools.delete`` of the recorded pool (gone already: nothing to do), bounded by the
        delete timeout the state recorded."""
        t = self._transport(props["region"])
        try:
            op = t.call("projects.locations.deploymentResourcePools.delete", {"name": props["name"]})
        except NotFound:
            return
        self._waiter(t).wait(op, props["timeouts"]["delete_seconds"], f"delete {props['name']}")

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """A refresh: the recorded pool while it exists (gone: absent)."""
        m = _POOL_ID_RE.match(id_)
        if m is None:
            raise OperationError(
                f"not a deployment resource pool name: {id_!r} (projects/<p>/locations/<r>/deploymentResourcePools/<id>)"
            )
        try:
            self._transport(m.group(2)).call("projects.locations.deploymentResourcePools.get", {"name": id_})
        except NotFound:
            return ReadResult("", {})
        return ReadResult(id_, props)


# ---- resources ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeployedModelInputs:
    project: str
    region: str
    #: ``projects/<p>/locations/<r>/endpoints/<id>``.
    endpoint: pulumi.Input[str]
    #: Caller-chosen ids (requests.creation_ids): the upload's ``modelId`` and ``DeployedModel.id``.
    model_id: str
    deployed_model_id: str
    #: The UploadModelRequest without ``modelId`` (requests.upload_model_request()).
    upload_model_request: pulumi.Input[Mapping[str, Any]]
    #: The DeployedModel body without ``model`` and ``id`` (requests.deployed_model()).
    deployed_model: pulumi.Input[Mapping[str, Any]]
    timeouts: DeployTimeouts = DeployTimeouts()
    #: CREATE_FIRST or DELETE_FIRST (how a replacement makes way).
    replacement: str = CREATE_FIRST


class DeployedModel(pulumi.dynamic.Resource, module="vertex", name="DeployedModel"):
    """A custom-container Model uploaded from Cloud Storage and deployed to an existing endpoint.

    A replacement (new release, machine shape, ...) follows Pulumi's create-before-delete by default: the new model
    is deployed under new ids, EndpointTraffic moves the pool's share to it, then the old one is undeployed. Like
    the GKE side's surge replica, the reservation must have room for the new deployment's minimum replicas
    meanwhile; with ``replacement=DELETE_FIRST`` the old one is undeployed first instead."""

    model_name: pulumi.Output[str]
    deployed_model_id: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        args: DeployedModelInputs,
        opts: pulumi.ResourceOptions | None = None,
        provider: DeployedModelProvider | None = None,
    ):
        props = {
            "project": args.project,
            "region": args.region,
            "endpoint": args.endpoint,
            "model_id": args.model_id,
            "deployed_model_id": args.deployed_model_id,
            "upload_model_request": args.upload_model_request,
            "deployed_model": args.deployed_model,
            "timeouts": asdict(args.timeouts),
            "replacement": args.replacement,
            "model_name": None,
        }
        super().__init__(provider or DeployedModelProvider(), resource_name, props, opts)


@dataclass(frozen=True)
class EndpointTrafficInputs:
    project: str
    region: str
    endpoint: pulumi.Input[str]
    #: Pool role -> percent (sum 100).
    weights: Mapping[str, int]
    #: Pool role -> deployed model id (DeployedModel.deployed_model_id).
    deployed_model_ids: Mapping[str, pulumi.Input[str]]
    inference_timeout_seconds: int | None = None


class EndpointTraffic(pulumi.dynamic.Resource, module="vertex", name="EndpointTraffic"):
    """The endpoint's traffic split over its deployed models, owned by exactly one resource."""

    traffic_split: pulumi.Output[Mapping[str, int]]

    def __init__(
        self,
        resource_name: str,
        args: EndpointTrafficInputs,
        opts: pulumi.ResourceOptions | None = None,
        provider: EndpointTrafficProvider | None = None,
    ):
        props = {
            "project": args.project,
            "region": args.region,
            "endpoint": args.endpoint,
            "weights": dict(sorted(args.weights.items())),
            "deployed_model_ids": dict(sorted(args.deployed_model_ids.items())),
            "inference_timeout_seconds": args.inference_timeout_seconds,
            "traffic_split": None,
        }
        super().__init__(provider or EndpointTrafficProvider(), resource_name, props, opts)
