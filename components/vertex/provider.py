"""Pulumi dynamic providers for what pulumi-gcp 10.2.0 cannot express on Vertex AI.

pulumi-gcp 10.2.0 has ``gcp.vertex.AiEndpoint``, ``AiDeploymentResourcePool``, ``AiEndpointIamMember`` and
``AiEndpointWithModelGardenDeployment`` (checked with ``inspect``), but no resource that uploads a custom-container
Model from Cloud Storage, none that deploys a Model to an *existing* endpoint, and none that sets an endpoint's
traffic split across deployed models (``AiEndpoint.traffic_split`` would need the deployed model ids, which exist
only after deployment: a dependency cycle). Its ``AiDeploymentResourcePool`` has no ``serviceAccount`` and no
``reservationAffinity`` (its machine spec is machine type + accelerator type/count only), so co-hosted models
could neither read the weights bucket through a bucket-only grant nor consume the reservation.

Three dynamic resources fill the gap, each a thin state machine over the official client library
(``googleapiclient.discovery.build("aiplatform", "v1", static_discovery=True)`` against the regional endpoint,
Application Default Credentials). Request bodies come from :mod:`components.vertex.requests`, i.e. exactly the
discovery shapes the tests validate:

* :class:`DeployedModel` - ``models.upload`` + ``endpoints.deployModel`` (create), ``mutateDeployedModel`` /
  ``models.patch`` (update), ``endpoints.undeployModel`` + ``models.delete`` (delete);
* :class:`EndpointTraffic` - ``endpoints.patch`` of ``trafficSplit`` (+ ``clientConnectionConfig``);
* :class:`DeploymentResourcePool` - ``deploymentResourcePools.create`` / ``patch`` / ``delete``.

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
import time
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
    ResourceProvider,
    UpdateResult,
)
from pulumi.runtime import rpc as _rpc

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
#: Bound on undeploy / model and pool deletion: replicas drain and VMs are released; 30 min bounds a stuck
#: teardown.
TEARDOWN_TIMEOUT_S = 1800
#: Bound on resource-pool creation: whether Vertex provisions the pool's minimum replicas at creation or at the
#: first deployment is not stated in aiplatform.v1, so it gets the deploy bound.
POOL_CREATE_TIMEOUT_S = rq.MAX_DEPLOYMENT_TIMEOUT_S + PROVISIONING_MARGIN_S

UNKNOWN = _rpc.UNKNOWN  # what preview passes for values known only after apply
PROVIDER_KEY = "__provider"

Body = dict[str, Any]


# ---- transport ------------------------------------------------------------------------------------------


class NotFound(Exception):
    """The addressed resource does not exist (HTTP 404)."""


class VertexTransport(Protocol):
    """The only network interface of the providers: one discovery method call, returning the JSON response.

    ``method`` is the dotted discovery path (``projects.locations.models.upload``), ``params`` its path/query
    parameters, ``body`` the request body (None for methods without one). Raises :class:`NotFound` on 404."""

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Body: ...


TransportFactory = Callable[[str], VertexTransport]


class DiscoveryTransport:
    """google-api-python-client over the aiplatform v1 discovery document shipped with the library.

    ``static_discovery=True`` uses the packaged document, the one the tests validate against, so no discovery
    fetch happens at runtime and the client's request shapes cannot drift from the validated ones. The
    regional host (``https://<region>-aiplatform.googleapis.com``) is required: Vertex resources live in a
    region and the global host does not serve them. One instance per provider call: httplib2 connections are
    not thread-safe and the dynamic-provider server runs calls on a thread pool."""

    def __init__(self, region: str, credentials: Any = None):
        from googleapiclient import discovery  # imported lazily: the offline plan never needs it

        if credentials is None:
            import google.auth

            credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        self.region = region
        self._service = discovery.build(
            "aiplatform",
            "v1",
            credentials=credentials,
            static_discovery=True,
            cache_discovery=False,
            client_options={"api_endpoint": f"https://{region}-aiplatform.googleapis.com"},
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
        return getattr(node, verb)(**kwargs)

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Body:
        from googleapiclient.errors import HttpError

        try:
            return self.request(method, params, body).execute(num_retries=HTTP_RETRIES) or {}
        except HttpError as err:
            if err.resp.status == 404:
                raise NotFound(f"{method} {dict(params)}: {err}") from err
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


class Waiter:
    def __init__(
        self, transport: VertexTransport, policy: PollPolicy, sleep: Callable[[float], None], clock: Callable[[], float]
    ):
        self.transport, self.policy, self.sleep, self.clock = transport, policy, sleep, clock

    def wait(self, op: Mapping[str, Any], timeout_s: float, what: str) -> Body:
        """The operation's response once done; on timeout a best-effort cancel, then :class:`OperationError`."""
        name = op.get("name", "")
        deadline = self.clock() + timeout_s
        interval = self.policy.first_interval_s
        while not op.get("done"):
            remaining = deadline - self.clock()
            if remaining <= 0:
                self._cancel(name)
                raise OperationError(
                    f"{what}: operation {name} not done after {timeout_s:.0f} s; cancellation requested. It may "
                    f"still finish server-side: check it with `gcloud ai operations describe {name}` before "
                    "retrying, and remove what it created if it did."
                )
            self.sleep(min(interval, remaining))
            interval = min(interval * self.policy.growth, self.policy.max_interval_s)
            op = self.transport.call(operation_method(name), {"name": name})
        return _operation_result(op, what)

    def _cancel(self, name: str) -> None:
        try:
            self.transport.call(operation_method(name, "cancel"), {"name": name})
        except Exception as err:  # best effort: the timeout error below is what the operator must see
            log.warning("cancelling %s failed: %s", name, err)


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
) -> DiffResult:
    paths = changed_paths(olds, news, keys)
    replaces = sorted({p.split(".", 1)[0] for p in paths if not _matches(p, updatable)})
    provider_changed = olds.get(PROVIDER_KEY) != news.get(PROVIDER_KEY)
    # A provider-only change is an update that calls nothing: the state then carries the new pickle.
    return DiffResult(
        changes=bool(paths) or provider_changed or extra_change, replaces=replaces, delete_before_replace=False
    )


# ---- providers --------------------------------------------------------------------------------------------


class _VertexProvider(ResourceProvider):
    """Shared plumbing: transport per call, operation waiting, deterministic pickling."""

    serialize_as_secret_always = False

    def __init__(
        self,
        transport_factory: TransportFactory | None = None,
        poll: PollPolicy = PollPolicy(),
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ):
        super().__init__()
        self._transport_factory = transport_factory
        self._poll = poll
        self._sleep = sleep
        self._clock = clock

    def __getstate__(self) -> dict[str, Any]:
        # Exactly what defines the provider; nothing cached at runtime can leak into the pickled __provider.
        return {
            "_transport_factory": self._transport_factory,
            "_poll": self._poll,
            "_sleep": self._sleep,
            "_clock": self._clock,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _transport(self, region: str) -> VertexTransport:
        return (self._transport_factory or DiscoveryTransport)(region)

    def _waiter(self, transport: VertexTransport) -> Waiter:
        return Waiter(transport, self._poll, self._sleep or time.sleep, self._clock or time.monotonic)


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


class DeployedModelProvider(_VertexProvider):
    """Upload one Model and deploy it to an existing endpoint (without traffic: see EndpointTraffic)."""

    INPUTS = ("project", "region", "endpoint", "upload_model_request", "deployed_model", "timeouts")
    UPDATABLE = (
        *(f"deployed_model.{p}" for p in rq.MUTABLE_DEPLOYED_MODEL_PATHS),
        "upload_model_request.model.labels",
        "timeouts",
    )

    @_normalize_props
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures: list[CheckFailure] = []
        dm = news.get("deployed_model")
        if isinstance(dm, Mapping) and not _is_unknown(dm):
            kinds = [k for k in ("dedicatedResources", "sharedResources") if k in dm]
            if len(kinds) != 1:
                failures.append(
                    CheckFailure("deployed_model", f"exactly one of dedicatedResources or sharedResources, got {kinds}")
                )
            if "model" in dm:
                failures.append(CheckFailure("deployed_model", "'model' is set by the provider from the upload"))
        for key in ("project", "region", "endpoint", "upload_model_request", "deployed_model"):
            if news.get(key) in (None, ""):
                failures.append(CheckFailure(key, "required"))
        return CheckResult(news, failures)

    @_normalize_props
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return _diff(olds, news, self.INPUTS, self.UPDATABLE)

    @_normalize_props
    def create(self, props: dict[str, Any]) -> CreateResult:
        t = self._transport(props["region"])
        w = self._waiter(t)
        timeouts = props["timeouts"]
        op = t.call(
            "projects.locations.models.upload",
            {"parent": rq.location_name(props["project"], props["region"])},
            props["upload_model_request"],
        )
        model_name = w.wait(op, timeouts["upload_seconds"], "upload model")["model"]
        try:
            op = t.call(
                "projects.locations.endpoints.deployModel",
                {"endpoint": props["endpoint"]},
                rq.deploy_model_request(model_name, props["deployed_model"]),
            )
            deployed_id = w.wait(op, timeouts["deploy_seconds"], f"deploy {model_name}")["deployedModel"]["id"]
        except Exception:
            # Create must be transactional for Pulumi: a failed create records nothing, so the uploaded model
            # would be orphaned. If the deployment is still running server-side, this delete fails and the log
            # names the model to remove by hand.
            self._delete_model(t, w, model_name, timeouts["teardown_seconds"])
            raise
        outs = {**props, "model_name": model_name, "deployed_model_id": deployed_id}
        return CreateResult(f"{props['endpoint']}/deployedModels/{deployed_id}", outs)

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
            t.call("projects.locations.models.patch", {"name": olds["model_name"], "updateMask": update_mask}, body)
        return UpdateResult({**news, "model_name": olds["model_name"], "deployed_model_id": olds["deployed_model_id"]})

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
                if remaining and sum(remaining.values()) != 100:
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
        self._delete_model(t, w, props["model_name"], timeout, raise_errors=True)

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: gone if the endpoint or the deployment is gone; live replica bounds of a dedicated
        deployment replace the recorded ones, so a hand-made change shows as drift and the next update undoes
        it. Autoscaling specs are not refreshed: Vertex may fill in defaults, which would read as drift forever."""
        t = self._transport(props["region"])
        try:
            endpoint = t.call("projects.locations.endpoints.get", {"name": props["endpoint"]})
        except NotFound:
            return ReadResult("", {})
        live = next((d for d in endpoint.get("deployedModels", []) if d.get("id") == props["deployed_model_id"]), None)
        if live is None:
            return ReadResult("", {})
        outs = {**props}
        dedicated = live.get("dedicatedResources")
        if dedicated and "dedicatedResources" in props["deployed_model"]:
            recorded = dict(props["deployed_model"]["dedicatedResources"])
            for key in ("minReplicaCount", "maxReplicaCount"):
                if key in dedicated:
                    recorded[key] = int(dedicated[key])
            outs["deployed_model"] = {**props["deployed_model"], "dedicatedResources": recorded}
        return ReadResult(id_, outs)

    @staticmethod
    def _delete_model(
        t: VertexTransport, w: Waiter, model_name: str, timeout: float, raise_errors: bool = False
    ) -> None:
        try:
            op = t.call("projects.locations.models.delete", {"name": model_name})
            w.wait(op, timeout, f"delete {model_name}")
        except NotFound:
            pass
        except Exception as err:
            if raise_errors:
                raise
            log.error("could not delete model %s after a failed deployment: %s; delete it by hand", model_name, err)


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
        try:
            endpoint = self._transport(props["region"]).call(
                "projects.locations.endpoints.get", {"name": props["endpoint"]}
            )
        except NotFound:
            return ReadResult("", {})
        live = {k: int(v) for k, v in sorted(endpoint.get("trafficSplit", {}).items())}
        return ReadResult(id_, {**props, "traffic_split": live})

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


@dataclass(frozen=True)
class PoolTimeouts:
    create_seconds: int = POOL_CREATE_TIMEOUT_S
    update_seconds: int = POOL_CREATE_TIMEOUT_S
    delete_seconds: int = TEARDOWN_TIMEOUT_S


class DeploymentResourcePoolProvider(_VertexProvider):
    """A DeploymentResourcePool with the fields pulumi-gcp's lacks (service account, reservation affinity)."""

    INPUTS = ("project", "region", "pool_id", "resource_pool", "timeouts")
    UPDATABLE = (*(f"resource_pool.{p}" for p in rq.MUTABLE_RESOURCE_POOL_PATHS), "timeouts")

    @_normalize_props
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return _diff(olds, news, self.INPUTS, self.UPDATABLE)

    @_normalize_props
    def create(self, props: dict[str, Any]) -> CreateResult:
        t = self._transport(props["region"])
        op = t.call(
            "projects.locations.deploymentResourcePools.create",
            {"parent": rq.location_name(props["project"], props["region"])},
            rq.create_resource_pool_request(props["pool_id"], props["resource_pool"]),
        )
        self._waiter(t).wait(op, props["timeouts"]["create_seconds"], f"create resource pool {props['pool_id']}")
        name = rq.resource_pool_name(props["project"], props["region"], props["pool_id"])
        return CreateResult(name, {**props, "name": name})

    @_normalize_props
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        paths = [p.removeprefix("resource_pool.") for p in changed_paths(olds, news, ("resource_pool",))]
        if paths:
            t = self._transport(news["region"])
            body, mask = rq.resource_pool_patch(news["resource_pool"], paths)
            op = t.call(
                "projects.locations.deploymentResourcePools.patch", {"name": olds["name"], "updateMask": mask}, body
            )
            self._waiter(t).wait(op, news["timeouts"]["update_seconds"], f"patch {olds['name']}")
        return UpdateResult({**news, "name": olds["name"]})

    @_normalize_props
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        t = self._transport(props["region"])
        try:
            op = t.call("projects.locations.deploymentResourcePools.delete", {"name": props["name"]})
        except NotFound:
            return
        self._waiter(t).wait(op, props["timeouts"]["delete_seconds"], f"delete {props['name']}")

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        try:
            live = self._transport(props["region"]).call(
                "projects.locations.deploymentResourcePools.get", {"name": props["name"]}
            )
        except NotFound:
            return ReadResult("", {})
        recorded = dict(props["resource_pool"]["dedicatedResources"])
        for key in ("minReplicaCount", "maxReplicaCount"):
            if key in live.get("dedicatedResources", {}):
                recorded[key] = int(live["dedicatedResources"][key])
        return ReadResult(id_, {**props, "resource_pool": {**props["resource_pool"], "dedicatedResources": recorded}})


# ---- resources ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeployedModelInputs:
    project: str
    region: str
    #: ``projects/<p>/locations/<r>/endpoints/<id>``.
    endpoint: pulumi.Input[str]
    upload_model_request: pulumi.Input[Mapping[str, Any]]
    #: The DeployedModel body without ``model`` (requests.deployed_model()).
    deployed_model: pulumi.Input[Mapping[str, Any]]
    timeouts: DeployTimeouts = DeployTimeouts()


class DeployedModel(pulumi.dynamic.Resource, module="vertex", name="DeployedModel"):
    """A custom-container Model uploaded from Cloud Storage and deployed to an existing endpoint.

    A replacement (new release, machine shape, ...) follows Pulumi's create-before-delete: the new model is
    deployed, EndpointTraffic moves the pool's share to it, then the old one is undeployed. Like the GKE side's
    surge replica, the reservation must have room for the new deployment's minimum replicas meanwhile."""

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
            "upload_model_request": args.upload_model_request,
            "deployed_model": args.deployed_model,
            "timeouts": asdict(args.timeouts),
            "model_name": None,
            "deployed_model_id": None,
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


@dataclass(frozen=True)
class DeploymentResourcePoolInputs:
    project: str
    region: str
    pool_id: str
    #: requests.resource_pool() body (service account may be an Output).
    resource_pool: pulumi.Input[Mapping[str, Any]]
    timeouts: PoolTimeouts = PoolTimeouts()


class DeploymentResourcePool(pulumi.dynamic.Resource, module="vertex", name="DeploymentResourcePool"):
    """Shared machines for co-hosted deployed models. Its id carries a digest of its immutable shape
    (requests.ResourcePoolSpec.pool_id_for), so a replacement gets a new id and never collides with the pool
    it replaces."""

    name: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        args: DeploymentResourcePoolInputs,
        opts: pulumi.ResourceOptions | None = None,
        provider: DeploymentResourcePoolProvider | None = None,
    ):
        props = {
            "project": args.project,
            "region": args.region,
            "pool_id": args.pool_id,
            "resource_pool": args.resource_pool,
            "timeouts": asdict(args.timeouts),
            "name": None,
        }
        super().__init__(provider or DeploymentResourcePoolProvider(), resource_name, props, opts)
