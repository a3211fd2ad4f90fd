"""Helpers shared by the policies: unknown-safe property access, label selectors, vLLM argument parsing, and the
resource relationships the stack policies follow (serving Deployment -> node pool -> reservation).

Why policies never touch ``args.props`` directly: pulumi_policy wraps the properties in a proxy that raises
``UnknownValueError`` on the first unknown value, and for a *stack* policy that aborts the whole policy with one
advisory "can't run policy during preview" line — every other resource goes unchecked. :func:`plain` copies
the properties into ordinary dicts/lists once, replacing each unknown by :data:`UNKNOWN`, so a policy skips just
the value it cannot know and still checks everything else. Numbers arrive as protobuf doubles (``3`` as
``3.0``); integral floats are turned back into ints so messages read ``3``, not ``3.0``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    PolicyComplianceFramework,
    ReportViolation,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UnknownValueError


class _Unknown:
    """A value the engine does not know yet (preview). Falsy, equal only to itself."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown>"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()

# ---- the naming contract: a generated copy of components/naming.py (the pack runs in its own process) -------
from . import _naming as naming  # noqa: E402

COMPONENT_LABEL = naming.COMPONENT_LABEL
MODEL_SERVER = naming.MODEL_SERVER_COMPONENT
VERSION_LABEL = naming.VERSION_LABEL
POOL_LABEL = naming.POOL_LABEL
RELEASE_LABEL = naming.RELEASE_LABEL
RELEASES_ANNOTATION = naming.RELEASES_ANNOTATION
ACCELERATOR_LABEL = naming.ACCELERATOR_LABEL
#: Annotations the model server renders on each serving Deployment.
COLD_LOAD_ANNOTATION = naming.COLD_LOAD_ANNOTATION
STREAM_BOUND_ANNOTATION = naming.STREAM_BOUND_ANNOTATION
CONTRACT_MAX_MODEL_LEN_ANNOTATION = naming.CONTRACT_MAX_MODEL_LEN_ANNOTATION
CONTRACT_MAX_INPUT_TOKENS_ANNOTATION = naming.CONTRACT_MAX_INPUT_TOKENS_ANNOTATION
CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION = naming.CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION
SHEDDABLE_ANNOTATION = naming.SHEDDABLE_ANNOTATION
RESERVATION_KEY = naming.RESERVATION_NAME_KEY
GPU_RESOURCE = naming.GPU_RESOURCE

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
HELM_CHART = "kubernetes:helm.sh/v4:Chart"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
GCP_BACKEND_POLICY = "kubernetes:networking.gke.io/v1:GCPBackendPolicy"
GCP_GATEWAY_POLICY = "kubernetes:networking.gke.io/v1:GCPGatewayPolicy"
HTTP_ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
INFERENCE_POOL = "kubernetes:inference.networking.k8s.io/v1:InferencePool"
INFERENCE_OBJECTIVES = (
    "kubernetes:inference.networking.x-k8s.io/v1alpha2:InferenceObjective",
    "kubernetes:llm-d.ai/v1alpha2:InferenceObjective",
)
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
RESERVATION = "gcp:compute/reservation:Reservation"
BUCKET = "gcp:storage/bucket:Bucket"
DISK = "gcp:compute/disk:Disk"
#: A fleet's Hub memberships and its multi-cluster Ingress feature (components/fleet.py): deleting the config
#: cluster's membership or the feature takes down every multi-cluster Gateway of the fleet.
HUB_MEMBERSHIP = "gcp:gkehub/membership:Membership"
HUB_FEATURE = "gcp:gkehub/feature:Feature"
REPOSITORY = "gcp:artifactregistry/repository:Repository"
SSL_POLICIES = ("gcp:compute/sSLPolicy:SSLPolicy", "gcp:compute/regionSslPolicy:RegionSslPolicy")
SA_KEY = "gcp:serviceaccount/key:Key"

# ---- compliance frameworks (section numbers are those of the named version; they shift between versions) --
CIS_GKE = "CIS Google Kubernetes Engine (GKE) Benchmark"
CIS_GKE_VERSION = "1.5.0"
CIS_GCP = "CIS Google Cloud Platform Foundation Benchmark"
CIS_GCP_VERSION = "2.0.0"


def cis_gke(section: str, title: str) -> PolicyComplianceFramework:
    return PolicyComplianceFramework(name=CIS_GKE, version=CIS_GKE_VERSION, reference=section, specification=title)


def cis_gcp(section: str, title: str) -> PolicyComplianceFramework:
    return PolicyComplianceFramework(name=CIS_GCP, version=CIS_GCP_VERSION, reference=section, specification=title)


# ---- unknown-safe copies -----------------------------------------------------------------------------


def _is_engine_unknown(value: Any) -> bool:
    from pulumi_policy.proxy import _is_unknown  # the SDK's own sentinel test

    return _is_unknown(value)


def plain(value: Any) -> Any:
    """Deep copy of (proxied) properties into dicts/lists; unknowns become :data:`UNKNOWN`."""
    if isinstance(value, str):
        return UNKNOWN if _is_engine_unknown(value) else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in list(value):
            try:
                out[str(key)] = plain(value[key])
            except UnknownValueError:
                out[str(key)] = UNKNOWN
        return out
    if isinstance(value, Sequence):
        items: list[Any] = []
        for i in range(len(value)):
            try:
                items.append(plain(value[i]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def get(obj: Any, *path: str | int, default: Any = None) -> Any:
    """``get(props, "spec", "template", 0)``: ``UNKNOWN`` if any step is unknown, ``default`` if absent."""
    cur = obj
    for step in path:
        if cur is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(cur, list) or not -len(cur) <= step < len(cur):
                return default
            cur = cur[step]
        else:
            if not isinstance(cur, dict) or step not in cur:
                return default
            cur = cur[step]
        if cur is None:
            return default
    return cur


def known(*values: Any) -> bool:
    return all(v is not UNKNOWN for v in values)


def as_int(value: Any) -> int | None:
    """Ints, integral floats and numeric strings ("2") -> int; anything else (UNKNOWN, "50%") -> None."""
    if isinstance(value, bool) or value is UNKNOWN or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\d+", value.strip()):
        return int(value.strip())
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is UNKNOWN or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def fmt(number: float) -> str:
    """Stable number formatting for messages: 181.0 -> '181', 0.45 -> '0.45'."""
    return f"{number:g}"


# ---- resources ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Res:
    """A resource as the policies see it: plain properties, its Pulumi options that matter here."""

    type: str
    name: str
    urn: str
    props: dict[str, Any]
    protect: bool = False
    #: The name of the resource's provider ("" for a default provider): in a fleet it says which cluster a
    #: Kubernetes object is deployed to (:func:`fleet_region`).
    provider: str = ""

    @property
    def k8s_name(self) -> str:
        name = get(self.props, "metadata", "name")
        return name if isinstance(name, str) else self.name

    @property
    def namespace(self) -> Any:
        return get(self.props, "metadata", "namespace")

    @property
    def label(self) -> str:
        return f"{self.type.rsplit(':', 1)[-1]} {self.k8s_name}"


def resource_of(args: ResourceValidationArgs) -> Res:
    return Res(
        args.resource_type,
        args.name,
        args.urn,
        plain(args.props),
        bool(args.opts.protect),
        args.provider.name if args.provider is not None else "",
    )


def stack_resources(args: StackValidationArgs, types: tuple[str, ...] = ()) -> list[Res]:
    """The stack's resources (only ``types`` when given: copying every resource's properties for every stack
    policy would dominate the pack's run time), sorted by URN."""
    out = [
        Res(
            r.resource_type,
            r.name,
            r.urn,
            plain(r.props),
            bool(r.opts.protect),
            r.provider.name if r.provider is not None else "",
        )
        for r in args.resources
        if not types or r.resource_type in types
    ]
    return sorted(out, key=lambda r: r.urn)


def of_type(resources: Iterable[Res], *types: str) -> list[Res]:
    return [r for r in resources if r.type in types]


def config(args: ResourceValidationArgs | StackValidationArgs) -> dict[str, Any]:
    cfg: dict[str, Any] = plain(args.get_config() or {})
    return cfg


# ---- Kubernetes workloads -------------------------------------------------------------------------------


def pod_labels(workload: Res) -> Any:
    labels = get(workload.props, "spec", "template", "metadata", "labels", default={})
    return labels


def pod_spec(workload: Res) -> Any:
    return get(workload.props, "spec", "template", "spec", default={})


def containers(workload: Res, include_init: bool = True) -> list[Any]:
    spec = pod_spec(workload)
    found: list[Any] = []
    for key in ("containers", "initContainers") if include_init else ("containers",):
        items = get(spec, key, default=[])
        if isinstance(items, list):
            found.extend(c for c in items if isinstance(c, dict))
    return found


def annotation(res: Res, key: str) -> Any:
    """A workload annotation, falling back to the pod template's."""
    val = get(res.props, "metadata", "annotations", key)
    if val is None:
        val = get(res.props, "spec", "template", "metadata", "annotations", key)
    return val


def is_serving_deployment(res: Res) -> bool:
    """A vLLM model-server Deployment: pod label ``app.kubernetes.io/component: model-server``."""
    if res.type != DEPLOYMENT:
        return False
    labels = pod_labels(res)
    return isinstance(labels, dict) and labels.get(COMPONENT_LABEL) == MODEL_SERVER


def serving_container(dep: Res) -> dict[str, Any] | None:
    """The container running vLLM: the one with a GPU limit, else the first container."""
    cs = containers(dep, include_init=False)
    for c in cs:
        if get(c, "resources", "limits", GPU_RESOURCE) is not None:
            found: dict[str, Any] = c
            return found
    return cs[0] if cs else None


def argv(container: dict[str, Any] | None) -> list[Any] | Any:
    """command + args of a container; UNKNOWN if either list is unknown."""
    if container is None:
        return []
    parts: list[Any] = []
    for key in ("command", "args"):
        val = get(container, key, default=[])
        if val is UNKNOWN:
            return UNKNOWN
        if isinstance(val, list):
            parts.extend(val)
    # A shell wrapper (``sh -c "vllm serve ..."``) carries the flags in one string: split it.
    if (
        len(parts) >= 3
        and parts[0] in ("sh", "bash", "/bin/sh", "/bin/bash")
        and parts[1] == "-c"
        and isinstance(parts[2], str)
    ):
        try:
            return parts[:2] + shlex.split(parts[2]) + parts[3:]
        except ValueError:
            return parts
    return parts


_MISSING = object()


def flag_values(args: list[Any], flag: str) -> list[Any]:
    """Every value given to ``--flag`` (``--flag v`` or ``--flag=v``); ``True`` for a bare boolean flag."""
    out: list[Any] = []
    for i, a in enumerate(args):
        if not isinstance(a, str):
            continue
        if a == flag:
            nxt = args[i + 1] if i + 1 < len(args) else _MISSING
            if nxt is _MISSING or (isinstance(nxt, str) and nxt.startswith("--")):
                out.append(True)
            else:
                out.append(nxt)
        elif a.startswith(flag + "="):
            out.append(a.split("=", 1)[1])
    return out


#: vLLM 0.32 flags that write request prompts / generated outputs to the server log. Both are boolean flags with a
#: ``--no-`` form; argparse keeps the last of the two.
PROMPT_LOGGING_FLAGS = ("--enable-log-requests", "--enable-log-outputs")
#: Environment switches that log request or response bodies.
PROMPT_LOGGING_ENV = ("VLLM_DEBUG_LOG_API_SERVER_RESPONSE",)
_FALSE_VALUES = ("false", "False", False)


def prompt_logging_flags(args: list[Any]) -> list[str]:
    """The ``PROMPT_LOGGING_FLAGS`` an argument list leaves on: the last of ``--flag`` / ``--flag=v`` /
    ``--no-flag`` wins, and an explicit ``false`` value counts as off."""
    on: list[str] = []
    for flag in PROMPT_LOGGING_FLAGS:
        negation, state = "--no-" + flag[2:], False
        for i, a in enumerate(args):
            if a == negation:
                state = False
            elif a == flag or (isinstance(a, str) and a.startswith(flag + "=")):
                state = flag_values(args[i : i + 2], flag)[0] not in _FALSE_VALUES
        if state:
            on.append(flag)
    return on


def prompt_logging_env(lookup: Callable[[str], Any]) -> list[tuple[str, str]]:
    """``(name, value)`` of each ``PROMPT_LOGGING_ENV`` variable that ``lookup`` finds switched on."""
    return [
        (name, val)
        for name in PROMPT_LOGGING_ENV
        if isinstance(val := lookup(name), str) and val.lower() in ("1", "true", "yes")
    ]


def flag_value(args: list[Any], flag: str) -> Any:
    """The last value of ``--flag`` (vLLM's argparse keeps the last), or None."""
    vals = flag_values(args, flag)
    return vals[-1] if vals else None


# ---- co-host servers (components/cohost/server.py) ----------------------------------------------------------------
#: The co-host server's configuration flag and the document's format marker (the server owns the format).
COHOST_CONFIG_FLAG = "--config-json"
COHOST_CONFIG_FORMAT = "llm-serving.io/cohost-config"


def entry_list(d: dict[str, Any], key: str) -> list[Any]:
    """``d[key]`` when it is a list, else empty."""
    v = d.get(key)
    return v if isinstance(v, list) else []


def entry_dict(d: dict[str, Any], key: str) -> dict[str, Any]:
    """``d[key]`` when it is an object, else empty."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def cohost_instances(dep: Res) -> list[dict[str, Any]] | Any:
    """The instances of a co-host server's configuration when the Deployment's serving container runs one (its
    arguments carry ``--config-json`` with a co-host document); None for a plain vLLM container; UNKNOWN at preview.
    Each instance is the document's entry: ``name``, ``release``, ``model_names``, ``gpus``, ``partition``, ``args``
    (what follows the engine command), ``env`` and ``verify`` (the release check run before it starts)."""
    return cohost_document_instances(argv(serving_container(dep)))


def cohost_document_instances(args: Any) -> list[dict[str, Any]] | Any:
    """The instances of the co-host document a command line passes with ``--config-json`` (any target's container:
    a Deployment's, a Vertex AI model's); None when it passes none; UNKNOWN when the command line is unknown."""
    if args is UNKNOWN:
        return UNKNOWN
    raw = flag_value(args, COHOST_CONFIG_FLAG)
    if raw is UNKNOWN:
        return UNKNOWN
    if not isinstance(raw, str):
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("format") != COHOST_CONFIG_FORMAT:
        return None
    found = doc.get("instances")
    return [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []


def instance_gpu_shares(
    instances: list[dict[str, Any]], default_utilization: float
) -> dict[int, list[tuple[float, str]]]:
    """Per GPU of a co-host server's machine, ``(--gpu-memory-utilization, instance name)`` of every instance its
    configuration places on it (each instance's ``gpus``); an instance whose utilisation is unreadable is left out."""
    on: dict[int, list[tuple[float, str]]] = {}
    for inst in instances:
        raw = flag_value(entry_list(inst, "args"), "--gpu-memory-utilization")
        u = default_utilization if raw is None else as_float(raw)
        if u is None:
            continue
        for g in entry_list(inst, "gpus"):
            if isinstance(g, int):
                on.setdefault(g, []).append((u, str(inst.get("name"))))
    return dict(sorted(on.items()))


def vllm_command_lines(dep: Res) -> list[tuple[str, Any]]:
    """Every vLLM command line a model-server Deployment runs, as ``(who, argv)``: its serving container's, or, for
    a co-host server, each instance's (``who`` names the instance); argv UNKNOWN at preview."""
    instances = cohost_instances(dep)
    c = serving_container(dep)
    name = f"container {c.get('name')!r}" if c is not None else "the serving container"
    if instances is UNKNOWN:
        return [("", UNKNOWN)]
    if instances is None:
        return [("", argv(c))]
    return [(f"{name} instance {i.get('name')!r}: ", entry_list(i, "args")) for i in instances]


def env_value(container: dict[str, Any] | None, name: str) -> Any:
    """An env var: its literal value, ``{"valueFrom": ...}`` for a reference, None if absent."""
    for e in get(container or {}, "env", default=[]) or []:
        if isinstance(e, dict) and e.get("name") == name:
            if "valueFrom" in e:
                return {"valueFrom": e["valueFrom"]}
            return e.get("value")
    return None


def probe_window(probe: Any) -> int | None:
    """Seconds a probe tolerates before the kubelet gives up: initialDelay + period x failureThreshold
    (Kubernetes defaults: period 10, failureThreshold 3)."""
    if not isinstance(probe, dict):
        return None
    delay = as_int(probe.get("initialDelaySeconds", 0))
    period = as_int(probe.get("periodSeconds", 10))
    failures = as_int(probe.get("failureThreshold", 3))
    if delay is None or period is None or failures is None:
        return None
    return delay + period * failures


def prestop_sleep_seconds(container: dict[str, Any] | None) -> int | None:
    """Seconds the preStop hook sleeps (``sleep: {seconds}`` action or ``exec: [sleep, N]``); 0 if none."""
    pre = get(container or {}, "lifecycle", "preStop")
    if pre is None:
        return 0
    if pre is UNKNOWN:
        return None
    secs = get(pre, "sleep", "seconds")
    if secs is not None:
        return as_int(secs)
    cmd = get(pre, "exec", "command", default=[])
    if isinstance(cmd, list) and cmd:
        words = [w for w in cmd if isinstance(w, str)]
        text = " ".join(words[2:]) if words[:2] in (["sh", "-c"], ["/bin/sh", "-c"]) else " ".join(words)
        m = re.search(r"(?:^|\s|;|&&)sleep\s+(\d+)", text)
        if m:
            return int(m.group(1))
    return 0


# ---- label selectors ----------------------------------------------------------------------------------


def selector_matches(selector: Any, labels: Any) -> bool | None:
    """Kubernetes LabelSelector semantics; None when the selector or labels are unknown.

    An empty selector ``{}`` selects everything (as in NetworkPolicy ``podSelector: {}``)."""
    if selector is UNKNOWN or labels is UNKNOWN:
        return None
    if not isinstance(labels, dict):
        labels = {}
    if selector is None:
        selector = {}
    if not isinstance(selector, dict):
        return None
    match = selector.get("matchLabels")
    if match is UNKNOWN:  # checked before defaulting: UNKNOWN is falsy, and {} would select every pod
        return None
    match = match or {}
    if not isinstance(match, dict):
        return None
    for k, v in match.items():
        if v is UNKNOWN or labels.get(k) is UNKNOWN:
            return None
        if labels.get(k) != v:
            return False
    exprs = selector.get("matchExpressions")
    if exprs is UNKNOWN:
        return None
    for expr in exprs or []:
        if not isinstance(expr, dict) or not known(*expr.values()):
            return None
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        has = key in labels
        if op == "In" and not (has and labels[key] in values):
            return False
        if op == "NotIn" and has and labels[key] in values:
            return False
        if op == "Exists" and not has:
            return False
        if op == "DoesNotExist" and has:
            return False
    return True


# ---- GKE node pools and reservations ----------------------------------------------------------------------


def node_pool_accelerators(pool: Res) -> list[Any]:
    accs = get(pool.props, "nodeConfig", "guestAccelerators", default=[])
    return accs if isinstance(accs, list) else []


def is_gpu_node_pool(pool: Res) -> bool:
    return pool.type == NODE_POOL and bool(node_pool_accelerators(pool))


def node_pool_label(pool: Res, key: str) -> Any:
    return get(pool.props, "nodeConfig", "labels", key)


def gpus_per_node(pool: Res) -> int | None:
    total = 0
    for acc in node_pool_accelerators(pool):
        n = as_int(get(acc, "count"))
        if n is None:
            return None
        total += n
    return total or None


def reservation_name(pool: Res) -> Any:
    """The reservation a node pool targets by name (SPECIFIC_RESERVATION), else None."""
    aff = get(pool.props, "nodeConfig", "reservationAffinity")
    if aff is UNKNOWN:
        return UNKNOWN
    if not isinstance(aff, dict) or aff.get("consumeReservationType") != "SPECIFIC_RESERVATION":
        return None
    values = aff.get("values")
    if values is UNKNOWN:
        return UNKNOWN
    if isinstance(values, list) and len(values) == 1:
        name = values[0]
        # A reservation shared from another project is targeted as projects/<p>/reservations/<name>.
        return name.rsplit("/", 1)[-1] if isinstance(name, str) else name
    return None


def fleet_region(res: Res) -> str | None:
    """The fleet region whose member cluster deploys this Kubernetes object (its provider is
    ``fleet-<region>-k8s``), or None: the stack's own cluster."""
    return naming.member_provider_region(res.provider)


def fleet_regions(resources: Iterable[Res]) -> frozenset[str]:
    """Every fleet member region some of ``resources`` is deployed to (empty in a single-region stack)."""
    return frozenset(r for r in (fleet_region(x) for x in resources) if r is not None)


def location_region(location: Any) -> str | None:
    """``us-central1`` of a region or of a zone (``us-central1-a``); None when unknown."""
    if not isinstance(location, str) or not location:
        return None
    head, _, tail = location.rpartition("-")
    return head if head and len(tail) == 1 and tail.isalpha() else location


def pool_for_deployment(dep: Res, pools: list[Res], member_regions: frozenset[str] = frozenset()) -> Res | None:
    """The GPU node pool a serving Deployment lands on, by its ``llm-serving.io/accelerator`` node selector, among
    the pools of its own cluster: in a fleet (``member_regions``, :func:`fleet_regions`) every cluster has pools of
    the same accelerator, so a member's Deployment matches the pools located in its region and the stack's own
    cluster's the pools in no member region."""
    key = get(pod_spec(dep), "nodeSelector", ACCELERATOR_LABEL)
    if not isinstance(key, str):
        return None
    region = fleet_region(dep)
    for p in pools:
        if node_pool_label(p, ACCELERATOR_LABEL) != key:
            continue
        pool_region = location_region(p.props.get("location"))
        if region is not None and pool_region != region:
            continue
        if region is None and pool_region in member_regions:
            continue
        return p
    return None


def gpus_per_replica(dep: Res) -> int | None:
    total = 0
    for c in containers(dep, include_init=False):
        n = get(c, "resources", "limits", GPU_RESOURCE)
        if n is None:
            continue
        v = as_int(n)
        if v is None:
            return None
        total += v
    return total or None


def deployment_max_replicas(dep: Res, hpas: list[Res]) -> int | None:
    """An HPA's maxReplicas when one scales this Deployment, else ``spec.replicas`` (default 1)."""
    for h in hpas:
        ref = get(h.props, "spec", "scaleTargetRef", default={})
        if (
            isinstance(ref, dict)
            and ref.get("kind") == "Deployment"
            and ref.get("name") == dep.k8s_name
            and same_namespace(h, dep)
        ):
            return as_int(get(h.props, "spec", "maxReplicas"))
    return as_int(get(dep.props, "spec", "replicas", default=1))


def same_namespace(a: Res, b: Res) -> bool:
    return (a.namespace or "default") == (b.namespace or "default")


def rolling_surge(dep: Res, replicas: int) -> int | None:
    """Extra pods a rolling update may add: ``maxSurge`` (int or percent, rounded up), default 25 %."""
    strategy = get(dep.props, "spec", "strategy", default={})
    if strategy is UNKNOWN:
        return None
    if isinstance(strategy, dict) and strategy.get("type") == "Recreate":
        return 0
    surge = get(strategy, "rollingUpdate", "maxSurge", default="25%")
    if surge is UNKNOWN:
        return None
    n = as_int(surge)
    if n is not None:
        return n
    if isinstance(surge, str) and surge.endswith("%"):
        pct = as_float(surge[:-1])
        if pct is not None:
            return -(-int(replicas * pct) // 100)
    return None


# ---- validation plumbing ----------------------------------------------------------------------------------

ResourceCheck = Callable[[Res, dict[str, Any]], Iterable[str]]
StackCheck = Callable[[list[Res], dict[str, Any]], Iterable[tuple[str, str]]]


def resource_validator(
    types: tuple[str, ...], check: ResourceCheck
) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    """Adapt ``check(res, config) -> messages`` to pulumi_policy's validate callback."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if types and args.resource_type not in types:
            return
        for message in check(resource_of(args), config(args)):
            report_violation(message, None)

    return validate


def stack_validator(
    check: StackCheck, types: tuple[str, ...]
) -> Callable[[StackValidationArgs, ReportViolation], None]:
    """Adapt ``check(resources of these types, config) -> (urn, message)`` pairs to a stack validate callback."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for urn, message in check(stack_resources(args, types), config(args)):
            report_violation(message, urn or None)

    return validate


# ---- Cloud Run services ------------------------------------------------------------------------------------------

#: The program's Cloud Run resources (components/cloud_run/provider.py, dynamic providers over run.v2): the service
#: (service-level fields under ``service``), one revision per pool (its run.v2 ``RevisionTemplate`` under
#: ``template``, run.v2 spellings: ``command``, ``env``, ``volumeMounts``) and the traffic split (``traffic``).
CLOUD_RUN_SERVICE = "pulumi-python:dynamic/cloudrun:Service"
CLOUD_RUN_REVISION = "pulumi-python:dynamic/cloudrun:Revision"
CLOUD_RUN_TRAFFIC = "pulumi-python:dynamic/cloudrun:Traffic"
CLOUD_RUN_IAM = (
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
    "gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding",
    "gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy",
)
#: run.v2 Probe defaults (discovery document): periodSeconds 10, failureThreshold 3, initialDelaySeconds 0.
CLOUD_RUN_PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}


def cloud_run_containers(revision: Res) -> list[dict[str, Any]]:
    """The template's containers of a Cloud Run revision resource."""
    items = get(revision.props, "template", "containers", default=[])
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def cloud_run_serving_container(revision: Res) -> dict[str, Any] | None:
    """The container the GPU is attached to (the vLLM server), else None."""
    for c in cloud_run_containers(revision):
        if get(c, "resources", "limits", GPU_RESOURCE) is not None:
            return c
    return None


def cloud_run_argv(container: dict[str, Any] | None) -> list[Any] | Any:
    """``command`` + ``args`` of a Cloud Run container; UNKNOWN if either is unknown."""
    if container is None:
        return []
    parts: list[Any] = []
    for key in ("command", "args"):
        val = get(container, key, default=[])
        if val is UNKNOWN:
            return UNKNOWN
        if isinstance(val, list):
            parts.extend(val)
    return parts


def vllm_serve_args(argv: list[Any]) -> list[Any] | None:
    """What follows ``vllm serve`` in a command line (also behind a wrapper such as the release verifier's
    ``--exec --``), or None when the command never runs ``vllm serve``."""
    for i in range(len(argv) - 1):
        if argv[i] == "vllm" and argv[i + 1] == "serve":
            return argv[i + 2 :]
    return None


def cloud_run_env(container: dict[str, Any] | None, name: str) -> Any:
    """An env var of a Cloud Run container: its literal value, ``{"valueSource": ...}``, None if absent, UNKNOWN if the
    list is unknown (a preview must not report a variable it cannot see)."""
    envs = get(container or {}, "env", default=[])
    if envs is UNKNOWN:
        return UNKNOWN
    for e in envs or []:
        if isinstance(e, dict) and e.get("name") == name:
            if e.get("valueSource") is not None:
                return {"valueSource": e["valueSource"]}
            return e.get("value")
    return None


# ---- IAM grants ----------------------------------------------------------------------------------------------

#: The public principals: a grant to either makes a resource reachable without (or with any) Google identity.
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")


def iam_grants(res: Res) -> list[tuple[Any, Any]]:
    """(role, member) of an IAM member, binding or policy resource (``member`` / ``members`` / ``policyData``);
    nothing when the policy document is unknown at preview or not JSON."""
    p = res.props
    if "policyData" in p:
        data = p.get("policyData")
        if not isinstance(data, str) or data is UNKNOWN:
            return []
        try:
            bindings = json.loads(data).get("bindings") or []
        except (ValueError, AttributeError):
            return []
        return [(b.get("role"), m) for b in bindings if isinstance(b, dict) for m in b.get("members") or []]
    members = p.get("members") if "members" in p else [p.get("member")]
    return [(p.get("role"), m) for m in members] if isinstance(members, list) else []
