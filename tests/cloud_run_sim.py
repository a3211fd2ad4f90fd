"""A small simulator of Cloud Run's documented revision model, and a small stand-in for the Pulumi engine, so the
Cloud Run target's rollout can be driven stage by stage without a cloud (tests/test_cloud_run_rollout.py).

The simulator (:class:`CloudRunSim`) answers the run.v2 calls the dynamic providers make (``RunTransport.call``)
and holds exactly what these statements of Cloud Run's documentation say, nothing more:

* a revision is created only from the service's template ("Manage revisions": "When you deploy to a service or
  change the configuration of a service, an immutable revision is created"); a template equal to the service's
  current one creates none (run.v2 ``services.patch`` ``forceNewRevision``: "a new revision will be created from
  the template even if the system doesn't detect any changes");
* revision names are caller-chosen (``RevisionTemplate.revision``), start with the service's name and a dash,
  are unique and immutable: a template naming an existing revision is HTTP 409 ("Error 409 revision named '<rev>'
  already exists", hashicorp/terraform-provider-google#14569) unless it is the service's current template sent
  again unchanged (which creates nothing). Whether Cloud Run accepts a name reused with the very same spec is not
  documented; the simulator takes the strict reading, which the providers never need (they find a revision by name
  before they create it);
* traffic may name only revisions that exist and are ready ("Revision '...' does not exist or is deleted. Update
  all traffic to route to currently available revisions", terraform-google-modules/terraform-docs-samples#269) -
  strictly, revisions that existed before the request: whether a split may name the revision its own request's
  template creates is not documented, and the providers never rely on it;
  tags are unique, percents sum to 100; an empty split means 100 % to the latest ready revision (run.v2
  ``Service.traffic``); a split naming revisions stays where it is when a new revision is created ("Rollbacks,
  gradual rollouts, and traffic migration", lifecycle of traffic splits);
* mutations are long-running operations (run.v2 ``services.create`` / ``patch`` / ``delete`` return
  ``GoogleLongrunningOperation``), polled with ``projects.locations.operations.get``; a patch carrying a stale
  ``etag`` is HTTP 409 (run.v2 ``Service.etag``: "May be used to detect modification conflict");
* a revision whose instance cannot start (an image in ``failing_images``, or a Cloud Storage volume's
  ``only-dir`` folder with no object in a bucket the simulator tracks) exists but is not ready, and the operation
  that created it fails.

Every request body and parameter set is validated against run.v2's discovery document first (HTTP 400 with the
validator's messages). What the simulator records for the assertions: every call, every mutating call that failed
(``errors``), and every traffic move a revision creation caused (``moves_by_creation``, which must stay empty).

The engine (:class:`Engine`) applies an offline plan's inventory the way ``pulumi up`` does for this program's
resources: in dependency order, each resource created, updated or replaced (create-before-delete) by its
provider's ``check`` / ``diff`` / ``create`` / ``update``, then the deletions (replaced and removed resources) in
reverse order; the Cloud Run dynamic resources run their real providers against the simulator, the program's
Cloud Storage objects are put into the simulator's buckets (kept on delete, as ``retain_on_delete`` does), every
other resource is recorded only.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.cloud_run import provider as pv

from .discovery import document

BY_REVISION = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"
TO_LATEST = "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST"
#: The Service fields a request may set (the run.v2 schema's non-output fields this program uses).
SERVICE_FIELDS = ("labels", "description", "ingress", "launchStage", "invokerIamDisabled", "annotations")
MUTATING = ("create", "patch", "delete")


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def _content(template: Mapping[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in template.items() if k != "revision"}


@dataclass
class SimRevision:
    service: str
    name: str
    template: dict[str, Any]
    ready: bool
    message: str = ""


@dataclass
class SimService:
    name: str
    fields: dict[str, Any]
    template: dict[str, Any]
    traffic: list[dict[str, Any]]
    generation: int = 1
    latest_created: str = ""
    latest_ready: str = ""

    @property
    def etag(self) -> str:
        return f'"g{self.generation}"'


class CloudRunSim:
    def __init__(self, failing_images: tuple[str, ...] = (), polls_per_operation: int = 1):
        self.doc = document("run", "v2")
        self.services: dict[str, SimService] = {}
        self.revisions: dict[str, SimRevision] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.failing_images = failing_images
        self.polls_per_operation = polls_per_operation
        #: Buckets whose objects the simulator knows (the programs bucket): name -> object names.
        self.buckets: dict[str, set[str]] = {}
        self.calls: list[tuple[str, dict[str, Any], Any]] = []
        self.errors: list[tuple[str, str]] = []
        self.moves_by_creation: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []
        #: Conflicts to inject: the next N patches of a service find its etag changed.
        self.stale_etags = 0
        self._ids = itertools.count(1)

    # ---- transport -------------------------------------------------------------------------------------------
    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.calls.append((method, dict(params), copy.deepcopy(body)))
        try:
            problems = self.doc.validate_parameters(method, params)
            schema = self.doc.request_schema(method)
            if schema is not None:
                if body is None:
                    problems.append(f"{method}: a {schema} body is required")
                else:
                    problems += self.doc.validate(schema, body)
            if problems:
                raise ApiError(400, "; ".join(problems))
            return self._dispatch(method, params, body)
        except ApiError as err:
            if method.rsplit(".", 1)[-1] in MUTATING:
                self.errors.append((method, str(err)))
            if err.status == 404:
                raise pv.NotFound(str(err)) from err
            if err.status == 409:
                raise pv.Conflict(str(err)) from err
            raise

    def _dispatch(self, method: str, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        verbs = {
            "projects.locations.services.create": self._create,
            "projects.locations.services.get": self._get,
            "projects.locations.services.patch": self._patch,
            "projects.locations.services.delete": self._delete,
            "projects.locations.services.revisions.get": self._get_revision,
            "projects.locations.operations.get": self._get_operation,
        }
        if method not in verbs:
            raise AssertionError(f"the simulator does not model {method}")
        return verbs[method](params, body)

    # ---- the model ---------------------------------------------------------------------------------------------
    def _instance_starts(self, template: Mapping[str, Any]) -> tuple[bool, str]:
        for c in template.get("containers") or []:
            if c.get("image") in self.failing_images:
                return False, f"container {c.get('name')} failed to start (image {c.get('image')})"
        for v in template.get("volumes") or []:
            gcs = v.get("gcs")
            if not gcs or gcs.get("bucket") not in self.buckets:
                continue
            folder = next((o.split("=", 1)[1] for o in gcs.get("mountOptions", []) if o.startswith("only-dir=")), "")
            if not any(name.startswith(folder + "/") for name in self.buckets[gcs["bucket"]]):
                return False, f"volume {v.get('name')}: gs://{gcs['bucket']}/{folder}/ is empty"
        return True, ""

    def _new_revision(self, service: str, template: Mapping[str, Any]) -> SimRevision:
        short = service.rsplit("/", 1)[-1]
        name = template.get("revision") or f"{short}-{next(self._ids):05d}-sim"
        if not name.startswith(f"{short}-") or len(name) > 63:
            raise ApiError(400, f"revision name {name!r} must start with '{short}-' and be at most 63 characters")
        full = f"{service}/revisions/{name}"
        if full in self.revisions:
            raise ApiError(409, f"revision named {name!r} already exists")
        ready, message = self._instance_starts(template)
        rev = SimRevision(service, name, _content(template), ready, message)
        self.revisions[full] = rev
        return rev

    def _resolve_traffic(self, svc: SimService, traffic: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The split as Cloud Run routes it (TrafficTargetStatus): every entry by revision name."""
        entries = traffic or [{"type": TO_LATEST, "percent": 100}]
        out: list[dict[str, Any]] = []
        for e in entries:
            if e.get("type") == TO_LATEST:
                if not svc.latest_ready:
                    raise ApiError(400, "traffic to the latest ready revision, but none is ready")
                name = svc.latest_ready
            elif e.get("type") == BY_REVISION:
                name = e.get("revision", "")
            else:
                raise ApiError(400, f"traffic type {e.get('type')!r}")
            rev = self.revisions.get(f"{svc.name}/revisions/{name}")
            if rev is None:
                raise ApiError(
                    404,
                    f"Revision '{name}' does not exist or is deleted. Update all traffic to route to currently "
                    "available revisions",
                )
            if not rev.ready:
                raise ApiError(400, f"Revision '{name}' is not ready and cannot serve traffic")
            out.append(
                {"type": BY_REVISION, "revision": name, "percent": int(e.get("percent", 0)), "tag": e.get("tag")}
            )
        total = sum(int(e["percent"]) for e in out)
        if total != 100:
            raise ApiError(400, f"traffic percents sum to {total}")
        tags = [e["tag"] for e in out if e["tag"]]
        if len(tags) != len(set(tags)):
            raise ApiError(400, f"tags must be unique: {tags}")
        return out

    def _operation(self, response: dict[str, Any], error: str | None = None) -> dict[str, Any]:
        name = f"projects/sim/locations/sim/operations/op-{next(self._ids)}"
        op: dict[str, Any] = {"name": name, "done": False, "polls": self.polls_per_operation}
        if error is not None:
            op["error"] = {"code": 9, "message": error}
        else:
            op["response"] = response
        self.operations[name] = op
        return {"name": name, "done": False}

    def _create(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        name = f"{params['parent']}/services/{params['serviceId']}"
        if name in self.services:
            raise ApiError(409, f"service {name} already exists")
        if "template" not in body:
            raise ApiError(400, "template is required")
        for e in body.get("traffic") or []:
            if e.get("type") == BY_REVISION:
                raise ApiError(
                    404,
                    f"Revision '{e.get('revision')}' does not exist or is deleted. Update all traffic to route to "
                    "currently available revisions",
                )
        svc = SimService(name, {k: copy.deepcopy(body[k]) for k in SERVICE_FIELDS if k in body}, {}, [])
        rev = self._new_revision(name, body["template"])
        svc.template = copy.deepcopy(body["template"])
        svc.template.setdefault("revision", rev.name)
        svc.latest_created = rev.name
        if rev.ready:
            svc.latest_ready = rev.name
        self.services[name] = svc
        if not rev.ready:
            return self._operation({}, f"revision {rev.name} is not ready: {rev.message}")
        svc.traffic = self._store_traffic(svc, body.get("traffic") or [])
        return self._operation(self._view(svc))

    def _store_traffic(self, svc: SimService, traffic: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._resolve_traffic(svc, traffic)  # validates
        return copy.deepcopy(traffic)

    def _patch(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        svc = self.services.get(params["name"])
        if svc is None:
            raise ApiError(404, f"service {params['name']} not found")
        if self.stale_etags:
            self.stale_etags -= 1
            svc.generation += 1  # someone else wrote in between
        if body.get("etag") not in (None, svc.etag):
            raise ApiError(409, f"etag {body.get('etag')} is stale (now {svc.etag})")
        if "template" not in body:
            raise ApiError(400, "template is required")
        before = self._resolve_traffic(svc, svc.traffic)
        self._resolve_traffic(
            svc, [e for e in body.get("traffic") or [] if e.get("type") == BY_REVISION] or svc.traffic
        )
        template = body["template"]
        created: SimRevision | None = None
        named = template.get("revision")
        if named:
            existing = self.revisions.get(f"{svc.name}/revisions/{named}")
            unchanged = named == svc.template.get("revision") and _content(template) == _content(svc.template)
            if existing is not None and not unchanged:
                spec = "the same" if existing.template == _content(template) else "another"
                raise ApiError(409, f"revision named {named!r} already exists (with {spec} spec)")
            if existing is None:
                created = self._new_revision(svc.name, template)
        elif _content(template) != _content(svc.template):
            created = self._new_revision(svc.name, template)
        svc.template = copy.deepcopy(template)
        if created is not None:
            svc.template["revision"] = created.name
            svc.latest_created = created.name
            if created.ready:
                svc.latest_ready = created.name
        svc.fields = {k: copy.deepcopy(body[k]) for k in SERVICE_FIELDS if k in body}
        svc.generation += 1
        if created is not None and not created.ready:
            return self._operation({}, f"revision {created.name} is not ready: {created.message}")
        svc.traffic = self._store_traffic(svc, body.get("traffic") or [])
        after = self._resolve_traffic(svc, svc.traffic)
        if created is not None and after != before:
            self.moves_by_creation.append((created.name, before, after))
        return self._operation(self._view(svc))

    def _delete(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        svc = self.services.pop(params["name"], None)
        if svc is None:
            raise ApiError(404, f"service {params['name']} not found")
        for key in [k for k, r in self.revisions.items() if r.service == svc.name]:
            del self.revisions[key]
        return self._operation({})

    def _view(self, svc: SimService) -> dict[str, Any]:
        statuses = self._resolve_traffic(svc, svc.traffic) if svc.latest_ready or svc.traffic else []
        return {
            "name": svc.name,
            **copy.deepcopy(svc.fields),
            "template": copy.deepcopy(svc.template),
            "traffic": copy.deepcopy(svc.traffic),
            "trafficStatuses": statuses,
            "etag": svc.etag,
            "generation": str(svc.generation),
            "latestCreatedRevision": f"{svc.name}/revisions/{svc.latest_created}",
            "latestReadyRevision": f"{svc.name}/revisions/{svc.latest_ready}" if svc.latest_ready else "",
            "uri": f"https://{svc.name.rsplit('/', 1)[-1]}-sim.a.run.app",
            "reconciling": False,
        }

    def _get(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        svc = self.services.get(params["name"])
        if svc is None:
            raise ApiError(404, f"service {params['name']} not found")
        return self._view(svc)

    def _get_revision(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        rev = self.revisions.get(params["name"])
        if rev is None:
            raise ApiError(404, f"revision {params['name']} not found")
        return {
            "name": params["name"],
            "service": rev.service,
            **{k: copy.deepcopy(v) for k, v in rev.template.items() if k != "labels"},
            "labels": copy.deepcopy(rev.template.get("labels", {})),
            "reconciling": False,
            "conditions": [
                {
                    "type": "Ready",
                    "state": "CONDITION_SUCCEEDED" if rev.ready else "CONDITION_FAILED",
                    "message": rev.message,
                }
            ],
        }

    def _get_operation(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        op = self.operations[params["name"]]
        op["polls"] -= 1
        if op["polls"] <= 0:
            op["done"] = True
        return {k: v for k, v in op.items() if k != "polls"}

    # ---- what the assertions read -------------------------------------------------------------------------------
    def routed(self, service: str) -> list[dict[str, Any]]:
        svc = self.services[service]
        return [{k: v for k, v in e.items() if v is not None} for e in self._resolve_traffic(svc, svc.traffic)]

    def revision_count(self, service: str) -> int:
        return sum(1 for r in self.revisions.values() if r.service == service)


# ---- the engine ----------------------------------------------------------------------------------------------------

DYNAMIC = {
    "pulumi-python:dynamic/cloudrun:Service": pv.ServiceProvider,
    "pulumi-python:dynamic/cloudrun:Revision": pv.RevisionProvider,
    "pulumi-python:dynamic/cloudrun:Traffic": pv.TrafficProvider,
}
BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"
BUCKET = "gcp:storage/bucket:Bucket"


@dataclass
class Stored:
    type: str
    id: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    retain_on_delete: bool = False


@dataclass
class Engine:
    """``pulumi up`` for one stack against the simulator; ``steps`` of the last apply: (op, resource name)."""

    sim: CloudRunSim
    state: dict[str, Stored] = field(default_factory=dict)
    steps: list[tuple[str, str]] = field(default_factory=list)

    def provider(self, typ: str) -> pv._RunProvider:
        clock = itertools.count(0, 1.0)
        return DYNAMIC[typ](transport_factory=lambda: self.sim, sleep=lambda s: None, clock=lambda: float(next(clock)))

    @staticmethod
    def _order(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
        by_urn = {r["urn"]: r for r in resources}
        done: list[str] = []
        seen: set[str] = set()

        def visit(urn: str) -> None:
            if urn in seen or urn not in by_urn:
                return
            seen.add(urn)
            for dep in by_urn[urn].get("dependencies", []):
                visit(dep)
            done.append(urn)

        for urn in sorted(by_urn):
            visit(urn)
        return [by_urn[u] for u in done]

    def apply(self, inventory: Mapping[str, Any]) -> list[tuple[str, str]]:
        self.steps = []
        resources = [r for r in inventory["resources"] if r.get("custom")]
        ordered = self._order(resources)
        pending_deletes: list[tuple[str, Stored]] = []
        for res in ordered:
            urn, typ = res["urn"], res["type"]
            news = {k: v for k, v in res["inputs"].items() if k != "__provider"}
            old = self.state.get(urn)
            if typ in DYNAMIC:
                prov = self.provider(typ)
                news = pv.normalized(news)
                checked = prov.check(old.inputs if old else {}, news)
                assert not checked.failures, (res["name"], [(f.property, f.reason) for f in checked.failures])
                if old is None:
                    created = prov.create(news)
                    self.state[urn] = Stored(typ, created.id, news, dict(created.outs or {}))
                    self.steps.append(("create", res["name"]))
                    continue
                d = prov.diff(old.id, old.outputs, news)
                if d.replaces:
                    created = prov.create(news)
                    pending_deletes.append((urn, old))
                    self.state[urn] = Stored(typ, created.id, news, dict(created.outs or {}))
                    self.steps.append(("replace", res["name"]))
                elif d.changes:
                    updated = prov.update(old.id, old.outputs, news)
                    self.state[urn] = Stored(typ, old.id, news, dict(updated.outs or {}))
                    self.steps.append(("update", res["name"]))
                continue
            retain = bool(res.get("options", {}).get("retain_on_delete"))
            if typ == BUCKET and old is None:
                self.sim.buckets.setdefault(news["name"], set())
            if old is not None and old.inputs == news:
                continue
            replaced = old is not None and typ == BUCKET_OBJECT and old.inputs.get("name") != news.get("name")
            if typ == BUCKET_OBJECT:
                self.sim.buckets.setdefault(news["bucket"], set()).add(news["name"])
            if replaced:
                assert old is not None
                pending_deletes.append((urn, old))
            self.state[urn] = Stored(typ, res["name"], news, news, retain)
            self.steps.append(("create" if old is None else "replace" if replaced else "update", res["name"]))
        wanted = {r["urn"] for r in resources}
        removed = [(u, s) for u, s in self.state.items() if u not in wanted]
        for urn, stored in [*reversed(pending_deletes), *reversed(removed)]:
            if stored.type in DYNAMIC:
                self.provider(stored.type).delete(stored.id, stored.outputs)
            elif stored.type == BUCKET_OBJECT and not stored.retain_on_delete:
                self.sim.buckets.get(stored.inputs["bucket"], set()).discard(stored.inputs["name"])
            if urn not in wanted:
                del self.state[urn]
            self.steps.append(("delete", urn.rsplit("::", 1)[-1]))
        return self.steps
