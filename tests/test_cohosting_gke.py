"""Model co-hosting on GKE (issue 17, part 3, GKE form): the shipped ``dev-cohost-gke`` stack planned by the real
program under the mock monitor. Two models share each node of a time-shared H100 node pool: one vLLM Deployment
per model (its partition as ``--gpu-memory-utilization``, one shared GPU slot, one pod per node), its own
InferencePool, and the API route's per-model rule matching the header GAIE's body-based router sets.

Figures are hand-computed here from the models' published shapes; every GKE-only rule has a failing config.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
import yaml

from infra.config import ConfigError
from infra.offline import cli
from infra.offline.planrun import run_plan
from infra.offline.stackfile import ROOT, read_stack_file
from infra.planning.cohosting import GKE_ROLE_MAX_LENGTH
from infra.resolve import resolve_stack
from infra.targets.gke.planning import gke_part
from tests.test_gateway import find, only
from tests.test_policies import evaluate

from .conftest import one, planned, reference

STACK = "dev-cohost-gke"
GiB = 2**30
#: H100 80GB as the stack states it (usable GiB per GPU).
M = 79.6
#: Llama 3.1 8B and Mistral 7B v0.3 at FP8: the catalogue's parameter counts x 1 byte.
W_LLAMA, W_MISTRAL = 8.03e9, 7.25e9
#: KV bytes per token: 2 x 32 layers x 8 KV heads x 128 x 2 bytes (bf16 cache) for both models.
K = 2 * 32 * 8 * 128 * 2
#: The dev contract's mean context: 600 prompt + 200 output tokens (50 KV blocks of 16).
MEAN = 800
ROLES = {
    "llama-3-1-8b": ("llama-3.1-8b", "llama-3.1-8b-fp8-2026-11-25.1", W_LLAMA),
    "mistral-7b": ("mistral-7b", "mistral-7b-v0.3-fp8-2026-11-25.1", W_MISTRAL),
}


def inv() -> dict[str, Any]:
    return planned(STACK)[2]


def values() -> dict[str, Any]:
    return json.loads(json.dumps(read_stack_file(STACK, ROOT / "stacks").values))


def issues(v: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        resolve_stack(v, STACK, ROOT)
    return [str(i) for i in err.value.issues]


def _group(v: dict[str, Any]) -> dict[str, Any]:
    return v["llm-serving:cohosting"]["pair"]


def container_args(role: str) -> list[str]:
    dep = only(inv(), "Deployment", f"vllm-{role}")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c["args"]


def arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# ---- sizing ------------------------------------------------------------------------------------------------------


def kv_tokens(weights_bytes: float) -> int:
    # partition 0.4 of 79.6 GiB - the whole FP8 weights (TP 1) - 2 GiB runtime overhead, in tokens of K bytes
    return math.floor((M * 0.4 * GiB - weights_bytes - 2 * GiB) / K)


def test_hand_arithmetic_of_the_two_partitions():
    # llama: 31.84 - 7.479 - 2 = 22.362 GiB -> 183,185 tokens; mistral: 31.84 - 6.752 - 2 = 23.088 GiB -> 189,136
    assert kv_tokens(W_LLAMA) == 183_185 and kv_tokens(W_MISTRAL) == 189_136
    assert (kv_tokens(W_LLAMA) // MEAN, kv_tokens(W_LLAMA) // 4096) == (228, 44)
    assert (kv_tokens(W_MISTRAL) // MEAN, kv_tokens(W_MISTRAL) // 4096) == (236, 46)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_each_model_is_a_deployment_with_its_partition_and_names(role: str):
    name, release, w = ROLES[role]
    args = container_args(role)
    assert arg(args, "--gpu-memory-utilization") == "0.4"
    assert arg(args, "--max-num-seqs") == str(kv_tokens(w) // MEAN)  # 228 / 236
    served = args[args.index("--served-model-name") + 1 : args.index("--served-model-name") + 3]
    assert served == [release, name]
    assert arg(args, "--tensor-parallel-size") == "1"
    dep = only(inv(), "Deployment", f"vllm-{role}")
    assert dep["metadata"]["namespace"] == f"llm-serving-{role}"
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    # one time-shared slot of a GPU, on the group's own node pool
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["nodeSelector"] == {"llm-serving.io/accelerator": "h100-shared"}
    # at most one pod of this model per node: the memory bound counts each model once per GPU
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    # the stack's own pools keep whole GPUs and no anti-affinity
    stable = only(inv(), "Deployment", "vllm-stable")["spec"]["template"]["spec"]
    assert "affinity" not in stable and stable["nodeSelector"] == {"llm-serving.io/accelerator": "l4"}


def test_group_plan_reports_the_worst_case_and_node_bounds():
    _, plan, _ = planned(STACK)
    g = gke_part(plan).gke_groups()["pair"]
    # 2 time-shared clients per GPU: the two largest partitions (0.4 + 0.4) may share one GPU; limit 1 - 0.1
    assert (g.clients_per_gpu, g.worst_case_partition_sum) == (2, 0.8)
    # one warm node; max 1 + one node the rollout surge pods of both models share
    assert (g.min_nodes, g.max_nodes) == (1, 2)
    by_role = {m.role: m for m in g.models}
    assert sorted(by_role) == sorted(ROLES)
    assert by_role["llama-3-1-8b"].placement.max_seqs_at_max_model_len == 44
    assert by_role["mistral-7b"].placement.max_seqs_at_max_model_len == 46
    assert {r: (m.pool.hpa.min_replicas, m.pool.hpa.max_replicas) for r, m in by_role.items()} == {
        "llama-3-1-8b": (1, 1),
        "mistral-7b": (1, 1),
    }


def test_node_pool_time_shares_each_gpu_between_the_models():
    pool = one(inv(), "gcp:container/nodePool:NodePool", "platform-gpu-h100-shared-pool")["inputs"]
    (acc,) = pool["nodeConfig"]["guestAccelerators"]
    assert acc["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 2}
    assert (acc["type"], acc["count"]) == ("nvidia-h100-80gb", 1)
    assert pool["autoscaling"]["totalMinNodeCount"] == 1 and pool["autoscaling"]["totalMaxNodeCount"] == 2


# ---- routing by model name ---------------------------------------------------------------------------------------


def test_route_sends_each_model_name_to_its_own_pool_and_everything_else_to_the_split():
    route = only(inv(), "HTTPRoute", "llm-api")
    weighted, *models = route["spec"]["rules"]
    assert all("headers" not in m for m in weighted["matches"])
    assert {b["name"] for b in weighted["backendRefs"]} == {"vllm-stable", "vllm-canary"}
    router = only(inv(), "Deployment", "body-based-router")["spec"]["template"]["spec"]
    (bbr,) = router["containers"]
    plugin = json.loads(bbr["args"][bbr["args"].index("--plugin") + 1].split(":", 2)[2])
    header = plugin["headerName"]
    assert plugin["fieldName"] == "model"
    seen = {}
    for rule in models:
        (backend,) = rule["backendRefs"]
        names = set()
        for m in rule["matches"]:
            (h,) = m["headers"]
            assert (h["type"], h["name"]) == ("Exact", header)
            names.add(h["value"])
        (name,) = names
        # the same path prefixes as the weighted rule (so the header match decides), minus the bodyless /v1/models
        assert [m["path"]["value"] for m in rule["matches"]] == ["/v1/chat/completions", "/v1/completions"]
        seen[name] = (backend["name"], backend["namespace"])
    assert seen == {
        "llama-3.1-8b": ("vllm-llama-3-1-8b", "llm-serving-llama-3-1-8b"),
        "mistral-7b": ("vllm-mistral-7b", "llm-serving-mistral-7b"),
    }
    # each model's InferencePool selects exactly its own Deployment's pods
    for role in ROLES:
        pool = only(inv(), "InferencePool", f"vllm-{role}")
        dep = only(inv(), "Deployment", f"vllm-{role}")
        assert pool["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]


def test_body_router_is_wired_to_the_gateway_and_runs_restricted():
    (gateway,) = find(inv(), "Gateway")
    ext = only(inv(), "GCPRoutingExtension", "body-based-router")
    assert ext["metadata"]["namespace"] == gateway["metadata"]["namespace"]
    assert ext["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway["metadata"]["name"]}
    ]
    (chain,) = ext["spec"]["extensionChains"]
    (e,) = chain["extensions"]
    svc = only(inv(), "Service", "body-based-router")
    (port,) = svc["spec"]["ports"]
    assert e["backendRef"] == {"group": "", "kind": "Service", "name": svc["metadata"]["name"], "port": port["port"]}
    assert e["requestBodySendMode"] == "FullDuplexStreamed" and e["failOpen"] is True  # dev's picker: FailOpen
    pod = only(inv(), "Deployment", "body-based-router")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert "--streaming" in c["args"]
    assert port["targetPort"] in [p["containerPort"] for p in c["ports"]]
    hc = only(inv(), "HealthCheckPolicy", "body-based-router")["spec"]
    assert hc["default"]["config"]["grpcHealthCheck"]["port"] == c["readinessProbe"]["grpc"]["port"]
    # Pod Security "restricted" (the gateway namespace enforces it)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["image"] == "registry.k8s.io/gateway-api-inference-extension/bbr:v1.5.0"


def test_stacks_without_gke_groups_render_no_router():
    for stack in ("dev", "staging", "prod"):
        assert find(planned(stack)[2], "GCPRoutingExtension") == []
        assert len(only(planned(stack)[2], "HTTPRoute", "llm-api")["spec"]["rules"]) == 1


# ---- refusals ----------------------------------------------------------------------------------------------------


def test_mps_is_refused():
    v = values()
    v["llm-serving:accelerators"]["h100-shared"]["gpu_sharing"]["strategy"] = "MPS"
    (msg,) = issues(v)
    assert msg.startswith(
        "llm-serving:accelerators.h100-shared.gpu_sharing: cohosting.pair runs its models as pods "
        "sharing GPUs: needs strategy TIME_SHARING"
    )
    assert msg.endswith("got MPS")


def test_a_third_model_needs_a_third_slot():
    v = values()
    # three partitions of 0.3 fit one GPU (0.9 = 1 - 0.1); llama at 0.3: 23.88 - 7.48 - 2 = 14.4 GiB, 147 seqs @ 800
    for m in _group(v)["models"]:
        m["gpu_memory_partition"] = 0.3
    _group(v)["models"].append(dict(_group(v)["models"][0], model_name="llama-copy"))
    assert issues(v) == [
        "llm-serving:accelerators.h100-shared.gpu_sharing.max_shared_clients_per_gpu: one pod of "
        "each of cohosting.pair's 3 models per node needs ceil(3 / 1 GPU(s)) = 3 clients per GPU, "
        "got 2"
    ]


def _two_gpu_node(v: dict[str, Any], partitions: list[float]) -> None:
    acc = v["llm-serving:accelerators"]["h100-shared"]
    acc.update(machine_type="a3-highgpu-2g", gpus_per_node=2)
    models = _group(v)["models"]
    models.append(dict(models[0], model_name="llama-copy"))
    for m, part in zip(models, partitions, strict=True):
        m["gpu_memory_partition"] = part


def test_worst_case_of_the_slots_bounds_what_one_gpu_holds():
    # 3 models on a 2-GPU node with 2 clients per GPU: ceil(3 / 2) = 2 slots suffice; the device plugin may put any
    # two pods on one GPU, never three. 0.4 x 3 = 1.2 over the node, but at most 0.4 + 0.4 = 0.8 on one GPU.
    v = values()
    _two_gpu_node(v, [0.4, 0.4, 0.4])
    plan = resolve_stack(v, STACK, ROOT).plan
    assert gke_part(plan).gke_groups()["pair"].worst_case_partition_sum == 0.8
    v = values()
    _two_gpu_node(v, [0.5, 0.45, 0.4])  # the two largest: 0.95 > 0.9
    assert issues(v) == [
        "llm-serving:cohosting.pair.models: 2 time-shared clients per GPU (h100-shared.gpu_sharing) may put the 2 "
        "largest partitions on one GPU: 0.95 > 1 - transient_reserve 0.1; the device plugin, not the planner, picks "
        "each pod's GPU: lower the partitions or the clients per GPU"
    ]


def test_a_release_on_two_gpus_cannot_take_one_slot():
    v = values()
    path = ROOT / "stacks/releases/dev/mistral-7b-v0.3-fp8-2026-11-25.1.json"
    rel = json.loads(path.read_text())
    rel["tensor_parallel_size"] = 2
    v["llm-serving:releases"][3] = rel
    got = issues(v)
    assert (
        "llm-serving:cohosting.pair.models[1].release: release 'mistral-7b-v0.3-fp8-2026-11-25.1' runs on "
        "tensor_parallel_size 2; a pod on a time-shared GPU gets one GPU: co-host it on vertex or serve it as a "
        "pool"
    ) in got


def test_the_group_needs_a_node_pool_of_its_own():
    v = values()
    _group(v)["accelerator"] = "l4"
    got = issues(v)
    assert (
        "llm-serving:cohosting.pair.accelerator: 'l4' is also the accelerator of serving.stable: a gke group "
        "needs a node pool of its own"
    ) in got
    assert any(
        g.startswith("llm-serving:accelerators.l4.gpu_sharing: cohosting.pair runs its models as pods sharing GPUs")
        and g.endswith("got none")
        for g in got
    )


def test_gke_groups_need_the_stacks_gke_pools_and_no_endpoint_ids():
    v = values()
    _group(v)["models"][0]["endpoint_id"] = "llm-dev-llama"
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[0].endpoint_id: only on vertex: the GKE gateway routes by model name"
    ]
    v = values()
    _group(v)["models"][0]["instances"] = 2
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[0].instances: GKE places one pod of a model per node "
        "(GPU time-sharing gives no control over which GPU a pod's slot is on, so the memory bound "
        "counts each model once per GPU): 1, got 2"
    ]


def test_a_model_name_may_not_take_a_pools_role_or_collide_after_dns_mapping():
    v = values()
    _group(v)["models"][0]["model_name"] = "canary"
    assert (
        "llm-serving:cohosting.pair.models[0].model_name: 'canary' would name the namespace of serving.canary"
        in issues(v)
    )
    v = values()
    _group(v)["models"][0]["model_name"] = "mistral.7b"
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].model_name: 'mistral-7b' and 'mistral.7b' both name "
        "the role 'mistral-7b' ('.' and '_' become '-')"
    ]


def test_reservation_must_hold_the_surge_node():
    v = values()
    acc = v["llm-serving:accelerators"]["h100-shared"]
    acc["spot"] = False
    acc["reservation"] = {"mode": "create", "name": "llm-dev-h100-shared", "count": 1}
    got = issues(v)
    assert (
        "llm-serving:accelerators.h100-shared.reservation.count: 1 reserved node(s) cannot hold cohosting.pair's "
        "max_replicas 1 + 1 rollout surge node = 2"
    ) in got


# ---- policy: the pack's GPU-sharing bound agrees with the planner ------------------------------------------------


def _resources() -> list[dict[str, Any]]:
    return copy.deepcopy(inv()["resources"])


def _deployment(rs: list[dict[str, Any]], role: str) -> dict[str, Any]:
    (d,) = [
        r["inputs"]
        for r in rs
        if r["type"] == "kubernetes:apps/v1:Deployment" and r["inputs"]["metadata"]["name"] == f"vllm-{role}"
    ]
    return d


def _set_share(rs: list[dict[str, Any]], role: str, share: str) -> None:
    (c,) = _deployment(rs, role)["spec"]["template"]["spec"]["containers"]
    c["args"][c["args"].index("--gpu-memory-utilization") + 1] = share


def _hpa_max(rs: list[dict[str, Any]], role: str, n: int) -> None:
    (h,) = [
        r["inputs"]
        for r in rs
        if r["type"] == "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
        and r["inputs"]["metadata"]["name"] == f"vllm-{role}"
    ]
    h["spec"]["maxReplicas"] = n


def test_shipped_stack_passes_the_pack_through_the_analyzer(tmp_path, capsys):
    assert cli.main(["policy", "--stack", STACK, "--out", str(tmp_path)]) == 0
    assert "0 violation(s)" in capsys.readouterr().out


def test_policy_counts_a_one_pod_per_node_model_once_per_gpu():
    rs = _resources()
    assert evaluate("gpu-memory-shares-below-one", rs, {}) == []
    # 0.6 + 0.3 with two replicas allowed each: one pod of each model per node, so at most 0.9 on the GPU
    _set_share(rs, "llama-3-1-8b", "0.6")
    _set_share(rs, "mistral-7b", "0.3")
    _hpa_max(rs, "llama-3-1-8b", 2)
    assert evaluate("gpu-memory-shares-below-one", rs, {}) == []
    # without the anti-affinity two llama pods may share the GPU: 0.6 + 0.6
    del _deployment(rs, "llama-3-1-8b")["spec"]["template"]["spec"]["affinity"]
    assert evaluate("gpu-memory-shares-below-one", rs, {}) == [
        "platform-gpu-h100-shared-pool: up to 2 servers share one GPU of this pool (maxSharedClientsPerGpu 2) and "
        "their --gpu-memory-utilization partitions sum to 1.2 = 0.6 (vllm-llama-3-1-8b) + 0.6 (vllm-llama-3-1-8b): "
        "keep the sum at most 0.9 (1 - transient reserve 0.1)"
    ]


def test_policy_flags_two_models_whose_partitions_overfill_one_gpu():
    rs = _resources()
    _set_share(rs, "llama-3-1-8b", "0.6")
    _set_share(rs, "mistral-7b", "0.5")
    assert evaluate("gpu-memory-shares-below-one", rs, {}) == [
        "platform-gpu-h100-shared-pool: up to 2 servers share one GPU of this pool (maxSharedClientsPerGpu 2) and "
        "their --gpu-memory-utilization partitions sum to 1.1 = 0.6 (vllm-llama-3-1-8b) + 0.5 (vllm-mistral-7b): "
        "keep the sum at most 0.9 (1 - transient reserve 0.1)"
    ]


def test_policy_keeps_the_transient_reserve_below_one():
    """0.5 + 0.45 = 0.95 is below 1.0 but eats the transient reserve the planner keeps (0.1, as on Vertex AI): the
    pack flags it at its default reserve and accepts it with a reserve of 0.05."""
    rs = _resources()
    _set_share(rs, "llama-3-1-8b", "0.5")
    _set_share(rs, "mistral-7b", "0.45")
    assert evaluate("gpu-memory-shares-below-one", rs, {}) == [
        "platform-gpu-h100-shared-pool: up to 2 servers share one GPU of this pool (maxSharedClientsPerGpu 2) and "
        "their --gpu-memory-utilization partitions sum to 0.95 = 0.5 (vllm-llama-3-1-8b) + 0.45 (vllm-mistral-7b): "
        "keep the sum at most 0.9 (1 - transient reserve 0.1)"
    ]
    assert evaluate("gpu-memory-shares-below-one", rs, {"transientReserve": 0.05}) == []


def test_redundant_routers_spread_and_keep_one_through_a_drain(tmp_path):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    doc["config"]["llm-serving:gateway"]["epp"]["replicas"] = 2
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc))
    rs = run_plan(STACK, tmp_path).inventory.to_dict()
    dep = only(rs, "Deployment", "body-based-router")
    assert dep["spec"]["replicas"] == 2
    (term,) = dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    pdb = only(rs, "PodDisruptionBudget", "body-based-router")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": dep["spec"]["selector"]}
    # one router (the shipped dev stack): no budget, which would block every drain of its node
    assert find(inv(), "PodDisruptionBudget", "body-based-router") == []
    assert "affinity" not in only(inv(), "Deployment", "body-based-router")["spec"]["template"]["spec"]


# ---- names the picker chart derives ------------------------------------------------------------------------------

#: A co-hosted model name whose GKE role is exactly GKE_ROLE_MAX_LENGTH (40) characters.
LONGEST = "llama-3.1-8b-instruct-fp8-2026-11-25.abc"
#: What the chart's ``gateway-api-inference-extension.name`` makes of release ``vllm-<role>`` (45 characters):
#: ``trunc 40`` keeps "vllm-llama-3-1-8b-instruct-fp8-2026-11-2", then ``-epp``.
LONGEST_PICKER = "vllm-llama-3-1-8b-instruct-fp8-2026-11-2-epp"


def test_the_picker_service_is_named_as_the_chart_names_it_at_the_longest_role(tmp_path):
    # The rule, as the vendored chart states it (a chart whose rule differs fails here first).
    helpers = reference("charts", "inferencepool", "v1.5.0", "epplib", "templates", "_helpers.tpl").read_text()
    assert '$base := .Release.Name | default "default-pool" | lower | trim | trunc 40 -}}\n{{ $base }}-epp' in helpers
    assert len(LONGEST.replace(".", "-")) == GKE_ROLE_MAX_LENGTH
    v = values()
    _group(v)["models"][0]["model_name"] = LONGEST
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump({"config": v}))
    run = run_plan(STACK, tmp_path)
    role = LONGEST.replace(".", "-")
    inventory = run.inventory.to_dict()
    (pool,) = [m for m in find(inventory, "InferencePool") if m["metadata"]["name"] == f"vllm-{role}"]
    assert pool["spec"]["endpointPickerRef"]["name"] == LONGEST_PICKER
    # The chart release is the pool's Deployment name; only the objects the chart creates are cut.
    (chart,) = [
        r
        for r in inventory["resources"]
        if r["type"] == "kubernetes:helm.sh/v4:Chart" and r["inputs"]["name"] == f"vllm-{role}"
    ]
    assert chart["name"] == LONGEST_PICKER
