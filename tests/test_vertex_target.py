"""The Vertex AI target (issue 17, part 1): the shipped ``staging-vertex`` stack planned by the real program under
the mock monitor.

Derived values are asserted against hand-written arithmetic (the numbers are spelled out in each test); every
request body the dynamic providers would send for this stack is validated against the aiplatform.v1 discovery
document shipped in google-api-python-client, by driving the providers with the planned inputs through the
validating fake Vertex of tests/test_vertex_requests.py, and broken bodies are shown to fail; every validation rule
has a failing config asserting its key path and message; the rendered container command is executed for real
against a Cloud Storage emulator (verifier, then a stand-in ``vllm``).
"""

from __future__ import annotations

import copy
import json
import math
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.serving import verify_release as vr
from components.vertex import provider as pv
from components.vertex import requests as rq
from components.vertex.container import VERIFY_SCRIPT
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.stackfile import ROOT, _as_engine_string, read_stack_file
from infra.planning.vllm_args import VllmInputs, render_vllm_args
from infra.resolve import resolve_stack
from infra.targets.vertex import compose as target
from infra.targets.vertex.config import VertexPool
from infra.targets.vertex.planning import VertexPoolPlan
from infra.targets.vertex.planning import pools as vx
from tests.discovery import DiscoveryDocument, document
from tests.test_vertex_requests import FakeClock, FakeVertex, floats

from .conftest import plan_run, resources
from .gcs_emulator import Gcs, running_emulator

STACK = "staging-vertex"
DEPLOYED = "pulumi-python:dynamic/vertex:DeployedModel"
TRAFFIC = "pulumi-python:dynamic/vertex:EndpointTraffic"
ENDPOINT_TYPE = "gcp:vertex/aiEndpoint:AiEndpoint"
PROJECT, REGION = "acme-llm-staging", "us-central1"
ENDPOINT = f"projects/{PROJECT}/locations/{REGION}/endpoints/llm-staging"
RESERVATION = "projects/acme-capacity/zones/us-central1-a/reservations/shared-h100-staging-vertex"
SA = f"llm-staging-vtx@{PROJECT}.iam.gserviceaccount.com"
BUCKET = "acme-llm-staging-weights"
STABLE_REV = "a77a90ec726c8f7b0669da7663324540d5b15677"
CANARY_REV = "281de45e51aa15309f463357b6f785685134723b"
MiB, GiB = 2**20, 2**30
#: Qwen3-32B at FP8 (stacks/releases/staging/*.json): the catalogue's 32.8 B parameters, the quantised ones at 1 byte,
#: the embedding and lm_head (untied: 2 x 151,936 x 5,120 parameters) at bf16's 2 bytes.
W = 32.8e9 + 2 * 151_936 * 5120


# ---- helpers -----------------------------------------------------------------------------------------------------


def values() -> dict[str, Any]:
    """Decoded stack-file values (a deep copy: tests mutate them)."""
    return json.loads(json.dumps(read_stack_file(STACK, ROOT / "stacks").values))


def issues(v: dict[str, Any], stack: str = STACK) -> list[str]:
    with pytest.raises(ConfigError) as err:
        resolve_stack(v, stack, ROOT)
    return [str(i) for i in err.value.issues]


def _pool(v: dict[str, Any], role: str = "stable") -> dict[str, Any]:
    return v["llm-serving:serving"][role]


def _acc(v: dict[str, Any]) -> dict[str, Any]:
    return v["llm-serving:accelerators"]["h100-tp2"]


def inv() -> dict[str, Any]:
    return plan_run(STACK).inventory.to_dict()


def deployed(role: str, inventory: dict[str, Any] | None = None) -> dict[str, Any]:
    (r,) = [r for r in resources(inventory or inv(), DEPLOYED) if r["name"] == f"vertex-{role}"]
    return r["inputs"]


def container(role: str, inventory: dict[str, Any] | None = None) -> dict[str, Any]:
    return deployed(role, inventory)["upload_model_request"]["model"]["containerSpec"]


def plan_values(v: dict[str, Any], stack: str = STACK) -> dict[str, Any]:
    """The inventory of the real program run on these values under the mock monitor."""
    from infra.entry import main as program_main
    from infra.offline.runner import run_offline

    run = run_offline(
        lambda: program_main(),
        project="llm-serving",
        stack=stack,
        config={k: _as_engine_string(x) for k, x in v.items()},
        secret_keys=[],
    )
    return run.inventory().to_dict()


def vertex_plan(role: str = "stable", v: dict[str, Any] | None = None) -> VertexPoolPlan:
    plan = resolve_stack(v, STACK, ROOT).plan if v is not None else plan_run(STACK).resolved.plan
    p = plan.pools[role]
    assert isinstance(p, VertexPoolPlan)
    return p


def prod_values() -> dict[str, Any]:
    """The stack as a compliant prod stack (two warm replicas per pool, a reservation for them, protected)."""
    v = values()
    v["llm-serving:environment"] = "prod"
    _pool(v)["min_replicas"], _pool(v)["max_replicas"] = 2, 3
    _pool(v, "canary")["min_replicas"], _pool(v, "canary")["max_replicas"] = 2, 2
    _acc(v)["reservation"]["count"] = 9  # (3 + 2) + (2 + 2)
    v["llm-serving:vertex"]["protect"] = True
    return v


# ---- the shipped stack -------------------------------------------------------------------------------------------


def test_staging_vertex_has_no_gke_sections_and_plans_with_zero_violations(tmp_path: Path, capsys) -> None:
    v = values()
    assert not {"llm-serving:gke", "llm-serving:gateway", "llm-serving:cloud_run"} & set(v)
    assert cli.main(["plan", "--stack", STACK, "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert "policy: 0 violation(s): 0 mandatory, 0 advisory, " in out
    types = sorted(r["type"] for r in json.loads((tmp_path / "plan" / "inventory.json").read_text())["resources"])
    assert not [t for t in types if t.startswith(("kubernetes:", "gcp:container", "gcp:compute", "gcp:cloudrun"))]
    assert types.count(DEPLOYED) == 2 and types.count(TRAFFIC) == 1 and types.count(ENDPOINT_TYPE) == 1


def test_only_the_vertex_apis_are_enabled() -> None:
    enabled = sorted(r["inputs"]["service"] for r in resources(inv(), "gcp:projects/service:Service"))
    assert (
        enabled
        == sorted(target.SERVICES)
        == [
            "aiplatform.googleapis.com",
            "artifactregistry.googleapis.com",
            "iam.googleapis.com",
            "logging.googleapis.com",
            "monitoring.googleapis.com",
            "storage.googleapis.com",
        ]
    )


def test_two_plans_are_byte_identical(tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert cli.main(["plan", "--stack", STACK, "--out", str(tmp_path / out)]) == 0
    for name in ("inventory.json", "capacity.json", "policy-report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


# ---- derived values (hand arithmetic) -----------------------------------------------------------------------------


def test_reservation_affinity_names_the_stacks_reservation() -> None:
    for role in ("stable", "canary"):
        spec = deployed(role)["deployed_model"]["dedicatedResources"]["machineSpec"]
        assert spec == {
            "machineType": "a3-highgpu-2g",
            "acceleratorType": "NVIDIA_H100_80GB",
            "acceleratorCount": 2,
            "reservationAffinity": {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [RESERVATION],
            },
        }
    # Without owner_project the reservation is the stack's own project's.
    v = values()
    del _acc(v)["reservation"]["owner_project"]
    assert (
        vertex_plan(v=v).vertex.reservation_resource
        == f"projects/{PROJECT}/zones/us-central1-a/reservations/shared-h100-staging-vertex"
    )


def test_traffic_split_from_the_pool_weights() -> None:
    (traffic,) = resources(inv(), TRAFFIC)
    assert traffic["inputs"]["weights"] == {"stable": 90, "canary": 10}
    assert traffic["inputs"]["endpoint"] == ENDPOINT
    # What the provider sends once Vertex assigned the deployed-model ids: {id: percent}.
    assert rq.traffic_split({"stable": 90, "canary": 10}, {"stable": "1000", "canary": "1001"}) == {
        "1000": 90,
        "1001": 10,
    }
    v = values()
    _pool(v)["weight"], _pool(v, "canary")["weight"] = 100, 0
    (dark,) = resources(plan_values(v), TRAFFIC)
    assert dark["inputs"]["weights"] == {"stable": 100, "canary": 0}
    # A dark canary stays deployed and gets no entry in the split.
    assert rq.traffic_split(dark["inputs"]["weights"], {"stable": "1000", "canary": "1001"}) == {"1000": 100}


def test_replica_bounds_within_the_reservation() -> None:
    # 5 reserved a3-highgpu-2g machines, one TP-2 replica each. Stable: 5 - canary (max 1 + min 1) - its own
    # replacement (min 1) = 2 >= max 2. Canary: 5 - stable (2 + 1) - 1 = 1 >= max 1.
    stable, canary = vertex_plan("stable").vertex, vertex_plan("canary").vertex
    assert (stable.reservation_cap, stable.min_replicas, stable.max_replicas) == (5 - 2 - 1, 1, 2)
    assert (canary.reservation_cap, canary.min_replicas, canary.max_replicas) == (5 - 3 - 1, 1, 1)
    for role, (lo, hi) in (("stable", (1, 2)), ("canary", (1, 1))):
        d = deployed(role)["deployed_model"]["dedicatedResources"]
        assert (d["minReplicaCount"], d["maxReplicaCount"]) == (lo, hi)
    # A larger pool max than the reservation holds is capped: stable max 4 on 5 machines -> 5 - 2 - 1 = 2 (and the
    # rule reports the reservation as too small for max 4 + 1 + replacements 1 + 1 = 7).
    v = values()
    _pool(v)["max_replicas"] = 4
    assert issues(v) == [
        "llm-serving:accelerators.h100-tp2.reservation.count: 5 reserved machine(s) cannot hold the Vertex pools' "
        "max replicas 5 + the replacement transient (stable 1 + canary 1) = 7: a create-first replacement would "
        "find the reservation full; reserve more machines, lower max_replicas, or set the pool's replacement: "
        "delete_first"
    ]
    _acc(v)["reservation"]["count"] = 7
    p = vertex_plan(v=v).vertex
    assert (p.reservation_cap, p.max_replicas, p.max_reason) == (
        7 - 2 - 1,
        4,
        "pool max_replicas (reservation holds 4)",
    )
    # Below the pool's max the reservation caps maxReplicaCount (the rule above reports such a stack), never below
    # the warm minimum.
    pool = VertexPool.model_validate(_pool(v))
    assert vx.replica_bounds(pool, 2) == (2, "reservation holds 2 replica(s) for this pool")
    assert vx.replica_bounds(pool, 0) == (1, "reservation holds 0 replica(s) for this pool")
    assert vx.replica_bounds(pool, None) == (
        4,
        "pool max_replicas (no reservation: on-demand/Spot capacity is not held)",
    )


def test_cold_load_startup_probe_and_deployment_timeout() -> None:
    # Verify: the object-metadata check (10 s); vLLM streams W at the stated 1,000 MiB/s; 150 s of engine init.
    read = W / (1000 * MiB)  # 32.76 s
    cold = 10 + read + 150  # 192.76 s
    required = cold * 1.5  # 289.15 s with the default margin 0.5
    threshold = math.ceil(required / 10)  # 29 probes of 10 s
    assert (round(read, 2), round(cold, 2), threshold) == (32.76, 192.76, 29)
    p = vertex_plan().vertex
    assert p.cold_load_seconds == pytest.approx(cold)
    assert (p.startup_failure_threshold, p.startup_window_seconds) == (29, 290)
    assert p.deployment_timeout_seconds == 290 + 600  # + the image-pull allowance
    c = container("stable")
    assert c["startupProbe"] == {
        "httpGet": {"path": "/health", "port": 8000},
        "periodSeconds": 10,
        "timeoutSeconds": 10,
        "failureThreshold": 29,
        "successThreshold": 1,
        "initialDelaySeconds": 0,
    }
    assert c["healthProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert c["healthProbe"]["failureThreshold"] == 3
    assert (c["deploymentTimeout"], c["sharedMemorySizeMb"]) == ("890s", str(16 * 1024))
    assert (c["healthRoute"], c["predictRoute"], c["ports"]) == (
        "/health",
        "/v1/chat/completions",
        [{"containerPort": 8000}],
    )


def test_a_cold_load_beyond_the_deployment_timeout_is_an_error() -> None:
    # 5 MiB/s: 34.36e9 / (5 MiB/s) + 10 + 150 = 6,713 s; x 1.5 = 10,069 s -> 1,007 x 10 s = 10,070 s + 600 s > 7,200 s.
    v = values()
    _pool(v)["loading"]["throughput_mib_s"] = 5
    cold = W / (5 * MiB) + 160
    n = math.ceil(cold * 1.5 / 10)
    assert (round(cold), n) == (6713, 1007)
    assert issues(v) == [
        f"llm-serving:serving.stable.loading: the deployment cannot wait for the cold load: {cold:.0f} s x (1 + margin "
        f"0.5) = {cold * 1.5:.0f} s needs a {n * 10} s startup window ({n} x 10 s), + 600 s image pull = "
        f"{n * 10 + 600} s, above Vertex's deploymentTimeout limit of 7200 s; load faster (loading.throughput_mib_s) "
        "or lower startup_margin knowingly"
    ]


def test_autoscaling_on_vllms_queue_at_the_hpa_target() -> None:
    d = deployed("stable")["deployed_model"]["dedicatedResources"]
    assert d["autoscalingMetricSpecs"] == [
        {"metricName": "prometheus.googleapis.com/vertex_vllm_num_requests_waiting", "target": 3}
    ]
    v = values()
    _pool(v)["autoscaling"] = {"signal": "accelerator_duty_cycle"}
    _pool(v, "canary")["autoscaling"] = {"signal": "vllm_queue", "target": 5}
    assert (vertex_plan("stable", v).vertex.autoscaling_metric, vertex_plan("stable", v).vertex.autoscaling_target) == (
        "aiplatform.googleapis.com/prediction/online/accelerator/duty_cycle",
        60,
    )
    assert vertex_plan("canary", v).vertex.autoscaling_target == 5


def test_vllm_args_come_from_the_one_renderer_with_the_public_name() -> None:
    # KV budget per GPU: 79.6 GiB x 0.9 - W / TP 2 - 2 GiB overhead; per token per GPU 2 x 64 layers x (8 / 2) KV
    # heads x 128 x 2 bytes = 131,072 B; mean context 1,800 + 350 = 2,150 tokens = 135 blocks of 16 = 2,160.
    budget = 79.6 * GiB * 0.9 - W / 2 - 2 * GiB
    assert math.floor(budget / (131_072 * 2160)) == 203
    assert math.floor(budget / (131_072 * 16384)) == 26  # sequences at max_model_len
    for role, rev, release in (
        ("stable", STABLE_REV, "qwen3-32b-fp8-2026-08-23.1"),
        ("canary", CANARY_REV, "qwen3-32b-fp8-2026-11-20.1"),
    ):
        uri = f"gs://{BUCKET}/qwen3-32b-fp8/{rev}/"
        expected = render_vllm_args(
            VllmInputs(
                model=uri,
                streamer_concurrency=32,
                served_model_names=(release, "qwen3-32b"),
                port=8000,
                tensor_parallel_size=2,
                max_model_len=16384,
                gpu_memory_utilization=0.9,
                max_num_seqs=203,
                max_num_batched_tokens=8192,
                dtype="bfloat16",
                kv_cache_dtype="auto",
                quantization="fp8",
                shutdown_timeout_seconds=207,  # ceil(1.5 s + 4,096 x 0.05 s = 206.3 s)
                max_output_tokens=4096,
            )
        )
        assert container(role)["args"] == expected
        assert vertex_plan(role).capacity.max_seqs_at_max_model_len == 26
        assert deployed(role)["upload_model_request"]["model"]["artifactUri"] == uri
        assert container(role)["imageUri"] == vertex_plan(role).release.image
        assert "@sha256:" in container(role)["imageUri"]
    (traffic,) = resources(inv(), TRAFFIC)
    assert traffic["inputs"]["inference_timeout_seconds"] == 207


def test_the_serving_account_and_callers() -> None:
    for role in ("stable", "canary"):
        assert deployed(role)["deployed_model"]["serviceAccount"] == SA
        assert deployed(role)["upload_model_request"]["serviceAccount"] == SA
    (reader,) = resources(inv(), "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert (reader["inputs"]["bucket"], reader["inputs"]["role"]) == (BUCKET, "roles/storage.objectViewer")
    # ... on the two release folders only: their objects, and listings under them (the verifier's and the
    # streamer's objects.list calls, whose resource is the bucket).
    folders = [f"qwen3-32b-fp8/{STABLE_REV}/", f"qwen3-32b-fp8/{CANARY_REV}/"]
    assert reader["inputs"]["condition"]["expression"] == " || ".join(
        f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/{f}") || '
        f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{f}")'
        for f in folders
    )
    assert reader["inputs"]["condition"]["title"] == "llm-staging-release-folders"
    (repo,) = resources(inv(), "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    assert (repo["inputs"]["repository"], repo["inputs"]["role"]) == ("serving", "roles/artifactregistry.reader")
    callers = sorted(
        (c["inputs"]["role"], c["inputs"]["member"])
        for c in resources(inv(), "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember")
    )
    assert callers == [
        ("roles/aiplatform.user", "group:llm-serving-team@acme.example"),
        ("roles/aiplatform.user", f"serviceAccount:loadgen@{PROJECT}.iam.gserviceaccount.com"),
    ]
    assert "allUsers" not in json.dumps(inv()) and "allAuthenticatedUsers" not in json.dumps(inv())
    (endpoint,) = resources(inv(), ENDPOINT_TYPE)
    assert endpoint["inputs"]["dedicatedEndpointEnabled"] is True and endpoint["inputs"]["name"] == "llm-staging"


def test_private_service_connect_access() -> None:
    v = values()
    v["llm-serving:vertex"].update(
        access="private_service_connect", private_service_connect={"project_allowlist": ["acme-llm-clients"]}
    )
    (endpoint,) = resources(plan_values(v), ENDPOINT_TYPE)
    assert endpoint["inputs"]["privateServiceConnectConfig"] == {
        "enablePrivateServiceConnect": True,
        "projectAllowlists": ["acme-llm-clients"],
    }
    assert "dedicatedEndpointEnabled" not in endpoint["inputs"]


# ---- every request body against the aiplatform.v1 discovery document --------------------------------------------


@pytest.fixture(scope="module")
def ai() -> DiscoveryDocument:
    return document("aiplatform", "v1")


def _fake(ai: DiscoveryDocument) -> FakeVertex:
    vertex = FakeVertex(ai, polls_until_done=1)
    vertex.endpoints = {
        ENDPOINT: {"name": ENDPOINT, "displayName": "llm-staging", "deployedModels": [], "trafficSplit": {}}
    }
    return vertex


def _make(cls: type, vertex: FakeVertex) -> Any:
    clock = FakeClock()
    return cls(transport_factory=vertex, sleep=clock.sleep, clock=clock)


def test_every_request_body_of_this_stack_validates(ai: DiscoveryDocument) -> None:
    """The planned inputs of both deployed models and the traffic split, handed to the real providers as Pulumi hands
    them (numbers as floats): create, mutate the replica bounds, patch the labels, move the split, undeploy and
    delete. The fake Vertex validates every call's parameters and body against the method's request schema."""
    vertex = _fake(ai)
    deployer = _make(pv.DeployedModelProvider, vertex)
    outs: dict[str, dict[str, Any]] = {}
    for role in ("stable", "canary"):
        props = floats({k: v for k, v in deployed(role).items() if k != "__provider"})
        assert deployer.check({}, props).failures == []
        outs[role] = {**props, **deployer.create(props).outs}
    (traffic_res,) = resources(inv(), TRAFFIC)
    traffic = _make(pv.EndpointTrafficProvider, vertex)
    tprops = floats(
        {
            **{k: v for k, v in traffic_res["inputs"].items() if k != "__provider"},
            "deployed_model_ids": {r: outs[r]["deployed_model_id"] for r in outs},
        }
    )
    assert traffic.check({}, tprops).failures == []
    tout = traffic.create(tprops).outs
    assert vertex.endpoints[ENDPOINT]["trafficSplit"] == {
        outs["stable"]["deployed_model_id"]: 90,
        outs["canary"]["deployed_model_id"]: 10,
    }
    # Scale the stable pool and relabel it (mutateDeployedModel + models.patch), promote the canary, remove stable.
    news = copy.deepcopy(outs["stable"])
    news["deployed_model"]["dedicatedResources"]["maxReplicaCount"] = 3.0
    news["upload_model_request"]["model"]["labels"]["team"] = "llm"
    deployer.update("id", outs["stable"], news)
    promoted = {**tprops, "weights": {"stable": 0.0, "canary": 100.0}}
    traffic.update("id", tout, promoted)
    deployer.delete("id", outs["stable"])
    methods = set(vertex.methods())
    assert {
        "projects.locations.models.upload",
        "projects.locations.endpoints.deployModel",
        "projects.locations.endpoints.patch",
        "projects.locations.endpoints.mutateDeployedModel",
        "projects.locations.models.patch",
        "projects.locations.endpoints.undeployModel",
        "projects.locations.models.delete",
    } <= methods
    # The bodies that went over the wire are the planned ones: every upload body is this stack's, unchanged.
    uploads = vertex.bodies("projects.locations.models.upload")
    assert uploads == [
        {**deployed(role)["upload_model_request"], "modelId": deployed(role)["model_id"]}
        for role in ("stable", "canary")
    ]
    for body in uploads:
        assert (
            ai.validate(
                "GoogleCloudAiplatformV1UploadModelRequest",
                body,
                required=(
                    "model.displayName",
                    "model.artifactUri",
                    "model.containerSpec.imageUri",
                    "model.containerSpec.ports[].containerPort",
                ),
            )
            == []
        )
    for body in vertex.bodies("projects.locations.endpoints.deployModel"):
        assert (
            ai.validate(
                "GoogleCloudAiplatformV1DeployModelRequest",
                body,
                required=(
                    "deployedModel.model",
                    "deployedModel.dedicatedResources.machineSpec.machineType",
                    "deployedModel.dedicatedResources.minReplicaCount",
                ),
            )
            == []
        )
        assert body["deployedModel"]["dedicatedResources"]["machineSpec"]["reservationAffinity"]["values"] == [
            RESERVATION
        ]
    assert vertex.bodies("projects.locations.endpoints.patch")[0] == {
        "trafficSplit": {deployed("stable")["deployed_model_id"]: 90, deployed("canary")["deployed_model_id"]: 10},
        "clientConnectionConfig": {"inferenceTimeout": "207s"},
    }


def test_a_broken_body_of_this_stack_fails(ai: DiscoveryDocument) -> None:
    good = deployed("stable")["upload_model_request"]
    assert ai.validate("GoogleCloudAiplatformV1UploadModelRequest", good) == []
    wrong_field = copy.deepcopy(good)
    wrong_field["model"]["containerSpec"]["sharedMemorySizeMB"] = wrong_field["model"]["containerSpec"].pop(
        "sharedMemorySizeMb"
    )
    assert ai.validate("GoogleCloudAiplatformV1UploadModelRequest", wrong_field) == [
        "$.model.containerSpec.sharedMemorySizeMB: unknown field (GoogleCloudAiplatformV1ModelContainerSpec has no "
        "field 'sharedMemorySizeMB'); did you mean 'sharedMemorySizeMb'?"
    ]
    deploy = rq.deploy_model_request(
        f"projects/{PROJECT}/locations/{REGION}/models/1", deployed("stable")["deployed_model"]
    )
    assert ai.validate("GoogleCloudAiplatformV1DeployModelRequest", deploy) == []
    wrong_enum = copy.deepcopy(deploy)
    wrong_enum["deployedModel"]["dedicatedResources"]["machineSpec"]["reservationAffinity"][
        "reservationAffinityType"
    ] = "SPECIFIC"
    (error,) = ai.validate("GoogleCloudAiplatformV1DeployModelRequest", wrong_enum)
    assert error.startswith(
        "$.deployedModel.dedicatedResources.machineSpec.reservationAffinity."
        'reservationAffinityType: "SPECIFIC" is not a value of '
    )
    assert "SPECIFIC_RESERVATION" in error
    # The fake Vertex refuses it the same way the real API would, before anything is applied.
    vertex = _fake(ai)
    props = floats({k: v for k, v in deployed("stable").items() if k != "__provider"})
    props["upload_model_request"] = wrong_field
    with pytest.raises(AssertionError, match="sharedMemorySizeMB: unknown field"):
        _make(pv.DeployedModelProvider, vertex).create(props)
    assert vertex.models == {}


# ---- the release verifier runs before vLLM, for real ---------------------------------------------------------------


def _fake_vllm(bin_dir: Path, record: Path) -> None:
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


@pytest.fixture(scope="module")
def staging_bucket() -> Iterator[Gcs]:
    with running_emulator(BUCKET) as gcs:
        yield gcs


def _stage(gcs: Gcs, tmp_path: Path, revision: str, tamper: bool = False) -> None:
    """The release folder in the emulator: two files and their manifest, built with verify_release's functions."""
    from infra.offline.release.stage import hash_file

    folder = tmp_path / "release"
    folder.mkdir()
    (folder / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (folder / "model.safetensors").write_bytes(os.urandom(1 << 16))
    files = [vr.ManifestFile(p.name, *hash_file(p)) for p in sorted(folder.iterdir())]
    manifest = vr.render_manifest(vr.build_manifest("qwen3-32b-fp8", revision, revision, files))
    bucket = Gcs.client(gcs.emulator_url).bucket(BUCKET)
    for p in sorted(folder.iterdir()):
        data = p.read_bytes() if not (tamper and p.name == "config.json") else b'{"architectures": ["OtherModel"]}'
        bucket.blob(f"qwen3-32b-fp8/{revision}/{p.name}").upload_from_string(data)
    bucket.blob(f"qwen3-32b-fp8/{revision}/{vr.MANIFEST_NAME}").upload_from_string(manifest)


def _run(c: dict[str, Any], gcs: Gcs, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    argv = [sys.executable if a == "python3" else a for a in c["command"] + c["args"]]
    record = tmp_path / "exec.json"
    _fake_vllm(tmp_path / "bin", record)
    env = {**Gcs.env(gcs.emulator_url), "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env), record


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_the_verifier_checks_the_release_then_execs_vllm(staging_bucket: Gcs, tmp_path: Path) -> None:
    staging_bucket.wipe()
    c = container("canary")
    assert c["command"][:2] == ["python3", "-c"]
    assert c["command"][2] == VERIFY_SCRIPT.read_text(encoding="utf-8")  # the very same verifier code
    assert c["command"][3:] == [
        "gcs",
        "--bucket",
        BUCKET,
        "--prefix",
        f"qwen3-32b-fp8/{CANARY_REV}",
        "--expect-revision",
        CANARY_REV,
        "--exec",
        "--",
        "vllm",
        "serve",
    ]
    _stage(staging_bucket, tmp_path, CANARY_REV)
    proc, record = _run(c, staging_bucket, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verify_release: verified 2 files" in proc.stdout
    assert json.loads(record.read_text()) == ["serve", *c["args"]]


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_tampered_release_never_reaches_vllm(staging_bucket: Gcs, tmp_path: Path) -> None:
    staging_bucket.wipe()
    _stage(staging_bucket, tmp_path, CANARY_REV, tamper=True)
    proc, record = _run(container("canary"), staging_bucket, tmp_path)
    assert proc.returncode == vr.EXIT_MISMATCH, proc.stdout + proc.stderr
    assert not record.exists()


# ---- every validation rule, with a failing config --------------------------------------------------------------------


def test_the_vertex_section_is_required() -> None:
    v = values()
    del v["llm-serving:vertex"]
    assert issues(v) == [
        "llm-serving:vertex: required when a pool targets vertex (stable, canary): the endpoint id, "
        "its access and its callers"
    ]


def test_vertex_section_schema_rules() -> None:
    v = values()
    v["llm-serving:vertex"]["caller_members"] = ["allUsers", "alice@acme.example"]
    assert issues(v) == [
        "llm-serving:vertex.caller_members[0]: allUsers would let anyone call the endpoint and spend its GPUs: name "
        "principals (user:, group:, serviceAccount:, domain:, principal:, principalSet:)",
        "llm-serving:vertex.caller_members[1]: 'alice@acme.example' is not an IAM member: <type>:<id> with type user, "
        "group, serviceAccount, domain, principal or principalSet",
    ]
    v = values()
    v["llm-serving:vertex"]["access"] = "private_service_connect"
    assert issues(v) == [
        "llm-serving:vertex.private_service_connect: required with access: private_service_connect "
        "(the consumer projects)"
    ]
    v = values()
    v["llm-serving:vertex"]["private_service_connect"] = {"project_allowlist": ["acme-llm-clients"]}
    assert issues(v) == ["llm-serving:vertex.private_service_connect: only with access: private_service_connect"]
    v = values()
    v["llm-serving:vertex"]["endpoint_id"] = "llm-staging-endpoint-for-the-team"
    (msg,) = issues(v)
    assert msg.startswith("llm-serving:vertex.endpoint_id: String should match pattern")


def test_pool_schema_rules() -> None:
    v = values()
    _pool(v)["max_replicas"] = 0
    assert issues(v) == ["llm-serving:serving.stable.max_replicas: Input should be greater than or equal to 1 (got 0)"]
    v = values()
    _pool(v, "canary")["min_replicas"] = 2
    assert issues(v) == ["llm-serving:serving.canary.max_replicas: must be >= min_replicas (2), got 1"]
    v = values()
    _pool(v)["loading"]["path"] = "hyperdisk_ml"
    assert issues(v) == [
        "llm-serving:serving.stable.loading.path: Input should be 'gcs_streaming' (got 'hyperdisk_ml')"
    ]
    v = values()
    _pool(v)["instances"] = 1
    assert issues(v) == ["llm-serving:serving.stable.instances: unknown key (not part of the schema)"]


def test_pools_name_known_accelerators() -> None:
    v = values()
    _pool(v)["accelerator"] = "h100-tp4"
    assert issues(v) == ["llm-serving:serving.stable.accelerator: unknown accelerator 'h100-tp4'; known: h100-tp2"]


def _price(v: dict[str, Any], machine: str, gpu: str) -> None:
    pricing = v["llm-serving:vertex"]["pricing"]
    pricing["machine_hour_usd"][machine] = 1.0
    pricing["accelerator_hour_usd"][gpu] = 1.0


def test_the_gpu_must_be_offered_by_vertex() -> None:
    v = values()
    _acc(v).update(machine_type="a4-highgpu-2g", gpu_type="nvidia-b200", allow_unknown_machine_pair=True)
    _price(v, "a4-highgpu-2g", "nvidia-b200")
    (msg,) = issues(v)
    assert msg.startswith(
        "llm-serving:accelerators.h100-tp2.gpu_type: nvidia-b200 has no known Vertex AI "
        "MachineSpec.acceleratorType; known: nvidia-a100-80gb, "
    )


def test_vertex_serves_only_gpus_with_a_serving_quota() -> None:
    # H100 Mega is a value of the MachineSpec enum, but gcloud knows no custom_model_serving quota for it.
    v = values()
    _acc(v).update(machine_type="a3-megagpu-8g", gpu_type="nvidia-h100-mega-80gb", gpus_per_node=2)
    _acc(v)["allow_unknown_machine_pair"] = True
    _price(v, "a3-megagpu-8g", "nvidia-h100-mega-80gb")
    assert [i for i in issues(v) if "serving quota" in i] == [
        "llm-serving:accelerators.h100-tp2.gpu_type: nvidia-h100-mega-80gb has no Vertex AI serving quota "
        "(custom_model_serving_*): Vertex inference is not known to offer it; serve it on GKE"
    ]


def test_every_vertex_machine_has_a_vertex_price() -> None:
    v = values()
    pricing = v["llm-serving:vertex"]["pricing"]
    del pricing["machine_hour_usd"]["a3-highgpu-2g"], pricing["accelerator_hour_usd"]["nvidia-h100-80gb"]
    assert issues(v) == [
        "llm-serving:vertex.pricing.accelerator_hour_usd: no Vertex AI prediction price for nvidia-h100-80gb "
        "(accelerators.h100-tp2.gpu_type): add its accelerator-hour price from "
        "https://cloud.google.com/vertex-ai/pricing (0 if the machine's price includes it)",
        "llm-serving:vertex.pricing.machine_hour_usd: no Vertex AI prediction price for a3-highgpu-2g "
        "(accelerators.h100-tp2.machine_type): add its node-hour price from https://cloud.google.com/vertex-ai/pricing",
    ]
    v = values()
    v["llm-serving:vertex"]["pricing"]["as_of"] = "2026-02-30"
    (msg,) = issues(v)
    assert msg.startswith("llm-serving:vertex.pricing.as_of: '2026-02-30' is not a calendar date")


def test_cost_uses_vertex_prediction_prices_not_compute_engine() -> None:
    # staging-vertex: a3-highgpu-2g node hour 3.40 + 2 H100 hours x 11.35 = 26.10 USD per replica, not the
    # topology's Compute Engine node_hourly_usd 22.06.
    stable = vertex_plan("stable")
    assert stable.vertex.replica_hour_usd == 26.10 == stable.capacity.replica_hourly_usd
    v = values()
    v["llm-serving:vertex"]["pricing"]["accelerator_hour_usd"]["nvidia-h100-80gb"] = 10.0
    assert vertex_plan("stable", v).capacity.replica_hourly_usd == 3.40 + 2 * 10.0
    # The Vertex serving quota the stack needs: max replicas (2 + 1) x 2 GPUs = 6, and a create-first replacement's
    # min replicas (1 + 1) x 2 = 4 beside them.
    from infra.targets.vertex.report import report_lines, serving_quota

    plan = plan_run(STACK).resolved.plan
    assert serving_quota(plan) == {"aiplatform.googleapis.com/custom_model_serving_nvidia_h100_gpus": (6, 4)}
    assert report_lines(plan)[0] == (
        "Vertex serving quota aiplatform.googleapis.com/custom_model_serving_nvidia_h100_gpus (per project and "
        "region): 6 GPUs at max replicas + 4 during a create-first replacement = 10"
    )


def test_the_release_fills_the_machine() -> None:
    v = values()
    _acc(v).update(machine_type="a3-highgpu-4g", gpus_per_node=4)
    _price(v, "a3-highgpu-4g", "nvidia-h100-80gb")
    assert issues(v) == [
        f"llm-serving:serving.{role}.accelerator: release {rel!r} runs on tensor_parallel_size 2 GPU(s), a h100-tp2 "
        "replica (a3-highgpu-4g) has 4: one Vertex replica is one machine, so pick the topology whose GPU count "
        "equals the release's tensor parallelism"
        for role, rel in (("canary", "qwen3-32b-fp8-2026-11-20.1"), ("stable", "qwen3-32b-fp8-2026-08-23.1"))
    ]


def test_the_accelerator_zone_is_the_stacks() -> None:
    v = values()
    _acc(v)["zone"] = "us-central1-b"
    assert issues(v) == [
        "llm-serving:accelerators.h100-tp2.zone: zone 'us-central1-b' is not one of the stack's zones ['us-central1-a']"
    ]


def test_the_reservation_is_an_existing_one() -> None:
    v = values()
    _acc(v)["reservation"] = {"mode": "create", "name": "llm-h100", "count": 5}
    assert issues(v) == [
        "llm-serving:accelerators.h100-tp2.reservation.mode: Vertex pools consume an existing reservation by name "
        "(mode: existing); the vertex target does not create one, and the Vertex AI service agent needs "
        "compute.reservations read on its project"
    ]


def test_the_reservation_holds_max_plus_replacement() -> None:
    v = values()
    _acc(v)["reservation"]["count"] = 4  # needs (2 + 1) + (1 + 1) = 5
    assert issues(v) == [
        "llm-serving:accelerators.h100-tp2.reservation.count: 4 reserved machine(s) cannot hold the Vertex pools' max "
        "replicas 3 + the replacement transient (stable 1 + canary 1) = 5: a create-first replacement would find the "
        "reservation full; reserve more machines, lower max_replicas, or set the pool's replacement: delete_first"
    ]
    # A delete-first canary needs no room beside it: 3 + stable 1 = 4 machines hold the stack, and the planner gives
    # the canary 4 - stable (2 + 1) - 0 = 1 replica, the stable 4 - canary (1 + 0) - 1 = 2.
    _pool(v, "canary")["replacement"] = "delete_first"
    resolve_stack(v, STACK, ROOT)  # no issue
    stable, canary = vertex_plan("stable", v).vertex, vertex_plan("canary", v).vertex
    assert (stable.reservation_cap, canary.reservation_cap) == (4 - 1 - 1, 4 - 3 - 0)
    assert (canary.replacement, deployed("canary", plan_values(v))["replacement"]) == ("delete_first",) * 2
    # Both delete-first: 3 machines are enough (max 2 + 1, no transient).
    _pool(v, "stable")["replacement"] = "delete_first"
    _acc(v)["reservation"]["count"] = 3
    resolve_stack(v, STACK, ROOT)
    _acc(v)["reservation"]["count"] = 2
    assert issues(v) == [
        "llm-serving:accelerators.h100-tp2.reservation.count: 2 reserved machine(s) cannot hold the Vertex pools' max "
        "replicas 3 + the replacement transient (0) = 3: a create-first replacement would find the reservation full; "
        "stable, canary replace(s) delete-first; reserve more machines, lower max_replicas, or set the pool's "
        "replacement: delete_first"
    ]


def test_delete_first_is_refused_for_a_serving_prod_pool() -> None:
    v = prod_values()
    _pool(v, "stable")["replacement"] = "delete_first"
    assert [i for i in issues(v) if "replacement:" in i] == [
        "llm-serving:serving.stable.replacement: delete_first would leave pool stable (90 % of traffic) without a "
        "deployment during every replacement; prod replaces create-first (reserve the min replicas once more)"
    ]
    v["llm-serving:environment"] = "staging"  # outside prod a pool may accept the gap
    assert vertex_plan("stable", v).vertex.replacement == "delete_first"


def test_the_releases_share_one_weights_bucket() -> None:
    v = values()
    canary = json.loads((ROOT / "stacks/releases/staging/qwen3-32b-fp8-2026-11-20.1.json").read_text())
    canary["weight_manifest"] = canary["weight_manifest"].replace(BUCKET, "acme-llm-other-weights")
    v["llm-serving:releases"][1] = canary
    assert issues(v) == [
        "llm-serving:releases[1].weight_manifest: bucket 'acme-llm-other-weights' differs from "
        "'acme-llm-staging-weights' of the stable release: the Vertex serving account reads exactly one weights bucket"
    ]


def test_a_split_across_targets_is_refused() -> None:
    v = values()
    _pool(v, "canary")["target"] = "cloud_run"
    found = issues(v)
    assert (
        "llm-serving:serving.canary.target: stable targets vertex and canary cloud_run: a Vertex traffic split is "
        "between the deployed models of one endpoint; put both pools on one target"
    ) not in found  # schema first
    assert any(i.startswith("llm-serving:serving.canary.") for i in found)
    v = json.loads(json.dumps(read_stack_file("dev-cloudrun", ROOT / "stacks").values))
    v["llm-serving:serving"]["canary"] = {
        **_pool(values(), "canary"),
        "release": "qwen3-8b-fp8-2026-11-02.1",
        "weight": 0,
    }
    v["llm-serving:serving"]["stable"]["weight"] = 100
    assert (
        "llm-serving:serving.canary.target: stable targets cloud_run and canary vertex: a traffic split works "
        "within one target (one Cloud Run service's revisions or one Vertex endpoint's deployed models); put both "
        "pools on one"
    ) in issues(v, "dev-cloudrun")


def test_prod_rules() -> None:
    v = prod_values()
    resolve_stack(v, "prod-vertex", ROOT)  # the compliant baseline plans
    v = prod_values()
    _pool(v)["min_replicas"] = 1
    v["llm-serving:vertex"]["protect"] = False
    assert issues(v, "prod-vertex") == [
        "llm-serving:serving.stable.min_replicas: prod keeps at least 2 warm replicas per Vertex pool, got 1",
        "llm-serving:vertex.protect: prod must protect the Vertex endpoint and its serving account from deletion",
    ]
    v = prod_values()
    del _acc(v)["reservation"]
    assert issues(v, "prod-vertex") == [
        "llm-serving:accelerators.h100-tp2.reservation: prod Vertex pools must consume a specific zonal reservation "
        "(quota is not capacity)"
    ]
    v = prod_values()
    del _acc(v)["reservation"]
    _acc(v)["spot"] = True
    assert issues(v, "prod-vertex") == [
        "llm-serving:accelerators.h100-tp2.spot: Spot VMs are not allowed in prod: they are preempted without notice"
    ]


def test_images_come_from_the_stack_registry() -> None:
    v = values()
    v["llm-serving:vertex"]["repository"] = "other"
    assert issues(v) == [
        f"llm-serving:releases[{i}].image: the Vertex serving account reads the stack's repository "
        f"us-central1-docker.pkg.dev/{PROJECT}/other/... only, got {image}"
        for i, image in enumerate(json.loads((ROOT / p).read_text())["image"] for p in values()["llm-serving:releases"])
    ]
    del v["llm-serving:vertex"]["repository"]  # no repository: the Vertex AI Service Agent pulls the image
    resolve_stack(v, STACK, ROOT)


def test_an_unknown_target_names_all_three() -> None:
    v = values()
    _pool(v)["target"] = "vertex-ai"
    assert issues(v) == [
        "llm-serving:serving.stable.target: unknown serving target 'vertex-ai'; known: gke, cloud_run, vertex"
    ]


def test_the_vertex_docs_figures_are_the_plans() -> None:
    """docs/vertex.md's replica price and docs/deploying.md's serving quota are this stack's plan."""
    from infra.targets.vertex.report import serving_quota

    stable = vertex_plan("stable").vertex
    v = values()["llm-serving:vertex"]["pricing"]
    machine, gpu = v["machine_hour_usd"]["a3-highgpu-2g"], v["accelerator_hour_usd"]["nvidia-h100-80gb"]
    vertex_md = (ROOT / "docs" / "vertex.md").read_text()
    assert f"{machine:.2f} + 2 × {gpu:.2f} = {stable.replica_hour_usd:.2f} USD per replica hour" in vertex_md
    ((at_max, transient),) = serving_quota(plan_run(STACK).resolved.plan).values()
    deploying = (ROOT / "docs" / "deploying.md").read_text()
    assert (
        f"staging-vertex: {at_max} GPUs at max + {transient} during a replacement = {at_max + transient}" in deploying
    )
