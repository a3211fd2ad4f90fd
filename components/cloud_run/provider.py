"""Pulumi dynamic providers for a Cloud Run service whose revisions and traffic are separate, idempotent steps.

Why not ``gcp.cloudrunv2.Service``: pulumi-gcp 10.2.0's Cloud Run v2 module has a ``Service`` (one ``template``, one
``traffics`` list in one resource), Jobs, worker pools and IAM, and no revision or traffic resource (checked with
``inspect``). Cloud Run creates a revision only from the service's one template, and traffic may name only
revisions that exist ("Revision '...' does not exist or is deleted. Update all traffic to route to currently
available revisions": terraform-google-modules/terraform-docs-samples#269, Google's own gradual-rollout sample;
users ask for separate resources in hashicorp/terraform-provider-google#10095, and reusing a name with changes is
"Error 409 revision named '<rev>' already exists", #14569). With a canary present, one Service resource can render
only the canary's template, so any change of stable's template names a revision nobody creates. Three resources
here split the steps, each one ``services.patch`` (run.v2) whose long-running operation is waited on:

* :class:`CloudRunService` - the service itself: created with stable's template and traffic to the latest ready
  revision (run.v2 ``Service.traffic``: empty means 100 % to the latest ready revision); afterwards it owns only the
  service-level fields (labels, description, ingress, launch stage, the invoker IAM check) and re-sends the live
  template and traffic unchanged, so it never creates a revision or moves traffic;
* :class:`CloudRunRevision` - one pool's revision, **find or create by its caller-chosen name**
  (``RevisionTemplate.revision``): a revision of that name carrying the same template digest
  (:data:`~components.naming.TEMPLATE_SHA_ANNOTATION`) is adopted as it is; a revision of that name with another
  digest is an error; otherwise the service is patched with this template and the *current* traffic pinned by
  revision name, which creates the revision and moves no traffic (a split that names revisions is kept for later
  deployments: "Rollbacks, gradual rollouts, and traffic migration"). Revisions are immutable, so any input change
  is a replacement, and deleting one calls nothing: Cloud Run keeps non-serving revisions at no cost and deletes the
  oldest itself beyond 1,000 per service ("Manage revisions"), and a later rollback finds its revision again;
* :class:`CloudRunTraffic` - the whole split (revision, percent, tag per pool), set in one patch that re-sends the
  live template unchanged, after checking that every revision it names exists and is ready.

Every network call goes through :class:`RunTransport` (one method), so ``tests/test_cloud_run_rollout.py`` drives
the providers against a simulator of Cloud Run's revision model and ``tests/test_cloud_run_provider.py`` validates
every request body against run.v2's discovery document. Patches carry the etag read just before them (run.v2
``Service.etag``: "May be used to detect modification conflict during updates") and are retried from a fresh read
on a conflict. No client, credential or token is stored: the pickled provider (``__provider``) holds only its
poll policy (ADC is read in the provider process at call time), exactly as ``components/vertex/provider.py``.
"""

from __future__ import annotations

import logging
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

from .. import naming
from ..dynamic_provider import PickledProvider
from . import service as svc

log = logging.getLogger(__name__)

Body = dict[str, Any]

#: googleapiclient's own retry of 429/5xx and connection errors per call (``HttpRequest.execute(num_retries=...)``).
HTTP_RETRIES = 5
#: Patches retried from a fresh read when the etag no longer matches (another writer came in between): 3 tries
#: ride out a concurrent console edit; more would hide a tool fighting this stack.
CONFLICT_RETRIES = 3
#: Added to a revision's startup window for its creation: image pull (a CUDA vLLM image is several GB) and GPU
#: instance provisioning come before the startup probe's clock; 15 min bounds them, not an estimate.
PROVISIONING_MARGIN_S = 900
#: A traffic patch routes existing, ready revisions: seconds normally; 10 min bounds a stuck reconciliation.
TRAFFIC_TIMEOUT_S = 600
#: Deleting a service drains and releases its instances; 15 min bounds it.
DELETE_TIMEOUT_S = 900
#: run.v2 ``Condition.type`` of a revision's readiness and the state that means it succeeded.
READY = "Ready"
SUCCEEDED = "CONDITION_SUCCEEDED"
FAILED = "CONDITION_FAILED"

UNKNOWN = _rpc.UNKNOWN  # what preview passes for values known only after apply
PROVIDER_KEY = "__provider"


# ---- transport ---------------------------------------------------------------------------------------------------


class NotFound(Exception):
    """The addressed resource does not exist (HTTP 404)."""


class Conflict(Exception):
    """HTTP 409: the resource already exists, or the etag no longer matches (ABORTED)."""


class RunTransport(Protocol):
    """The providers' only network interface: one run.v2 discovery method call, returning the JSON response.
    ``method`` is the dotted discovery path (``projects.locations.services.patch``). Raises :class:`NotFound` on
    404 and :class:`Conflict` on 409."""

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Body: ...


TransportFactory = Callable[[], RunTransport]


class DiscoveryTransport:
    """google-api-python-client over the run.v2 discovery document shipped with the library
    (``static_discovery=True``: the document the tests validate against, no discovery fetch at runtime). One
    instance per provider call: httplib2 connections are not thread-safe."""

    def __init__(self, credentials: Any = None):
        from googleapiclient import discovery  # imported lazily: the offline plan never needs it

        if credentials is None:
            import google.auth

            credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        self._service = discovery.build(
            "run", "v2", credentials=credentials, static_discovery=True, cache_discovery=False
        )

    def request(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Any:
        """The unsent ``googleapiclient.http.HttpRequest`` for one call."""
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
            if err.resp.status == 409:
                raise Conflict(f"{method} {dict(params)}: {err}") from err
            raise


# ---- names -------------------------------------------------------------------------------------------------------


def location_name(project: str, region: str) -> str:
    return f"projects/{project}/locations/{region}"


def service_name(project: str, region: str, service_id: str) -> str:
    return f"{location_name(project, region)}/services/{service_id}"


def revision_resource(service: str, revision: str) -> str:
    return f"{service}/revisions/{revision}"


def short_name(resource_name: str) -> str:
    """``projects/p/locations/l/services/s/revisions/r`` -> ``r`` (run.v2 reports full names, traffic takes short)."""
    return resource_name.rsplit("/", 1)[-1]


# ---- long-running operations ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PollPolicy:
    """How long-running operations are polled: growing intervals, capped."""

    #: First wait: a traffic patch finishes in seconds, a GPU revision in minutes.
    first_interval_s: float = 5.0
    #: Cap: 30 s keeps a 45 min revision creation to ~100 reads, far below the Admin API's read quota.
    max_interval_s: float = 30.0
    growth: float = 1.5


class OperationError(RuntimeError):
    """A long-running operation failed, or did not finish within its bound, or a revision is not ready."""


class Waiter:
    def __init__(
        self, transport: RunTransport, policy: PollPolicy, sleep: Callable[[float], None], clock: Callable[[], float]
    ):
        self.transport, self.policy, self.sleep, self.clock = transport, policy, sleep, clock

    def wait(self, op: Mapping[str, Any], timeout_s: float, what: str) -> Body:
        """The operation's response once done (run.v2 operations: ``projects.locations.operations.get``)."""
        name = op.get("name", "")
        deadline = self.clock() + timeout_s
        interval = self.policy.first_interval_s
        while not op.get("done"):
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise OperationError(
                    f"{what}: operation {name} not done after {timeout_s:.0f} s. It may still finish: check it with "
                    f"`gcloud run services describe` before retrying `pulumi up` (the retry finds what it created)."
                )
            self.sleep(min(interval, remaining))
            interval = min(interval * self.policy.growth, self.policy.max_interval_s)
            op = self.transport.call("projects.locations.operations.get", {"name": name})
        if "error" in op:
            err = op["error"]
            raise OperationError(f"{what} failed: operation {name}: code {err.get('code')}: {err.get('message')}")
        return dict(op.get("response") or {})


# ---- helpers -----------------------------------------------------------------------------------------------------


def normalized(value: Any) -> Any:
    """Pulumi hands dynamic providers every number as a float (protobuf ``Struct``); every number these bodies carry
    is an int32 (percentages, seconds, counts), so integral floats become ints before they are compared or sent."""
    if isinstance(value, Mapping):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalized(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _normalize_props(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any) -> Any:
        return method(self, *(normalized(a) if isinstance(a, Mapping) else a for a in args))

    wrapper.__name__, wrapper.__doc__, wrapper.__qualname__ = method.__name__, method.__doc__, method.__qualname__
    return wrapper


def changed_keys(olds: Mapping[str, Any], news: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """Top-level keys whose values differ (unknown values at preview differ)."""
    return [k for k in keys if olds.get(k) != news.get(k) or news.get(k) == UNKNOWN]


def _diff(
    olds: Mapping[str, Any], news: Mapping[str, Any], keys: Sequence[str], updatable: Sequence[str]
) -> DiffResult:
    changed = changed_keys(olds, news, keys)
    provider_changed = olds.get(PROVIDER_KEY) != news.get(PROVIDER_KEY)
    # A provider-only change is an update that calls nothing: the state then carries the new pickle.
    return DiffResult(
        changes=bool(changed) or provider_changed,
        replaces=sorted(k for k in changed if k not in updatable),
        delete_before_replace=False,
    )


def ready_condition(resource: Mapping[str, Any]) -> Mapping[str, Any] | None:
    conditions: list[Mapping[str, Any]] = list(resource.get("conditions") or [])
    return next((c for c in conditions if c.get("type") == READY), None)


def verbatim(resource: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a revision reports exactly as its template stated them (no server defaults mixed in): each
    container's name, image, command and args, the instance bounds, each Cloud Storage volume's bucket and mount
    options. A found revision must match them besides carrying the template's digest annotation."""
    scaling = resource.get("scaling") or {}
    return {
        "containers": [
            [c.get("name"), c.get("image"), list(c.get("command") or []), list(c.get("args") or [])]
            for c in resource.get("containers") or []
        ],
        "scaling": [int(scaling.get("minInstanceCount") or 0), scaling.get("maxInstanceCount")],
        "gcs": sorted(
            [v.get("name"), v["gcs"].get("bucket"), list(v["gcs"].get("mountOptions") or [])]
            for v in resource.get("volumes") or []
            if v.get("gcs")
        ),
    }


def verbatim_differences(live: Mapping[str, Any], template: Mapping[str, Any]) -> list[tuple[str, tuple[Any, Any]]]:
    a, b = verbatim(live), verbatim(template)
    return [(k, (a[k], b[k])) for k in a if a[k] != b[k]]


def pinned_traffic(live: Mapping[str, Any]) -> list[Body]:
    """The service's current split with every entry by revision name: an entry to the latest ready revision (or
    an empty split, which means exactly that) becomes that revision by name, so a new template creates its revision
    without moving traffic."""
    entries = list(live.get("traffic") or []) or [{"type": svc.TRAFFIC_TO_LATEST, "percent": 100}]
    latest = live.get("latestReadyRevision")
    out: list[Body] = []
    for e in entries:
        revision = e.get("revision")
        if e.get("type") == svc.TRAFFIC_TO_LATEST or not revision:
            if not latest:
                raise OperationError(
                    f"{live.get('name')}: traffic goes to the latest ready revision, but none is ready: the "
                    "service's first revision never started; fix its cause (`gcloud run revisions list`) first"
                )
            revision = short_name(latest)
        entry: Body = {"type": svc.TRAFFIC_BY_REVISION, "revision": revision, "percent": int(e.get("percent") or 0)}
        if e.get("tag"):
            entry["tag"] = e["tag"]
        out.append(entry)
    return out


def explicit_traffic(live: Mapping[str, Any]) -> list[Body]:
    """The live split as the traffic resource records it (explicit entries: type, revision, percent, tag)."""
    try:
        return pinned_traffic(live)
    except OperationError:
        return []


# ---- providers ---------------------------------------------------------------------------------------------------


class _RunProvider(PickledProvider[TransportFactory, PollPolicy]):
    """Shared plumbing: a transport per call, operation waiting, etag-checked patches, deterministic pickling."""

    #: Every diff() here compares the recorded INPUTS only (no output read back): a plan review
    #: (infra/offline/review/providers.py) may call it on the old plan's inputs without running create().
    DIFF_READS_INPUTS_ONLY = True

    def __init__(
        self,
        transport_factory: TransportFactory | None = None,
        poll: PollPolicy = PollPolicy(),
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ):
        super().__init__(transport_factory, poll, sleep, clock)

    def _transport(self) -> RunTransport:
        return (self._transport_factory or DiscoveryTransport)()

    def _waiter(self, transport: RunTransport) -> Waiter:
        return Waiter(transport, self._poll, self.sleeper(), self.monotonic())

    def _patch(
        self,
        t: RunTransport,
        name: str,
        fields: Mapping[str, Any],
        timeout_s: float,
        what: str,
        template: Mapping[str, Any] | None = None,
        traffic: Sequence[Mapping[str, Any]] | None = None,
    ) -> Body:
        """One read-modify-write of the whole service: the service-level ``fields``, the given template (else the
        live one, re-sent unchanged: no new revision) and traffic (else the live split pinned by name: no move).
        No ``updateMask``: the body is the whole service, as run.v2 ``services.patch`` takes it."""
        for attempt in range(1, CONFLICT_RETRIES + 1):
            live = t.call("projects.locations.services.get", {"name": name})
            body: Body = {
                **dict(fields),
                "template": dict(template if template is not None else live["template"]),
                "traffic": [dict(e) for e in (traffic if traffic is not None else pinned_traffic(live))],
            }
            if live.get("etag"):
                body["etag"] = live["etag"]
            try:
                op = t.call("projects.locations.services.patch", {"name": name}, body)
            except Conflict as err:
                if attempt == CONFLICT_RETRIES:
                    raise OperationError(f"{what}: {name} kept changing under this update ({err})") from err
                log.warning("%s: %s changed since it was read (%s); reading it again", what, name, err)
                continue
            return self._waiter(t).wait(op, timeout_s, what)
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class ServiceTimeouts:
    create_seconds: int
    update_seconds: int = TRAFFIC_TIMEOUT_S
    delete_seconds: int = DELETE_TIMEOUT_S


class ServiceProvider(_RunProvider):
    """The service: created once with stable's template; then only its service-level fields."""

    INPUTS = ("project", "region", "service_id", "service", "timeouts")
    UPDATABLE = ("service", "timeouts")

    @_normalize_props
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = [
            CheckFailure(k, "required") for k in (*self.INPUTS, "initial_template") if news.get(k) in (None, "")
        ]
        fields = news.get("service")
        if isinstance(fields, Mapping) and {"template", "traffic"} & set(fields):
            failures.append(
                CheckFailure("service", "template and traffic belong to the revision and traffic resources")
            )
        return CheckResult(news, failures)

    @_normalize_props
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # initial_template is create-only: after creation the revision resources own the template.
        return _diff(olds, news, self.INPUTS, self.UPDATABLE)

    @_normalize_props
    def create(self, props: dict[str, Any]) -> CreateResult:
        t = self._transport()
        name = service_name(props["project"], props["region"], props["service_id"])
        body = {
            **props["service"],
            "template": props["initial_template"],
            "traffic": [{"type": svc.TRAFFIC_TO_LATEST, "percent": 100}],
        }
        try:
            op = t.call(
                "projects.locations.services.create",
                {"parent": location_name(props["project"], props["region"]), "serviceId": props["service_id"]},
                body,
            )
        except Conflict:
            live = t.call("projects.locations.services.get", {"name": name})
            if (live.get("labels") or {}) != props["service"].get("labels"):
                raise OperationError(
                    f"{name} already exists and is not this stack's (its labels differ): choose another "
                    "cloud_run.service_name, or delete that service"
                ) from None
            # An earlier apply created it and failed before recording it: adopt it, with this stack's fields.
            log.warning("%s already exists with this stack's labels: adopting it", name)
            self._patch(t, name, props["service"], props["timeouts"]["update_seconds"], f"update {name}")
        else:
            self._waiter(t).wait(op, props["timeouts"]["create_seconds"], f"create {name}")
        live = t.call("projects.locations.services.get", {"name": name})
        return CreateResult(name, {**props, "name": name, "uri": live.get("uri")})

    @_normalize_props
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        t = self._transport()
        name = olds["name"]
        if changed_keys(olds, news, ("service",)):
            self._patch(t, name, news["service"], news["timeouts"]["update_seconds"], f"update {name}")
        live = t.call("projects.locations.services.get", {"name": name})
        return UpdateResult({**news, "name": name, "uri": live.get("uri")})

    @_normalize_props
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        t = self._transport()
        try:
            op = t.call("projects.locations.services.delete", {"name": props["name"]})
        except NotFound:
            return
        self._waiter(t).wait(op, props["timeouts"]["delete_seconds"], f"delete {props['name']}")

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: gone if the service is gone; the owned fields as they are live, so a hand-made change shows as
        drift and the next update undoes it (a field the API leaves out reads as its proto3 default)."""
        try:
            live = self._transport().call("projects.locations.services.get", {"name": props["name"]})
        except NotFound:
            return ReadResult("", {})
        fields = dict(props["service"])
        for key, recorded in props["service"].items():
            value = live.get(key, False if isinstance(recorded, bool) else None)
            if key == "ingress" and value in (None, "INGRESS_TRAFFIC_UNSPECIFIED"):
                continue  # "INGRESS_TRAFFIC_UNSPECIFIED if no revision is active" (run.v2 Service.ingress)
            if key == "launchStage":
                continue  # on output "whether the resource uses preview features", not what was asked for
            fields[key] = value
        return ReadResult(id_, {**props, "service": fields, "uri": live.get("uri")})


@dataclass(frozen=True)
class RevisionTimeouts:
    create_seconds: int


class RevisionProvider(_RunProvider):
    """One pool's revision, found or created by its caller-chosen name without moving traffic."""

    INPUTS = ("project", "region", "service", "revision", "template", "timeouts")
    UPDATABLE = ("timeouts",)

    @_normalize_props
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = [CheckFailure(k, "required") for k in (*self.INPUTS, "service_fields") if news.get(k) in (None, "")]
        template, revision, service = news.get("template"), news.get("revision"), news.get("service")
        if isinstance(template, Mapping) and isinstance(revision, str) and isinstance(service, str):
            if template.get("revision") != revision:
                failures.append(CheckFailure("template", f"template.revision must be {revision!r}"))
            if not revision.startswith(f"{short_name(service)}-"):
                failures.append(CheckFailure("revision", f"must start with the service's name and '-': {revision!r}"))
            stated = (template.get("annotations") or {}).get(naming.TEMPLATE_SHA_ANNOTATION)
            if stated != svc.template_digest(template):
                failures.append(
                    CheckFailure("template", f"{naming.TEMPLATE_SHA_ANNOTATION} is not the digest of the template")
                )
        return CheckResult(news, failures)

    @_normalize_props
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # service_fields is context for the patch that creates the revision, owned by the service resource.
        return _diff(olds, news, self.INPUTS, self.UPDATABLE)

    @_normalize_props
    def create(self, props: dict[str, Any]) -> CreateResult:
        t = self._transport()
        name = revision_resource(props["service"], props["revision"])
        timeout = props["timeouts"]["create_seconds"]
        try:
            live = t.call("projects.locations.services.revisions.get", {"name": name})
        except NotFound:
            self._patch(
                t, props["service"], props["service_fields"], timeout, f"create revision {props['revision']}",
                template=props["template"],
            )  # fmt: skip
            live = t.call("projects.locations.services.revisions.get", {"name": name})
        self._adopt(t, live, props, timeout)
        return CreateResult(name, {**props, "name": name})

    def _adopt(self, t: RunTransport, live: Mapping[str, Any], props: Mapping[str, Any], timeout_s: float) -> None:
        """A found revision is ours only with the same digest, and usable only once ready."""
        name = revision_resource(props["service"], props["revision"])
        want = svc.template_digest(props["template"])
        found = (live.get("annotations") or {}).get(naming.TEMPLATE_SHA_ANNOTATION)
        differs = [] if found == want else [f"{naming.TEMPLATE_SHA_ANNOTATION} {found!r}, this template's {want!r}"]
        differs += [
            f"{k}: live {a!r}, this template's {b!r}" for k, (a, b) in verbatim_differences(live, props["template"])
        ]
        if differs:
            raise OperationError(
                f"revision {props['revision']} already exists with another spec ({'; '.join(differs)}): revision "
                "names are immutable, so this template cannot create it; find what made it (`gcloud run revisions "
                "describe`) before deleting it"
            )
        waiter = self._waiter(t)
        deadline = waiter.clock() + timeout_s
        while live.get("reconciling") and waiter.clock() < deadline:
            waiter.sleep(waiter.policy.first_interval_s)
            live = t.call("projects.locations.services.revisions.get", {"name": name})
        ready = ready_condition(live) or {}
        if ready.get("state") != SUCCEEDED:
            raise OperationError(
                f"revision {props['revision']} exists but is not ready ({ready.get('state')}: {ready.get('message')}): "
                "fix the cause; an unchanged template finds this same revision again, so delete it first "
                f"(`gcloud run revisions delete {props['revision']} --region {props['region']}`)"
            )

    @_normalize_props
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult({**news, "name": olds["name"]})  # only timeouts: nothing to call

    @_normalize_props
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Nothing: a revision no longer named by traffic serves nothing and costs nothing (its minimum instances
        run only while traffic or a tag addresses it: Cloud Run "Set minimum instances"), Cloud Run deletes the
        oldest non-serving revisions beyond 1,000 itself, and a rollback finds this one again by name. A promoted
        canary's revision is also stable's now: deleting it would take the service down."""

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        try:
            self._transport().call("projects.locations.services.revisions.get", {"name": props["name"]})
        except NotFound:
            return ReadResult("", {})
        return ReadResult(id_, props)


@dataclass(frozen=True)
class TrafficTimeouts:
    update_seconds: int = TRAFFIC_TIMEOUT_S


def traffic_problems(traffic: Any) -> list[str]:
    """What run.v2 refuses in a split (and what this program never sends): percents not summing to 100, a
    revision or tag named twice."""
    if not isinstance(traffic, list) or any(not isinstance(e, Mapping) for e in traffic):
        return ["a list of traffic targets"]
    problems = []
    total = sum(int(e.get("percent") or 0) for e in traffic)
    if total != 100:
        problems.append(f"percents sum to {total}, not 100")
    for key in ("revision", "tag"):
        values = [e.get(key) for e in traffic if e.get(key)]
        if len(values) != len(set(values)):
            problems.append(f"a {key} is named twice: {values}")
    return problems


class TrafficProvider(_RunProvider):
    """The service's whole split over the revisions the revision resources created."""

    INPUTS = ("project", "region", "service", "traffic", "timeouts")
    UPDATABLE = ("traffic", "timeouts")

    @_normalize_props
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = [CheckFailure(k, "required") for k in (*self.INPUTS, "service_fields") if news.get(k) in (None, "")]
        traffic = news.get("traffic")
        if traffic not in (None, UNKNOWN):
            failures += [CheckFailure("traffic", p) for p in traffic_problems(traffic)]
        return CheckResult(news, failures)

    @_normalize_props
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return _diff(olds, news, self.INPUTS, self.UPDATABLE)

    @_normalize_props
    def create(self, props: dict[str, Any]) -> CreateResult:
        self._apply(props)
        return CreateResult(f"{props['service']}/traffic", dict(props))

    @_normalize_props
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._apply(news)
        return UpdateResult(dict(news))

    def _apply(self, props: Mapping[str, Any]) -> None:
        t = self._transport()
        for entry in props["traffic"]:
            name = revision_resource(props["service"], entry["revision"])
            try:
                live = t.call("projects.locations.services.revisions.get", {"name": name})
            except NotFound:
                raise OperationError(
                    f"traffic names revision {entry['revision']}, which does not exist: its revision resource must "
                    "create it first"
                ) from None
            if (ready_condition(live) or {}).get("state") != SUCCEEDED:
                raise OperationError(f"traffic names revision {entry['revision']}, which is not ready")
        self._patch(
            t, props["service"], props["service_fields"], props["timeouts"]["update_seconds"],
            f"route traffic of {props['service']}", traffic=props["traffic"],
        )  # fmt: skip

    @_normalize_props
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Nothing: the split belongs to the service; deleting the service (the stack's teardown) removes it."""

    @_normalize_props
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: the live split, so a split changed by hand (console, gcloud) shows as drift and the next update
        restores the configured one."""
        try:
            live = self._transport().call("projects.locations.services.get", {"name": props["service"]})
        except NotFound:
            return ReadResult("", {})
        return ReadResult(id_, {**props, "traffic": explicit_traffic(live)})


# ---- resources ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceInputs:
    project: str
    region: str
    service_id: str
    #: service.service_fields(): what this resource owns.
    service: Mapping[str, Any]
    #: Stable's named revision template, sent once when the service is created.
    initial_template: Mapping[str, Any]
    timeouts: ServiceTimeouts


class CloudRunService(pulumi.dynamic.Resource, module="cloudrun", name="Service"):
    """A Cloud Run service whose template and traffic are owned by :class:`CloudRunRevision` and
    :class:`CloudRunTraffic`."""

    name: pulumi.Output[str]
    uri: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        args: ServiceInputs,
        opts: pulumi.ResourceOptions | None = None,
        provider: ServiceProvider | None = None,
    ):
        props = {
            "project": args.project,
            "region": args.region,
            "service_id": args.service_id,
            "service": dict(args.service),
            "initial_template": dict(args.initial_template),
            "timeouts": asdict(args.timeouts),
            "name": None,
            "uri": None,
        }
        super().__init__(provider or ServiceProvider(), resource_name, props, opts)


@dataclass(frozen=True)
class RevisionInputs:
    project: str
    region: str
    #: The service's full resource name (``projects/<p>/locations/<r>/services/<id>``).
    service: str
    revision: str
    template: Mapping[str, Any]
    #: The service-level fields re-sent with the patch that creates the revision (owned by the service resource).
    service_fields: Mapping[str, Any]
    timeouts: RevisionTimeouts


class CloudRunRevision(pulumi.dynamic.Resource, module="cloudrun", name="Revision"):
    """One immutable revision of the service, found or created by its name; any change is a replacement."""

    name: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        args: RevisionInputs,
        opts: pulumi.ResourceOptions | None = None,
        provider: RevisionProvider | None = None,
    ):
        props = {
            "project": args.project,
            "region": args.region,
            "service": args.service,
            "revision": args.revision,
            "template": dict(args.template),
            "service_fields": dict(args.service_fields),
            "timeouts": asdict(args.timeouts),
            "name": None,
        }
        super().__init__(provider or RevisionProvider(), resource_name, props, opts)


@dataclass(frozen=True)
class TrafficInputs:
    project: str
    region: str
    service: str
    #: service.traffic(): one entry per pool.
    traffic: Sequence[Mapping[str, Any]]
    service_fields: Mapping[str, Any]
    timeouts: TrafficTimeouts = TrafficTimeouts()


class CloudRunTraffic(pulumi.dynamic.Resource, module="cloudrun", name="Traffic"):
    """The service's traffic split, owned by exactly one resource."""

    def __init__(
        self,
        resource_name: str,
        args: TrafficInputs,
        opts: pulumi.ResourceOptions | None = None,
        provider: TrafficProvider | None = None,
    ):
        props = {
            "project": args.project,
            "region": args.region,
            "service": args.service,
            "traffic": [dict(e) for e in args.traffic],
            "service_fields": dict(args.service_fields),
            "timeouts": asdict(args.timeouts),
        }
        super().__init__(provider or TrafficProvider(), resource_name, props, opts)
