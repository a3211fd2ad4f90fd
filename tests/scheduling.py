"""Scheduling fit of a plan: every pod the plan renders, or the endpoint-picker chart will render, must fit the
allocatable CPU / memory (and GPUs) of at least one node pool that admits it.

Pure helpers (no Pulumi, no cluster): they read the offline inventory (``tests/conftest.py::planned``) and the
upstream chart sources in ``../shared/reference/charts/llm-d-router``.

What is modelled, and from which source:

* **Node allocatable** per machine type: GKE's reservation formula (GKE docs, "Standard cluster architecture" ->
  "Node allocatable resources", now on "Plan GKE Standard node sizes" -> "Memory and CPU reservations") applied to
  the machine's shape (Compute Engine docs, machine-family pages, see :data:`MACHINE_SHAPES`), minus the kubelet's
  100 MiB hard-eviction threshold.
* **Not subtracted**: what GKE's own system pods (DaemonSets such as logging, metrics, CSI and Dataplane V2 agents,
  and the kube-system Deployments that land on untainted nodes) request on each node. GKE documents no per-node
  number for them (it varies with GKE version and enabled add-ons), so none is built in; :func:`fits` takes an
  explicit ``per_node_overhead`` for a measured value (``kubectl describe node`` -> "Allocated resources").
  Also not modelled: GKE's extra memory reservation on nodes with image streaming (GKE docs "Use Image streaming",
  not verified here), ephemeral storage, the 110-pods-per-node limit, how many replicas share one node, pod
  (anti-)affinity between pods, topology spread and PersistentVolume node affinity.
* **Pods**: every pod-template object the program registers (its manifest is the resource's ``inputs``), plus the
  picker pods the ``llm-d-router-gateway`` chart renders from its ``values.yaml`` defaults coalesced with the stack's
  values the way Helm does (:func:`coalesce_values`); the value keys are those the chart's Deployment template
  reads (:data:`PICKER_CHARTS`; ``tests/test_scheduling_fit.py`` checks each key against the template text).
* **Admission**: a pool admits a pod when the pod tolerates every NoSchedule / NoExecute taint of the pool and its
  nodeSelector and required node affinity match the labels GKE puts on the pool's nodes (:func:`pool_labels`).
  Tolerations are taken as written: GKE's ExtendedResourceToleration admission (which adds a GPU toleration to
  pods that request ``nvidia.com/gpu``) is deliberately not assumed, so a manifest must state its own toleration.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from components.gateway.charts import ROUTER_CHART

MIB = 2**20
GIB = 2**30

CPU = "cpu"
MEMORY = "memory"
#: The device-plugin resource GKE's NVIDIA device plugin advertises on GPU nodes.
GPU = "nvidia.com/gpu"
#: Requested resources this check does not compare (see the module docstring): the boot-disk-backed ephemeral
#: storage allocatable depends on the node image's own partitions, which no documented formula here covers.
UNCHECKED_RESOURCES = frozenset({"ephemeral-storage"})


# ---- Kubernetes quantities -----------------------------------------------------------------------------------

#: Suffixes of the Kubernetes quantity grammar (apimachinery ``resource.Quantity``): binary SI, decimal SI
#: (``n``/``u``/``m`` included, which the parser accepts) and a decimal exponent (``1e3``).
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$"
)


def parse_quantity(value: str | int | float) -> Fraction:
    """Exact value of a Kubernetes quantity (``"250m"`` -> 1/4, ``"400Mi"`` -> 419430400, ``"8G"`` -> 8e9).

    Raises ``ValueError`` for anything outside the grammar, and for negative amounts (never valid as requests)."""
    if isinstance(value, bool):
        raise ValueError(f"quantity {value!r}: a boolean is not a quantity")
    if isinstance(value, int):
        number, scale = Fraction(value), Fraction(1)
    elif isinstance(value, float):
        number, scale = Fraction(str(value)), Fraction(1)
    else:
        m = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
        if m is None:
            raise ValueError(f"quantity {value!r}: not a Kubernetes quantity (e.g. 250m, 4, 400Mi, 32Gi, 8G, 1e3)")
        number, suffix = Fraction(m["num"]), m["suffix"]
        if suffix in _BINARY:
            scale = Fraction(_BINARY[suffix])
        elif suffix[:1] in ("e", "E") and len(suffix) > 1:
            scale = Fraction(10) ** int(suffix[1:])
        else:
            scale = _DECIMAL[suffix]
    amount = number * scale
    if amount < 0:
        raise ValueError(f"quantity {value!r}: negative amounts cannot be requested")
    return amount


def parse_cpu_millis(value: str | int | float) -> int:
    """CPU quantity in millicores, rounded up like the scheduler's ``MilliValue`` (``"4"`` -> 4000)."""
    return math.ceil(parse_quantity(value) * 1000)


def parse_memory_bytes(value: str | int | float) -> int:
    """Memory quantity in bytes, rounded up like ``Quantity.Value`` (``"400Mi"`` -> 419430400)."""
    return math.ceil(parse_quantity(value))


def amount_of(resource: str, value: str | int | float) -> int:
    """Integer scheduling amount: millicores for cpu, the base unit (bytes, devices) for everything else."""
    return parse_cpu_millis(value) if resource == CPU else math.ceil(parse_quantity(value))


def format_amount(resource: str, amount: int | Fraction) -> str:
    if resource == MEMORY:
        return f"{float(Fraction(amount) / MIB):.1f} MiB"
    return f"{math.ceil(amount)}m" if resource == CPU else str(math.ceil(amount))


# ---- resource amounts -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resources:
    """Scheduling amounts by resource name: ``cpu`` in millicores, ``memory`` in bytes, devices as counts.
    Kept as sorted pairs so the value is immutable; absent resources are 0."""

    amounts: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def of(mapping: Mapping[str, int]) -> Resources:
        return Resources(tuple(sorted((k, v) for k, v in mapping.items() if v)))

    def get(self, resource: str) -> int:
        return dict(self.amounts).get(resource, 0)

    def names(self) -> list[str]:
        return [k for k, _ in self.amounts]

    def plus(self, other: Resources) -> Resources:
        out = dict(self.amounts)
        for k, v in other.amounts:
            out[k] = out.get(k, 0) + v
        return Resources.of(out)

    def maximum(self, other: Resources) -> Resources:
        out = dict(self.amounts)
        for k, v in other.amounts:
            out[k] = max(out.get(k, 0), v)
        return Resources.of(out)

    def describe(self) -> str:
        shown = [CPU, MEMORY] + [k for k in self.names() if k not in (CPU, MEMORY)]
        return ", ".join(f"{k} {format_amount(k, self.get(k))}" for k in shown)


def container_requests(container: Mapping[str, Any]) -> Resources:
    """What one container requests for scheduling. A resource with a limit and no request requests its limit
    (Kubernetes docs, "Resource Management for Pods and Containers": the limit is copied as the request)."""
    res = container.get("resources") or {}
    wanted: dict[str, Any] = dict(res.get("limits") or {})
    wanted.update(res.get("requests") or {})
    return Resources.of({k: amount_of(k, v) for k, v in wanted.items() if k not in UNCHECKED_RESOURCES})


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """A pod's effective request (Kubernetes docs, "Init Containers" and "Sidecar Containers" -> resource sharing):
    per resource, the larger of the app containers' sum plus the restartable (sidecar, ``restartPolicy: Always``)
    init containers, and each ordinary init container's own request plus the sidecars started before it; then
    the pod overhead (``spec.overhead``, set from a RuntimeClass) is added."""
    sidecars = Resources()
    peak = Resources()
    for init in spec.get("initContainers") or []:
        req = container_requests(init)
        if init.get("restartPolicy") == "Always":
            sidecars = sidecars.plus(req)
            peak = peak.maximum(sidecars)
        else:
            peak = peak.maximum(req.plus(sidecars))
    running = sidecars
    for c in spec.get("containers") or []:
        running = running.plus(container_requests(c))
    total = peak.maximum(running)
    overhead = spec.get("overhead") or {}
    return total.plus(Resources.of({k: amount_of(k, v) for k, v in overhead.items() if k not in UNCHECKED_RESOURCES}))


# ---- machine shapes and GKE allocatable ------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineShape:
    vcpus: int
    #: Memory in GiB: Compute Engine's machine tables say "GB" but mean 2^30 bytes (the API's ``memoryMb`` of
    #: e2-standard-4 is 16384).
    memory_gib: Fraction
    #: ``kubernetes.io/arch`` of the nodes: every family below is x86-64.
    arch: str = "amd64"


#: Compute Engine machine shapes (vCPUs, memory) of the machine types the stacks and tests use. Sources, by page:
#: "General-purpose machine family for Compute Engine" (E2 standard table) and "Accelerator-optimized machine
#: family for Compute Engine" (G2 and A3 tables). A machine type outside this table fails :func:`machine_shape`.
MACHINE_SHAPES: dict[str, MachineShape] = {
    # E2 standard: 4 GB per vCPU.
    "e2-standard-2": MachineShape(2, Fraction(8)),
    "e2-standard-4": MachineShape(4, Fraction(16)),
    "e2-standard-8": MachineShape(8, Fraction(32)),
    "e2-standard-16": MachineShape(16, Fraction(64)),
    "e2-standard-32": MachineShape(32, Fraction(128)),
    # G2 (NVIDIA L4): 4 GB per vCPU.
    "g2-standard-4": MachineShape(4, Fraction(16)),
    "g2-standard-8": MachineShape(8, Fraction(32)),
    "g2-standard-12": MachineShape(12, Fraction(48)),
    "g2-standard-16": MachineShape(16, Fraction(64)),
    "g2-standard-24": MachineShape(24, Fraction(96)),
    "g2-standard-32": MachineShape(32, Fraction(128)),
    "g2-standard-48": MachineShape(48, Fraction(192)),
    "g2-standard-96": MachineShape(96, Fraction(384)),
    # A3 High / Mega (NVIDIA H100 80GB): 26 vCPU and 234 GB per GPU.
    "a3-highgpu-1g": MachineShape(26, Fraction(234)),
    "a3-highgpu-2g": MachineShape(52, Fraction(468)),
    "a3-highgpu-4g": MachineShape(104, Fraction(936)),
    "a3-highgpu-8g": MachineShape(208, Fraction(1872)),
    "a3-megagpu-8g": MachineShape(208, Fraction(1872)),
}


class UnknownMachineType(ValueError):
    """A node pool uses a machine type whose shape this check does not know."""


def machine_shape(machine_type: str) -> MachineShape:
    try:
        return MACHINE_SHAPES[machine_type]
    except KeyError:
        raise UnknownMachineType(
            f"machine type {machine_type!r}: shape unknown to tests/scheduling.py MACHINE_SHAPES (known: "
            f"{', '.join(sorted(MACHINE_SHAPES))}); add its vCPUs and memory from the Compute Engine "
            f"machine-family page"
        ) from None


#: GKE CPU reservation tiers (GKE docs, "Node allocatable resources"): (cores in the tier, fraction reserved):
#: 6 % of the first core, 1 % of the next core, 0.5 % of the next 2 cores, 0.25 % of every core above 4.
CPU_RESERVATION_TIERS: tuple[tuple[Fraction | None, Fraction], ...] = (
    (Fraction(1), Fraction(6, 100)),
    (Fraction(1), Fraction(1, 100)),
    (Fraction(2), Fraction(5, 1000)),
    (None, Fraction(25, 10000)),
)
#: GKE memory reservation tiers (same page): (GiB in the tier, fraction reserved): 25 % of the first 4 GiB, 20 % of
#: the next 4 GiB, 10 % of the next 8 GiB, 6 % of the next 112 GiB, 2 % of everything above 128 GiB.
MEMORY_RESERVATION_TIERS: tuple[tuple[Fraction | None, Fraction], ...] = (
    (Fraction(4), Fraction(25, 100)),
    (Fraction(4), Fraction(20, 100)),
    (Fraction(8), Fraction(10, 100)),
    (Fraction(112), Fraction(6, 100)),
    (None, Fraction(2, 100)),
)
#: Flat memory reservation on machines with less than 1 GiB (same page).
SMALL_MACHINE_MEMORY_RESERVATION_MIB = 255
#: The kubelet's hard-eviction threshold GKE configures, subtracted from allocatable memory (same page).
EVICTION_THRESHOLD_MIB = 100


def _tiered(total: Fraction, tiers: Sequence[tuple[Fraction | None, Fraction]]) -> Fraction:
    reserved, left = Fraction(0), total
    for size, rate in tiers:
        part = left if size is None else min(left, size)
        reserved += part * rate
        left -= part
        if left <= 0:
            break
    return reserved


def reserved_cpu_millis(vcpus: int | Fraction) -> Fraction:
    """GKE's CPU reservation for a node with ``vcpus`` cores, in millicores (4 cores -> 80m)."""
    return _tiered(Fraction(vcpus), CPU_RESERVATION_TIERS) * 1000


def reserved_memory_mib(memory_gib: int | Fraction) -> Fraction:
    """GKE's memory reservation for kubelet and system (eviction threshold not included), in MiB
    (16 GiB -> 2662.4 MiB)."""
    gib = Fraction(memory_gib)
    if gib < 1:
        return Fraction(SMALL_MACHINE_MEMORY_RESERVATION_MIB)
    return _tiered(gib, MEMORY_RESERVATION_TIERS) * 1024


def allocatable(machine_type: str, gpus: int = 0) -> Resources:
    """Node allocatable of one node of ``machine_type``: capacity - GKE reservation (- the 100 MiB eviction
    threshold for memory), rounded down to whole millicores / bytes; ``gpus`` devices as advertised."""
    shape = machine_shape(machine_type)
    cpu = math.floor(shape.vcpus * 1000 - reserved_cpu_millis(shape.vcpus))
    memory = math.floor(
        (shape.memory_gib * 1024 - reserved_memory_mib(shape.memory_gib) - EVICTION_THRESHOLD_MIB) * MIB
    )
    return Resources.of({CPU: cpu, MEMORY: memory, GPU: gpus})


# ---- scheduling terms -----------------------------------------------------------------------------------------

#: GKE API taint effects (node pool ``nodeConfig.taints[].effect``) and their Kubernetes names.
_GKE_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}
#: Effects that keep a pod off a node it does not tolerate; PreferNoSchedule only lowers a node's score.
EXCLUDING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes toleration matching ("Taints and Tolerations"): an empty effect matches every effect, an
        empty key with ``Exists`` matches every taint, ``Exists`` ignores the value, ``Equal`` compares it."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "In":
            return present and value in self.values
        if self.operator == "NotIn":
            return not present or value not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            try:
                have, bound = int(str(value)), int(self.values[0])
            except ValueError:
                return False
            return have > bound if self.operator == "Gt" else have < bound
        raise ValueError(f"node selector operator {self.operator!r} is not a Kubernetes operator")

    def __str__(self) -> str:
        return f"{self.key} {self.operator} {list(self.values)}" if self.values else f"{self.key} {self.operator}"


#: One nodeSelectorTerm: its requirements (ANDed), and whether it uses ``matchFields`` (node names, unknown in a
#: plan, so such a term is treated as matching no pool).
@dataclass(frozen=True)
class SelectorTerm:
    requirements: tuple[Requirement, ...]
    uses_match_fields: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        # "A null or empty node selector term matches no objects" (core/v1 NodeSelectorTerm).
        if self.uses_match_fields or not self.requirements:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        text = " AND ".join(str(r) for r in self.requirements) or "(empty term)"
        return text + (" + matchFields (not evaluable in a plan)" if self.uses_match_fields else "")


# ---- pods ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pod:
    """One pod template as the scheduler sees it."""

    #: ``<namespace>/<name>`` of the owning object.
    name: str
    #: Where it comes from (``Deployment <pulumi name>`` or ``chart llm-d-router-gateway v0.10.0 release <name>``).
    source: str
    replicas: int
    requests: Resources
    node_selector: tuple[tuple[str, str], ...] = ()
    #: Required node affinity terms (ORed); ``None`` when the pod states none.
    required_terms: tuple[SelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()


def _term(raw: Mapping[str, Any]) -> SelectorTerm:
    reqs = tuple(
        Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ()))
        for e in raw.get("matchExpressions") or []
    )
    return SelectorTerm(reqs, uses_match_fields=bool(raw.get("matchFields")))


def pod_from_spec(name: str, source: str, spec: Mapping[str, Any], replicas: int = 1) -> Pod:
    """The scheduling view of a pod spec (``spec.template.spec`` of a Deployment)."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = None if required is None else tuple(_term(t) for t in required.get("nodeSelectorTerms") or [])
    tolerations = tuple(
        Toleration(
            key=t.get("key") or "",
            operator=t.get("operator") or "Equal",
            value=str(t.get("value") or ""),
            effect=t.get("effect") or "",
        )
        for t in spec.get("tolerations") or []
    )
    selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
    return Pod(
        name=name,
        source=source,
        replicas=replicas,
        requests=pod_requests(spec),
        node_selector=selector,
        required_terms=terms,
        tolerations=tolerations,
    )


def _kind(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[-1]


def _pod_spec_of(kind: str, manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec inside an object of a pod-template kind (apps/v1, batch/v1, core/v1)."""
    spec = manifest.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"):
        return (spec.get("template") or {}).get("spec")
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    if kind == "Pod":
        return spec
    return None


def plan_pods(inventory: Mapping[str, Any]) -> list[Pod]:
    """Every pod template among the Kubernetes objects the program registers (charts excluded: see
    :func:`picker_pods`)."""
    pods: list[Pod] = []
    for r in inventory["resources"]:
        if not r["type"].startswith("kubernetes:"):
            continue
        kind = _kind(r["type"])
        manifest = r.get("inputs") or {}
        spec = _pod_spec_of(kind, manifest)
        if spec is None:
            continue
        meta = manifest.get("metadata") or {}
        name = f"{meta.get('namespace', 'default')}/{meta.get('name') or r['name']}"
        replicas = int((manifest.get("spec") or {}).get("replicas", 1)) if kind != "Pod" else 1
        pods.append(pod_from_spec(name, f"{kind} {r['name']}", spec, replicas))
    return pods


# ---- the endpoint-picker chart -----------------------------------------------------------------------------------


def coalesce_values(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's value coalescing: maps merge key by key, any other value (lists included) replaces the default,
    and ``null`` deletes the default key."""
    out: dict[str, Any] = copy.deepcopy(dict(defaults))
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = coalesce_values(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chart_default_values(chart_dir: Path) -> dict[str, Any]:
    """A chart's effective defaults: its ``values.yaml`` coalesced over the defaults of each local dependency
    (``repository: file://...``), placed under the dependency's alias (or name) as Helm does; the v0.10.0
    ``llm-d-router-gateway`` chart takes ``routerlib``'s values this way under ``router``."""
    values: dict[str, Any] = yaml.safe_load((chart_dir / "values.yaml").read_text(encoding="utf-8")) or {}
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text(encoding="utf-8")) or {}
    for dep in chart.get("dependencies") or []:
        repo = str(dep.get("repository", ""))
        if not repo.startswith("file://"):
            raise ValueError(f"{chart_dir}: dependency {dep.get('name')!r} from {repo!r} is not a local chart")
        dep_values = chart_default_values((chart_dir / repo[len("file://") :]).resolve())
        key = dep.get("alias") or dep["name"]
        values[key] = coalesce_values(dep_values, values.get(key) or {})
    return values


def value_at(values: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = values
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True)
class PickerChart:
    """Where one pinned ``llm-d-router-gateway`` release keeps its picker Deployment and which values it reads for
    the pod's scheduling (read from the chart sources; ``None`` = the template renders no such field)."""

    version: str
    #: Chart directory (the one with Chart.yaml the release installs), relative to ``charts/llm-d-router``.
    chart_dir: tuple[str, ...]
    #: The template that renders the picker Deployment, relative to ``charts/llm-d-router``.
    deployment_template: tuple[str, ...]
    replicas: tuple[str, ...]
    resources: tuple[str, ...] | None
    affinity: tuple[str, ...]
    tolerations: tuple[str, ...]
    #: Template snippets proving each modelled key is read (checked against the template text by the tests).
    evidence: tuple[str, ...] = field(default=())
    #: Scheduling-related values people set that this release's templates never read (a silent no-op).
    ignored_keys: tuple[tuple[str, ...], ...] = field(default=())


_R = "router"
PICKER_CHARTS: dict[str, PickerChart] = {
    # v0.10.0: the Deployment lives in the routerlib library chart (dependency aliased ``router``).
    # routerlib/templates/_deployment.yaml: proxy sidecar l.20/l.58, epp resources l.129, tokenizer l.209/l.244,
    # latency predictor containers l.255 (_latency-predictor.tpl), affinity l.286, tolerations l.290, replicas l.337.
    "v0.10.0": PickerChart(
        version="v0.10.0",
        chart_dir=("v0.10.0", "llm-d-router-gateway"),
        deployment_template=("v0.10.0", "routerlib", "templates", "_deployment.yaml"),
        replicas=(_R, "epp", "replicas"),
        resources=(_R, "epp", "resources"),
        affinity=(_R, "epp", "affinity"),
        tolerations=(_R, "epp", "tolerations"),
        evidence=(
            "replicas: {{ .Values.router.epp.replicas | default 1 }}",
            "{{- with .Values.router.epp.resources }}",
            "{{- with $proxy.resources }}",
            "{{- with $tokenizer.resources }}",
            '{{- include "llm-d-router.latencyPredictor.containers" . | nindent 8 }}',
            "{{- toYaml .Values.router.epp.affinity | nindent 8 }}",
            "{{- toYaml .Values.router.epp.tolerations | nindent 8 }}",
        ),
        ignored_keys=((_R, "epp", "nodeSelector"),),
    ),
}

_CHART_TYPES = ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v3:Release")


def picker_chart(version: str) -> PickerChart:
    try:
        return PICKER_CHARTS[version]
    except KeyError:
        raise ValueError(
            f"llm-d-router-gateway chart {version!r}: its picker pod is not modelled in tests/scheduling.py "
            f"PICKER_CHARTS (modelled: {', '.join(sorted(PICKER_CHARTS))})"
        ) from None


def picker_values(chart: PickerChart, charts_root: Path, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The values the chart renders with: its defaults coalesced with the release's values."""
    return coalesce_values(chart_default_values(charts_root.joinpath(*chart.chart_dir)), overrides)


def picker_pod_spec(chart: PickerChart, values: Mapping[str, Any]) -> dict[str, Any]:
    """The scheduling fields of the picker pod the chart's Deployment template renders from ``values``: the epp
    container, plus the proxy sidecar, the tokenizer and the latency predictor's servers when they are enabled."""
    containers: list[dict[str, Any]] = [
        {"name": "epp", "resources": (value_at(values, chart.resources) or {}) if chart.resources else {}}
    ]
    router = value_at(values, (_R,)) or {}
    proxy = value_at(router, ("proxy",)) or {}
    if proxy.get("enabled") and (proxy.get("mode") or "sidecar") == "sidecar":
        containers.append({"name": proxy.get("name") or "proxy", "resources": proxy.get("resources") or {}})
    if value_at(router, ("tokenizer", "enabled")):
        containers.append({"name": "vllm-render", "resources": value_at(router, ("tokenizer", "resources")) or {}})
    if value_at(router, ("latencyPredictor", "enabled")):
        lp = router["latencyPredictor"]
        containers.append({"name": "training-server", "resources": value_at(lp, ("trainingServer", "resources"))})
        for i in range(int(value_at(lp, ("predictionServers", "count")) or 0)):
            containers.append(
                {"name": f"prediction-server-{i + 1}", "resources": value_at(lp, ("predictionServers", "resources"))}
            )
    spec: dict[str, Any] = {"containers": containers}
    if value_at(values, chart.affinity):
        spec["affinity"] = value_at(values, chart.affinity)
    if value_at(values, chart.tolerations):
        spec["tolerations"] = value_at(values, chart.tolerations)
    return spec


def picker_pod(
    chart: PickerChart, charts_root: Path, release: str, namespace: str, overrides: Mapping[str, Any]
) -> Pod:
    """The picker pod one Helm release of the chart renders (Deployment ``<release>-epp``, routerlib _helpers.tpl)."""
    values = picker_values(chart, charts_root, overrides)
    replicas = int(value_at(values, chart.replicas) or 1)
    return pod_from_spec(
        f"{namespace}/{release}-epp",
        f"chart llm-d-router-gateway {chart.version} release {release}",
        picker_pod_spec(chart, values),
        replicas,
    )


def picker_pods(inventory: Mapping[str, Any], charts_root: Path) -> list[Pod]:
    """The picker pod of every endpoint-picker Helm release in the plan. Any other chart is refused: what it
    renders cannot be known offline."""
    pods: list[Pod] = []
    for r in inventory["resources"]:
        if r["type"] not in _CHART_TYPES:
            continue
        inputs = r["inputs"]
        if inputs.get("chart") != ROUTER_CHART:
            raise ValueError(
                f"Helm chart resource {r['name']}: chart {inputs.get('chart')!r} is not the "
                f"llm-d-router-gateway chart; its pods are not modelled"
            )
        pods.append(
            picker_pod(
                picker_chart(str(inputs["version"])),
                charts_root,
                str(inputs["name"]),
                str(inputs.get("namespace") or "default"),
                inputs.get("values") or {},
            )
        )
    return pods


def ignored_picker_values(inventory: Mapping[str, Any]) -> list[str]:
    """Scheduling values a stack sets that its pinned chart never renders (e.g. ``router.epp.nodeSelector`` in
    v0.10.0)."""
    found: list[str] = []
    for r in inventory["resources"]:
        if r["type"] in _CHART_TYPES and r["inputs"].get("chart") == ROUTER_CHART:
            chart = picker_chart(str(r["inputs"]["version"]))
            for path in chart.ignored_keys:
                if value_at(r["inputs"].get("values") or {}, path) is not None:
                    found.append(f"{r['name']}: {'.'.join(path)} is set but chart {chart.version} never reads it")
    return found


# ---- node pools ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodePool:
    name: str
    machine_type: str
    labels: tuple[tuple[str, str], ...]
    taints: tuple[Taint, ...]
    allocatable: Resources

    def describe(self) -> str:
        shape = machine_shape(self.machine_type)
        return f"pool {self.name} ({self.machine_type}, {shape.vcpus} vCPU / {float(shape.memory_gib):g} GiB)"


def _taint(raw: Mapping[str, Any]) -> Taint:
    effect = str(raw["effect"])
    effect = _GKE_EFFECTS.get(effect, effect)
    if effect not in _GKE_EFFECTS.values():
        raise ValueError(f"taint {raw}: effect {raw['effect']!r} is neither a GKE nor a Kubernetes taint effect")
    return Taint(str(raw["key"]), str(raw.get("value") or ""), effect)


def pool_labels(name: str, node_config: Mapping[str, Any]) -> dict[str, str]:
    """The labels the scheduler sees on a pool's nodes: the pool's own ``nodeConfig.labels`` plus what GKE and the
    kubelet add. Sources: GKE docs "About node pools" (``cloud.google.com/gke-nodepool``), "Run GPUs in GKE
    Standard node pools" (``cloud.google.com/gke-accelerator``), "Spot VMs" / "Preemptible VMs"
    (``cloud.google.com/gke-spot`` / ``gke-preemptible``); Kubernetes docs "Well-Known Labels, Annotations and
    Taints" (``kubernetes.io/os``, ``kubernetes.io/arch``, ``node.kubernetes.io/instance-type``). Zone labels differ
    per node and are not modelled."""
    machine_type = str(node_config["machineType"])
    image = str(node_config.get("imageType") or "COS_CONTAINERD")
    labels = {
        "cloud.google.com/gke-nodepool": name,
        "node.kubernetes.io/instance-type": machine_type,
        "kubernetes.io/os": "windows" if image.upper().startswith("WINDOWS") else "linux",
        "kubernetes.io/arch": machine_shape(machine_type).arch,
    }
    accelerators = node_config.get("guestAccelerators") or []
    if accelerators:
        labels["cloud.google.com/gke-accelerator"] = str(accelerators[0]["type"])
    if node_config.get("spot"):
        labels["cloud.google.com/gke-spot"] = "true"
    if node_config.get("preemptible"):
        labels["cloud.google.com/gke-preemptible"] = "true"
    labels.update({str(k): str(v) for k, v in (node_config.get("labels") or {}).items()})
    return labels


def pool_gpus(node_config: Mapping[str, Any]) -> int:
    """``nvidia.com/gpu`` each node advertises: GPUs per node, times ``maxSharedClientsPerGpu`` when GPU sharing
    (time-sharing or MPS) is configured (GKE docs "GPU time-sharing" / "NVIDIA MPS": each shared GPU is exposed as
    that many allocatable units)."""
    total = 0
    for acc in node_config.get("guestAccelerators") or []:
        sharing = acc.get("gpuSharingConfig") or {}
        total += int(acc["count"]) * int(sharing.get("maxSharedClientsPerGpu") or 1)
    return total


def node_pool(name: str, node_config: Mapping[str, Any]) -> NodePool:
    taints = tuple(_taint(t) for t in node_config.get("taints") or [])
    return NodePool(
        name=name,
        machine_type=str(node_config["machineType"]),
        labels=tuple(sorted(pool_labels(name, node_config).items())),
        taints=taints,
        allocatable=allocatable(str(node_config["machineType"]), pool_gpus(node_config)),
    )


def node_pools(inventory: Mapping[str, Any]) -> list[NodePool]:
    """Every node pool of the plan. A cluster that keeps its default pool or turns on node auto-provisioning would
    add pools the inventory does not list, so it is refused rather than checked against too few pools."""
    for r in inventory["resources"]:
        if r["type"] == "gcp:container/cluster:Cluster":
            inputs = r["inputs"]
            if not inputs.get("removeDefaultNodePool"):
                raise ValueError(f"cluster {r['name']}: keeps its default node pool, which is not modelled")
            if (inputs.get("clusterAutoscaling") or {}).get("enabled"):
                raise ValueError(f"cluster {r['name']}: node auto-provisioning creates pools not in the plan")
    return [
        node_pool(str(r["inputs"]["name"]), r["inputs"]["nodeConfig"])
        for r in inventory["resources"]
        if r["type"] == "gcp:container/nodePool:NodePool"
    ]


# ---- admission and fit --------------------------------------------------------------------------------------------


def admission(pod: Pod, pool: NodePool) -> str | None:
    """Why ``pool`` does not admit ``pod`` (``None`` when it does): an untolerated NoSchedule/NoExecute taint, a
    nodeSelector label the nodes lack, or required node affinity no term of which matches."""
    reasons: list[str] = []
    for taint in pool.taints:
        if taint.effect in EXCLUDING_EFFECTS and not any(t.tolerates(taint) for t in pod.tolerations):
            reasons.append(f"taint {taint} not tolerated")
    labels = dict(pool.labels)
    for key, want in pod.node_selector:
        if labels.get(key) != want:
            have = labels.get(key)
            reasons.append(
                f"nodeSelector {key}={want} but nodes have "
                + (f"{key}={have}" if have is not None else f"no label {key}")
            )
    if pod.required_terms is not None and not any(t.matches(labels) for t in pod.required_terms):
        shown = " OR ".join(f"({t})" for t in pod.required_terms) or "(no terms)"
        reasons.append(f"required node affinity {shown} matches no node label")
    return "; ".join(reasons) or None


def fits(pod: Pod, pools: Sequence[NodePool], per_node_overhead: Resources | None = None) -> tuple[bool, str]:
    """Whether one replica of ``pod`` fits an empty node of at least one pool that admits it, and why.

    ``per_node_overhead`` (default none) is subtracted from every pool's allocatable: a measured amount that GKE's
    own pods request on each node. The explanation names the pod, each pool considered and either what excluded it
    (taint, selector) or the numbers (requested vs allocatable)."""
    overhead = per_node_overhead or Resources()
    head = f"pod {pod.name} [{pod.source}, {pod.replicas} replica(s)] requests {pod.requests.describe()}" + (
        f"; per-node overhead {overhead.describe()}" if overhead.amounts else ""
    )
    lines = [head]
    fitting: list[str] = []
    for pool in pools:
        excluded = admission(pod, pool)
        if excluded is not None:
            lines.append(f"  {pool.describe()}: excluded: {excluded}")
            continue
        checks: list[str] = []
        ok = True
        for res in [CPU, MEMORY] + [r for r in pod.requests.names() if r not in (CPU, MEMORY)]:
            want, free = pod.requests.get(res), pool.allocatable.get(res) - overhead.get(res)
            room = format_amount(res, pool.allocatable.get(res))
            if overhead.get(res):
                room += f" - overhead {format_amount(res, overhead.get(res))} = {format_amount(res, free)}"
            if want <= free:
                checks.append(f"{res} {format_amount(res, want)} <= allocatable {room}")
            else:
                ok = False
                checks.append(f"{res} {format_amount(res, want)} > allocatable {room}")
        verdict = "admitted, fits" if ok else "admitted, DOES NOT FIT"
        lines.append(f"  {pool.describe()}: {verdict}: {'; '.join(checks)}")
        if ok:
            fitting.append(pool.name)
    if not pools:
        lines.append("  (no node pools in the plan)")
    lines.append(
        f"  => fits pool(s) {', '.join(fitting)}"
        if fitting
        else "  => no pool both admits and fits this pod: it would stay Pending"
    )
    return bool(fitting), "\n".join(lines)


def unfit(pods: Iterable[Pod], pools: Sequence[NodePool]) -> list[str]:
    """The explanation of every pod that fits no admitting pool."""
    return [why for ok, why in (fits(p, pools) for p in pods) if not ok]
