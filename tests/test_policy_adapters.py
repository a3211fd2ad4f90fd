"""The policy pack's per-target adapters (``policies/rules/_adapters/``): each turns its target's resources into the
facts the cross-target policies judge, and nothing else's.

Each adapter is fed the resources of its target's compliant baseline (the shipped prod GKE plan, the prod Cloud Run
fixture, the prod Vertex stack of tests/test_vertex_policies.py), marshalled as the engine marshals them and copied by
the pack's ``plain`` exactly as a policy sees them; the facts are written out by hand. One change at a time then
shows a fact follows its property, and an unknown value stays unknown in its own field only.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import pytest

from infra.offline.analyzer import COMPUTED_MARKER
from infra.resolve import ResolvedStack

from .conftest import CLOUD_RUN_INVOKER, REPO, VERTEX_CALLER
from .test_cloud_run_policies import CANARY_REVISION, COLD, cloud_run  # noqa: F401 (fixture)
from .test_policies import _engine_props, _opts, find, prod  # noqa: F401 (fixture)
from .test_vertex_policies import RESERVATION, cohost, vertex  # noqa: F401 (fixture)

if str(REPO / "policies") not in sys.path:
    sys.path.insert(0, str(REPO / "policies"))  # the pack imports its rules as the top-level package ``rules``
from rules._adapters import ADAPTERS, gke
from rules._adapters import cloud_run as cloud_run_adapter
from rules._adapters import vertex as vertex_adapter
from rules._adapters.facts import (
    CallerGrant,
    IamCheckSwitch,
    ImageRef,
    ProbeLimit,
    ReservationClaim,
    ServingEndpoint,
    SharedGpu,
    StartupWindow,
    VllmServer,
    WarmFloor,
)
from rules._common import UNKNOWN, Res, plain

Resources = list[dict[str, Any]]


def as_res(r: dict[str, Any]) -> Res:
    """An inventory resource as a policy sees it: engine-marshalled, then copied unknown-safe."""
    return Res(r["type"], r["name"], r["urn"], plain(_engine_props(r["inputs"])), _opts(r).protect)


def facts_of(adapter: Any, kind: str, rs: Resources, typ: str, name: str) -> list[Any]:
    return getattr(adapter, kind)(as_res(find(rs, typ, name)))


KINDS = ("images", "warm_floors", "vllm_servers", "startup_windows", "reservations", "caller_grants", "endpoints")


def _others(adapter: Any) -> list[Any]:
    return [a for a in ADAPTERS if a is not adapter]


def _no_foreign_facts(adapter: Any, rs: Resources) -> None:
    """The other targets' adapters find nothing in this target's resources (resource and stack readers)."""
    resources = [as_res(r) for r in rs]
    for other in _others(adapter):
        assert {k: [f for r in resources for f in getattr(other, k)(r)] for k in KINDS} == {k: [] for k in KINDS}
        assert other.shared_gpus(resources) == []


# ---- GKE --------------------------------------------------------------------------------------------------------

GKE_IMAGE = (
    "us-central1-docker.pkg.dev/acme-llm-prod/serving/vllm-openai@sha256:"
    "1b11c85fb4191d72e407866cde1a182f22f50de937b852ca4111c698e2cafa79"
)


def _stable_container(rs: Resources) -> dict[str, Any]:
    return find(rs, ":Deployment", "vllm-stable-deployment")["inputs"]["spec"]["template"]["spec"]["containers"][0]


def test_gke_adapter_reads_a_model_server_deployment(prod: tuple[ResolvedStack, Resources]) -> None:  # noqa: F811
    resolved, rs = prod
    c = _stable_container(rs)
    dep = ":Deployment", "vllm-stable-deployment"
    assert facts_of(gke.ADAPTER, "images", rs, *dep) == [
        ImageRef("container 'vllm' image", GKE_IMAGE, digest_required=True, starts="pod"),
        ImageRef("container 'verify-release' image", GKE_IMAGE, digest_required=True, starts="pod"),
    ]
    (server,) = facts_of(gke.ADAPTER, "vllm_servers", rs, *dep)
    assert server.container == "container 'vllm'"
    assert server.args == ["vllm", "serve", *c["args"]]  # the image's `vllm serve` command, then its flags
    assert server.env["HF_HUB_OFFLINE"] == "1" and "VLLM_DEBUG_LOG_API_SERVER_RESPONSE" not in server.env
    cold = round(resolved.plan.pools["stable"].capacity.cold_load_seconds, 3)
    assert facts_of(gke.ADAPTER, "startup_windows", rs, *dep) == [
        StartupWindow(
            container="container 'vllm'",
            probe=c["startupProbe"],
            defaults={"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3},
            without_probe="the liveness and readiness probes would judge a pod that is still loading weights",
            cold_load=f"{cold:g}",
            rendered_on="the Deployment",
            key="vllm-stable",
            readiness_required=True,
            readiness=c["readinessProbe"],
        )
    ]
    assert facts_of(gke.ADAPTER, "warm_floors", rs, *dep) == []  # the HPA carries it


def test_gke_adapter_reads_other_workloads_charts_hpas_and_pools(prod: tuple[ResolvedStack, Resources]) -> None:  # noqa: F811
    _, rs = prod
    (adapter_image,) = facts_of(gke.ADAPTER, "images", rs, ":Deployment", "observability-adapter-deployment")
    assert adapter_image.digest_required is False and adapter_image.starts == "pod"
    assert facts_of(gke.ADAPTER, "vllm_servers", rs, ":Deployment", "observability-adapter-deployment") == []
    # The picker chart's values state the whole image (the llm-d chart's default tag is the moving `main`): the
    # release's tag, not a digest.
    assert facts_of(gke.ADAPTER, "images", rs, ":Chart", "vllm-stable-router-epp") == [
        ImageRef(
            "values.router.epp.image",
            "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
            digest_required=False,
            starts="pod",
        )
    ]
    assert facts_of(gke.ADAPTER, "warm_floors", rs, ":HorizontalPodAutoscaler", "observability-hpa-stable") == [
        WarmFloor("minReplicas", 2, "replica", "a new GPU replica takes minutes to obtain a node and load weights")
    ]
    assert facts_of(gke.ADAPTER, "reservations", rs, ":NodePool", "platform-gpu-h100-tp2-pool") == [
        ReservationClaim(
            "GPU node pool",
            {
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": ["llm-prod-h100-tp2"],
            },
            type_field="consumeReservationType",
            by="name",
        )
    ]
    # The system pool has no GPU: no reservation is asked of it.
    assert facts_of(gke.ADAPTER, "reservations", rs, ":NodePool", "platform-cluster-system-pool") == []
    _no_foreign_facts(gke.ADAPTER, rs)


def test_gke_adapter_shared_gpus_follow_the_pools_sharing(prod: tuple[ResolvedStack, Resources]) -> None:  # noqa: F811
    _, resources = prod
    assert gke.ADAPTER.shared_gpus([as_res(r) for r in resources]) == []  # whole GPUs: nothing shares one
    rs = copy.deepcopy(resources)
    pool = find(rs, ":NodePool", "platform-gpu-h100-tp2-pool")
    pool["inputs"]["nodeConfig"]["guestAccelerators"][0]["gpuSharingConfig"] = {
        "gpuSharingStrategy": "MPS",
        "maxSharedClientsPerGpu": 2,
    }
    assert gke.ADAPTER.shared_gpus([as_res(r) for r in rs]) == [
        SharedGpu(
            pool["urn"],
            "up to 2 servers share one GPU of this pool (maxSharedClientsPerGpu 2)",
            ((0.9, "vllm-canary"), (0.9, "vllm-canary")),
        )
    ]
    # A utilisation unknown at preview: that pool cannot be judged, so it yields nothing rather than a guess.
    args = _stable_container(rs)["args"]
    args[args.index("--gpu-memory-utilization") + 1] = COMPUTED_MARKER
    assert gke.ADAPTER.shared_gpus([as_res(r) for r in rs]) == []


def test_gke_adapter_keeps_unknowns_per_value(prod: tuple[ResolvedStack, Resources]) -> None:  # noqa: F811
    _, resources = prod
    rs = copy.deepcopy(resources)
    c = _stable_container(rs)
    c["args"], c["image"] = COMPUTED_MARKER, COMPUTED_MARKER
    dep = ":Deployment", "vllm-stable-deployment"
    (server,) = facts_of(gke.ADAPTER, "vllm_servers", rs, *dep)
    assert server.args is UNKNOWN and server.env["HF_HUB_OFFLINE"] == "1"
    assert [i.image for i in facts_of(gke.ADAPTER, "images", rs, *dep)] == [UNKNOWN, GKE_IMAGE]
    c["env"] = COMPUTED_MARKER
    find(rs, ":HorizontalPodAutoscaler", "observability-hpa-stable")["inputs"]["spec"]["minReplicas"] = COMPUTED_MARKER
    assert facts_of(gke.ADAPTER, "vllm_servers", rs, *dep)[0].env is UNKNOWN
    assert facts_of(gke.ADAPTER, "startup_windows", rs, *dep)[0].probe == c["startupProbe"]
    (floor,) = facts_of(gke.ADAPTER, "warm_floors", rs, ":HorizontalPodAutoscaler", "observability-hpa-stable")
    assert floor.value is UNKNOWN


# ---- Cloud Run ----------------------------------------------------------------------------------------------------

SERVICE = "pulumi-python:dynamic/cloudrun:Service"
REVISION = "pulumi-python:dynamic/cloudrun:Revision"


def _cr_container(rs: Resources, name: str = "vllm", role: str = "canary") -> dict[str, Any]:
    template = find(rs, REVISION, f"cloud-run-revision-{role}")["inputs"]["template"]
    (c,) = [c for c in template["containers"] if c["name"] == name]
    return c


def test_cloud_run_adapter_reads_each_revision_and_the_service(
    cloud_run: tuple[ResolvedStack, Resources],  # noqa: F811
) -> None:
    _, rs = cloud_run
    svc = REVISION, "cloud-run-revision-canary"
    vllm, collector = _cr_container(rs), _cr_container(rs, "collector")
    assert facts_of(cloud_run_adapter.ADAPTER, "images", rs, *svc) == [
        ImageRef("container 'vllm' image", vllm["image"], digest_required=True, starts="instance"),
        ImageRef("container 'collector' image", collector["image"], digest_required=True, starts="instance"),
    ]
    assert facts_of(cloud_run_adapter.ADAPTER, "warm_floors", rs, *svc) == [
        WarmFloor(
            "template.scaling.minInstanceCount",
            1,
            "instance",
            "a cold GPU instance loads its weights for minutes before it answers",
        )
    ]
    (server,) = facts_of(cloud_run_adapter.ADAPTER, "vllm_servers", rs, *svc)
    argv = vllm["command"] + vllm["args"]
    assert server.container == "container 'vllm'"
    assert server.args == argv[argv.index("serve") + 1 :]  # behind the verifier's `--exec -- vllm serve`
    assert server.args[:2] == ["--model", f"/staged-weights/qwen3-8b-fp8/{CANARY_REVISION}"]
    assert server.env["HF_HUB_OFFLINE"] == "1"
    assert server.env["HF_TOKEN"] == {"valueSource": {"secretKeyRef": {"secret": "hf-hub-token", "version": "3"}}}
    assert facts_of(cloud_run_adapter.ADAPTER, "startup_windows", rs, *svc) == [
        StartupWindow(
            container="container 'vllm'",
            probe=vllm["startupProbe"],
            defaults={"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3},
            without_probe="Cloud Run's default TCP probe gives up long before a GPU cold load ends",
            cold_load=COLD,
            rendered_on="the revision template",
            key=find(rs, *svc)["inputs"]["revision"],
            limit=ProbeLimit(1800, "Cloud Run accepts for GPU services: the revision would be refused"),
            min_factor=2.0,
        )
    ]
    # Stable's revision is read too (it is no longer hidden behind the canary's template).
    assert len(facts_of(cloud_run_adapter.ADAPTER, "startup_windows", rs, REVISION, "cloud-run-revision-stable")) == 1
    assert facts_of(cloud_run_adapter.ADAPTER, "endpoints", rs, SERVICE, "cloud-run-service") == [
        ServingEndpoint(
            "service", iam_check_switch=IamCheckSwitch("service.invokerIamDisabled", False, "roles/run.invoker")
        )
    ]
    assert facts_of(cloud_run_adapter.ADAPTER, "endpoints", rs, *svc) == []  # a revision is no endpoint
    invoker = find(rs, "gcp:cloudrunv2/serviceIamMember:ServiceIamMember", CLOUD_RUN_INVOKER[0])["inputs"]
    assert facts_of(
        cloud_run_adapter.ADAPTER,
        "caller_grants",
        rs,
        "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
        CLOUD_RUN_INVOKER[0],
    ) == [CallerGrant("roles/run.invoker", invoker["member"], "service")]
    assert cloud_run_adapter.ADAPTER.reservations.types == () and cloud_run_adapter.ADAPTER.shared_gpus.types == ()
    _no_foreign_facts(cloud_run_adapter.ADAPTER, rs)


def test_cloud_run_adapter_needs_the_gpu_and_keeps_unknowns_per_value(
    cloud_run: tuple[ResolvedStack, Resources],  # noqa: F811
) -> None:
    _, resources = cloud_run
    svc = REVISION, "cloud-run-revision-canary"
    rs = copy.deepcopy(resources)
    _cr_container(rs)["env"] = COMPUTED_MARKER
    find(rs, *svc)["inputs"]["template"]["annotations"]["llm-serving.io/cold-load-seconds"] = COMPUTED_MARKER
    (server,) = facts_of(cloud_run_adapter.ADAPTER, "vllm_servers", rs, *svc)
    assert server.env is UNKNOWN and server.args[0] == "--model"
    (window,) = facts_of(cloud_run_adapter.ADAPTER, "startup_windows", rs, *svc)
    assert window.cold_load is UNKNOWN and window.probe == _cr_container(rs)["startupProbe"]
    # Without the GPU the service serves no model: no warm floor, no vLLM server; its images are still read.
    rs = copy.deepcopy(resources)
    del _cr_container(rs)["resources"]["limits"]["nvidia.com/gpu"]
    assert facts_of(cloud_run_adapter.ADAPTER, "warm_floors", rs, *svc) == []
    assert facts_of(cloud_run_adapter.ADAPTER, "vllm_servers", rs, *svc) == []
    assert len(facts_of(cloud_run_adapter.ADAPTER, "images", rs, *svc)) == 2


# ---- Vertex AI ------------------------------------------------------------------------------------------------------

DEPLOYED = "pulumi-python:dynamic/vertex:DeployedModel"
VERTEX_AFFINITY = {
    "key": "compute.googleapis.com/reservation-name",
    "reservationAffinityType": "SPECIFIC_RESERVATION",
    "values": [RESERVATION],
}


def _spec(rs: Resources, role: str = "stable") -> dict[str, Any]:
    return find(rs, DEPLOYED, f"vertex-{role}")["inputs"]["upload_model_request"]["model"]["containerSpec"]


def test_vertex_adapter_reads_a_dedicated_deployed_model(vertex: tuple[ResolvedStack, Resources]) -> None:  # noqa: F811
    _, rs = vertex
    dm = DEPLOYED, "vertex-stable"
    spec = _spec(rs)
    assert facts_of(vertex_adapter.ADAPTER, "images", rs, *dm) == [
        ImageRef("containerSpec.imageUri", spec["imageUri"], digest_required=True, starts="replica")
    ]
    assert facts_of(vertex_adapter.ADAPTER, "warm_floors", rs, *dm) == [
        WarmFloor(
            "dedicatedResources.minReplicaCount",
            2,
            "replica",
            "a new Vertex AI replica takes minutes to obtain a machine and load weights",
        )
    ]
    assert facts_of(vertex_adapter.ADAPTER, "vllm_servers", rs, *dm) == [
        VllmServer(
            container="containerSpec", args=spec["args"], env={e["name"]: e["value"] for e in spec["env"]}
        )  # the command ends in the verifier's `--exec -- vllm serve`: every arg is vLLM's
    ]
    assert facts_of(vertex_adapter.ADAPTER, "reservations", rs, *dm) == [
        ReservationClaim(
            "machineSpec",
            VERTEX_AFFINITY,
            type_field="reservationAffinityType",
            by="resource name",
            resource_form="projects/<p>/zones/<z>/reservations/<name>",
        )
    ]
    # No cold-load estimate is rendered on a deployed model: the startup window is not the pack's to judge here.
    assert vertex_adapter.ADAPTER.startup_windows.types == ()
    assert facts_of(vertex_adapter.ADAPTER, "endpoints", rs, "gcp:vertex/aiEndpoint:AiEndpoint", "vertex-endpoint") == [
        ServingEndpoint("endpoint", private=True)
    ]
    caller = "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember", VERTEX_CALLER[0]
    (grant,) = facts_of(vertex_adapter.ADAPTER, "caller_grants", rs, *caller)
    assert grant == CallerGrant(find(rs, *caller)["inputs"]["role"], find(rs, *caller)["inputs"]["member"], "endpoint")
    assert vertex_adapter.ADAPTER.shared_gpus([as_res(r) for r in rs]) == []  # nothing co-hosted
    _no_foreign_facts(vertex_adapter.ADAPTER, rs)


def test_vertex_adapter_reads_co_hosting_from_the_servers_configuration(
    vertex: tuple[ResolvedStack, Resources],  # noqa: F811
) -> None:
    _, resources = vertex
    rs = copy.deepcopy(resources)
    cohost(rs, "0.4", "0.45")
    dm = DEPLOYED, "vertex-stable"
    doc = json.loads(_spec(rs)["args"][1])
    # One vLLM server per instance of the document, each with its own arguments and the container's environment.
    servers = facts_of(vertex_adapter.ADAPTER, "vllm_servers", rs, *dm)
    assert [(s.container, s.args) for s in servers] == [
        (f"containerSpec instance {i['name']!r}", i["args"]) for i in doc["instances"]
    ]
    # The co-host deployed model is a dedicated one: its own floor and reservation are read.
    assert [f.value for f in facts_of(vertex_adapter.ADAPTER, "warm_floors", rs, *dm)] == [2]
    assert [c.affinity for c in facts_of(vertex_adapter.ADAPTER, "reservations", rs, *dm)] == [VERTEX_AFFINITY]
    assert vertex_adapter.ADAPTER.shared_gpus([as_res(r) for r in rs]) == [
        SharedGpu(
            find(rs, *dm)["urn"],
            "2 vLLM instance(s) of the co-host server of deployed model vertex-stable share GPU 0 of each replica",
            ((0.45, "mistral-0"), (0.4, "llama-0")),
        )
    ]
    # The document unknown at preview: no sum can be known, and nothing is invented.
    _spec(rs)["args"] = COMPUTED_MARKER
    assert vertex_adapter.ADAPTER.shared_gpus([as_res(r) for r in rs]) == []


def test_vertex_adapter_keeps_unknowns_per_value(vertex: tuple[ResolvedStack, Resources]) -> None:  # noqa: F811
    _, resources = vertex
    rs = copy.deepcopy(resources)
    dm = DEPLOYED, "vertex-stable"
    _spec(rs)["args"] = COMPUTED_MARKER
    find(rs, *dm)["inputs"]["deployed_model"]["dedicatedResources"]["machineSpec"]["reservationAffinity"] = (
        COMPUTED_MARKER
    )
    (server,) = facts_of(vertex_adapter.ADAPTER, "vllm_servers", rs, *dm)
    assert server.args is UNKNOWN and server.env["HF_HUB_OFFLINE"] == "1"
    assert [c.affinity for c in facts_of(vertex_adapter.ADAPTER, "reservations", rs, *dm)] == [UNKNOWN]
    assert [f.value for f in facts_of(vertex_adapter.ADAPTER, "warm_floors", rs, *dm)] == [2]
    assert [i.image for i in facts_of(vertex_adapter.ADAPTER, "images", rs, *dm)] == [_spec(rs)["imageUri"]]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.target)
def test_every_adapter_reader_reads_only_its_declared_types(adapter: Any) -> None:
    """A reader answers nothing for a type outside its ``types`` (the policy asks the engine for those only)."""
    stranger = Res("test:index:Other", "x", "urn:pulumi:s::p::test:index:Other::x", {"spec": {}}, False)
    assert {k: getattr(adapter, k)(stranger) for k in KINDS} == {k: [] for k in KINDS}
    assert adapter.shared_gpus([stranger]) == []
