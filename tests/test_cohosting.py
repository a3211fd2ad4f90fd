"""Model co-hosting: the co-hosted group config, the planner's memory checks with hand-computed arithmetic, and its
Vertex rendering (one deployed model with dedicated resources whose container runs the co-host server with every
model, behind one endpoint), planned by the real program under the mock monitor for the shipped ``dev-cohost`` stack.

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
    # The dev release line's endpoint and deployed model, and the group's: no deployment resource pool at all.
    assert not [t for t in types if "ResourcePool" in t]
    assert (types.count(DEPLOYED), types.count("gcp:vertex/aiEndpoint:AiEndpoint")) == (2, 2)
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


GROUP_DEPLOYMENT = "vertex-llm-dev-cohost-cohost"


def server_document() -> dict[str, Any]:
    """The co-host server's configuration the group's container runs with (its ``--config-json``)."""
    spec = deployed(GROUP_DEPLOYMENT)["upload_model_request"]["model"]["containerSpec"]
    assert spec["args"][0] == "--config-json"
    doc: dict[str, Any] = json.loads(spec["args"][1])
    return doc


def test_instances_take_the_partition_the_public_name_and_a_loopback_port() -> None:
    g = group_plan()
    doc = server_document()
    for m, inst, release, name, seqs, port in (
        (g.models[0], doc["instances"][0], "llama-3.1-8b-fp8-2026-11-25.1", "llama-3.1-8b", 218, 8100),
        (g.models[1], doc["instances"][1], "mistral-7b-v0.3-fp8-2026-11-25.1", "mistral-7b", 233, 8101),
    ):
        (planned,) = m.instances
        args = list(planned.args)
        assert args[args.index("--gpu-memory-utilization") + 1] == "0.4"
        assert args[args.index("--served-model-name") + 1 : args.index("--served-model-name") + 3] == [release, name]
        assert args[args.index("--max-num-seqs") + 1] == str(seqs)
        # Only the server's port (8000) is the container's: each instance listens on loopback from 8100 on.
        assert args[args.index("--host") + 1 : args.index("--host") + 4] == ["127.0.0.1", "--port", str(port)]
        assert inst["args"] == args and inst["port"] == port and inst["gpus"] == [0] and inst["partition"] == 0.4
        assert inst["model_names"] == [release, name]
        assert inst["verify"][:2] == ["python3", "/tmp/llm-serving/scripts/verify_release.py"]
    assert doc["port"] == 8000 and doc["gpus"] == 1 and doc["transient_reserve"] == 0.1


def test_the_group_is_one_dedicated_deployed_model_running_the_server() -> None:
    dm = deployed(GROUP_DEPLOYMENT)
    d = dm["deployed_model"]
    assert "sharedResources" not in d
    # The whole machine: acceleratorCount is the machine's GPUs, which the server hands out to its instances.
    assert d["dedicatedResources"]["machineSpec"] == {
        "machineType": "a3-highgpu-1g",
        "acceleratorType": "NVIDIA_H100_80GB",
        "acceleratorCount": 1,
    }
    assert (d["dedicatedResources"]["minReplicaCount"], d["dedicatedResources"]["maxReplicaCount"]) == (1, 1)
    assert d["serviceAccount"] == f"llm-dev-cohost-vtx@{PROJECT}.iam.gserviceaccount.com"
    assert dm["endpoint"] == f"projects/{PROJECT}/locations/{REGION}/endpoints/llm-dev-cohost"
    spec = dm["upload_model_request"]["model"]["containerSpec"]
    # The bootstrap writes the server and the verifier, then becomes the server.
    command = spec["command"]
    assert command[:2] == ["python3", "-c"] and command[-1] == "--"
    assert command[3:5] == ["/tmp/llm-serving/scripts", "cohost_server.py"]
    assert command[5] == (ROOT / "components/cohost/server.py").read_text()
    assert command[6:8] == ["verify_release.py", (ROOT / "components/serving/verify_release.py").read_text()]
    # update_models: the server follows the group's model-set object in the weights bucket.
    assert spec["args"][2:] == [
        "--watch",
        "gs://acme-llm-dev-weights/cohosting/dev-cohost/pair.json",
        "--poll-seconds",
        "30",
    ]
    # Requests reach the server's router (by the body's model); health is the server's (every instance healthy).
    assert (spec["predictRoute"], spec["healthRoute"]) == ("/v1/chat/completions", "/health")
    # Cold loads by hand: weights / 1000 MiB/s + 90 s engine init + 10 s metadata check, one model after the other.
    cold = [w / (1000 * 2**20) + 90 + 10 for w in (W_LLAMA, W_MISTRAL)]
    assert [round(c, 2) for c in cold] == [108.66, 107.17]
    window = math.ceil(sum(cold) * 1.5 / 10) * 10  # (1 + startup_margin 0.5), 10 s probe period
    assert window == 330
    assert spec["startupProbe"]["periodSeconds"] * spec["startupProbe"]["failureThreshold"] == window
    assert spec["deploymentTimeout"] == f"{window + 600}s"  # + the image-pull allowance
    doc = server_document()
    assert doc["start_timeout_seconds"] == math.ceil(max(cold) * 1.5) == 163
    assert doc["drain_seconds"] == 84 + 10  # vLLM's --shutdown-timeout (the stream bound) + the server's slack
    assert doc["restart"]["window_seconds"] == window
    # One endpoint, its one deployment at 100 %, beside the dev release line's.
    weights = sorted((t["name"], t["inputs"]["weights"]) for t in resources(inv(), TRAFFIC))
    assert weights == [("vertex-llm-dev-cohost-traffic", {"cohost": 100}), ("vertex-traffic", {"stable": 100})]
    # The group's account reads both release folders and the watched object, and nothing else of the bucket.
    readers = {
        r["inputs"]["member"]: r["inputs"]["condition"]["expression"]
        for r in resources(inv(), "gcp:storage/bucketIAMMember:BucketIAMMember")
    }
    own = readers[f"serviceAccount:llm-dev-cohost-vtx@{PROJECT}.iam.gserviceaccount.com"]
    for folder in (
        "llama-3.1-8b-fp8/0e9e39f249a16976918f6564b8830bc894c89659/",
        "mistral-7b-v0.3-fp8/e0bc86c23ce5aae1db576c8cca6f06f1f73af2db/",
    ):
        assert folder in own
    assert 'resource.name == "projects/_/buckets/acme-llm-dev-weights/objects/cohosting/dev-cohost/pair.json"' in own
    assert "qwen3" not in own


def test_every_cohosting_request_body_validates() -> None:
    ai: DiscoveryDocument = document("aiplatform", "v1")
    vertex = FakeVertex(ai, polls_until_done=1)
    clock = FakeClock()
    deployer = pv.DeployedModelProvider(transport_factory=vertex, sleep=clock.sleep, clock=clock)
    name = f"projects/{PROJECT}/locations/{REGION}/endpoints/llm-dev-cohost"
    vertex.endpoints[name] = {"name": name, "displayName": "llm-dev-cohost", "deployedModels": [], "trafficSplit": {}}
    props = floats({k: v for k, v in deployed(GROUP_DEPLOYMENT).items() if k != "__provider"})
    assert deployer.check({}, props).failures == []
    deployer.create(props)
    (upload,) = vertex.bodies("projects.locations.models.upload")
    assert ai.validate("GoogleCloudAiplatformV1UploadModelRequest", upload) == []
    (body,) = vertex.bodies("projects.locations.endpoints.deployModel")
    assert (
        ai.validate(
            "GoogleCloudAiplatformV1DeployModelRequest",
            body,
            required=("deployedModel.model", "deployedModel.dedicatedResources.machineSpec"),
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


def test_several_instances_of_one_model_share_the_machine() -> None:
    """Data parallel on Vertex: the server runs two mistral instances beside llama on the one H100, each in its own
    partition: 0.3 + 2 x 0.3 = 0.9 <= 1 - 0.1. A fourth 0.3 would not fit (1.2 > 0.9)."""
    v = values()
    for i in (0, 1):
        _model(v, i)["gpu_memory_partition"] = 0.3
    _model(v, 1)["instances"] = 2
    g = group_plan(v)
    assert [i.name for m in g.models for i in m.instances] == ["llama-3-1-8b-0", "mistral-7b-0", "mistral-7b-1"]
    assert [i.port for m in g.models for i in m.instances] == [8100, 8101, 8102]
    assert [i.gpus for m in g.models for i in m.instances] == [(0,), (0,), (0,)]
    assert [round(x, 9) for x in g.layout.partition_sum_per_gpu] == [0.9]
    # Three cold loads in turn now: 108.66 + 2 x 107.17 s, x 1.5, in 10 s probe periods.
    assert g.machine.startup_window_seconds == math.ceil((108.66 + 2 * 107.17) * 1.5 / 10) * 10 == 490
    _model(v, 0)["instances"] = 2
    (msg,) = issues(v)
    assert msg.startswith("llm-serving:cohosting.pair.models: the partitions on GPU 0 sum to 1.2")


def test_group_schema_rules() -> None:
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
    assert issues(v) == [
        "llm-serving:cohosting.pair.endpoint_id: unknown key (not part of the schema)",
        "llm-serving:cohosting.pair.shm_gib: unknown key (not part of the schema)",
    ]
    v = values()
    del _group(v)["endpoint_id"]
    assert issues(v) == ["llm-serving:cohosting.pair.endpoint_id: required key is missing"]
    v = values()
    _model(v, 1)["endpoint_id"] = "llm-dev-mistral"  # one endpoint per model was the resource-pool layout's
    assert issues(v) == ["llm-serving:cohosting.pair.models[1].endpoint_id: unknown key (not part of the schema)"]
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
    _group(v)["endpoint_id"] = "llm-dev"
    assert issues(v) == [
        "llm-serving:cohosting.pair.endpoint_id: 'llm-dev' is already vertex.endpoint_id: one endpoint per group"
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
        "'acme-llm-other-weights', the group's first in 'acme-llm-dev-weights': the group's service account reads "
        "exactly one weights bucket"
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
    # at bf16: W = 32.8e9 + 2 x 151,936 x 5,120 = 34.36e9 B). On Vertex a pool is one vLLM per machine (the layout of
    # one instance) and a group's co-host server runs any layout: TP 2, B = 71.64 - 34.36e9 / 2 / GiB - 2 = 53.64
    # GiB -> 203 at the mean, 26 at 16,384; two TP-2 instances at 0.45 share both GPUs.
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
    assert (
        "    2 x TP 2      2           0.45        17.82 GiB                    67                8             134  "
        "vertex group (instances: 2)"
    ) in out
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
    for role, release in (
        ("pair-llama-3-1-8b", "llama-3.1-8b-fp8-2026-11-25.1"),
        ("pair-mistral-7b", "mistral-7b-v0.3-fp8-2026-11-25.1"),
    ):
        for alert in ("TtftP95OverObjective", "ItlP95OverObjective", "KvCacheSaturated"):
            query = policies[(role, alert)]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
            # the model's series: the group's endpoint and its one deployed model (AutoMetrics' model_display_name,
            # ``cohost-<group>``), told apart by vLLM's model_name (the release id)
            assert 'endpoint_id="llm-dev-cohost"' in query and 'model_display_name="cohost-pair"' in query
            assert f'model_name="{release}"' in query and "vertex_vllm_" in query
        # AutoMetrics keeps vLLM's series only: no alert on the co-host server's own
        assert (role, "CoHostedInstancesMissing") not in policies
    boards = [r["inputs"]["dashboardJson"] for r in resources(inv(), "gcp:monitoring/dashboard:Dashboard")]
    assert sum("Co-hosted llama-3.1-8b (llama-3.1-8b-fp8-2026-11-25.1) in pair" in b for b in boards) == 1
