"""VertexServing under the Pulumi SDK's mock monitor (infra.offline.runner.run_offline): what it registers, that
every request body it hands its dynamic resources validates against aiplatform.v1, and that the pickled
``__provider`` of those resources is the same in every run and every process."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickletools
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.vertex import requests as rq
from components.vertex.endpoint import (
    ImageRepository,
    PrivateServiceConnect,
    VertexDeployment,
    VertexServing,
    VertexServingArgs,
    VertexServingConfigError,
)
from infra.offline.runner import OfflineRun, run_offline
from tests.discovery import document

REPO = Path(__file__).resolve().parents[1]
PROJECT, REGION, ZONE = "acme-llm-prod", "us-central1", "us-central1-a"
BUCKET = "acme-llm-prod-weights"
IMAGE = "us-central1-docker.pkg.dev/acme-llm-prod/serving/vllm@sha256:" + "ab" * 32
SA_EMAIL = f"vertex-serving@{PROJECT}.iam.gserviceaccount.com"
COMPONENT = "llm-serving:vertex:VertexServing"
DEPLOYED = "pulumi-python:dynamic/vertex:DeployedModel"
TRAFFIC = "pulumi-python:dynamic/vertex:EndpointTraffic"
RESERVATION = f"projects/{PROJECT}/zones/{ZONE}/reservations/llm-h100"


def model(revision: str, release: str) -> rq.ModelSpec:
    return rq.ModelSpec(
        display_name=release,
        artifact=rq.ReleaseArtifact(BUCKET, "qwen3-32b", revision),
        container=rq.ContainerSpec(
            image=IMAGE,
            command=("vllm", "serve"),
            args=("--model", f"gs://{BUCKET}/qwen3-32b/{revision}/", "--load-format", "runai_streamer"),
            shared_memory_mb=16384,
            startup_probe=rq.startup_probe(272),
            health_probe=rq.HttpProbe("/health"),
            deployment_timeout_seconds=3600,
        ),
        labels={"llm-serving-io-release": rq.label_value(release)},
    )


def h100(min_r: int = 2, max_r: int = 4) -> rq.DedicatedResources:
    return rq.DedicatedResources(
        rq.MachineSpec("a3-highgpu-2g", "nvidia-h100-80gb", 2, rq.Reservation(PROJECT, ZONE, "llm-h100")),
        rq.Scaling(min_r, max_r, (rq.AutoscalingTarget("vllm_queue", 3),)),
    )


def args(**overrides: Any) -> VertexServingArgs:
    base: dict[str, Any] = dict(
        stack="prod",
        project=PROJECT,
        region=REGION,
        endpoint_id="llm-prod",
        display_name="llm-prod",
        weights_bucket=BUCKET,
        service_account_id="vertex-serving",
        deployments=(
            VertexDeployment("stable", 100, model("a" * 40, "qwen3-32b-fp8-2026-08-23.1"), h100()),
            VertexDeployment("canary", 0, model("b" * 40, "qwen3-32b-fp8-2026-09-01.1"), h100(1, 2)),
        ),
        caller_members=("group:llm-callers@example.com", f"serviceAccount:gateway@{PROJECT}.iam.gserviceaccount.com"),
        inference_timeout_seconds=1800,
        labels={"env": "prod"},
    )
    base.update(overrides)
    return VertexServingArgs(**base)


def plan(
    build: Callable[[], VertexServingArgs], opts: Callable[[], pulumi.ResourceOptions | None] = lambda: None
) -> OfflineRun:
    def program() -> None:
        VertexServing("vertex", build(), opts())

    return run_offline(program, project="llm-serving", stack="prod", config={"gcp:project": PROJECT}, secret_keys=[])


@pytest.fixture(scope="module")
def run() -> OfflineRun:
    return plan(args)


def named(run: OfflineRun, typ: str, name: str) -> Any:
    return run.one(typ, name)


def snapshot(run: OfflineRun) -> str:
    """Everything recorded about every resource, as canonical JSON (only attributes every runner version has)."""
    rows = [
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "parent": r.parent,
            "inputs": r.inputs,
            "dependencies": sorted(r.dependencies),
            "options": r.options,
        }
        for r in sorted(run.resources, key=lambda r: r.urn)
    ]
    return json.dumps(rows, sort_keys=True)


# ---- what it registers ---------------------------------------------------------------------------------------


def test_every_child_is_parented_to_the_component(run: OfflineRun) -> None:
    component = run.one(COMPONENT)
    children = [r for r in run.resources if r.type != COMPONENT]
    assert sorted(r.type for r in children) == sorted(
        [
            "gcp:serviceaccount/account:Account",
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            "gcp:vertex/aiEndpoint:AiEndpoint",
            DEPLOYED,
            DEPLOYED,
            TRAFFIC,
            "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember",
            "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember",
        ]
    )
    assert {r.parent for r in children} == {component.urn}


def test_endpoint_is_dedicated_and_never_owns_the_split(run: OfflineRun) -> None:
    endpoint = run.one("gcp:vertex/aiEndpoint:AiEndpoint")
    assert endpoint.inputs["name"] == "llm-prod" and endpoint.inputs["location"] == REGION
    assert endpoint.inputs["dedicatedEndpointEnabled"] is True
    assert "privateServiceConnectConfig" not in endpoint.inputs and "trafficSplit" not in endpoint.inputs
    assert endpoint.options["ignore_changes"] == ["trafficSplit"]
    assert endpoint.options["delete_before_replace"] is True  # fixed id: old and new cannot coexist


def test_traffic_split_comes_from_the_pool_weights(run: OfflineRun) -> None:
    traffic = run.one(TRAFFIC)
    assert traffic.inputs["weights"] == {"stable": 100, "canary": 0}
    assert sum(traffic.inputs["weights"].values()) == 100
    assert traffic.inputs["endpoint"] == f"projects/{PROJECT}/locations/{REGION}/endpoints/llm-prod"
    assert traffic.inputs["inference_timeout_seconds"] == 1800
    deployed = {r.urn for r in run.by_type(DEPLOYED)}
    assert deployed <= set(traffic.dependencies)  # the split is set after both deployments exist
    # the weight-0 canary stays deployed
    assert {r.name for r in run.by_type(DEPLOYED)} == {"vertex-stable", "vertex-canary"}


def test_deployments_consume_the_reservation_by_resource_name(run: OfflineRun) -> None:
    for r in run.by_type(DEPLOYED):
        spec = r.inputs["deployed_model"]["dedicatedResources"]["machineSpec"]
        assert spec["reservationAffinity"] == {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [RESERVATION],
        }
        assert (spec["machineType"], spec["acceleratorType"], spec["acceleratorCount"]) == (
            "a3-highgpu-2g",
            "NVIDIA_H100_80GB",
            2,
        )
    canary = named(run, DEPLOYED, "vertex-canary").inputs["deployed_model"]["dedicatedResources"]
    assert (canary["minReplicaCount"], canary["maxReplicaCount"]) == (1, 2)


def test_deployments_run_as_the_dedicated_account_and_are_serialised(run: OfflineRun) -> None:
    stable, canary = named(run, DEPLOYED, "vertex-stable"), named(run, DEPLOYED, "vertex-canary")
    grant = run.one("gcp:storage/bucketIAMMember:BucketIAMMember")
    for r in (stable, canary):
        assert r.inputs["deployed_model"]["serviceAccount"] == SA_EMAIL
        assert grant.urn in r.dependencies  # the container can read the weights when it starts
    assert stable.urn in canary.dependencies  # one deploy operation on the endpoint at a time
    assert "serviceAccount" not in stable.inputs["upload_model_request"]  # the service agent uploads by default
    assert stable.inputs["timeouts"] == {"upload_seconds": 1800, "deploy_seconds": 3600 + 900, "teardown_seconds": 1800}


def test_identity_reads_the_weights_bucket_only(run: OfflineRun) -> None:
    account = run.one("gcp:serviceaccount/account:Account")
    assert account.inputs["accountId"] == "vertex-serving"
    grants = run.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert [(g.inputs["bucket"], g.inputs["role"], g.inputs["member"]) for g in grants] == [
        (BUCKET, "roles/storage.objectViewer", f"serviceAccount:{SA_EMAIL}")
    ]
    project_level = [r for r in run.resources if r.type.startswith(("gcp:projects/", "gcp:organizations/"))]
    assert project_level == []
    iam = [r for r in run.resources if "IAM" in r.type or "Iam" in r.type]
    assert {r.type for r in iam} == {
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember",
    }


def test_callers_are_the_configured_members_on_the_endpoint_only(run: OfflineRun) -> None:
    callers = run.by_type("gcp:vertex/aiEndpointIamMember:AiEndpointIamMember")
    assert sorted((c.inputs["endpoint"], c.inputs["role"], c.inputs["member"]) for c in callers) == [
        ("llm-prod", "roles/aiplatform.user", "group:llm-callers@example.com"),
        ("llm-prod", "roles/aiplatform.user", "serviceAccount:gateway@acme-llm-prod.iam.gserviceaccount.com"),
    ]
    text = snapshot(run)
    assert "allUsers" not in text and "allAuthenticatedUsers" not in text


def test_every_body_handed_to_the_providers_validates() -> None:
    """The exact bodies recorded in the plan, as the providers will send them."""
    ai = document("aiplatform", "v1")
    for build in (args,):
        run = plan(build)
        for r in run.by_type(DEPLOYED):
            # As the provider sends them: the upload with its modelId, the deployment with its id.
            assert (
                ai.validate(
                    "GoogleCloudAiplatformV1UploadModelRequest",
                    {**r.inputs["upload_model_request"], "modelId": r.inputs["model_id"]},
                    required=("modelId", "model.displayName", "model.artifactUri", "model.containerSpec.imageUri"),
                )
                == []
            )
            body = rq.deploy_model_request(
                rq.model_name(PROJECT, REGION, r.inputs["model_id"]),
                r.inputs["deployed_model"],
                r.inputs["deployed_model_id"],
            )
            assert ai.validate("GoogleCloudAiplatformV1DeployModelRequest", body, required=("deployedModel.id",)) == []


def _identity_hex(stack: str, role: str, r: Any) -> str:
    """The identity digest written out by hand: sha256 of the sorted, compact JSON of the stack, the endpoint, the
    role, the upload without its labels and uploading account, the deployment without its mutable fields."""
    upload = json.loads(json.dumps(r.inputs["upload_model_request"]))
    upload["model"].pop("labels")
    upload.pop("serviceAccount", None)
    deployed = json.loads(json.dumps(r.inputs["deployed_model"]))
    for key in ("minReplicaCount", "maxReplicaCount", "autoscalingMetricSpecs"):
        deployed["dedicatedResources"].pop(key)
    deployed.pop("disableContainerLogging")
    identity = {"deployed": deployed, "endpoint": "llm-prod", "role": role, "stack": stack, "upload": upload}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_every_upload_and_deployment_carries_a_deterministic_caller_chosen_id(run: OfflineRun) -> None:
    ids = {}
    for role in ("stable", "canary"):
        r = named(run, DEPLOYED, f"vertex-{role}")
        digest = _identity_hex("prod", role, r)
        # modelId: "<endpoint>-<role>-" + 12 hex digits; DeployedModel.id: 1e9 + the next 40 bits mod 9e9.
        assert r.inputs["model_id"] == f"llm-prod-{role}-{digest[:12]}"
        assert r.inputs["deployed_model_id"] == str(1_000_000_000 + int(digest[12:22], 16) % 9_000_000_000)
        assert re.fullmatch(r"[a-z_][a-z0-9_-]{0,62}", r.inputs["model_id"])  # UploadModelRequest.modelId
        assert re.fullmatch(r"[1-9][0-9]{9}", r.inputs["deployed_model_id"])  # DeployedModel.id: 1-10 digits
        ids[role] = (r.inputs["model_id"], r.inputs["deployed_model_id"])
    assert len({i for pair in ids.values() for i in pair}) == 4
    # The traffic split names the same ids, known in the plan.
    assert run.one(TRAFFIC).inputs["deployed_model_ids"] == {role: dm for role, (_, dm) in ids.items()}

    def ids_of(**change: Any) -> dict[str, tuple[str, str]]:
        r = plan(lambda: args(**change))
        return {
            role: (
                named(r, DEPLOYED, f"vertex-{role}").inputs["model_id"],
                named(r, DEPLOYED, f"vertex-{role}").inputs["deployed_model_id"],
            )
            for role in ("stable", "canary")
        }

    # In-place changes keep the ids (an update finds the same resources): replica bounds, labels.
    wider = (
        VertexDeployment("stable", 100, model("a" * 40, "qwen3-32b-fp8-2026-08-23.1"), h100(3, 6)),
        VertexDeployment("canary", 0, model("b" * 40, "qwen3-32b-fp8-2026-09-01.1"), h100(1, 2)),
    )
    assert ids_of(deployments=wider) == ids
    assert ids_of(labels={"env": "prod", "team": "llm"}) == ids
    # A new release of the stable pool is a new identity (a replacement never collides); the canary keeps its ids.
    moved = (
        VertexDeployment("stable", 100, model("c" * 40, "qwen3-32b-fp8-2026-12-01.1"), h100()),
        VertexDeployment("canary", 0, model("b" * 40, "qwen3-32b-fp8-2026-09-01.1"), h100(1, 2)),
    )
    new = ids_of(deployments=moved)
    assert (
        new["canary"] == ids["canary"] and new["stable"][0] != ids["stable"][0] and new["stable"][1] != ids["stable"][1]
    )
    # Another stack in the same project finds none of these.
    other = ids_of(stack="staging")
    assert not {i for pair in other.values() for i in pair} & {i for pair in ids.values() for i in pair}


def test_request_response_logging_is_off_unless_configured(run: OfflineRun) -> None:
    endpoint = run.one("gcp:vertex/aiEndpoint:AiEndpoint")
    assert "predictRequestResponseLoggingConfig" not in endpoint.inputs
    logging_on = rq.RequestResponseLogging("bq://acme-llm-prod.llm_requests", 0.05)
    logged = plan(lambda: args(request_logging=logging_on)).one("gcp:vertex/aiEndpoint:AiEndpoint")
    assert logged.inputs["predictRequestResponseLoggingConfig"] == {
        "enabled": True,
        "samplingRate": 0.05,
        "bigqueryDestination": {"outputUri": "bq://acme-llm-prod.llm_requests"},
    }
    # The same config as the aiplatform.v1 Endpoint field it becomes.
    ai = document("aiplatform", "v1")
    assert ai.validate("GoogleCloudAiplatformV1PredictRequestResponseLoggingConfig", logging_on.body()) == []
    assert logging_on.body() == logged.inputs["predictRequestResponseLoggingConfig"]
    with pytest.raises(rq.VertexRequestError, match=r"sampling rate 0 outside \(0, 1\]"):
        rq.RequestResponseLogging("bq://acme-llm-prod", 0)
    with pytest.raises(rq.VertexRequestError, match="is not bq://<project>"):
        rq.RequestResponseLogging("gs://acme-llm-prod/logs", 0.5)


def test_private_service_connect() -> None:
    run = plan(lambda: args(private_service_connect=PrivateServiceConnect(("acme-llm-clients",))))
    endpoint = run.one("gcp:vertex/aiEndpoint:AiEndpoint")
    assert endpoint.inputs["privateServiceConnectConfig"] == {
        "enablePrivateServiceConnect": True,
        "projectAllowlists": ["acme-llm-clients"],
    }
    assert "dedicatedEndpointEnabled" not in endpoint.inputs


def test_uploads_as_the_serving_account_read_one_repository_only() -> None:
    run = plan(lambda: args(image_repository=ImageRepository(PROJECT, REGION, "serving")))
    reader = run.one("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    assert (reader.inputs["repository"], reader.inputs["role"], reader.inputs["member"]) == (
        "serving",
        "roles/artifactregistry.reader",
        f"serviceAccount:{SA_EMAIL}",
    )
    for r in run.by_type(DEPLOYED):
        assert r.inputs["upload_model_request"]["serviceAccount"] == SA_EMAIL
        assert reader.urn in r.dependencies


def test_component_depends_on_reaches_every_child() -> None:
    def opts() -> pulumi.ResourceOptions:
        import pulumi_gcp as gcp

        services = gcp.projects.Service("aiplatform-api", project=PROJECT, service="aiplatform.googleapis.com")
        return pulumi.ResourceOptions(depends_on=[services])

    run = plan(args, opts)
    api = run.one("gcp:projects/service:Service").urn
    children = [r for r in run.resources if r.parent == run.one(COMPONENT).urn]
    assert children and all(api in r.dependencies for r in children)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(
                deployments=(
                    VertexDeployment("stable", 90, model("a" * 40, "r1"), h100()),
                    VertexDeployment("canary", 0, model("b" * 40, "r2"), h100()),
                )
            ),
            "deployments: weights must sum to 100, got 90 (stable 90, canary 0)",
        ),
        (dict(caller_members=("allUsers",)), "caller_members: allUsers would make the endpoint public"),
        (dict(caller_members=("alice@example.com",)), "caller_members: 'alice@example.com' is not an IAM member"),
        (dict(endpoint_id="1234567890"), "endpoint_id '1234567890': letter first"),
        (dict(weights_prefixes=("/qwen3-32b/" + "a" * 40,)), "weights_prefixes: '/qwen3-32b/"),
        (dict(weights_prefixes=("qwen3-32b/r", "qwen3-32b/r")), "weights_prefixes: duplicates"),
        (dict(watched_objects=("cohosting/pair.json",)), "watched_objects: only beside weights_prefixes"),
        (
            dict(weights_prefixes=("qwen3-32b/r",), watched_objects=("/pair.json",)),
            "watched_objects: '/pair.json' is not an object name",
        ),
    ],
)
def test_invalid_args_are_refused_before_anything_is_registered(change: dict[str, Any], message: str) -> None:
    with pytest.raises(VertexServingConfigError) as err:
        args(**change)
    assert any(p.startswith(message) for p in err.value.problems), err.value.problems


# ---- the pickled provider -------------------------------------------------------------------------------------


def providers(run: OfflineRun) -> dict[str, str]:
    return {r.name: r.inputs["__provider"] for r in run.resources if r.type.startswith("pulumi-python:dynamic/")}


def test_provider_pickle_is_by_reference_and_not_secret(run: OfflineRun) -> None:
    for name, value in providers(run).items():
        assert value != "[secret]", name  # serialize_as_secret_always = False: the plan shows it
        ops = [(op.name, arg) for op, arg, _ in pickletools.genops(base64.b64decode(value))]
        strings = {arg for _, arg in ops if isinstance(arg, str)}
        assert "components.vertex.provider" in strings  # class by module + name, not by value
        assert not strings & {"_create_code", "_create_function", "CodeType", "marshal"}, name
        assert len(value) < 400, f"{name}: {len(value)} characters: more than the class reference and PollPolicy"


def test_provider_pickle_loads_into_a_working_provider(run: OfflineRun) -> None:
    """What the dynamic-provider process does with ``__provider`` (pulumi.dynamic.__main__.get_provider)."""
    import dill

    from components.vertex import provider as pv

    expected = {
        "vertex-stable": pv.DeployedModelProvider,
        "vertex-canary": pv.DeployedModelProvider,
        "vertex-traffic": pv.EndpointTrafficProvider,
    }
    for name, value in providers(run).items():
        loaded = dill.loads(base64.b64decode(value))
        assert type(loaded) is expected[name]
        assert loaded.__getstate__() == {
            "_transport_factory": None,
            "_poll": pv.PollPolicy(),
            "_sleep": None,
            "_clock": None,
        }  # production: real transport, real clock


def test_plan_is_identical_across_runs(run: OfflineRun) -> None:
    assert snapshot(plan(args)) == snapshot(run)


_CHILD = """
import hashlib, json, sys
sys.path.insert(0, {repo!r})
import tests.test_vertex_component as t
run = t.plan(t.args)
print(json.dumps({{"providers": t.providers(run),
                  "inventory": hashlib.sha256(t.snapshot(run).encode()).hexdigest()}}))
"""


def test_provider_pickle_and_plan_are_identical_across_processes(run: OfflineRun, tmp_path: Path) -> None:
    """Two fresh interpreters with different hash seeds (set iteration order) and working directories."""
    results = []
    for seed, cwd in (("1", tmp_path), ("4242", REPO)):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONWARNINGS": "ignore"}
        out = subprocess.run(
            [sys.executable, "-c", _CHILD.format(repo=str(REPO))],
            cwd=cwd,
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert results[0] == results[1]
    assert results[0]["providers"] == providers(run)
    assert results[0]["inventory"] == hashlib.sha256(snapshot(run).encode()).hexdigest()
