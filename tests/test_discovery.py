"""The discovery-document validator (tests/discovery.py): valid bodies pass, and each kind of mistake fails with
its exact, JSON-path-qualified message. The documents are the ones google-api-python-client ships."""

from __future__ import annotations

import re

import pytest

from tests.discovery import DOCUMENTS_DIR, DiscoveryDocument, document

AIPLATFORM = ("aiplatform", "v1")
#: Every document the project validates against (Vertex AI; later the dashboard, GKE and Compute enums).
DOCUMENTS = (
    AIPLATFORM,
    ("monitoring", "v1"),
    ("monitoring", "v3"),
    ("container", "v1"),
    ("compute", "v1"),
    ("run", "v2"),
    ("storage", "v1"),
)

DEPLOY = "GoogleCloudAiplatformV1DeployModelRequest"
RESERVATION_TYPES = "TYPE_UNSPECIFIED, NO_RESERVATION, ANY_RESERVATION, SPECIFIC_RESERVATION"


@pytest.fixture(scope="module")
def ai() -> DiscoveryDocument:
    return document(*AIPLATFORM)


def valid_deploy() -> dict:
    return {
        "deployedModel": {
            "model": "projects/p/locations/us-central1/models/123",
            "displayName": "stable",
            "dedicatedResources": {
                "machineSpec": {
                    "machineType": "g2-standard-12",
                    "acceleratorType": "NVIDIA_L4",
                    "acceleratorCount": 1,
                    "reservationAffinity": {
                        "reservationAffinityType": "SPECIFIC_RESERVATION",
                        "key": "compute.googleapis.com/reservation-name",
                        "values": ["projects/p/zones/us-central1-a/reservations/r"],
                    },
                },
                "minReplicaCount": 1,
                "maxReplicaCount": 3,
                "autoscalingMetricSpecs": [{"metricName": "m", "target": 60}],
            },
        },
        "trafficSplit": {"0": 100},
    }


def test_documents_ship_with_the_client_and_load() -> None:
    for api, version in DOCUMENTS:
        doc = document(api, version)
        assert (doc.name, doc.version) == (api, version)
        assert (DOCUMENTS_DIR / f"{api}.{version}.json").exists()
        assert doc.revision.isdigit() and len(doc.schemas) > 10


def test_every_schema_of_every_document_is_walkable_and_requires_nothing() -> None:
    """Generic, not Vertex-shaped: every schema accepts ``{}`` (discovery marks no field required) and every
    enum field of every schema resolves through ``enum_values``."""
    for api, version in DOCUMENTS:
        doc = document(api, version)
        enums = 0
        for schema_id, schema in doc.schemas.items():
            assert doc.validate(schema_id, {}) == [], schema_id
            for prop, node in schema.get("properties", {}).items():
                target = node.get("items", node)
                if "enum" in target:
                    assert doc.enum_values(schema_id, prop) == tuple(target["enum"])
                    enums += 1
        assert enums > 0, f"{api}.{version} has no enum field at all?"


def test_valid_bodies_pass(ai: DiscoveryDocument) -> None:
    assert ai.validate(DEPLOY, valid_deploy()) == []
    dashboard = {
        "displayName": "vLLM",
        "labels": {"pool": ""},
        "mosaicLayout": {
            "columns": 48,
            "tiles": [
                {
                    "xPos": 0,
                    "yPos": 0,
                    "width": 24,
                    "height": 16,
                    "widget": {
                        "title": "TTFT p95",
                        "xyChart": {
                            "dataSets": [
                                {
                                    "plotType": "LINE",
                                    "minAlignmentPeriod": "60s",
                                    "timeSeriesQuery": {"prometheusQuery": "histogram_quantile(0.95, ...)"},
                                }
                            ]
                        },
                    },
                }
            ],
        },
    }
    assert document("monitoring", "v1").validate("Dashboard", dashboard) == []
    node_pool = {
        "name": "gpu",
        "initialNodeCount": 1,
        "config": {
            "machineType": "a3-highgpu-2g",
            "reservationAffinity": {
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": ["res"],
            },
        },
    }
    assert document("container", "v1").validate("NodePool", node_pool) == []
    reservation = {
        "name": "res",
        "zone": "us-central1-a",
        "specificReservation": {"count": "2", "instanceProperties": {"machineType": "a3-highgpu-2g"}},
    }
    assert document("compute", "v1").validate("Reservation", reservation) == []


def test_wrong_field_name_fails_with_path_and_suggestion(ai: DiscoveryDocument) -> None:
    body = valid_deploy()
    body["deployedModel"]["dedicatedResource"] = body["deployedModel"].pop("dedicatedResources")
    assert ai.validate(DEPLOY, body) == [
        "$.deployedModel.dedicatedResource: unknown field (GoogleCloudAiplatformV1DeployedModel has no field "
        "'dedicatedResource'); did you mean 'dedicatedResources'?"
    ]


def test_wrong_enum_fails_listing_the_allowed_values(ai: DiscoveryDocument) -> None:
    body = valid_deploy()
    body["deployedModel"]["dedicatedResources"]["machineSpec"]["reservationAffinity"]["reservationAffinityType"] = (
        "SPECIFIC"
    )
    assert ai.validate(DEPLOY, body) == [
        '$.deployedModel.dedicatedResources.machineSpec.reservationAffinity.reservationAffinityType: "SPECIFIC" is '
        "not a value of GoogleCloudAiplatformV1ReservationAffinity.reservationAffinityType; allowed: "
        + RESERVATION_TYPES
    ]


def test_wrong_types_fail(ai: DiscoveryDocument) -> None:
    body = valid_deploy()
    body["deployedModel"]["dedicatedResources"]["minReplicaCount"] = "1"
    body["trafficSplit"] = {"0": True}
    assert ai.validate(DEPLOY, body) == [
        '$.deployedModel.dedicatedResources.minReplicaCount: expected integer (int32), got string "1"',
        '$.trafficSplit["0"]: expected integer (int32), got boolean true',
    ]
    spec = {"imageUri": "x", "sharedMemorySizeMb": 16384}
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", spec) == [
        "$.sharedMemorySizeMb: expected string (int64, a decimal integer in a JSON string), got integer 16384"
    ]
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"sharedMemorySizeMb": "16 GiB"}) == [
        '$.sharedMemorySizeMb: "16 GiB" is not a decimal int64'
    ]
    assert ai.validate("GoogleCloudAiplatformV1Port", {"containerPort": 2**31}) == [
        "$.containerPort: 2147483648 is out of range for int32 [-2147483648, 2147483647]"
    ]
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"ports": {"containerPort": 1}}) == [
        '$.ports: expected array, got object {"containerPort": 1}'
    ]
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"args": ["--port", 8000]}) == [
        "$.args[1]: expected string, got integer 8000"
    ]
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"imageUri": None}) == [
        "$.imageUri: null is not a valid string (omit the field instead)"
    ]


def test_bad_duration_and_other_formats_fail(ai: DiscoveryDocument) -> None:
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"deploymentTimeout": "1h"}) == [
        '$.deploymentTimeout: "1h" is not a google-duration (seconds with up to 9 fractional digits and a '
        "trailing 's', e.g. '3600s' or '0.5s')"
    ]
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"deploymentTimeout": "3600s"}) == []
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"deploymentTimeout": "0.250s"}) == []
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", {"deploymentTimeout": 3600}) == [
        "$.deploymentTimeout: expected string (google-duration), got integer 3600"
    ]
    assert ai.validate("GoogleLongrunningOperation", {"done": "yes"}) == ['$.done: expected boolean, got string "yes"']
    mutate = "GoogleCloudAiplatformV1MutateDeployedModelRequest"
    assert ai.validate(mutate, {"updateMask": "dedicatedResources.minReplicaCount,spot"}) == []
    assert ai.validate(mutate, {"updateMask": "dedicated resources"}) == [
        "$.updateMask: \"dedicated resources\" is not a google-fieldmask (bad path(s) 'dedicated resources'; "
        "comma-separated dotted field names)"
    ]
    monitoring = document("monitoring", "v3")
    assert monitoring.validate("TimeInterval", {"endTime": "2026-08-23T10:00:00.5Z"}) == []
    assert monitoring.validate("TimeInterval", {"endTime": "2026-02-30T10:00:00Z"}) == [
        '$.endTime: "2026-02-30T10:00:00Z" is not a google-datetime (day is out of range for month)'
    ]
    assert monitoring.validate("TimeInterval", {"endTime": "2026-08-23 10:00"}) == [
        "$.endTime: \"2026-08-23 10:00\" is not a google-datetime (RFC 3339 with a 'Z' or numeric offset, "
        "e.g. '2026-08-23T10:00:00Z')"
    ]
    check = document("monitoring", "v3")
    assert check.validate("HttpCheck", {"body": "eyJ0ZXN0IjogMX0="}) == []
    assert check.validate("HttpCheck", {"body": "not base64!"}) == [
        '$.body: "not base64!" is not a byte (base64 (standard or URL-safe alphabet))'
    ]


def test_output_only_fields_are_refused_in_requests_but_allowed_in_responses(ai: DiscoveryDocument) -> None:
    endpoint = {"displayName": "e", "deployedModels": [{"id": "1"}]}
    assert ai.validate("GoogleCloudAiplatformV1Endpoint", endpoint) == [
        "$.deployedModels: output-only field of GoogleCloudAiplatformV1Endpoint must not be sent"
    ]
    assert ai.validate("GoogleCloudAiplatformV1Endpoint", endpoint, allow_read_only=True) == []


def test_recursive_schemas_are_followed(ai: DiscoveryDocument) -> None:
    """GoogleCloudAiplatformV1Schema (an OpenAPI schema) refers to itself through ``properties`` and ``items``."""
    schema = {"type": "OBJECT", "properties": {"a": {"type": "ARRAY", "items": {"type": "STRING", "nullabel": 1}}}}
    assert ai.validate("GoogleCloudAiplatformV1Schema", schema) == [
        "$.properties.a.items.nullabel: unknown field (GoogleCloudAiplatformV1Schema has no field 'nullabel'); "
        "did you mean 'nullable'?"
    ]


def test_required_fields_only_when_the_caller_asks(ai: DiscoveryDocument) -> None:
    body = {"deployedModel": {"displayName": "x", "dedicatedResources": {"machineSpec": {}}}}
    assert ai.validate(DEPLOY, body) == []  # discovery itself requires nothing
    required = ("deployedModel.model", "deployedModel.dedicatedResources.minReplicaCount", "deployedModel.displayName")
    assert ai.validate(DEPLOY, body, required=required) == [
        "$.deployedModel.model: required field is missing",
        "$.deployedModel.dedicatedResources.minReplicaCount: required field is missing",
    ]
    spec = {"ports": [{"containerPort": 8000}, {}]}
    assert ai.validate("GoogleCloudAiplatformV1ModelContainerSpec", spec, required=("ports[].containerPort",)) == [
        "$.ports[1].containerPort: required field is missing"
    ]


def test_method_lookup(ai: DiscoveryDocument) -> None:
    assert ai.request_schema("projects.locations.models.upload") == "GoogleCloudAiplatformV1UploadModelRequest"
    assert ai.request_schema("projects.locations.endpoints.deployModel") == DEPLOY
    assert ai.request_schema("projects.locations.endpoints.get") is None
    assert ai.response_schema("projects.locations.endpoints.deployModel") == "GoogleLongrunningOperation"
    with pytest.raises(KeyError, match=re.escape("resource 'projects.locations.models' has no method 'uplaod'")):
        ai.method("projects.locations.models.uplaod")
    with pytest.raises(KeyError, match=re.escape("has no resource 'projects.locations.modles'")):
        ai.method("projects.locations.modles.upload")


def test_enum_values_and_field_lookup(ai: DiscoveryDocument) -> None:
    assert ai.enum_values(
        DEPLOY, "deployedModel.dedicatedResources.machineSpec.reservationAffinity.reservationAffinityType"
    ) == tuple(RESERVATION_TYPES.split(", "))
    accelerators = ai.enum_values("GoogleCloudAiplatformV1MachineSpec", "acceleratorType")
    assert {"NVIDIA_L4", "NVIDIA_H100_80GB"} <= set(accelerators)
    assert ai.field(DEPLOY, "trafficSplit.*") == {"format": "int32", "type": "integer"}
    with pytest.raises(KeyError, match="GoogleCloudAiplatformV1MachineSpec has no field 'acceleratorKind'"):
        ai.field("GoogleCloudAiplatformV1MachineSpec", "acceleratorKind")
    with pytest.raises(KeyError, match="is not an enum field"):
        ai.enum_values("GoogleCloudAiplatformV1MachineSpec", "machineType")
    assert ai.field_mask_errors(
        "GoogleCloudAiplatformV1DeployedModel", "dedicatedResources.minReplicaCount,dedicatedResources.minReplicas"
    ) == [
        "field mask 'dedicatedResources.minReplicas': GoogleCloudAiplatformV1DeployedModel.dedicatedResources has "
        "no field 'minReplicas' (in 'dedicatedResources.minReplicas')"
    ]


def test_parameters(ai: DiscoveryDocument) -> None:
    get = "projects.locations.models.operations.get"
    assert ai.validate_parameters(get, {"name": "projects/p/locations/l/models/m/operations/1"}) == []
    assert ai.validate_parameters(get, {"name": "projects/p/locations/l/endpoints/e/operations/1", "x": 1}) == [
        'projects.locations.models.operations.get: parameter name="projects/p/locations/l/endpoints/e/operations/1" '
        "does not match ^projects/[^/]+/locations/[^/]+/models/[^/]+/operations/[^/]+$",
        "projects.locations.models.operations.get: unknown parameter 'x'; declared: name",
    ]
    assert ai.validate_parameters(get, {}) == [
        "projects.locations.models.operations.get: required parameter 'name' is missing"
    ]
    patch = "projects.locations.endpoints.patch"
    assert ai.validate_parameters(patch, {"name": "projects/p/locations/l/endpoints/e", "updateMask": "a b"}) == [
        "projects.locations.endpoints.patch(updateMask): \"a b\" is not a google-fieldmask (bad path(s) 'a b'; "
        "comma-separated dotted field names)"
    ]
    assert ai.validate_parameters(patch, {"name": "projects/p/locations/l/endpoints/e", "fields": "name"}) == []


def test_unknown_schema_and_document() -> None:
    with pytest.raises(KeyError, match="has no schema 'Dashbord'; did you mean 'Dashboard'"):
        document("monitoring", "v1").schema("Dashbord")
    with pytest.raises(FileNotFoundError, match=re.escape("no discovery document aiplatform.v9.json")):
        document("aiplatform", "v9")
