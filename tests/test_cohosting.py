"""Model co-hosting (issue 17, part 3): the co-hosted group config, the planner's memory checks with hand-computed
arithmetic, and its Vertex rendering (one deployment resource pool shared by the models' deployed models, one
endpoint per model), planned by the real program under the mock monitor for the shipped ``dev-cohost`` stack.

Every planner refusal and every rule has a failing config asserting its key path and message; every request body
of the co-hosting deployment validates against the aiplatform.v1 discovery document (driven through the providers
and the validating fake Vertex of tests/test_vertex_requests.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from components.vertex import provider as pv
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.stackfile import ROOT, read_stack_file
from infra.planning import capacity
from infra.planning import cohosting as ch
from infra.resolve import resolve_stack
from infra.targets.vertex.planning import CoHostedGroupPlan, vertex_part
from tests.discovery import DiscoveryDocument, document
from tests.test_vertex_requests import FakeClock, FakeVertex, floats

from .conftest import plan_run, resources

STACK = "dev-cohost"
DEPLOYED = "pulumi-python:dynamic/vertex:DeployedModel"
POOL = "pulumi-python:dynamic/vertex:DeploymentResourcePool"
TRAFFIC = "pulumi-python:dynamic/vertex:EndpointTraffic"
PROJECT, REGION = "acme-llm-dev", "us-central1"
GiB = 2**30
#: H100 80GB as the stack states it (usable GiB per GPU).
M = 79.6
#: Llama 3.1 8B and Mistral 7B v0.3 at FP8 by tensor precision: the quantised layers at 1 byte, the embedding and
#: lm_head (vocab x hidden each, untied) at bf16's 2: + 2 x 128,256 x 4,096 and + 2 x 32,768 x 4,096 bytes.
W_LLAMA, W_MISTRAL = 8.03e9 + 2 * 128_256 * 4096, 7.25e9 + 2 * 32_768 * 4096
#: KV bytes per token: 2 x 32 layers x 8 KV heads x 128 x 2 bytes (bf16 cache) for both models.
K = 2 * 32 * 8 * 128 * 2
#: The dev contract's mean context: 600 prompt + 200 output tokens (50 KV blocks of 16).
MEAN = 800


def values() -> dict[str, Any]:
    return json.loads(json.dumps(read_stack_file(STACK, ROOT / "stacks").values))


def issues(v: dict[str, Any], stack: str = STACK) -> list[str]:
    with pytest.raises(ConfigError) as err:
        resolve_stack(v, stack, ROOT)
    return [str(i) for i in err.value.issues]


def _group(v: dict[str, Any]) -> dict[str, Any]:
    return v["llm-serving:cohosting"]["pair"]


def _model(v: dict[str, Any], i: int) -> dict[str, Any]:
    return _group(v)["models"][i]


def group_plan(v: dict[str, Any] | None = None) -> CoHostedGroupPlan:
    plan = resolve_stack(v, STACK, ROOT).plan if v is not None else plan_run(STACK).resolved.plan
    group = plan.cohosting["pair"]
    assert isinstance(group, CoHostedGroupPlan)  # the stack's group runs on Vertex
    return group


def inv() -> dict[str, Any]:
    return plan_run(STACK).inventory.to_dict()


def deployed(name: str) -> dict[str, Any]:
    (r,) = [r for r in resources(inv(), DEPLOYED) if r["name"] == name]
    return r["inputs"]


# ---- the shipped stack -------------------------------------------------------------------------------------------


def test_dev_cohost_plans_with_zero_violations_and_no_gke(tmp_path: Path, capsys) -> None:
    assert not {"llm-serving:gke", "llm-serving:gateway", "llm-serving:cloud_run"} & set(values())
    assert cli.main(["plan", "--stack", STACK, "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert "policy: 0 violation(s): 0 mandatory, 0 advisory, " in out
    assert (
        "co-hosted group pair (vertex) on a3-highgpu-1g (1 x nvidia-h100-80gb), 1..1 machine(s): partitions per "
        "GPU 0.8 (at most 1 - transient reserve 0.1 = 0.9)"
    ) in out
    types = [r["type"] for r in json.loads((tmp_path / "plan" / "inventory.json").read_text())["resources"]]
    assert not [t for t in types if t.startswith(("kubernetes:", "gcp:container", "gcp:compute"))]
    assert (types.count(POOL), types.count(DEPLOYED), types.count("gcp:vertex/aiEndpoint:AiEndpoint")) == (1, 3, 3)
    capacity_json = json.loads((tmp_path / "plan" / "capacity.json").read_text())
    assert capacity_json["cohosting"]["pair"]["layout"]["partition_sum_per_gpu"] == [0.8]


def test_two_plans_are_byte_identical(tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert cli.main(["plan", "--stack", STACK, "--out", str(tmp_path / out)]) == 0
    for name in ("inventory.json", "capacity.json", "policy-report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


# ---- the planner's arithmetic ------------------------------------------------------------------------------------


def test_partitions_and_per_model_concurrency_by_hand() -> None:
    # Partition 0.4 of 79.6 GiB = 31.84 GiB per GPU, less the weights (TP 1) and 2 GiB overhead, is the KV budget.
    part = M * 0.4
    llama_budget = part * GiB - W_LLAMA - 2 * GiB  # 31.84 - 8.46 - 2 = 21.38 GiB
    mistral_budget = part * GiB - W_MISTRAL - 2 * GiB  # 31.84 - 7.00 - 2 = 22.84 GiB
    assert (round(llama_budget / GiB, 2), round(mistral_budget / GiB, 2)) == (21.38, 22.84)
    # Sequences at max_model_len 4096 (256 whole blocks): floor(B / (131,072 B x 4096)) = floor(B / 0.5 GiB).
    assert (math.floor(llama_budget / (K * 4096)), math.floor(mistral_budget / (K * 4096))) == (42, 45)
    # ... and at the contract's mean context of 800 tokens (the useful concurrency of 32 fits both).
    assert (math.floor(llama_budget / (K * MEAN)), math.floor(mistral_budget / (K * MEAN))) == (218, 233)
    g = group_plan()
    llama, mistral = (m.placement for m in g.models)
    assert (llama.model_name, mistral.model_name) == ("llama-3.1-8b", "mistral-7b")
    assert llama.preallocated_gib_per_gpu == pytest.approx(31.84)
    assert llama.kv_budget_gib_per_gpu == pytest.approx(llama_budget / GiB)
    assert (llama.max_seqs_at_max_model_len, mistral.max_seqs_at_max_model_len) == (42, 45)
    assert (llama.max_seqs_at_mean_context, mistral.max_seqs_at_mean_context) == (218, 233)
    assert (llama.max_num_seqs, mistral.max_num_seqs) == (218, 233)
    assert (llama.gpus, mistral.gpus) == (((0,),), ((0,),))  # both on the machine's one GPU
    assert g.layout.partition_sum_per_gpu == (0.8,)  # 0.4 + 0.4 <= 1 - 0.1


def test_layout_on_eight_gpus() -> None:
    """The seed's shapes on 8 x H100: one TP-8 instance beside eight TP-1 instances, or four TP-2 beside eight TP-1;
    each GPU carries 0.4 + 0.4."""
    geo = capacity.Geometry(8_030_000_000, 32, 8, 128, 1.0, 2.0)

    def model(name: str, tp: int, instances: int, partition: float = 0.4) -> ch.ModelInputs:
        return ch.ModelInputs(name, name, geo, tp, 4096, partition, instances, 8, 2.0)

    lay = ch.plan_layout([model("a", 8, 1), model("b", 1, 8)], 8, 79.6, 0.1, MEAN)
    assert lay.models[0].gpus == (tuple(range(8)),)
    assert lay.models[1].gpus == tuple((g,) for g in range(8))
    assert lay.partition_sum_per_gpu == (0.8,) * 8
    lay = ch.plan_layout([model("a", 2, 4), model("b", 1, 8)], 8, 79.6, 0.1, MEAN)
    assert lay.models[0].gpus == ((0, 1), (2, 3), (4, 5), (6, 7))
    # TP 2 halves the weight shard: (31.84 - 8.03e9 / 2 / GiB - 2) GiB of KV per GPU at half the KV per token.
    assert lay.models[0].kv_budget_gib_per_gpu == pytest.approx(M * 0.4 - 8.03e9 / 2 / GiB - 2)
    # Five TP-1 instances on 4 GPUs wrap around: GPU 0 carries two of them.
    lay = ch.plan_layout([model("a", 1, 5, 0.3)], 4, 79.6, 0.1, MEAN)
    assert lay.models[0].gpus == ((0,), (1,), (2,), (3,), (0,))
    assert lay.partition_sum_per_gpu == (0.6, 0.3, 0.3, 0.3)
    with pytest.raises(ch.CoHostingError, match=r"GPU 0 sum to 1 \(a 0.5 \+ a 0.5\), above 1 - transient_reserve"):
        ch.plan_layout([model("a", 1, 5, 0.5)], 4, 79.6, 0.1, MEAN)
    with pytest.raises(ch.CoHostingError, match="tensor_parallel_size 3, which does not divide the machine's 8"):
        ch.plan_layout([model("a", 3, 1)], 8, 79.6, 0.1, MEAN)


def test_vllm_args_take_the_partition_and_the_models_public_name() -> None:
    g = group_plan()
    for m, release, name, seqs in (
        (g.models[0], "llama-3.1-8b-fp8-2026-11-25.1", "llama-3.1-8b", 218),
        (g.models[1], "mistral-7b-v0.3-fp8-2026-11-25.1", "mistral-7b", 233),
    ):
        args = list(m.vllm_args)
        assert args[args.index("--gpu-memory-utilization") + 1] == "0.4"
        assert args[args.index("--served-model-name") + 1 : args.index("--served-model-name") + 3] == [release, name]
        assert args[args.index("--max-num-seqs") + 1] == str(seqs)
        assert args[args.index("--port") + 1] == "8000"  # each deployed model is its own container
        container = deployed(f"vertex-{m.endpoint_id}-model")["upload_model_request"]["model"]["containerSpec"]
        assert container["args"] == args


# ---- the Vertex rendering ---------------------------------------------------------------------------------------


def test_models_share_one_resource_pool_each_behind_its_own_endpoint() -> None:
    (pool,) = resources(inv(), POOL)
    name = f"projects/{PROJECT}/locations/{REGION}/deploymentResourcePools/{pool['inputs']['pool_id']}"
    assert pool["inputs"]["pool_id"].startswith("pair-")
    d = pool["inputs"]["resource_pool"]["dedicatedResources"]
    assert d["machineSpec"] == {
        "machineType": "a3-highgpu-1g",
        "acceleratorType": "NVIDIA_H100_80GB",
        "acceleratorCount": 1,
    }
    assert (d["minReplicaCount"], d["maxReplicaCount"]) == (1, 1)
    assert pool["inputs"]["resource_pool"]["serviceAccount"] == f"llm-dev-llama-vtx@{PROJECT}.iam.gserviceaccount.com"
    for endpoint in ("llm-dev-llama", "llm-dev-mistral"):
        dm = deployed(f"vertex-{endpoint}-model")
        assert dm["deployed_model"]["sharedResources"] == name
        assert "dedicatedResources" not in dm["deployed_model"]
        assert dm["endpoint"] == f"projects/{PROJECT}/locations/{REGION}/endpoints/{endpoint}"
    weights = sorted((t["name"], t["inputs"]["weights"]) for t in resources(inv(), TRAFFIC))
    assert weights == [
        ("vertex-llm-dev-llama-traffic", {"model": 100}),
        ("vertex-llm-dev-mistral-traffic", {"model": 100}),
        ("vertex-traffic", {"stable": 100}),
    ]
    # The pool's containers run as the owner's (llama's) account: it reads both release folders; mistral's own
    # account (which uploads its model) reads mistral's folder only.
    readers = {
        r["inputs"]["member"]: r["inputs"]["condition"]["expression"]
        for r in resources(inv(), "gcp:storage/bucketIAMMember:BucketIAMMember")
    }
    llama_folder = "llama-3.1-8b-fp8/0e9e39f249a16976918f6564b8830bc894c89659/"
    mistral_folder = "mistral-7b-v0.3-fp8/e0bc86c23ce5aae1db576c8cca6f06f1f73af2db/"
    owner = readers[f"serviceAccount:llm-dev-llama-vtx@{PROJECT}.iam.gserviceaccount.com"]
    assert llama_folder in owner and mistral_folder in owner
    other = readers[f"serviceAccount:llm-dev-mistral-vtx@{PROJECT}.iam.gserviceaccount.com"]
    assert mistral_folder in other and llama_folder not in other
    # The mistral deployment waits for the pool it is deployed onto.
    (mistral,) = [r for r in resources(inv(), DEPLOYED) if r["name"] == "vertex-llm-dev-mistral-model"]
    assert pool["urn"] in mistral["dependencies"]


def test_every_cohosting_request_body_validates() -> None:
    ai: DiscoveryDocument = document("aiplatform", "v1")
    vertex = FakeVertex(ai, polls_until_done=1)
    clock = FakeClock()
    make = lambda cls: cls(transport_factory=vertex, sleep=clock.sleep, clock=clock)  # noqa: E731
    (pool,) = resources(inv(), POOL)
    pool_props = floats({k: v for k, v in pool["inputs"].items() if k != "__provider"})
    make(pv.DeploymentResourcePoolProvider).create(pool_props)
    deployer = make(pv.DeployedModelProvider)
    for endpoint in ("llm-dev-llama", "llm-dev-mistral"):
        name = f"projects/{PROJECT}/locations/{REGION}/endpoints/{endpoint}"
        vertex.endpoints[name] = {"name": name, "displayName": endpoint, "deployedModels": [], "trafficSplit": {}}
        props = floats({k: v for k, v in deployed(f"vertex-{endpoint}-model").items() if k != "__provider"})
        assert deployer.check({}, props).failures == []
        deployer.create(props)
    assert vertex.methods().count("projects.locations.deploymentResourcePools.create") == 1
    assert vertex.methods().count("projects.locations.endpoints.deployModel") == 2
    (create,) = vertex.bodies("projects.locations.deploymentResourcePools.create")
    assert (
        ai.validate(
            "GoogleCloudAiplatformV1CreateDeploymentResourcePoolRequest",
            create,
            required=("deploymentResourcePoolId", "deploymentResourcePool.dedicatedResources.machineSpec"),
        )
        == []
    )
    for body in vertex.bodies("projects.locations.endpoints.deployModel"):
        assert (
            ai.validate(
                "GoogleCloudAiplatformV1DeployModelRequest",
                body,
                required=("deployedModel.model", "deployedModel.sharedResources"),
            )
            == []
        )


# ---- every refusal, with a failing config ---------------------------------------------------------------------------


def test_weights_must_fit_the_partition() -> None:
    # 0.1 x 79.6 = 7.96 GiB < 8.46 GiB of Llama weights + 2 GiB overhead.
    v = values()
    _model(v, 0)["gpu_memory_partition"] = 0.1
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[0].gpu_memory_partition: llama-3.1-8b: the weights do not fit the "
        "partition: 8.46 GiB / TP 1 = 8.46 GiB per GPU + 2 GiB overhead > 79.6 GiB x 0.1 = 7.96 GiB"
    ]


def test_the_useful_concurrency_must_fit_the_partition() -> None:
    # 300 x 131,072 B x 800 tokens = 29.30 GiB of KV: with 8.46 GiB of weights and 2 GiB it exceeds 31.84 GiB.
    v = values()
    _model(v, 0)["useful_concurrency"] = 300
    assert round(300 * K * MEAN / GiB, 2) == 29.30
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[0].gpu_memory_partition: llama-3.1-8b: weights + KV for 300 sequences of "
        "800 tokens do not fit the partition: 8.46 GiB weights + 29.30 GiB KV + 2 GiB overhead > 79.6 GiB x 0.4 = "
        "31.84 GiB per GPU (it holds 218); raise the partition or lower useful_concurrency"
    ]


def test_partitions_leave_the_transient_reserve() -> None:
    v = values()
    _model(v, 0)["gpu_memory_partition"] = 0.5
    _model(v, 1)["gpu_memory_partition"] = 0.45
    assert issues(v) == [
        "llm-serving:cohosting.pair.models: the partitions on GPU 0 sum to 0.95 (llama-3.1-8b 0.5 + mistral-7b 0.45), "
        "above 1 - transient_reserve 0.1 = 0.9: lower the partitions or place fewer instances"
    ]
    _group(v)["transient_reserve"] = 0.05  # 0.95 <= 1 - 0.05: accepted
    assert group_plan(v).layout.partition_sum_per_gpu == (0.95,)


def test_group_schema_rules() -> None:
    v = values()
    _model(v, 1)["instances"] = 2
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].instances: a Vertex deployed model is one container, one vLLM server "
        "per replica: 1, got 2 (more instances need a GKE pod)"
    ]
    v = values()
    _model(v, 1)["model_name"] = "llama-3.1-8b"
    assert issues(v) == ["llm-serving:cohosting.pair.models[1].model_name: 'llama-3.1-8b' is given twice"]
    v = values()
    _group(v)["models"] = _group(v)["models"][:1]
    assert issues(v) == [
        "llm-serving:cohosting.pair.models: a group runs at least 2 instances (one instance alone is a pool), got 1"
    ]
    v = values()
    _group(v)["target"] = "gcs"
    assert issues(v) == ["llm-serving:cohosting.pair.target: unknown serving target 'gcs'; known: gke, vertex"]
    v = values()
    _group(v)["target"] = "gke"  # a Vertex group's own keys are not the GKE group's
    assert issues(v) == ["llm-serving:cohosting.pair.shm_gib: unknown key (not part of the schema)"]
    v = values()
    del _model(v, 1)["endpoint_id"]
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].endpoint_id: required on vertex: one endpoint per co-hosted model"
    ]
    v = values()
    v["llm-serving:cohosting"] = {"Pair": _group(v)}
    (msg,) = issues(v)
    assert msg.startswith("llm-serving:cohosting.Pair.[key]: String should match pattern")


def test_names_are_the_stacks_only_ones() -> None:
    v = values()
    _model(v, 0)["model_name"] = "qwen3-8b"
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[0].model_name: 'qwen3-8b' is already serving.model_name: "
        "each public name reaches one model"
    ]
    v = values()
    _model(v, 1)["endpoint_id"] = "llm-dev"
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].endpoint_id: 'llm-dev' is already vertex.endpoint_id: "
        "one endpoint per model"
    ]
    v = values()
    _model(v, 1)["model_name"] = "qwen3-8b-fp8-2026-11-02.1"
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].model_name: 'qwen3-8b-fp8-2026-11-02.1' is also a release id: a "
        "response's model (the release id) must tell which release served it"
    ]


def test_references_resolve() -> None:
    v = values()
    _group(v)["accelerator"] = "h100-8g"
    assert issues(v) == ["llm-serving:cohosting.pair.accelerator: unknown accelerator 'h100-8g'; known: h100-1g"]
    v = values()
    _model(v, 1)["release"] = "mistral-7b-v0.3-fp8-2026-12-01.1"
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].release: unknown release 'mistral-7b-v0.3-fp8-2026-12-01.1'; known: "
        "qwen3-8b-fp8-2026-11-02.1, llama-3.1-8b-fp8-2026-11-25.1, mistral-7b-v0.3-fp8-2026-11-25.1"
    ]
    v = values()
    del v["llm-serving:vertex"]
    found = issues(v)
    assert (
        "llm-serving:vertex: required when a co-hosted group targets vertex (pair): the endpoints' access and callers"
    ) in found


def test_group_releases_share_one_weights_bucket() -> None:
    v = values()
    rel = json.loads((ROOT / "stacks/releases/dev/mistral-7b-v0.3-fp8-2026-11-25.1.json").read_text())
    rel["weight_manifest"] = rel["weight_manifest"].replace("acme-llm-dev-weights", "acme-llm-other-weights")
    v["llm-serving:releases"][2] = rel
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].release: release 'mistral-7b-v0.3-fp8-2026-11-25.1' is in bucket "
        "'acme-llm-other-weights', the group's first in 'acme-llm-dev-weights': the resource pool's service account "
        "reads exactly one weights bucket"
    ]


def test_the_reservation_holds_pools_and_groups() -> None:
    v = values()
    _acc = v["llm-serving:accelerators"]["h100-1g"]
    _acc["reservation"] = {"mode": "existing", "name": "h100-dev", "count": 3}  # needs (1 + 1) + (1 + 1) = 4
    assert issues(v) == [
        "llm-serving:accelerators.h100-1g.reservation.count: 3 reserved machine(s) cannot hold the Vertex pools' max "
        "replicas 2 + the replacement transient (stable 1 + pair 1) = 4: a create-first replacement would find the "
        "reservation full (co-hosted groups pair included); reserve more machines, lower max_replicas, or set the "
        "pool's replacement: delete_first"
    ]
    _acc["reservation"]["count"] = 4
    plan = resolve_stack(v, STACK, ROOT).plan
    g = plan.cohosting["pair"]
    assert isinstance(g, CoHostedGroupPlan)
    # The group's pool: 4 - the stable pool's (max 1 + min 1) - its own replacement (min 1) = 1 machine; the stable
    # pool likewise: 4 - the group's (1 + 1) - 1 = 1.
    assert (g.machine.reservation_cap, g.machine.max_replicas) == (1, 1)
    assert vertex_part(plan).vertex_pools()["stable"].vertex.reservation_cap == 1
    assert g.machine.reservation_resource == f"projects/{PROJECT}/zones/us-central1-a/reservations/h100-dev"


# ---- recipes: (instances x TP) layouts that fit memory ----------------------------------------------------------------


def test_recipes_for_qwen3_32b_on_two_h100(capsys) -> None:
    # Qwen3-32B FP8 (W = 32.8e9 B) on a3-highgpu-2g, partition 0.9 per server on its GPUs, 2 GiB overhead:
    # TP 1: B = 79.6 x 0.9 - 30.55 - 2 = 39.09 GiB; k = 2 x 64 x 8 x 128 x 2 = 262,144 B/token;
    #       mean context 2,150 -> 2,160 tokens (135 blocks): floor(39.09 GiB / (262,144 x 2,160)) = 74 per instance;
    #       16,384 tokens: 9. Two instances fill the machine: 148 sequences.
    # TP 2: B = 71.64 - 15.27 - 2 = 54.37 GiB at half the KV per token: 206 and 27 (one instance).
    # Two TP-2 servers per GPU pair at 0.45 each: B = 35.82 - 15.27 - 2 = 18.55 GiB: 70 and 9 each.
    w, k = 32.8e9, 2 * 64 * 8 * 128 * 2
    b1 = 79.6 * 0.9 * GiB - w - 2 * GiB
    assert (math.floor(b1 / (k * 2160)), math.floor(b1 / (k * 16384))) == (74, 9)
    geo = capacity.Geometry(32_800_000_000, 64, 8, 128, 1.0, 2.0)
    found = ch.recipes(geo, 16384, 2, 79.6, 2150)
    assert [
        (
            r.instances,
            r.tensor_parallel_size,
            r.instances_per_gpu_set,
            r.partition,
            r.max_seqs_at_mean_context,
            r.max_seqs_at_max_model_len,
            r.machine_seqs_at_mean_context,
        )
        for r in found
    ] == [(2, 1, 1, 0.9, 74, 9, 148), (1, 2, 1, 0.9, 206, 27, 206), (2, 2, 2, 0.45, 70, 9, 140)]
    # Two TP-1 servers per GPU at 0.45 leave no room for a 16,384-token sequence: not a recipe.
    assert 79.6 * 0.45 * GiB - w - 2 * GiB < k * 16384
    # The command lists what the stack's targets can deploy, from the release's own geometry (embedding and lm_head
    # at bf16: W = 32.8e9 + 2 x 151,936 x 5,120 = 34.36e9 B): on Vertex one container per machine, so only the
    # layout of one instance; TP 2: B = 71.64 - 34.36e9 / 2 / GiB - 2 = 53.64 GiB -> 203 at the mean, 26 at 16,384.
    w_rel = 32.8e9 + 2 * 151_936 * 5120
    b2 = 79.6 * 0.9 * GiB - w_rel / 2 - 2 * GiB
    assert (round(b2 / GiB, 2), math.floor(b2 / (k / 2 * 2160)), math.floor(b2 / (k / 2 * 16384))) == (53.64, 203, 26)
    assert cli.main(["capacity", "--stack", "staging-vertex", "--recipes"]) == 0
    out = capsys.readouterr().out
    assert (
        "qwen3-32b-fp8-2026-08-23.1 on h100-tp2 (a3-highgpu-2g, 2 x nvidia-h100-80gb of 79.6 GiB), max_model_len "
        "16384, mean context 2150:"
    ) in out
    assert (
        "    1 x TP 2      1           0.9         53.64 GiB                   203               26             203  "
        "vertex pool; vertex group"
    ) in out
    assert " x TP 1 " not in out and "0.45" not in out  # two servers in one Vertex container: not deployable
    # On GKE the same machine runs them: two pods per node, or the co-host server with two instances per GPU pair.
    assert cli.main(["capacity", "--stack", "prod", "--recipes"]) == 0
    out = capsys.readouterr().out
    assert "gke pool (2 pod(s) per node); gke group (instances: 2) (a release with tensor_parallel_size 1)" in out
    assert (
        "0.45        17.82 GiB                    67                8             134  gke group (instances: 2)" in out
    )


def test_recipes_skip_layouts_the_kv_heads_or_memory_refuse() -> None:
    # 8 KV heads on 16 GPUs: TP 16 replicates one head per rank (allowed); a 3-GPU machine has TP 3, which 8 heads
    # cannot be split over (8 % 3) and which is not a multiple of them: only TP 1 remains.
    geo = capacity.Geometry(8_030_000_000, 32, 8, 128, 1.0, 2.0)
    assert [r.tensor_parallel_size for r in ch.recipes(geo, 4096, 3, 79.6, MEAN)] == [1, 1]
    # 70B at FP8 on one H100: 71.64 - 65.75 - 2 = 3.89 GiB of KV, less than one 16,384-token sequence needs
    # (2 x 80 x 8 x 128 x 2 B x 16,384 = 5 GiB): only TP >= 2 layouts remain.
    big = capacity.Geometry(70_600_000_000, 80, 8, 128, 1.0, 2.0)
    assert 79.6 * 0.9 - 70.6e9 / GiB - 2 < 2 * 80 * 8 * 128 * 2 * 16384 / GiB
    assert {r.tensor_parallel_size for r in ch.recipes(big, 16384, 8, 79.6, MEAN)} == {2, 4, 8}


# ---- monitoring per co-hosted model ----------------------------------------------------------------------------------


def test_each_co_hosted_model_has_its_own_dashboard_panels_and_alerts() -> None:
    policies = {
        (
            r["inputs"]["userLabels"]["pool"],
            r["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]["alertRule"],
        ): r["inputs"]
        for r in resources(inv(), "gcp:monitoring/alertPolicy:AlertPolicy")
    }
    for role, endpoint, release in (
        ("pair-llama-3-1-8b", "llm-dev-llama", "llama-3.1-8b-fp8-2026-11-25.1"),
        ("pair-mistral-7b", "llm-dev-mistral", "mistral-7b-v0.3-fp8-2026-11-25.1"),
    ):
        for alert in ("TtftP95OverObjective", "ItlP95OverObjective", "KvCacheSaturated"):
            query = policies[(role, alert)]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
            # the model's series: its endpoint, its deployed model (AutoMetrics' model_display_name), its release
            assert f'endpoint_id="{endpoint}"' in query and f'model_display_name="model-{release}"' in query
            assert f'model_name="{release}"' in query and "vertex_vllm_" in query
        # AutoMetrics keeps vLLM's series only: no alert on the co-host server's own
        assert (role, "CoHostedInstancesMissing") not in policies
    boards = [r["inputs"]["dashboardJson"] for r in resources(inv(), "gcp:monitoring/dashboard:Dashboard")]
    assert sum("Co-hosted llama-3.1-8b (llama-3.1-8b-fp8-2026-11-25.1) in pair" in b for b in boards) == 1
