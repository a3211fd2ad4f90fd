"""Scheduling fit: every pod the plan renders, or the endpoint-picker chart will render (requests from the chart's
values), fits the allocatable CPU / memory of at least one node pool it tolerates and selects, using GKE's
documented allocatable formula (helpers and sources in tests/scheduling.py)."""

from __future__ import annotations

import copy
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from components.gateway.charts import ROUTER_CHART
from infra.targets.gke.planning import gke_part
from tests import scheduling as s
from tests.conftest import GKE_STACKS, STACKS, planned, reference, resources, serving_roles

MIB, GIB = s.MIB, s.GIB


@pytest.fixture(scope="module")
def charts_root() -> Path:
    return reference("charts", "llm-d-router")


def _cases() -> list[Any]:
    cases = []
    for stack in GKE_STACKS:
        for group in ("plan", "picker"):
            cases.append(pytest.param(stack, group, id=f"{stack}-{group}"))
    return cases


# ---- the check on the shipped stacks -----------------------------------------------------------------------------


@pytest.mark.parametrize(("stack", "group"), _cases())
def test_every_pod_fits_a_pool_that_admits_it(stack: str, group: str, charts_root: Path) -> None:
    """``plan``: every pod-template object the program registers; ``picker``: the pod each endpoint-picker Helm
    release renders from the chart defaults + the stack's values."""
    cfg, plan, inv = planned(stack)
    pools = s.node_pools(inv)
    roles = serving_roles(cfg, plan)
    if group == "plan":
        pods = s.plan_pods(inv)
        # the adapter, the body-based router when models are co-hosted, and one model-server Deployment per
        # serving pool or co-hosted model: an empty list would pass vacuously
        assert len(pods) == 1 + bool(gke_part(plan).cohosted()) + len(roles), [p.name for p in pods]
    else:
        pods = s.picker_pods(inv, charts_root)
        assert sorted(p.name for p in pods) == sorted(f"llm-serving-{role}/vllm-{role}-router-epp" for role in roles)
    failures = s.unfit(pods, pools)
    assert not failures, f"{stack}: pods that no node pool admits and fits:\n" + "\n".join(failures)


def test_stacks_set_no_picker_value_the_chart_ignores() -> None:
    """The chart templates read no ``nodeSelector`` (either release) and v1.1.0 reads no ``resources``: a stack
    setting one would believe it steers or sizes the picker while nothing changes."""
    for stack in STACKS:
        assert s.ignored_picker_values(planned(stack)[2]) == [], stack


# ---- allocatable, computed by hand ---------------------------------------------------------------------------------


def test_allocatable_e2_standard_4_by_hand() -> None:
    # 4 vCPU = 4000m; reserved 6 % of core 1 (60m) + 1 % of core 2 (10m) + 0.5 % of cores 3-4 (10m) = 80m.
    assert s.reserved_cpu_millis(4) == 80
    # 16 GiB = 16384 MiB; reserved 25 % of 4096 (1024) + 20 % of 4096 (819.2) + 10 % of 8192 (819.2) = 2662.4 MiB;
    # minus the 100 MiB eviction threshold: 16384 - 2662.4 - 100 = 13621.6 MiB.
    assert s.reserved_memory_mib(16) == Fraction("2662.4")
    a = s.allocatable("e2-standard-4")
    assert a.get(s.CPU) == 3920
    assert a.get(s.MEMORY) == math.floor(Fraction("13621.6") * MIB)
    assert a.get(s.GPU) == 0


def test_allocatable_a3_highgpu_2g_by_hand() -> None:
    # 52 vCPU = 52000m; reserved 60 + 10 + 10 + 0.25 % of the 48 cores above 4 (120m) = 200m.
    assert s.reserved_cpu_millis(52) == 200
    # 468 GiB = 479232 MiB; reserved 1024 + 819.2 + 819.2 + 6 % of 112 GiB (6881.28) + 2 % of the 340 GiB above
    # 128 GiB (6963.2) = 16506.88 MiB; 479232 - 16506.88 - 100 = 462625.12 MiB.
    assert s.reserved_memory_mib(468) == Fraction("16506.88")
    a = s.allocatable("a3-highgpu-2g", gpus=2)
    assert a.get(s.CPU) == 51800
    assert a.get(s.MEMORY) == math.floor(Fraction("462625.12") * MIB)
    assert a.get(s.GPU) == 2


@pytest.mark.parametrize(
    ("machine", "cpu_m", "memory_mib"),
    [
        # 8 vCPU: 80m + 0.25 % of 4 cores (10m) = 90m. 32 GiB: 2662.4 + 6 % of 16 GiB (983.04) = 3645.44; + 100.
        ("e2-standard-8", 8000 - 90, 32768 - Fraction("3645.44") - 100),
        # 12 vCPU: 80m + 0.25 % of 8 cores (20m) = 100m. 48 GiB: 2662.4 + 6 % of 32 GiB (1966.08) = 4628.48; + 100.
        ("g2-standard-12", 12000 - 100, 49152 - Fraction("4628.48") - 100),
    ],
)
def test_allocatable_of_the_other_shipped_machine_types(machine: str, cpu_m: int, memory_mib: Fraction) -> None:
    a = s.allocatable(machine)
    assert (a.get(s.CPU), a.get(s.MEMORY)) == (cpu_m, math.floor(memory_mib * MIB))


def test_machines_below_1_gib_reserve_255_mib() -> None:
    assert s.reserved_memory_mib(Fraction("0.6")) == 255
    assert s.reserved_memory_mib(1) == 256  # exactly 1 GiB is not "less than 1 GiB": 25 % of 1024 MiB


def test_unknown_machine_type_fails_clearly() -> None:
    with pytest.raises(s.UnknownMachineType, match=r"machine type 'n2-standard-4': shape unknown"):
        s.allocatable("n2-standard-4")
    with pytest.raises(s.UnknownMachineType, match="n2-standard-4"):
        s.node_pool("system", {"machineType": "n2-standard-4"})


# ---- quantities ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "millis"),
    [
        ("250m", 250),
        ("4", 4000),
        (4, 4000),
        ("0.5", 500),
        (0.25, 250),
        ("1.5m", 2),
        ("2000m", 2000),
        ("1e1", 10000),
    ],
)
def test_cpu_quantities(value: str | int | float, millis: int) -> None:
    assert s.parse_cpu_millis(value) == millis


@pytest.mark.parametrize(
    ("value", "nbytes"),
    [
        ("400Mi", 400 * MIB),
        ("32Gi", 32 * GIB),
        ("8G", 8 * 10**9),
        ("129M", 129 * 10**6),
        ("1Ki", 1024),
        ("128974848", 128974848),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1E", 10**18),
        ("0.5Gi", GIB // 2),
        (512, 512),
    ],
)
def test_memory_quantities(value: str | int, nbytes: int) -> None:
    assert s.parse_memory_bytes(value) == nbytes


@pytest.mark.parametrize("value", ["4 cores", "", "Gi", "-1", "1.2.3", "1Ki5", "1mi", True])
def test_bad_quantities_are_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="quantity"):
        s.parse_quantity(value)


# ---- pod requests ----------------------------------------------------------------------------------------------------


def _c(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": name, "resources": res, **extra}


def test_init_containers_count_as_the_max_not_the_sum() -> None:
    spec = {
        "initContainers": [_c("fetch", {"cpu": "2", "memory": "1Gi"}), _c("warm", {"cpu": "1", "memory": "5Gi"})],
        "containers": [_c("app", {"cpu": "500m", "memory": "3Gi"}), _c("log", {"cpu": "500m", "memory": "1Gi"})],
    }
    req = s.pod_requests(spec)
    assert req.get(s.CPU) == 2000  # max(init 2000, init 1000, containers 500 + 500)
    assert req.get(s.MEMORY) == 5 * GIB  # max(init 1Gi, init 5Gi, containers 3Gi + 1Gi)


def test_sidecar_init_containers_add_to_everything_after_them() -> None:
    spec = {
        "initContainers": [_c("proxy", {"cpu": "100m"}, restartPolicy="Always"), _c("migrate", {"cpu": "1"})],
        "containers": [_c("app", {"cpu": "500m"})],
    }
    assert s.pod_requests(spec).get(s.CPU) == 1100  # migrate 1000 + running sidecar 100 > app 500 + sidecar 100


def test_limit_without_request_is_the_request_and_overhead_is_added() -> None:
    spec = {
        "containers": [_c("app", limits={"cpu": "1", "memory": "2Gi"}), _c("b", {"cpu": "250m"}, {"cpu": "1"})],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    req = s.pod_requests(spec)
    assert (req.get(s.CPU), req.get(s.MEMORY)) == (1000 + 250 + 250, 2 * GIB + 120 * MIB)


def test_ephemeral_storage_is_not_compared() -> None:
    req = s.pod_requests({"containers": [_c("app", {"cpu": "1", "ephemeral-storage": "30Gi"})]})
    assert req.names() == [s.CPU]


# ---- pools, admission ------------------------------------------------------------------------------------------------

SYSTEM: dict[str, Any] = {
    "machineType": "e2-standard-4",
    "imageType": "COS_CONTAINERD",
    "labels": {"llm-serving.io/pool-kind": "system"},
}
GPU_L4: dict[str, Any] = {
    "machineType": "g2-standard-12",
    "imageType": "COS_CONTAINERD",
    "spot": True,
    "labels": {"llm-serving.io/accelerator": "l4"},
    "guestAccelerators": [{"type": "nvidia-l4", "count": 1}],
    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
}


def _pools() -> list[s.NodePool]:
    return [s.node_pool("system", SYSTEM), s.node_pool("gpu-l4", GPU_L4)]


def test_pool_labels_include_what_gke_and_the_kubelet_add() -> None:
    system, gpu = (dict(p.labels) for p in _pools())
    assert system == {
        "cloud.google.com/gke-nodepool": "system",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "e2-standard-4",
        "llm-serving.io/pool-kind": "system",
    }
    assert gpu["cloud.google.com/gke-accelerator"] == "nvidia-l4" and gpu["cloud.google.com/gke-spot"] == "true"
    assert gpu["cloud.google.com/gke-nodepool"] == "gpu-l4"


def test_gpu_sharing_multiplies_the_advertised_gpus() -> None:
    shared = copy.deepcopy(GPU_L4)
    shared["guestAccelerators"][0]["gpuSharingConfig"] = {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 2}
    assert s.node_pool("gpu-l4", shared).allocatable.get(s.GPU) == 2
    assert s.node_pool("gpu-l4", GPU_L4).allocatable.get(s.GPU) == 1


def test_toleration_matching() -> None:
    taint = s.Taint("nvidia.com/gpu", "present", "NoSchedule")
    assert s.Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule").tolerates(taint)
    assert s.Toleration("nvidia.com/gpu", "Exists").tolerates(taint)
    assert s.Toleration(operator="Exists").tolerates(taint)  # empty key + Exists: everything
    assert not s.Toleration("nvidia.com/gpu", "Equal", "absent").tolerates(taint)
    assert not s.Toleration("nvidia.com/gpu", "Exists", effect="NoExecute").tolerates(taint)
    assert not s.Toleration("other", "Exists").tolerates(taint)


def test_prefer_no_schedule_taints_do_not_exclude() -> None:
    soft = copy.deepcopy(SYSTEM)
    soft["taints"] = [{"key": "dedicated", "value": "x", "effect": "PREFER_NO_SCHEDULE"}]
    hard = copy.deepcopy(SYSTEM)
    hard["taints"] = [{"key": "dedicated", "value": "x", "effect": "NO_EXECUTE"}]
    pod = s.pod_from_spec("ns/p", "test", {"containers": [_c("a", {"cpu": "1"})]})
    assert s.admission(pod, s.node_pool("soft", soft)) is None
    assert s.admission(pod, s.node_pool("hard", hard)) == "taint dedicated=x:NoExecute not tolerated"


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


def test_required_node_affinity_terms_are_ored_and_expressions_anded() -> None:
    system = s.node_pool("system", SYSTEM)

    def admitted(*terms: list[dict[str, Any]]) -> bool:
        pod = s.pod_from_spec("ns/p", "test", {"containers": [], "affinity": _affinity(*terms)})
        return s.admission(pod, system) is None

    pool = {"key": "cloud.google.com/gke-nodepool"}
    assert admitted([{**pool, "operator": "In", "values": ["system"]}])
    assert not admitted([{**pool, "operator": "In", "values": ["gpu-l4"]}])
    assert admitted([{**pool, "operator": "In", "values": ["gpu-l4"]}], [{**pool, "operator": "Exists"}])
    assert not admitted([{**pool, "operator": "Exists"}, {"key": "absent", "operator": "Exists"}])
    assert admitted(
        [{**pool, "operator": "NotIn", "values": ["gpu-l4"]}, {"key": "absent", "operator": "DoesNotExist"}]
    )
    assert admitted([{"key": "absent", "operator": "NotIn", "values": ["x"]}])  # NotIn holds for a missing label
    assert not admitted([{**pool, "operator": "Gt", "values": ["1"]}])  # non-integer label value
    assert not admitted([])  # an empty term matches nothing
    fields = s.pod_from_spec(
        "ns/p",
        "test",
        {
            "containers": [],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                        ]
                    }
                }
            },
        },
    )
    assert "matchFields" in str(s.admission(fields, system))


def test_node_selector_must_match_every_label() -> None:
    pod = s.pod_from_spec(
        "ns/p",
        "test",
        {"containers": [], "nodeSelector": {"kubernetes.io/os": "linux", "llm-serving.io/pool-kind": "gpu"}},
    )
    assert s.admission(pod, s.node_pool("system", SYSTEM)) == (
        "nodeSelector llm-serving.io/pool-kind=gpu but nodes have llm-serving.io/pool-kind=system"
    )


def test_pod_without_gpu_toleration_does_not_fit_the_gpu_pool() -> None:
    """The shipped dev model server fits the L4 pool only because it tolerates the pool's GPU taint."""
    _, _, inv = planned("dev")
    pools = s.node_pools(inv)
    (deployment,) = [
        r for r in resources(inv, "kubernetes:apps/v1:Deployment") if r["name"] == "vllm-stable-deployment"
    ]
    spec = deployment["inputs"]["spec"]["template"]["spec"]
    ok, why = s.fits(s.pod_from_spec("llm-serving/vllm-stable", "dev model server", spec), pools)
    assert ok and "=> fits pool(s) gpu-l4" in why, why
    bare = {k: v for k, v in spec.items() if k != "tolerations"}
    ok, why = s.fits(s.pod_from_spec("llm-serving/vllm-stable", "dev model server, no toleration", bare), pools)
    assert not ok, why
    assert "pod llm-serving/vllm-stable" in why
    assert (
        "pool gpu-l4 (g2-standard-12, 12 vCPU / 48 GiB): excluded: "
        "taint nvidia.com/gpu=present:NoSchedule not tolerated"
    ) in why
    assert "pool system (e2-standard-4, 4 vCPU / 16 GiB): excluded: nodeSelector llm-serving.io/accelerator=l4" in why


def test_a_pod_requesting_exactly_the_allocatable_fits() -> None:
    exact = {"containers": [_c("app", {"cpu": "3920m", "memory": f"{math.floor(Fraction('13621.6') * MIB)}"})]}
    assert s.fits(s.pod_from_spec("ns/exact", "test", exact), _pools())[0]
    over = {"containers": [_c("app", {"cpu": "3921m"})]}
    ok, why = s.fits(s.pod_from_spec("ns/over", "test", over), _pools())
    assert not ok and "cpu 3921m > allocatable 3920m" in why, why


def test_a_pod_asking_for_more_gpus_than_a_node_has_does_not_fit() -> None:
    spec = {
        "containers": [_c("vllm", {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "2"})],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    ok, why = s.fits(s.pod_from_spec("ns/vllm", "test", spec), _pools())
    assert not ok and "nvidia.com/gpu 2 > allocatable 1" in why, why


# ---- the picker chart ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", sorted(s.PICKER_CHARTS))
def test_picker_model_matches_the_chart_template(version: str) -> None:
    chart = s.PICKER_CHARTS[version]
    template = reference("charts", "llm-d-router", *chart.deployment_template).read_text(encoding="utf-8")
    for snippet in chart.evidence:
        assert snippet in template, f"{version}: the Deployment template no longer contains {snippet!r}"
    assert "nodeSelector" not in template, f"{version}: the template now renders a nodeSelector: model it"
    tpl = reference("charts", "llm-d-router", version, "routerlib", "templates", "_latency-predictor.tpl")
    text = tpl.read_text(encoding="utf-8")
    assert "toYaml .Values.router.latencyPredictor.trainingServer.resources" in text
    assert "range $i := until (int .Values.router.latencyPredictor.predictionServers.count)" in text


def test_chart_defaults_include_the_library_chart_values(charts_root: Path) -> None:
    values = s.chart_default_values(charts_root / "v0.10.0" / "llm-d-router-gateway")
    epp = values["router"]["epp"]
    # routerlib/values.yaml
    assert epp["resources"] == {"requests": {"cpu": "8", "memory": "8Gi"}, "limits": {"memory": "16Gi"}}
    assert values["router"]["latencyPredictor"]["enabled"] is False
    assert values["router"]["latencyPredictor"]["trainingServer"]["resources"]["requests"] == {
        "cpu": "2000m",
        "memory": "4Gi",
    }
    assert values["provider"] == {"name": "none", **{k: values["provider"][k] for k in ("istio", "gke")}}


def test_helm_coalescing() -> None:
    defaults = {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 2}
    assert s.coalesce_values(defaults, {"a": {"b": 5, "c": [9], "d": None}, "g": 3}) == {
        "a": {"b": 5, "c": [9]},
        "f": 2,
        "g": 3,
    }
    assert defaults == {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 2}  # not mutated


def test_chart_default_picker_pod(charts_root: Path) -> None:
    chart = s.picker_chart("v0.10.0")
    pod = s.picker_pod(chart, charts_root, "vllm-stable", "llm-serving", {})
    assert pod.name == "llm-serving/vllm-stable-epp" and pod.replicas == 1
    assert pod.requests == s.Resources.of({s.CPU: 8000, s.MEMORY: 8 * GIB})
    assert pod.tolerations == () and pod.node_selector == () and pod.required_terms is None


def test_partial_overrides_keep_the_other_chart_defaults(charts_root: Path) -> None:
    """Helm merges maps: overriding only the CPU request keeps the chart's 8Gi memory request; dropping
    ``requests`` makes the 16Gi memory limit the request."""
    chart = s.picker_chart("v0.10.0")
    cpu_only = s.picker_pod(
        chart, charts_root, "r", "ns", {"router": {"epp": {"resources": {"requests": {"cpu": "500m"}}}}}
    )
    assert cpu_only.requests == s.Resources.of({s.CPU: 500, s.MEMORY: 8 * GIB})
    no_requests = s.picker_pod(chart, charts_root, "r", "ns", {"router": {"epp": {"resources": {"requests": None}}}})
    assert no_requests.requests == s.Resources.of({s.MEMORY: 16 * GIB})


def test_latency_predictor_tokenizer_and_proxy_containers_are_counted(charts_root: Path) -> None:
    chart = s.picker_chart("v0.10.0")
    pod = s.picker_pod(
        chart,
        charts_root,
        "r",
        "ns",
        {
            "router": {
                "latencyPredictor": {"enabled": True},
                "tokenizer": {"enabled": True, "modelName": "m"},
                "proxy": {"enabled": True, "name": "envoy", "resources": {"requests": {"cpu": "100m"}}},
            }
        },
    )
    # epp 8 + training 2 + one prediction server 8 + tokenizer 4 + proxy 0.1 CPU; memory 8 + 4 + 4 + 8 GiB
    # (routerlib values.yaml)
    assert pod.requests == s.Resources.of({s.CPU: 8000 + 2000 + 8000 + 4000 + 100, s.MEMORY: (8 + 4 + 4 + 8) * GIB})
    inv = {
        "resources": [
            {
                "type": "kubernetes:helm.sh/v4:Chart",
                "name": "epp",
                "inputs": {
                    "chart": ROUTER_CHART,
                    "version": "v0.10.0",
                    "values": {"router": {"epp": {"nodeSelector": {"a": "b"}}}},
                },
            }
        ]
    }
    assert s.ignored_picker_values(inv) == ["epp: router.epp.nodeSelector is set but chart v0.10.0 never reads it"]


def test_shipped_picker_values_with_4_cpu_do_not_fit_e2_standard_4(charts_root: Path) -> None:
    """The failing fixture: dev's own picker release values and node pools, with the chart's 4-CPU request forced
    (whatever the stack sets today), must fail naming the pod, each pool and the numbers."""
    _, _, inv = planned("dev")
    (release,) = [r for r in resources(inv, "kubernetes:helm.sh/v4:Chart") if r["name"] == "vllm-stable-router-epp"]
    values = s.coalesce_values(
        release["inputs"]["values"], {"router": {"epp": {"resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}}}
    )
    pod = s.picker_pod(
        s.picker_chart(release["inputs"]["version"]),
        charts_root,
        release["inputs"]["name"],
        release["inputs"]["namespace"],
        values,
    )
    ok, why = s.fits(pod, s.node_pools(inv))
    assert not ok, why
    assert (
        "pod llm-serving-stable/vllm-stable-router-epp [chart llm-d-router-gateway v0.10.0 release vllm-stable-router"
        in why
    )
    assert (
        "pool system (e2-standard-4, 4 vCPU / 16 GiB): admitted, DOES NOT FIT: cpu 4000m > allocatable 3920m; "
        "memory 8192.0 MiB <= allocatable 13621.6 MiB"
    ) in why
    assert "pool gpu-l4 (g2-standard-12, 12 vCPU / 48 GiB): excluded: taint nvidia.com/gpu=present:NoSchedule" in why
    assert "=> no pool both admits and fits this pod" in why


def test_per_node_overhead_is_subtracted_from_every_pool(charts_root: Path) -> None:
    """prod's e2-standard-8 holds one picker at 4 CPU (4000m of 7910m) but not two on the same node."""
    pod = s.picker_pod(
        s.picker_chart("v0.10.0"),
        charts_root,
        "vllm-stable",
        "llm-serving",
        {"router": {"epp": {"resources": {"requests": {"cpu": "4"}}}}},
    )
    pools = [s.node_pool("system", {**SYSTEM, "machineType": "e2-standard-8"})]
    assert s.fits(pod, pools)[0]
    ok, why = s.fits(pod, pools, per_node_overhead=pod.requests)
    assert not ok
    assert "cpu 4000m > allocatable 7910m - overhead 4000m = 3910m" in why, why


# ---- inventory guards ----------------------------------------------------------------------------------------------


def test_pools_of_a_cluster_with_unlisted_pools_are_refused() -> None:
    keeps = {"resources": [{"type": "gcp:container/cluster:Cluster", "name": "c", "inputs": {}}]}
    with pytest.raises(ValueError, match="keeps its default node pool"):
        s.node_pools(keeps)
    nap = {
        "resources": [
            {
                "type": "gcp:container/cluster:Cluster",
                "name": "c",
                "inputs": {"removeDefaultNodePool": True, "clusterAutoscaling": {"enabled": True}},
            }
        ]
    }
    with pytest.raises(ValueError, match="auto-provisioning"):
        s.node_pools(nap)


def test_unmodelled_charts_are_refused(charts_root: Path) -> None:
    other = {
        "resources": [
            {
                "type": "kubernetes:helm.sh/v4:Chart",
                "name": "x",
                "inputs": {"chart": "oci://example.com/charts/other", "version": "1.0.0"},
            }
        ]
    }
    with pytest.raises(ValueError, match="not the llm-d-router-gateway chart"):
        s.picker_pods(other, charts_root)
    with pytest.raises(ValueError, match=re.escape("'v9.9.9': its picker pod is not modelled")):
        s.picker_chart("v9.9.9")
