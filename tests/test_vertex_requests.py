"""Vertex AI request bodies: every body the builders and the dynamic providers can send validates against the
aiplatform.v1 discovery document the client is built from, and deliberately broken bodies fail.

Expected bodies are written out by hand. The providers are driven through :class:`FakeVertex`, a small
in-memory Vertex that checks every call (method exists, parameters match their patterns, the body validates
against the method's request schema) and answers with responses that validate against the response schemas.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from components.vertex import provider as pv
from components.vertex import requests as rq
from tests.discovery import DiscoveryDocument, document

IMAGE = "us-central1-docker.pkg.dev/acme-llm-prod/serving/vllm@sha256:" + "0123456789abcdef" * 4
REVISION = "c0ffee" + "0" * 34
PROJECT, REGION = "acme-llm-prod", "us-central1"
ENDPOINT = f"projects/{PROJECT}/locations/{REGION}/endpoints/llm-prod"
SA = "vertex-serving@acme-llm-prod.iam.gserviceaccount.com"
H100 = "NVIDIA_H100_80GB"


@pytest.fixture(scope="module")
def ai() -> DiscoveryDocument:
    return document("aiplatform", "v1")


def assert_valid(ai: DiscoveryDocument, schema: str, body: Any, required: tuple[str, ...] = ()) -> None:
    assert ai.validate(schema, body, required=required) == []


# ---- sample specs --------------------------------------------------------------------------------------------


def container() -> rq.ContainerSpec:
    return rq.ContainerSpec(
        image=IMAGE,
        command=("vllm", "serve"),
        args=(
            "--model",
            f"gs://acme-weights/qwen3-32b/{REVISION}/",
            "--load-format",
            "runai_streamer",
            "--port",
            "8000",
            "--tensor-parallel-size",
            "2",
        ),
        env=(rq.EnvVar("VLLM_LOGGING_LEVEL", "INFO"),),
        shared_memory_mb=16384,
        startup_probe=rq.startup_probe(272),
        health_probe=rq.HttpProbe("/health"),
        deployment_timeout_seconds=3600,
    )


def model_spec() -> rq.ModelSpec:
    return rq.ModelSpec(
        display_name="qwen3-32b-fp8-2026-08-23.1",
        artifact=rq.ReleaseArtifact("acme-weights", "qwen3-32b", REVISION),
        container=container(),
        labels={"llm-serving-io-release": rq.label_value("qwen3-32b-fp8-2026-08-23.1")},
    )


def dedicated(min_r: int = 2, max_r: int = 4) -> rq.DedicatedResources:
    return rq.DedicatedResources(
        machine=rq.MachineSpec(
            "a3-highgpu-2g", "nvidia-h100-80gb", 2, rq.Reservation(PROJECT, "us-central1-a", "llm-h100")
        ),
        scaling=rq.Scaling(min_r, max_r, (rq.AutoscalingTarget("vllm_queue", 3),)),
    )


EXPECTED_UPLOAD: dict[str, Any] = {
    "model": {
        "displayName": "qwen3-32b-fp8-2026-08-23.1",
        "labels": {"llm-serving-io-release": "qwen3-32b-fp8-2026-08-23-1"},
        "artifactUri": f"gs://acme-weights/qwen3-32b/{REVISION}/",
        "containerSpec": {
            "imageUri": IMAGE,
            "command": ["vllm", "serve"],
            "args": [
                "--model",
                f"gs://acme-weights/qwen3-32b/{REVISION}/",
                "--load-format",
                "runai_streamer",
                "--port",
                "8000",
                "--tensor-parallel-size",
                "2",
            ],
            "env": [{"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}],
            "ports": [{"containerPort": 8000}],
            "predictRoute": "/v1/chat/completions",
            "healthRoute": "/health",
            "sharedMemorySizeMb": "16384",
            "startupProbe": {
                "httpGet": {"path": "/health", "port": 8000},
                "periodSeconds": 10,
                "timeoutSeconds": 10,
                "failureThreshold": 28,
                "successThreshold": 1,
                "initialDelaySeconds": 0,
            },
            "healthProbe": {
                "httpGet": {"path": "/health", "port": 8000},
                "periodSeconds": 10,
                "timeoutSeconds": 10,
                "failureThreshold": 3,
                "successThreshold": 1,
                "initialDelaySeconds": 0,
            },
            "deploymentTimeout": "3600s",
        },
    },
}

EXPECTED_DEDICATED = {
    "machineSpec": {
        "machineType": "a3-highgpu-2g",
        "acceleratorType": H100,
        "acceleratorCount": 2,
        "reservationAffinity": {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [f"projects/{PROJECT}/zones/us-central1-a/reservations/llm-h100"],
        },
    },
    "minReplicaCount": 2,
    "maxReplicaCount": 4,
    "autoscalingMetricSpecs": [
        {"metricName": "prometheus.googleapis.com/vertex_vllm_num_requests_waiting", "target": 3}
    ],
}


# ---- builders: expected bodies, and they validate ----------------------------------------------------------


def test_upload_model_request(ai: DiscoveryDocument) -> None:
    body = rq.upload_model_request(model_spec())
    assert body == EXPECTED_UPLOAD
    assert ai.request_schema("projects.locations.models.upload") == "GoogleCloudAiplatformV1UploadModelRequest"
    assert_valid(
        ai,
        "GoogleCloudAiplatformV1UploadModelRequest",
        body,
        (
            "model.displayName",
            "model.artifactUri",
            "model.containerSpec.imageUri",
            "model.containerSpec.ports[].containerPort",
        ),
    )
    with_sa = rq.upload_model_request(model_spec(), service_account=SA)
    assert with_sa == {**EXPECTED_UPLOAD, "serviceAccount": SA}
    assert_valid(ai, "GoogleCloudAiplatformV1UploadModelRequest", with_sa)


def test_minimal_container_sends_no_optional_fields(ai: DiscoveryDocument) -> None:
    spec = rq.ContainerSpec(image=IMAGE, command=("vllm", "serve"), args=("--model", "gs://b/m/r/"))
    assert spec.body() == {
        "imageUri": IMAGE,
        "command": ["vllm", "serve"],
        "args": ["--model", "gs://b/m/r/"],
        "env": [],
        "ports": [{"containerPort": 8000}],
        "predictRoute": "/v1/chat/completions",
        "healthRoute": "/health",
    }
    assert_valid(ai, "GoogleCloudAiplatformV1ModelContainerSpec", spec.body())


def test_container_spec_fields_exist_in_the_document(ai: DiscoveryDocument) -> None:
    """The probes the builder sends are fields of this revision of ModelContainerSpec."""
    fields = ai.schema("GoogleCloudAiplatformV1ModelContainerSpec")["properties"]
    assert {"startupProbe", "healthProbe", "sharedMemorySizeMb", "deploymentTimeout"} <= set(fields)


def test_deploy_model_request_dedicated(ai: DiscoveryDocument) -> None:
    spec = rq.DeployedModelSpec(display_name="stable-qwen3", resources=dedicated(), service_account=SA)
    body = rq.deploy_model_request(f"projects/{PROJECT}/locations/{REGION}/models/42", rq.deployed_model(spec))
    assert body == {
        "deployedModel": {
            "displayName": "stable-qwen3",
            "enableAccessLogging": False,
            "dedicatedResources": EXPECTED_DEDICATED,
            "disableContainerLogging": False,
            "serviceAccount": SA,
            "model": f"projects/{PROJECT}/locations/{REGION}/models/42",
        }
    }
    assert "trafficSplit" not in body  # traffic belongs to EndpointTraffic alone
    assert_valid(
        ai,
        "GoogleCloudAiplatformV1DeployModelRequest",
        body,
        (
            "deployedModel.model",
            "deployedModel.dedicatedResources.machineSpec.machineType",
            "deployedModel.dedicatedResources.minReplicaCount",
            "deployedModel.dedicatedResources.machineSpec.reservationAffinity.reservationAffinityType",
        ),
    )


def test_spot_deployment(ai: DiscoveryDocument) -> None:
    spot = rq.DedicatedResources(rq.MachineSpec("g2-standard-12", "nvidia-l4", 1), rq.Scaling(1, 1), spot=True)
    assert spot.body() == {
        "machineSpec": {"machineType": "g2-standard-12", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1},
        "minReplicaCount": 1,
        "maxReplicaCount": 1,
        "autoscalingMetricSpecs": [],
        "spot": True,
    }
    assert_valid(ai, "GoogleCloudAiplatformV1DedicatedResources", spot.body())


def test_mutate_deployed_model_request(ai: DiscoveryDocument) -> None:
    deployed = rq.deployed_model(rq.DeployedModelSpec("stable", dedicated(3, 6), service_account=SA))
    body = rq.mutate_deployed_model_request(
        "1234567890", deployed, ["dedicatedResources.maxReplicaCount", "dedicatedResources.minReplicaCount"]
    )
    assert body == {
        "deployedModel": {
            "id": "1234567890",
            "dedicatedResources": {
                "minReplicaCount": 3,
                "maxReplicaCount": 6,
                "machineSpec": EXPECTED_DEDICATED["machineSpec"],
            },
        },
        "updateMask": "dedicatedResources.minReplicaCount,dedicatedResources.maxReplicaCount",
    }
    assert_valid(ai, "GoogleCloudAiplatformV1MutateDeployedModelRequest", body, ("deployedModel.id", "updateMask"))
    assert ai.field_mask_errors("GoogleCloudAiplatformV1DeployedModel", body["updateMask"]) == []
    # Every path the builder may ever put in the mask names a DeployedModel field of this revision.
    assert ai.field_mask_errors("GoogleCloudAiplatformV1DeployedModel", ",".join(rq.MUTABLE_DEPLOYED_MODEL_PATHS)) == []
    with pytest.raises(rq.VertexRequestError, match=r"not mutable by mutateDeployedModel: \['displayName'\]"):
        rq.mutate_deployed_model_request("1", deployed, ["displayName"])


def test_undeploy_model_request(ai: DiscoveryDocument) -> None:
    assert rq.undeploy_model_request("11", None) == {"deployedModelId": "11"}
    assert rq.undeploy_model_request("11", {"22": 100}) == {"deployedModelId": "11", "trafficSplit": {"22": 100}}
    for body in (rq.undeploy_model_request("11", None), rq.undeploy_model_request("11", {})):
        assert_valid(ai, "GoogleCloudAiplatformV1UndeployModelRequest", body, ("deployedModelId",))


def test_traffic_split_and_endpoint_patch(ai: DiscoveryDocument) -> None:
    split = rq.traffic_split({"stable": 100, "canary": 0}, {"stable": "111", "canary": "222"})
    assert split == {"111": 100}  # the dark canary stays deployed but is not listed
    assert rq.traffic_split({"stable": 95, "canary": 5}, {"stable": "111", "canary": "222"}) == {"111": 95, "222": 5}
    body, mask = rq.endpoint_patch({"111": 95, "222": 5}, inference_timeout_seconds=1800)
    assert (body, mask) == (
        {"trafficSplit": {"111": 95, "222": 5}, "clientConnectionConfig": {"inferenceTimeout": "1800s"}},
        "trafficSplit,clientConnectionConfig.inferenceTimeout",
    )
    assert_valid(ai, "GoogleCloudAiplatformV1Endpoint", body)
    assert ai.field_mask_errors("GoogleCloudAiplatformV1Endpoint", mask) == []
    assert ai.validate_parameters("projects.locations.endpoints.patch", {"name": ENDPOINT, "updateMask": mask}) == []
    assert rq.endpoint_patch(None) == ({"trafficSplit": {}}, "trafficSplit")
    assert_valid(ai, "GoogleCloudAiplatformV1Endpoint", rq.endpoint_patch(None)[0])


def test_traffic_split_refuses_bad_weights() -> None:
    ids = {"stable": "1", "canary": "2"}
    with pytest.raises(rq.VertexRequestError, match=re.escape("weights must sum to 100, got 90 (stable 90, canary 0)")):
        rq.traffic_split({"stable": 90, "canary": 0}, ids)
    with pytest.raises(rq.VertexRequestError, match="weight of 'canary' must be an integer 0-100, got 101"):
        rq.traffic_split({"stable": 0, "canary": 101}, ids)
    with pytest.raises(rq.VertexRequestError, match="weights for"):
        rq.traffic_split({"stable": 100}, ids)


def test_model_labels_patch(ai: DiscoveryDocument) -> None:
    body, mask = rq.model_labels_patch({"team": "llm", "llm-serving-io-pool": "stable"})
    assert (body, mask) == ({"labels": {"llm-serving-io-pool": "stable", "team": "llm"}}, "labels")
    assert_valid(ai, "GoogleCloudAiplatformV1Model", body)


# ---- constants come from the document ------------------------------------------------------------------------


def test_accelerator_mapping_targets_the_vertex_enum(ai: DiscoveryDocument) -> None:
    enum = ai.enum_values("GoogleCloudAiplatformV1MachineSpec", "acceleratorType")
    assert set(rq.GKE_TO_VERTEX_ACCELERATOR.values()) <= set(enum)
    assert rq.vertex_accelerator_type("nvidia-h100-80gb") == "NVIDIA_H100_80GB"
    assert rq.vertex_accelerator_type("nvidia-l4") == "NVIDIA_L4"
    with pytest.raises(
        rq.VertexRequestError,
        match=r"accelerator 'nvidia-h100' has no known Vertex AI "
        r"MachineSpec.acceleratorType; known: nvidia-a100-80gb, ",
    ):
        rq.vertex_accelerator_type("nvidia-h100")


def test_autoscaling_metrics_are_the_documented_ones(ai: DiscoveryDocument) -> None:
    """Vertex accepts only the metric names AutoscalingMetricSpec.metricName lists; the vLLM queue is among them
    in this revision, and the KV-cache one maps to a series vLLM 0.32 no longer exports."""
    listed = ai.field("GoogleCloudAiplatformV1AutoscalingMetricSpec", "metricName")["description"]
    for name in (*rq.AUTOSCALING_METRICS.values(), *rq.UNAVAILABLE_AUTOSCALING_METRICS):
        assert f"`{name}`" in listed, name
    assert rq.AUTOSCALING_METRICS["vllm_queue"] == "prometheus.googleapis.com/vertex_vllm_num_requests_waiting"
    with pytest.raises(rq.VertexRequestError, match="autoscaling metric 'kv_cache'; known: accelerator_duty_cycle"):
        rq.AutoscalingTarget("kv_cache", 80)


def test_reservation_key_is_the_documented_one(ai: DiscoveryDocument) -> None:
    key_doc = ai.field("GoogleCloudAiplatformV1ReservationAffinity", "key")["description"]
    assert f"`{rq.RESERVATION_NAME_KEY}`" in key_doc
    assert (
        "resource name of the reservation"
        in ai.field("GoogleCloudAiplatformV1ReservationAffinity", "values")["description"]
    )


# ---- broken bodies fail ------------------------------------------------------------------------------------


def test_broken_bodies_fail(ai: DiscoveryDocument) -> None:
    spec = rq.DeployedModelSpec(display_name="stable", resources=dedicated(), service_account=SA)
    good = rq.deploy_model_request(f"projects/{PROJECT}/locations/{REGION}/models/42", rq.deployed_model(spec))

    wrong_field = copy.deepcopy(good)
    wrong_field["deployedModel"]["dedicatedResources"]["minReplicas"] = wrong_field["deployedModel"][
        "dedicatedResources"
    ].pop("minReplicaCount")
    assert ai.validate("GoogleCloudAiplatformV1DeployModelRequest", wrong_field) == [
        "$.deployedModel.dedicatedResources.minReplicas: unknown field (GoogleCloudAiplatformV1DedicatedResources "
        "has no field 'minReplicas'); did you mean 'minReplicaCount'?"
    ]

    wrong_enum = copy.deepcopy(good)
    wrong_enum["deployedModel"]["dedicatedResources"]["machineSpec"]["acceleratorType"] = "nvidia-h100-80gb"
    errors = ai.validate("GoogleCloudAiplatformV1DeployModelRequest", wrong_enum)
    assert len(errors) == 1 and errors[0].startswith(
        '$.deployedModel.dedicatedResources.machineSpec.acceleratorType: "nvidia-h100-80gb" is not a value of '
        "GoogleCloudAiplatformV1MachineSpec.acceleratorType; allowed: ACCELERATOR_TYPE_UNSPECIFIED, "
    )
    assert "NVIDIA_H100_80GB" in errors[0]

    wrong_type = copy.deepcopy(EXPECTED_UPLOAD)
    wrong_type["model"]["containerSpec"]["sharedMemorySizeMb"] = 16384
    wrong_type["model"]["containerSpec"]["deploymentTimeout"] = "60m"
    assert ai.validate("GoogleCloudAiplatformV1UploadModelRequest", wrong_type) == [
        '$.model.containerSpec.deploymentTimeout: "60m" is not a google-duration (seconds with up to 9 '
        "fractional digits and a trailing 's', e.g. '3600s' or '0.5s')",
        "$.model.containerSpec.sharedMemorySizeMb: expected string (int64, a decimal integer in a JSON string), "
        "got integer 16384",
    ]


def test_builders_refuse_invalid_values() -> None:
    with pytest.raises(rq.VertexRequestError, match="must be <registry>/<path>@sha256:<64 hex>"):
        rq.ContainerSpec(image="vllm/vllm-openai:v0.32.0", command=(), args=())
    with pytest.raises(rq.VertexRequestError, match="Spot VMs cannot consume a reservation"):
        rq.DedicatedResources(dedicated().machine, rq.Scaling(1, 1), spot=True)
    with pytest.raises(rq.VertexRequestError, match=r"probe timeout 5s < period 10s"):
        rq.HttpProbe("/health", timeout_seconds=5)
    with pytest.raises(rq.VertexRequestError, match="max_replicas 1 < min_replicas 2"):
        rq.Scaling(2, 1)
    with pytest.raises(rq.VertexRequestError, match=r"deployment_timeout_seconds must be in \(0, 7200\]"):
        rq.ContainerSpec(image=IMAGE, command=(), args=(), deployment_timeout_seconds=7201)
    with pytest.raises(rq.VertexRequestError, match="value must be"):
        rq.ModelSpec("m", rq.ReleaseArtifact("b-1", "m", "r"), container(), labels={"release": "v1.2"})
    assert rq.ReleaseArtifact.from_uri(
        f"gs://acme-weights/qwen/qwen3-32b/{REVISION}/manifest.json"
    ) == rq.ReleaseArtifact("acme-weights", "qwen/qwen3-32b", REVISION)


# ---- the providers, driven through a fake Vertex ---------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


class FakeVertex:
    """An in-memory Vertex AI region. ``call`` validates like the real client would refuse, then applies the
    call with the documented semantics the providers rely on."""

    def __init__(self, doc: DiscoveryDocument, polls_until_done: int = 2):
        self.doc = doc
        self.polls_until_done = polls_until_done
        self.calls: list[tuple[str, dict[str, Any], Any]] = []
        self.pools: dict[str, dict[str, Any]] = {}
        self.models: dict[str, dict[str, Any]] = {}
        self.endpoints: dict[str, dict[str, Any]] = {
            ENDPOINT: {"name": ENDPOINT, "displayName": "llm", "deployedModels": [], "trafficSplit": {}}
        }
        self.operations: dict[str, dict[str, Any]] = {}
        self.fail_deploy = False
        self.never_done = False
        self._seq = 100

    def __call__(self, region: str) -> FakeVertex:  # the provider's transport factory
        assert region == REGION
        return self

    def methods(self) -> list[str]:
        return [c[0] for c in self.calls]

    def bodies(self, method: str) -> list[Any]:
        return [c[2] for c in self.calls if c[0] == method]

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        errors = self.doc.validate_parameters(method, params)
        schema = self.doc.request_schema(method)
        if schema is None:
            assert body is None, f"{method} takes no body"
        else:
            assert body is not None, f"{method} needs a body"
            errors += self.doc.validate(schema, body)
            assert _all_ints(body), f"{method}: a float reached the wire: {body}"
        assert errors == [], errors
        body = copy.deepcopy(body)  # the server keeps its own copy: no aliasing with the provider's state
        self.calls.append((method, dict(params), copy.deepcopy(body)))
        response = getattr(self, "_" + method.split(".", 2)[2].replace(".", "_"))(params, body)
        out_schema = self.doc.response_schema(method)
        if out_schema is not None:
            assert self.doc.validate(out_schema, response, allow_read_only=True) == [], response
        return copy.deepcopy(response)

    # -- operations --
    def _op(self, parent: str, response_type: str, response: dict[str, Any], error: str | None = None) -> dict:
        self._seq += 1
        assert (
            self.doc.validate(f"GoogleCloudAiplatformV1{response_type}", response, allow_read_only=True) == []
            if response_type != "Empty"
            else True
        )
        op: dict[str, Any] = {
            "name": f"{parent}/operations/{self._seq}",
            "done": False,
            "_polls": 0,
            "_result": {"error": {"code": 9, "message": error}}
            if error
            else {"response": {"@type": f"type.googleapis.com/google.cloud.aiplatform.v1.{response_type}", **response}},
        }
        self.operations[op["name"]] = op
        return {"name": op["name"], "done": False}

    def _poll(self, params: Mapping[str, Any]) -> dict[str, Any]:
        op = self.operations[params["name"]]
        op["_polls"] += 1
        if self.never_done or op["_polls"] < self.polls_until_done:
            return {"name": op["name"], "done": False}
        return {"name": op["name"], "done": True, **op["_result"]}

    _models_operations_get = _endpoints_operations_get = _deploymentResourcePools_operations_get = (
        lambda self, params, body: self._poll(params)
    )

    def _endpoints_operations_cancel(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        return {}

    _models_operations_cancel = _endpoints_operations_cancel

    def _list(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        return {}  # operations finish after polls_until_done polls and are never found by listing here

    _models_operations_list = _endpoints_operations_list = _list

    # -- models --
    def _models_upload(self, params: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        from components.vertex.provider import Conflict

        name = f"{params['parent']}/models/{body.get('modelId', len(self.models) + 1)}"
        if name in self.models:
            raise Conflict(name)
        self.models[name] = {**body["model"], "name": name}
        return self._op(name, "UploadModelResponse", {"model": name})

    def _models_get(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        from components.vertex.provider import NotFound

        if params["name"] not in self.models:
            raise NotFound(params["name"])
        return self.models[params["name"]]

    def _models_patch(self, params: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        model = self.models[params["name"]]
        for field in params["updateMask"].split(","):
            model[field] = body[field]
        return model

    def _models_delete(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        from components.vertex.provider import NotFound

        if params["name"] not in self.models:
            raise NotFound(params["name"])
        del self.models[params["name"]]
        return self._op(params["name"], "Empty", {})

    # -- endpoints --
    def _endpoints_get(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        from components.vertex.provider import NotFound

        if params["name"] not in self.endpoints:
            raise NotFound(params["name"])
        return self.endpoints[params["name"]]

    def _endpoints_deployModel(self, params: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        endpoint = self.endpoints[params["endpoint"]]
        if self.fail_deploy:
            return self._op(params["endpoint"], "DeployModelResponse", {}, error="no capacity in the reservation")
        deployed = {"id": str(1000 + len(endpoint["deployedModels"])), **body["deployedModel"]}
        endpoint["deployedModels"].append(deployed)
        return self._op(params["endpoint"], "DeployModelResponse", {"deployedModel": deployed})

    def _endpoints_mutateDeployedModel(self, params: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        endpoint = self.endpoints[params["endpoint"]]
        target = next(d for d in endpoint["deployedModels"] if d["id"] == body["deployedModel"]["id"])
        for path in body["updateMask"].split(","):
            head, _, leaf = path.partition(".")
            if leaf:
                target[head][leaf] = body["deployedModel"][head][leaf]
            else:
                target[head] = body["deployedModel"][head]
        return self._op(params["endpoint"], "MutateDeployedModelResponse", {"deployedModel": target})

    def _endpoints_undeployModel(self, params: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        endpoint = self.endpoints[params["endpoint"]]
        split = body.get("trafficSplit", endpoint["trafficSplit"])
        if split.get(body["deployedModelId"], 0):
            return self._op(params["endpoint"], "UndeployModelResponse", {}, error="model still has traffic")
        endpoint["trafficSplit"] = dict(split)
        endpoint["deployedModels"] = [d for d in endpoint["deployedModels"] if d["id"] != body["deployedModelId"]]
        return self._op(params["endpoint"], "UndeployModelResponse", {})

    def _endpoints_patch(self, params: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        endpoint = self.endpoints[params["name"]]
        split = body.get("trafficSplit", {})
        deployed = {d["id"] for d in endpoint["deployedModels"]}
        assert set(split) <= deployed and sum(split.values()) in (0, 100), split
        for path in params["updateMask"].split(","):
            head, _, leaf = path.partition(".")
            if leaf:
                endpoint.setdefault(head, {})[leaf] = body[head][leaf]
            else:
                endpoint[head] = body[head]
        return endpoint

    # -- resource pools (only what deleting one left by an earlier version takes) --
    def _deploymentResourcePools_get(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        from components.vertex.provider import NotFound

        if params["name"] not in self.pools:
            raise NotFound(params["name"])
        return self.pools[params["name"]]

    def _deploymentResourcePools_delete(self, params: Mapping[str, Any], body: Any) -> dict[str, Any]:
        from components.vertex.provider import NotFound

        if params["name"] not in self.pools:
            raise NotFound(params["name"])
        self.pools.pop(params["name"])
        return self._op(params["name"], "Empty", {})


def _all_ints(value: Any) -> bool:
    if isinstance(value, Mapping):
        return all(_all_ints(v) for v in value.values())
    if isinstance(value, list):
        return all(_all_ints(v) for v in value)
    return not isinstance(value, float)


def floats(value: Any) -> Any:
    """What Pulumi hands a dynamic provider: every number a float (protobuf Struct)."""
    if isinstance(value, dict):
        return {k: floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [floats(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def deployed_model_props(min_r: int = 2, max_r: int = 4, **overrides: Any) -> dict[str, Any]:
    props = {
        "project": PROJECT,
        "region": REGION,
        "endpoint": ENDPOINT,
        "upload_model_request": rq.upload_model_request(model_spec()),
        "deployed_model": rq.deployed_model(
            rq.DeployedModelSpec("stable", dedicated(min_r, max_r), service_account=SA)
        ),
        "timeouts": {"upload_seconds": 1800, "deploy_seconds": 4500, "teardown_seconds": 1800},
        "model_id": MODEL_ID,
        "deployed_model_id": DEPLOYED_ID,
        "replacement": "create_first",
        "__provider": "pickle-1",
    }
    props.update(overrides)
    return floats(props)


MODEL_ID, DEPLOYED_ID = "llm-prod-stable-0123456789ab", "1234567890"
MODEL_NAME = f"projects/{PROJECT}/locations/{REGION}/models/{MODEL_ID}"
DEPLOYED_RESOURCE_ID = f"{ENDPOINT}/deployedModels/{DEPLOYED_ID}"


@pytest.fixture
def vertex(ai: DiscoveryDocument) -> FakeVertex:
    return FakeVertex(ai)


def make(cls: type, vertex: FakeVertex, clock: FakeClock | None = None) -> Any:
    clock = clock or FakeClock()
    return cls(transport_factory=vertex, sleep=clock.sleep, clock=clock)


def test_operation_method_routes_to_the_collection_of_the_operation(ai: DiscoveryDocument) -> None:
    for name, method in [
        (f"projects/p/locations/{REGION}/models/1/operations/2", "projects.locations.models.operations.get"),
        (f"{ENDPOINT}/operations/3", "projects.locations.endpoints.operations.get"),
        (
            f"projects/p/locations/{REGION}/deploymentResourcePools/x/operations/4",
            "projects.locations.deploymentResourcePools.operations.get",
        ),
        (f"projects/p/locations/{REGION}/operations/5", "projects.locations.operations.get"),
    ]:
        assert pv.operation_method(name) == method
        assert ai.validate_parameters(method, {"name": name}) == []
    with pytest.raises(pv.OperationError, match="not an operation name"):
        pv.operation_method(ENDPOINT)


def test_create_uploads_deploys_and_polls(vertex: FakeVertex) -> None:
    clock = FakeClock()
    result = make(pv.DeployedModelProvider, vertex, clock).create(deployed_model_props())
    assert vertex.methods() == [
        # find: no model of this id, no upload of it running
        "projects.locations.models.get",
        "projects.locations.models.operations.list",
        "projects.locations.models.get",
        "projects.locations.models.upload",
        "projects.locations.models.operations.get",
        "projects.locations.models.operations.get",
        # find: no deployment of this id, no deploy running on the endpoint
        "projects.locations.endpoints.get",
        "projects.locations.endpoints.operations.list",
        "projects.locations.endpoints.get",
        "projects.locations.endpoints.deployModel",
        "projects.locations.endpoints.operations.get",
        "projects.locations.endpoints.operations.get",
        "projects.locations.endpoints.get",
    ]
    assert clock.sleeps == [10.0, 15.0, 10.0, 15.0]  # first interval, then x1.5, per operation
    (deploy,) = vertex.bodies("projects.locations.endpoints.deployModel")
    assert (deploy["deployedModel"]["model"], deploy["deployedModel"]["id"]) == (MODEL_NAME, DEPLOYED_ID)
    assert vertex.bodies("projects.locations.models.upload") == [{**EXPECTED_UPLOAD, "modelId": MODEL_ID}]
    assert result.id == DEPLOYED_RESOURCE_ID
    assert result.outs["model_name"] == MODEL_NAME and result.outs["deployed_model_id"] == DEPLOYED_ID


def test_a_second_create_finds_what_the_first_made(vertex: FakeVertex) -> None:
    provider = make(pv.DeployedModelProvider, vertex)
    first = provider.create(deployed_model_props())
    vertex.calls.clear()
    assert provider.create(deployed_model_props()).outs == first.outs
    assert vertex.methods() == ["projects.locations.models.get", "projects.locations.endpoints.get"]
    assert list(vertex.models) == [MODEL_NAME] and len(vertex.endpoints[ENDPOINT]["deployedModels"]) == 1


def test_failed_deploy_removes_the_uploaded_model(vertex: FakeVertex) -> None:
    vertex.fail_deploy = True
    with pytest.raises(
        pv.OperationError,
        match=r"deploy .* failed: .* code 9: no capacity in the reservation; removed what this create made: model "
        + MODEL_ID,
    ):
        make(pv.DeployedModelProvider, vertex).create(deployed_model_props())
    assert "projects.locations.models.delete" in vertex.methods()
    assert vertex.models == {}


def test_operation_timeout_leaves_the_operation_running_and_says_how_to_resume(vertex: FakeVertex) -> None:
    vertex.never_done = True
    clock = FakeClock()
    props = deployed_model_props(timeouts={"upload_seconds": 600, "deploy_seconds": 60, "teardown_seconds": 60})
    with pytest.raises(
        pv.OperationTimeout,
        match=rf"upload {MODEL_ID}: operation projects/.*/models/{MODEL_ID}/operations/101 not done after 600 s; it "
        r"keeps running server-side \(not cancelled\)\. Run `pulumi up` again: the create finds model "
        rf"{MODEL_ID} and deployed model {DEPLOYED_ID} by their ids",
    ):
        make(pv.DeployedModelProvider, vertex, clock).create(props)
    assert clock.sleeps[:6] == [10.0, 15.0, 22.5, 33.75, 50.625, 60.0]  # growing, then capped at 60 s
    assert sum(clock.sleeps) == 600  # bounded by the operation's timeout, to the second
    assert not any(m.endswith(".cancel") for m in vertex.methods())  # nothing is cancelled


def test_diff_update_versus_replace() -> None:
    provider = pv.DeployedModelProvider()
    olds = {**deployed_model_props(), "model_name": MODEL_NAME}

    def diff(news: dict[str, Any]) -> tuple[bool | None, list[str] | None]:
        result = provider.diff("id", olds, news)
        return result.changes, result.replaces

    assert diff(deployed_model_props()) == (False, [])
    assert diff(deployed_model_props(3, 6)) == (True, [])  # replica bounds: mutateDeployedModel
    assert diff(
        deployed_model_props(timeouts={"upload_seconds": 60, "deploy_seconds": 60, "teardown_seconds": 60})
    ) == (True, [])
    assert diff(deployed_model_props(__provider="pickle-2")) == (True, [])
    relabelled = deployed_model_props()
    relabelled["upload_model_request"]["model"]["labels"]["team"] = "llm"
    assert diff(relabelled) == (True, [])  # models.patch
    new_image = deployed_model_props()
    new_image["upload_model_request"]["model"]["containerSpec"]["imageUri"] = IMAGE.replace("0123", "3210")
    assert diff(new_image) == (True, ["upload_model_request"])
    new_machine = deployed_model_props()
    new_machine["deployed_model"]["dedicatedResources"]["machineSpec"]["machineType"] = "a3-highgpu-4g"
    assert diff(new_machine) == (True, ["deployed_model"])
    assert diff(deployed_model_props(endpoint=pv.UNKNOWN)) == (True, ["endpoint"])
    # New ids (a new identity digest) replace; the uploading account and the replacement order are recorded only.
    assert diff(deployed_model_props(deployed_model_id="1999999999")) == (True, ["deployed_model_id"])
    assert diff(deployed_model_props(model_id="llm-prod-stable-ffffffffffff")) == (True, ["model_id"])
    as_account = deployed_model_props()
    as_account["upload_model_request"]["serviceAccount"] = SA
    assert diff(as_account) == (True, [])
    assert diff(deployed_model_props(replacement="delete_first")) == (True, [])
    # delete_first makes a replacement delete-before-replace (Pulumi's deleteBeforeReplace); an update never is.
    first = deployed_model_props(replacement="delete_first")
    first["deployed_model"]["dedicatedResources"]["machineSpec"]["machineType"] = "a3-highgpu-4g"
    assert provider.diff("id", olds, first).delete_before_replace is True
    assert provider.diff("id", olds, new_machine).delete_before_replace is False
    assert (
        provider.diff("id", olds, deployed_model_props(3, 6, replacement="delete_first")).delete_before_replace is False
    )


def test_update_mutates_replica_bounds_and_patches_labels(vertex: FakeVertex) -> None:
    provider = make(pv.DeployedModelProvider, vertex)
    olds = {**deployed_model_props(), **provider.create(deployed_model_props()).outs}
    vertex.calls.clear()
    news = deployed_model_props(3, 6)
    news["upload_model_request"]["model"]["labels"]["team"] = "llm"
    outs = provider.update("id", olds, news).outs
    assert vertex.methods() == [
        "projects.locations.endpoints.mutateDeployedModel",
        "projects.locations.endpoints.operations.get",
        "projects.locations.endpoints.operations.get",
        "projects.locations.models.patch",
    ]
    mutate = vertex.bodies("projects.locations.endpoints.mutateDeployedModel")[0]
    assert mutate["updateMask"] == "dedicatedResources.minReplicaCount,dedicatedResources.maxReplicaCount"
    assert mutate["deployedModel"]["dedicatedResources"]["minReplicaCount"] == 3
    assert vertex.calls[-1][1] == {"name": olds["model_name"], "updateMask": "labels"}
    assert vertex.endpoints[ENDPOINT]["deployedModels"][0]["dedicatedResources"]["maxReplicaCount"] == 6
    assert outs is not None and outs["deployed_model_id"] == DEPLOYED_ID


def test_delete_undeploys_then_deletes_the_model(vertex: FakeVertex) -> None:
    provider = make(pv.DeployedModelProvider, vertex)
    outs = provider.create(deployed_model_props()).outs
    vertex.calls.clear()
    provider.delete("id", outs)
    assert vertex.bodies("projects.locations.endpoints.undeployModel") == [{"deployedModelId": DEPLOYED_ID}]
    assert vertex.models == {} and vertex.endpoints[ENDPOINT]["deployedModels"] == []
    provider.delete("id", outs)  # already gone: nothing left to undeploy or delete, and no error


def test_delete_of_the_last_model_holding_traffic_clears_the_split(vertex: FakeVertex) -> None:
    provider = make(pv.DeployedModelProvider, vertex)
    outs = provider.create(deployed_model_props()).outs
    vertex.endpoints[ENDPOINT]["trafficSplit"] = {DEPLOYED_ID: 100}
    provider.delete("id", outs)
    assert vertex.bodies("projects.locations.endpoints.undeployModel") == [
        {"deployedModelId": DEPLOYED_ID, "trafficSplit": {}}
    ]


def test_delete_refuses_to_strand_traffic(vertex: FakeVertex) -> None:
    provider = make(pv.DeployedModelProvider, vertex)
    stable = provider.create(deployed_model_props()).outs
    provider.create(deployed_model_props(model_id="llm-prod-canary-0123456789ab", deployed_model_id="2222222222"))
    vertex.endpoints[ENDPOINT]["trafficSplit"] = {DEPLOYED_ID: 90, "2222222222": 10}
    with pytest.raises(
        pv.OperationError, match=rf"deployed model {DEPLOYED_ID} still serves 90 % of .*move its traffic"
    ):
        provider.delete("id", stable)
    # A delete-first replacement moves the share to the others instead: 10 of the remaining 10 -> 100.
    provider.delete("id", {**stable, "replacement": "delete_first"})
    assert vertex.bodies("projects.locations.endpoints.undeployModel")[-1] == {
        "deployedModelId": DEPLOYED_ID,
        "trafficSplit": {"2222222222": 100},
    }


def test_rebalanced_split_keeps_the_others_proportions() -> None:
    # 50 / 30 / 20 without the 50: 30 / 20 -> 60 / 40; 40 / 33 / 27 without 40: 33 / 27 -> 55 / 45.
    assert pv.rebalanced({"1": 50, "2": 30, "3": 20}, "1") == {"2": 60, "3": 40}
    assert pv.rebalanced({"1": 40, "2": 33, "3": 27}, "1") == {"2": 55, "3": 45}
    # 34 / 33 / 33 without 34: 50 / 50; 10 / 45 / 45 without 10 -> 50 / 50; alone: nothing left to send.
    assert pv.rebalanced({"1": 34, "2": 33, "3": 33}, "1") == {"2": 50, "3": 50}
    assert pv.rebalanced({"1": 100}, "1") == {}
    # 1 / 1 / 1 of 3 without one: 50 / 50 (ties of the remainder broken by id), summing to 100 exactly.
    assert pv.rebalanced({"1": 98, "2": 1, "3": 1}, "1") == {"2": 50, "3": 50}


def test_read_reports_drift_and_disappearance(vertex: FakeVertex) -> None:
    provider = make(pv.DeployedModelProvider, vertex)
    outs = provider.create(deployed_model_props()).outs
    vertex.endpoints[ENDPOINT]["deployedModels"][0]["dedicatedResources"]["minReplicaCount"] = 1
    read = provider.read(DEPLOYED_RESOURCE_ID, floats(outs))
    assert read.id == DEPLOYED_RESOURCE_ID
    assert read.outs["deployed_model"]["dedicatedResources"]["minReplicaCount"] == 1
    assert read.inputs is None  # a refresh keeps the program's inputs: the drift shows against them
    assert provider.diff("id", read.outs, deployed_model_props()).changes is True
    vertex.endpoints[ENDPOINT]["deployedModels"].clear()
    assert provider.read(DEPLOYED_RESOURCE_ID, outs).id == ""
    with pytest.raises(pv.OperationError, match="not a deployed model id: 'id'"):
        provider.read("id", outs)


TRAFFIC_ID = f"{ENDPOINT}/trafficSplit"


def test_traffic_create_update_delete(vertex: FakeVertex) -> None:
    deployer = make(pv.DeployedModelProvider, vertex)
    stable = deployer.create(deployed_model_props()).outs["deployed_model_id"]
    canary = deployer.create(
        deployed_model_props(model_id="llm-prod-canary-0123456789ab", deployed_model_id="2222222222")
    ).outs["deployed_model_id"]
    traffic = make(pv.EndpointTrafficProvider, vertex)
    vertex.calls.clear()
    props = floats(
        {
            "project": PROJECT,
            "region": REGION,
            "endpoint": ENDPOINT,
            "weights": {"stable": 100, "canary": 0},
            "deployed_model_ids": {"stable": stable, "canary": canary},
            "inference_timeout_seconds": 1800,
        }
    )
    assert traffic.check({}, props).failures == []
    created = traffic.create(props)
    assert created.id == TRAFFIC_ID and created.outs["traffic_split"] == {stable: 100}
    assert vertex.calls == [
        (
            "projects.locations.endpoints.patch",
            {"name": ENDPOINT, "updateMask": "trafficSplit,clientConnectionConfig.inferenceTimeout"},
            {"trafficSplit": {stable: 100}, "clientConnectionConfig": {"inferenceTimeout": "1800s"}},
        )
    ]
    news = {**props, "weights": {"stable": 95.0, "canary": 5.0}}
    assert traffic.diff("id", created.outs, news).changes is True
    assert traffic.diff("id", created.outs, news).replaces == []
    updated = traffic.update("id", created.outs, news).outs
    assert vertex.endpoints[ENDPOINT]["trafficSplit"] == {stable: 95, canary: 5} == updated["traffic_split"]
    # drift: someone moved traffic by hand; refresh records it and the next diff wants it back
    vertex.endpoints[ENDPOINT]["trafficSplit"] = {stable: 100}
    refreshed = traffic.read(TRAFFIC_ID, updated).outs
    assert traffic.diff("id", refreshed, news).changes is True
    traffic.delete("id", updated)
    assert vertex.calls[-1] == (
        "projects.locations.endpoints.patch",
        {"name": ENDPOINT, "updateMask": "trafficSplit"},
        {"trafficSplit": {}},
    )
    bad = {**props, "weights": {"stable": 90, "canary": 0}}
    assert [f.reason for f in traffic.check({}, bad).failures] == [
        "weights must sum to 100, got 90 (stable 90, canary 0)"
    ]


# google.api_core warns on import that it will drop Python 3.11 in 2027: not this project's to fix.
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_discovery_transport_builds_the_validated_bodies_unchanged() -> None:
    """The real transport (no network: the request is built, not executed) sends the builder's body as-is to the
    regional host, with the update mask as a query parameter."""
    import json
    from urllib.parse import parse_qs, urlparse

    from google.auth.credentials import AnonymousCredentials

    transport = pv.DiscoveryTransport(REGION, credentials=AnonymousCredentials())
    upload = transport.request(
        "projects.locations.models.upload", {"parent": f"projects/{PROJECT}/locations/{REGION}"}, EXPECTED_UPLOAD
    )
    assert upload.method == "POST"
    assert upload.uri.startswith(
        f"https://{REGION}-aiplatform.googleapis.com/v1/projects/{PROJECT}/locations/{REGION}/models:upload"
    )
    assert json.loads(upload.body) == EXPECTED_UPLOAD
    body, mask = rq.endpoint_patch({"111": 100})
    patch = transport.request("projects.locations.endpoints.patch", {"name": ENDPOINT, "updateMask": mask}, body)
    url = urlparse(patch.uri)
    assert (patch.method, url.path, parse_qs(url.query)["updateMask"]) == ("PATCH", f"/v1/{ENDPOINT}", [mask])
    assert json.loads(patch.body) == body
    op = transport.request(
        "projects.locations.models.operations.get",
        {"name": f"projects/{PROJECT}/locations/{REGION}/models/1/operations/9"},
    )
    assert op.method == "GET"
    assert urlparse(op.uri).path == f"/v1/projects/{PROJECT}/locations/{REGION}/models/1/operations/9"
    with pytest.raises(TypeError, match="does not match the pattern"):  # the client checks patterns too
        transport.request("projects.locations.endpoints.operations.get", {"name": f"{ENDPOINT}/bad/9"})


def test_a_custom_container_is_never_deployed_on_a_resource_pool(vertex: FakeVertex) -> None:
    """Vertex AI "Share resources across deployments", Limitations: "custom containers aren't supported" on a
    deployment resource pool. Every model this provider uploads is a custom container (a containerSpec), so a
    deployed model naming ``sharedResources`` is refused at check, before any call; and the request builder has no
    way to name one (DeployedModelSpec takes dedicated resources only)."""
    provider = make(pv.DeployedModelProvider, vertex)
    props = deployed_model_props()
    assert "containerSpec" in props["upload_model_request"]["model"]
    assert provider.check({}, props).failures == []
    shared = copy.deepcopy(props)
    del shared["deployed_model"]["dedicatedResources"]
    shared["deployed_model"]["sharedResources"] = f"projects/{PROJECT}/locations/{REGION}/deploymentResourcePools/x"
    assert [f.reason for f in provider.check({}, shared).failures] == [
        "sharedResources: a custom container cannot run on a deployment resource pool (Vertex AI, Share resources "
        "across deployments: custom containers aren't supported); use dedicatedResources"
    ]
    neither = copy.deepcopy(props)
    del neither["deployed_model"]["dedicatedResources"]
    assert [f.reason for f in provider.check({}, neither).failures] == ["dedicatedResources is required"]
    assert vertex.methods() == []
    assert "resources" in {f.name for f in dataclasses.fields(rq.DeployedModelSpec)}
    assert typing.get_type_hints(rq.DeployedModelSpec)["resources"] is rq.DedicatedResources


def test_a_pool_left_by_an_earlier_version_is_deleted_through_its_pickled_provider(vertex: FakeVertex) -> None:
    """Pulumi deletes a dynamic resource the program no longer declares through the provider pickled in its state
    (by module and class name): the retired pool provider must unpickle and delete, and refuse everything else."""
    import dill

    name = f"projects/{PROJECT}/locations/{REGION}/deploymentResourcePools/pair-0123abcd"
    vertex.pools[name] = {"name": name}
    pickled = dill.dumps(pv.DeploymentResourcePoolProvider(), recurse=True)
    assert b"components.vertex.provider" in pickled and b"DeploymentResourcePoolProvider" in pickled
    retired = dill.loads(pickled)
    clock = FakeClock()
    retired = type(retired)(transport_factory=vertex, sleep=clock.sleep, clock=clock)
    recorded = {"project": PROJECT, "region": REGION, "name": name, "timeouts": {"delete_seconds": 1800}}
    assert retired.read(name, recorded).id == name
    retired.delete(name, recorded)
    assert name not in vertex.pools
    assert retired.read(name, recorded).id == ""  # refreshed after the delete: gone
    retired.delete(name, recorded)  # deleting what is gone already: nothing to do
    assert vertex.methods().count("projects.locations.deploymentResourcePools.delete") == 2
    (failure,) = retired.check({}, {"resource_pool": {}}).failures
    assert "custom containers aren't supported" in failure.reason
    with pytest.raises(pv.OperationError, match="never created"):
        retired.create({})
