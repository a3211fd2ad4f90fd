"""Run the real Pulumi program offline under the Pulumi SDK's mock monitor and record what it registers.

No Pulumi CLI, provider plugin, credential or network is involved: the SDK's ``MockMonitor`` stands in for
the engine. A recording subclass keeps the full ``RegisterResourceRequest`` of every resource (type, name,
parent, inputs, dependencies, options such as ``protect``), which becomes ``inventory.json``.

Values only the cloud knows (IDs, endpoints, the project number) resolve to deterministic, clearly marked
placeholders of the form ``<known-after-apply:...>``. Each run happens in a fresh ``contextvars.Context`` so
several stacks can be planned in one process.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from .inventory import COMPUTED_MARKER, SECRET_MARKER, Inventory, Resource

PLACEHOLDER = "<known-after-apply:{}>"

# Pulumi wire-format signatures (pulumi.runtime.rpc): how secrets, resource references and unknowns travel.
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET_TEXT = SECRET_MARKER
UNKNOWN_TEXT = COMPUTED_MARKER


def placeholder(what: str) -> str:
    return PLACEHOLDER.format(what)


#: Outputs the cloud computes, per resource type: the mock answers with a marked placeholder so code that
#: reads them (kubeconfig from the cluster endpoint, principals from the project number) runs offline.
CLOUD_OUTPUTS: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": ("endpoint", "selfLink", "masterVersion"),
    "gcp:compute/network:Network": ("selfLink",),
    "gcp:compute/subnetwork:Subnetwork": ("selfLink", "gatewayAddress"),
    "gcp:compute/address:Address": ("address", "selfLink"),
    "gcp:compute/disk:Disk": ("selfLink",),
    "gcp:compute/reservation:Reservation": ("selfLink",),
    "gcp:storage/bucket:Bucket": ("selfLink",),
    "gcp:serviceaccount/account:Account": ("uniqueId",),
    "gcp:secretmanager/secret:Secret": ("name",),
    "gcp:monitoring/notificationChannel:NotificationChannel": ("name",),
    "pulumi-python:dynamic/cloudrun:Service": ("uri",),
}


def _cloud_outputs(typ: str, name: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in CLOUD_OUTPUTS.get(typ, ()):
        out[key] = placeholder(f"{name}.{key}")
    if typ == "gcp:container/cluster:Cluster":
        out["masterAuth"] = {"clusterCaCertificate": placeholder(f"{name}.masterAuth.clusterCaCertificate")}
    if typ == "gcp:serviceaccount/account:Account" and "accountId" in inputs:
        # The e-mail is a deterministic function of account id and project, not a cloud secret.
        out["email"] = f"{inputs['accountId']}@{inputs.get('project') or project}.iam.gserviceaccount.com"
        out["member"] = f"serviceAccount:{out['email']}"
    if typ == "gcp:artifactregistry/repository:Repository" and "repositoryId" in inputs:
        out["name"] = inputs["repositoryId"]
    if typ == "gcp:storage/bucket:Bucket" and "name" in inputs:
        out["url"] = f"gs://{inputs['name']}"
    if typ == "gcp:projects/serviceIdentity:ServiceIdentity":
        # A service agent's e-mail is chosen by Google when the agent is created.
        out["email"] = placeholder(f"{name}.email")
        out["member"] = f"serviceAccount:{out['email']}"
    return out


# ---- wire format -> plain JSON --------------------------------------------------------------------


def plain(value: Any) -> Any:
    """Decode Pulumi's property encoding into JSON-friendly values with readable markers."""
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SECRET_SIG:
            return SECRET_TEXT
        if sig == _RESOURCE_SIG:
            return {"$resource": value.get("urn", "")}
        if sig == _OUTPUT_SIG:
            if value.get("secret"):
                return SECRET_TEXT
            return plain(value["value"]) if "value" in value else UNKNOWN_TEXT
        return {k: plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if value == _UNKNOWN:
        return UNKNOWN_TEXT
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf Struct carries every number as a double
    return value


def _strip_provider_id(ref: str) -> str:
    """Provider references are ``<urn>::<id>``; the mock id is the name, keep only the stable URN."""
    return ref.rsplit("::", 1)[0] if ref.count("::") > 3 else ref


def _registration(request: Any, urn: str, make_urn: Callable[[str, str, str], str]) -> Resource:
    inputs = plain(json_format.MessageToDict(request.object)) if request.HasField("object") else {}
    prop_deps = {k: sorted(v.urns) for k, v in sorted(request.propertyDependencies.items()) if v.urns}
    options = {
        "protect": bool(request.protect),
        "delete_before_replace": bool(request.deleteBeforeReplace),
        "ignore_changes": sorted(request.ignoreChanges),
        "replace_on_changes": sorted(request.replaceOnChanges),
        "retain_on_delete": bool(request.retainOnDelete),
        "additional_secret_outputs": sorted(request.additionalSecretOutputs),
    }
    if request.HasField("customTimeouts"):
        timeouts = {
            k: v
            for k, v in (
                ("create", request.customTimeouts.create),
                ("update", request.customTimeouts.update),
                ("delete", request.customTimeouts.delete),
            )
            if v
        }
        if timeouts:
            options["custom_timeouts"] = timeouts
    return Resource(
        urn=urn,
        type=request.type,
        name=request.name,
        aliases=alias_urns(request, urn, make_urn),
        custom=bool(request.custom),
        parent=request.parent or None,
        provider=_strip_provider_id(request.provider),
        inputs=inputs,
        dependencies=tuple(sorted(set(request.dependencies))),
        property_dependencies={k: tuple(v) for k, v in prop_deps.items()},
        options=options,
    )


def alias_urns(request: Any, urn: str, make_urn: Callable[[str, str, str], str]) -> tuple[str, ...]:
    """The URNs a resource's ``aliases`` name, resolved as the engine resolves an alias (``Alias.GetURN`` in
    github.com/pulumi/pulumi sdk/go/common/resource/alias.go: every field the alias leaves empty is the resource's
    own name, type and parent) and spelled as the mock monitor spells every URN of the plan (``make_urn``: the
    parent's type, then the type and name), so an alias matches the URN an older plan recorded."""
    out: set[str] = set(getattr(request, "aliasURNs", []))
    for alias in request.aliases:
        if alias.WhichOneof("alias") == "urn":
            out.add(alias.urn)
            continue
        spec = alias.spec
        which = spec.WhichOneof("parent")
        if which == "noParent" and spec.noParent:
            parent = ""
        elif which == "parentUrn" and spec.parentUrn:
            parent = spec.parentUrn
        else:
            parent = request.parent
        out.add(make_urn(parent, spec.type or request.type, spec.name or request.name))
    return tuple(sorted(out - {urn}))


@dataclass
class OfflineRun:
    project: str
    stack: str
    resources: list[Resource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    invokes: list[str] = field(default_factory=list)

    def inventory(self) -> Inventory:
        return Inventory(
            project=self.project,
            stack=self.stack,
            resources=tuple(sorted(self.resources, key=lambda r: r.urn)),
            outputs=self.outputs,
        )

    def by_type(self, typ: str) -> list[Resource]:
        return sorted((r for r in self.resources if r.type == typ), key=lambda r: r.urn)

    def one(self, typ: str, name: str | None = None) -> Resource:
        found = [r for r in self.by_type(typ) if name is None or r.name == name]
        if len(found) != 1:
            raise LookupError(f"expected exactly one {typ} named {name!r}, found {[r.name for r in found]}")
        return found[0]


class UnexpectedInvoke(RuntimeError):
    pass


def run_offline(
    program: Callable[[], None],
    *,
    project: str,
    stack: str,
    config: dict[str, str],
    secret_keys: list[str],
    sink: OfflineRun | None = None,
) -> OfflineRun:
    """Run ``program`` as the Pulumi engine would, with mocks, and return what it registered.

    ``sink`` receives registrations as they happen, so a caller can inspect what was registered even
    when the program raises (e.g. to prove that bad config registers nothing)."""
    result = sink if sink is not None else OfflineRun(project=project, stack=stack)
    return contextvars.Context().run(_run, program, result, config, secret_keys)


def _run(program: Callable[[], None], result: OfflineRun, config: dict[str, str], secret_keys: list[str]) -> OfflineRun:
    import pulumi
    from pulumi.runtime import mocks as pmocks
    from pulumi.runtime.config import set_all_config
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    project, stack = result.project, result.stack
    gcp_project = config.get("gcp:project", project)

    class PlanMocks(pmocks.Mocks):
        def new_resource(self, args: pmocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
            outputs = dict(args.inputs)
            outputs.update(_cloud_outputs(args.typ, args.name, args.inputs, gcp_project))
            rid = placeholder(f"{args.name}.id") if args.custom else None
            return rid, outputs

        def call(self, args: pmocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
            result.invokes.append(args.token)
            if args.token == "gcp:organizations/getProject:getProject":
                pid = args.args.get("projectId") or gcp_project
                # (outputs, check failures): the documented form; an empty list, because pulumi's mock monitor
                # iterates the failures of a tuple (a bare dict, which it also accepts, is the same response).
                return {"projectId": pid, "number": placeholder("project-number"), "name": pid}, []
            raise UnexpectedInvoke(f"the offline plan has no answer for invoke {args.token}")

    class RecordingMonitor(pmocks.MockMonitor):
        def RegisterResource(self, request: Any) -> Any:
            resp = super().RegisterResource(request)  # type: ignore[no-untyped-call]  # unannotated in pulumi
            if request.type != "pulumi:pulumi:Stack":
                result.resources.append(_registration(request, resp.urn, self.make_urn))
            return resp

    mocks = PlanMocks()
    pmocks.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=RecordingMonitor(mocks))
    set_all_config(config, secret_keys)

    _sync_await(run_pulumi_func(program))

    root = pulumi.runtime.settings.get_root_resource()
    raw_outputs = dict(getattr(root, "outputs", {}) or {})
    resolved = {}
    for key in sorted(raw_outputs):
        out = pulumi.Output.from_input(raw_outputs[key])
        value = _sync_await(out.future())
        secret = _sync_await(out.is_secret())
        resolved[key] = SECRET_TEXT if secret else json.loads(json.dumps(value, sort_keys=True, default=str))
    result.outputs = resolved
    return result
