"""The policies that judge Vertex AI resources, through the Vertex adapter (``policies/rules/_adapters/vertex.py``).

Same method as tests/test_policies.py, whose engine marshalling (``evaluate``) and config merge (``policy_config``)
are reused: the compliant baseline is the inventory of the shipped ``staging-vertex`` stack turned into a compliant
prod stack (environment prod, two warm replicas per pool, a reservation for them, a protected endpoint; the real
program under the mock monitor), judged under prod's policy config. Each case changes ONE thing and expects the exact
messages, written out by hand; the other policies reading Vertex resources must still pass. ``CASES`` is exported for the pack-wide
check that every policy has cases (tests/test_policies.py). Preview unknowns must neither crash a policy nor invent a
finding, and the acceptance tests go through the real Analyzer gRPC protocol.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from infra.offline import cli
from infra.offline import policy as pack
from infra.offline.analyzer import COMPUTED_MARKER
from infra.offline.stackfile import _as_engine_string
from infra.resolve import ResolvedStack

from .conftest import VERTEX_CALLER, plan_run
from .test_policies import BY_NAME, CONFIG_DIR, Mutation, _findings, _unknown_everywhere, evaluate, find, policy_config
from .test_vertex_target import STACK, prod_values

VERTEX_POLICIES = (
    "gpu-consumes-specific-reservation",
    "gpu-memory-shares-below-one",
    "serving-images-pinned-by-digest",
    "serving-keeps-warm-minimum",
    "serving-no-public-access",
    "vllm-no-request-logging",
)
DEPLOYED = "pulumi-python:dynamic/vertex:DeployedModel"
ENDPOINT = "gcp:vertex/aiEndpoint:AiEndpoint"
CALLER = "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember"
BINDING = "gcp:vertex/aiEndpointIamBinding:AiEndpointIamBinding"
PROD_STACK = "prod-vertex"
IMAGE = "us-central1-docker.pkg.dev/acme-llm-staging/serving/vllm-openai"
RESERVATION = "projects/acme-capacity/zones/us-central1-a/reservations/shared-h100-staging-vertex"


# ---- baseline and helpers ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vertex() -> tuple[ResolvedStack, list[dict[str, Any]]]:
    from infra.entry import main as program_main
    from infra.offline.runner import run_offline

    seen: list[ResolvedStack] = []
    run = run_offline(
        lambda: program_main(on_resolved=seen.append),
        project="llm-serving",
        stack=PROD_STACK,
        config={k: _as_engine_string(x) for k, x in prod_values().items()},
        secret_keys=[],
    )
    (resolved,) = seen
    return resolved, run.inventory().to_dict()["resources"]


def _dm(rs: list[dict[str, Any]], role: str = "stable") -> dict[str, Any]:
    return find(rs, DEPLOYED, f"vertex-{role}")["inputs"]


def _container(rs: list[dict[str, Any]], role: str = "stable") -> dict[str, Any]:
    return _dm(rs, role)["upload_model_request"]["model"]["containerSpec"]


def _machine(rs: list[dict[str, Any]], role: str = "stable") -> dict[str, Any]:
    return _dm(rs, role)["deployed_model"]["dedicatedResources"]["machineSpec"]


def _affinity(rs: list[dict[str, Any]], role: str = "stable") -> dict[str, Any]:
    return _machine(rs, role)["reservationAffinity"]


def _set_flag(rs: list[dict[str, Any]], flag: str, value: str, role: str = "stable") -> None:
    args = _container(rs, role)["args"]
    args[args.index(flag) + 1] = value


def _add(rs: list[dict[str, Any]], typ: str, name: str, inputs: dict[str, Any]) -> None:
    deps = list(find(rs, CALLER, VERTEX_CALLER[0])["dependencies"])
    rs.append(
        {
            "type": typ,
            "name": name,
            "urn": f"urn:pulumi:{PROD_STACK}::llm-serving::{typ}::{name}",
            "inputs": inputs,
            "options": {"protect": False},
            "custom": True,
            "dependencies": deps,
        }
    )


def cohost(rs: list[dict[str, Any]], first: str = "0.4", second: str = "0.4") -> None:
    """The stable deployed model turned into a co-host server's container (the bootstrap command and a configuration
    document, as components/vertex/container.py renders them) running two instances on GPU 0 of its machine, its
    own vLLM arguments with these --gpu-memory-utilization partitions."""
    spec = _container(rs)
    vllm = list(spec["args"])
    instances = []
    for name, share in (("llama-0", first), ("mistral-0", second)):
        args = list(vllm)
        args[args.index("--gpu-memory-utilization") + 1] = share
        instances.append({"name": name, "gpus": [0], "args": args, "env": {}})
    doc = {"format": "llm-serving.io/cohost-config", "format_version": 1, "instances": instances}
    spec["command"] = ["python3", "-c", "<bootstrap>", "/tmp/llm-serving/scripts", "cohost_server.py", "<server>", "--"]
    spec["args"] = ["--config-json", json.dumps(doc)]


def test_the_vertex_policies_are_every_policy_reading_vertex() -> None:
    from .test_policies import CROSS_TARGET

    assert not [n for n in BY_NAME if n.startswith("vertex-")]  # no Vertex-only copy of a cross-target rule
    assert set(VERTEX_POLICIES) == {n for n, ts in CROSS_TARGET.items() if "vertex" in ts}


@pytest.mark.parametrize("name", VERTEX_POLICIES)
def test_prod_vertex_baseline_passes(name: str, vertex: tuple[ResolvedStack, list[dict[str, Any]]]) -> None:
    resolved, rs = vertex
    assert resolved.config.environment == "prod"
    assert evaluate(name, copy.deepcopy(rs), policy_config(name, resolved)) == []


def test_co_hosting_at_0_4_plus_0_4_passes(vertex: tuple[ResolvedStack, list[dict[str, Any]]]) -> None:
    """The seed's partitions: 0.4 + 0.4 = 0.8 <= 1 - 0.1; 0.45 + 0.45 = 0.9 is exactly the limit."""
    resolved, resources = vertex
    for shares in (("0.4", "0.4"), ("0.45", "0.45")):
        rs = copy.deepcopy(resources)
        cohost(rs, *shares)
        assert {n: evaluate(n, rs, policy_config(n, resolved)) for n in VERTEX_POLICIES} == {
            n: [] for n in VERTEX_POLICIES
        }


# ---- one change -> the exact messages --------------------------------------------------------------------------

MOVES = "a tag can move to another image between two replica starts; use <repository>@sha256:<64 hex>"
NOT_PINNED = f"is not pinned by digest: {MOVES}"
LATEST = f"uses the mutable :latest tag: {MOVES}"
PUBLIC = "the endpoint would answer anyone, spending its GPUs; grant it to named principals only"
NO_AFFINITY = (
    "machineSpec has no reservationAffinity: set reservationAffinityType SPECIFIC_RESERVATION with key "
    "compute.googleapis.com/reservation-name and the reservation's resource name"
)
COLD_REPLICA = "a new Vertex AI replica takes minutes to obtain a machine and load weights"
LOGGED = (
    "prompts and completions would reach Cloud Logging with the container's output; remove it (log request ids, "
    "token counts and timings instead)"
)


def _without_affinity(rs: list[dict[str, Any]]) -> None:
    del _machine(rs)["reservationAffinity"]


def _public_binding(rs: list[dict[str, Any]]) -> None:
    _add(
        rs,
        BINDING,
        "vertex-callers",
        {
            "project": "acme-llm-staging",
            "location": "us-central1",
            "endpoint": "llm-staging",
            "role": "roles/aiplatform.user",
            "members": ["group:llm-serving-team@acme.example", "allUsers"],
        },
    )


def _shared_endpoint(rs: list[dict[str, Any]]) -> None:
    del find(rs, ENDPOINT, "vertex-endpoint")["inputs"]["dedicatedEndpointEnabled"]


def _replace_arg(rs: list[dict[str, Any]], old: str, new: str, role: str = "stable") -> None:
    args = _container(rs, role)["args"]
    args[args.index(old)] = new


CASES: list[tuple[str, str, Mutation, list[str]]] = [
    (
        "serving-images-pinned-by-digest",
        "tag-not-digest",
        lambda rs: _container(rs).update(imageUri=f"{IMAGE}:v0.32.0"),
        [f"vertex-stable: containerSpec.imageUri '{IMAGE}:v0.32.0' {NOT_PINNED}"],
    ),
    (
        "serving-images-pinned-by-digest",
        "latest-canary",
        lambda rs: _container(rs, "canary").update(imageUri="vllm/vllm-openai:latest"),
        [f"vertex-canary: containerSpec.imageUri 'vllm/vllm-openai:latest' {LATEST}"],
    ),
    (
        "serving-images-pinned-by-digest",
        "no-image",
        lambda rs: _container(rs).pop("imageUri"),
        [
            "vertex-stable: containerSpec.imageUri is not set: set it to <repository>@sha256:<64 hex>, the release's "
            "image digest"
        ],
    ),
    (
        "serving-keeps-warm-minimum",
        "one-replica",
        lambda rs: _dm(rs)["deployed_model"]["dedicatedResources"].update(minReplicaCount=1),
        [f"vertex-stable: dedicatedResources.minReplicaCount is 1: keep at least 2 warm replicas; {COLD_REPLICA}"],
    ),
    (
        "serving-keeps-warm-minimum",
        "unset",
        lambda rs: _dm(rs, "canary")["deployed_model"]["dedicatedResources"].pop("minReplicaCount"),
        [
            f"vertex-canary: dedicatedResources.minReplicaCount is not set: keep at least 2 warm replicas; {COLD_REPLICA}"
        ],
    ),
    (
        "vllm-no-request-logging",
        "enable-log-requests",
        lambda rs: _replace_arg(rs, "--no-enable-log-requests", "--enable-log-requests"),
        [f"vertex-stable: containerSpec sets --enable-log-requests: {LOGGED}"],
    ),
    (
        "vllm-no-request-logging",
        "debug-response-env",
        lambda rs: _container(rs, "canary")["env"].append({"name": "VLLM_DEBUG_LOG_API_SERVER_RESPONSE", "value": "1"}),
        [
            "vertex-canary: containerSpec sets VLLM_DEBUG_LOG_API_SERVER_RESPONSE=1: response bodies would reach Cloud "
            "Logging; remove it"
        ],
    ),
    ("gpu-consumes-specific-reservation", "no-affinity", _without_affinity, [f"vertex-stable: {NO_AFFINITY}"]),
    (
        "gpu-consumes-specific-reservation",
        "any-reservation",
        lambda rs: _affinity(rs, "canary").update(reservationAffinityType="ANY_RESERVATION"),
        [
            "vertex-canary: machineSpec consumes reservation type 'ANY_RESERVATION': set SPECIFIC_RESERVATION with key "
            "compute.googleapis.com/reservation-name and the reservation's resource name"
        ],
    ),
    (
        "gpu-consumes-specific-reservation",
        "bare-name",
        lambda rs: _affinity(rs).update(values=["shared-h100-staging-vertex"]),
        [
            "vertex-stable: reservationAffinity values is ['shared-h100-staging-vertex']: name exactly one reservation by "
            "resource name (projects/<p>/zones/<z>/reservations/<name>)"
        ],
    ),
    (
        "gpu-consumes-specific-reservation",
        "wrong-key",
        lambda rs: _affinity(rs).update(key="reservation-name"),
        [
            "vertex-stable: reservationAffinity key is 'reservation-name': set it to "
            "compute.googleapis.com/reservation-name"
        ],
    ),
    (
        "serving-no-public-access",
        "all-users-caller",
        lambda rs: find(rs, CALLER, VERTEX_CALLER[1])["inputs"].update(member="allUsers"),
        [f"{VERTEX_CALLER[1]}: roles/aiplatform.user is granted to allUsers: {PUBLIC}"],
    ),
    (
        "serving-no-public-access",
        "all-authenticated-binding",
        _public_binding,
        [f"vertex-callers: roles/aiplatform.user is granted to allUsers: {PUBLIC}"],
    ),
    (
        "serving-no-public-access",
        "shared-public-endpoint",
        _shared_endpoint,
        [
            "vertex-endpoint: the endpoint is neither dedicated (dedicatedEndpointEnabled) nor Private Service Connect: "
            "set one of them, so it has its own DNS name or is reachable only from the allowed projects"
        ],
    ),
    (
        "gpu-memory-shares-below-one",
        "co-hosted-at-vllm-default",
        lambda rs: cohost(rs, "0.9", "0.9"),
        [
            "vertex-stable: 2 vLLM instance(s) of the co-host server of deployed model vertex-stable share GPU 0 of "
            "each replica and their --gpu-memory-utilization partitions sum to 1.8 = 0.9 (llama-0) + 0.9 (mistral-0): "
            "keep the sum at most 0.9 (1 - transient reserve 0.1)"
        ],
    ),
    (
        "gpu-memory-shares-below-one",
        "no-transient-reserve",
        lambda rs: cohost(rs, "0.5", "0.45"),
        [
            "vertex-stable: 2 vLLM instance(s) of the co-host server of deployed model vertex-stable share GPU 0 of "
            "each replica and their --gpu-memory-utilization partitions sum to 0.95 = 0.5 (llama-0) + 0.45 (mistral-0): "
            "keep the sum at most 0.9 (1 - transient reserve 0.1)"
        ],
    ),
]


@pytest.mark.parametrize(("name", "case", "mutate", "expected"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_one_change_one_violation(
    name: str, case: str, mutate: Mutation, expected: list[str], vertex: tuple[ResolvedStack, list[dict[str, Any]]]
) -> None:
    resolved, resources = vertex
    rs = copy.deepcopy(resources)
    mutate(rs)
    assert evaluate(name, rs, policy_config(name, resolved)) == sorted(expected)
    # One change breaks one policy: the other Vertex policies still pass.
    assert {
        other: evaluate(other, rs, policy_config(other, resolved)) for other in VERTEX_POLICIES if other != name
    } == {other: [] for other in VERTEX_POLICIES if other != name}


def test_every_vertex_policy_has_cases() -> None:
    assert {c[0] for c in CASES} == set(VERTEX_POLICIES)


def test_environment_files_decide_the_reservation_and_the_reserve(
    vertex: tuple[ResolvedStack, list[dict[str, Any]]],
) -> None:
    resolved, resources = vertex
    rs = copy.deepcopy(resources)
    _without_affinity(rs)
    name = "gpu-consumes-specific-reservation"
    assert evaluate(name, rs, policy_config(name, resolved, "dev")) == []
    assert evaluate(name, rs, policy_config(name, resolved, "staging")) == [f"vertex-stable: {NO_AFFINITY}"]
    assert json.loads((CONFIG_DIR / "prod.json").read_text())[name] == {
        "enforcementLevel": "mandatory",
        "required": True,
    }
    rs = copy.deepcopy(resources)
    cohost(rs, "0.5", "0.45")
    name = "gpu-memory-shares-below-one"
    assert evaluate(name, rs, {**policy_config(name, resolved), "transientReserve": 0.05}) == []


@pytest.mark.parametrize(
    ("env", "one_replica", "public"), [("dev", True, True), ("staging", True, False), ("prod", False, False)]
)
def test_environment_files_decide_the_warm_floor_and_public_callers(
    env: str, one_replica: bool, public: bool, vertex: tuple[ResolvedStack, list[dict[str, Any]]]
) -> None:
    """One warm replica is enough outside prod; a public caller is accepted in dev only (as for Cloud Run), while the
    shared public endpoint domain is refused in every environment."""
    resolved, resources = vertex
    rs = copy.deepcopy(resources)
    _dm(rs)["deployed_model"]["dedicatedResources"]["minReplicaCount"] = 1
    find(rs, CALLER, VERTEX_CALLER[1])["inputs"]["member"] = "allUsers"
    _shared_endpoint(rs)
    warm, public_access = "serving-keeps-warm-minimum", "serving-no-public-access"
    assert evaluate(warm, rs, policy_config(warm, resolved, env)) == (
        []
        if one_replica
        else [f"vertex-stable: dedicatedResources.minReplicaCount is 1: keep at least 2 warm replicas; {COLD_REPLICA}"]
    )
    assert evaluate(public_access, rs, policy_config(public_access, resolved, env)) == sorted(
        ([] if public else [f"{VERTEX_CALLER[1]}: roles/aiplatform.user is granted to allUsers: {PUBLIC}"])
        + [
            "vertex-endpoint: the endpoint is neither dedicated (dedicatedEndpointEnabled) nor Private Service Connect: "
            "set one of them, so it has its own DNS name or is reachable only from the allowed projects"
        ]
    )


# ---- unknown values at preview -------------------------------------------------------------------------------

VERTEX_UNKNOWN_KEYS = [
    {"imageUri"},
    {"containerSpec"},
    {"upload_model_request"},
    {"args"},
    {"command"},
    {"deployed_model"},
    {"dedicatedResources"},
    {"machineSpec"},
    {"reservationAffinity"},
    {"values"},
    {"reservationAffinityType"},
    {"member"},
    {"members"},
    {"dedicatedEndpointEnabled"},
    {"minReplicaCount"},
    {"env"},
    {"value"},
]


@pytest.mark.parametrize("keys", VERTEX_UNKNOWN_KEYS, ids=lambda k: ",".join(sorted(k)))
def test_unknown_values_never_crash_or_invent_violations(
    keys: set[str], vertex: tuple[ResolvedStack, list[dict[str, Any]]]
) -> None:
    resolved, resources = vertex
    rs = copy.deepcopy(resources)
    cohost(rs, "0.4", "0.4")
    rs = _unknown_everywhere(rs, keys)
    assert {n: evaluate(n, rs, policy_config(n, resolved)) for n in VERTEX_POLICIES} == {n: [] for n in VERTEX_POLICIES}


def test_unknown_value_is_skipped_but_the_rest_still_checked(
    vertex: tuple[ResolvedStack, list[dict[str, Any]]],
) -> None:
    resolved, resources = vertex
    rs = copy.deepcopy(resources)
    _affinity(rs)["values"] = COMPUTED_MARKER  # the reservation name is unknown at preview ...
    _container(rs, "canary")["imageUri"] = f"{IMAGE}:latest"  # ... a tag is still a tag
    find(rs, CALLER, VERTEX_CALLER[0])["inputs"]["member"] = COMPUTED_MARKER
    _public_binding(rs)
    found = {n: evaluate(n, rs, policy_config(n, resolved)) for n in VERTEX_POLICIES}
    assert found == {
        **{n: [] for n in VERTEX_POLICIES},
        "serving-images-pinned-by-digest": [f"vertex-canary: containerSpec.imageUri '{IMAGE}:latest' {LATEST}"],
        "serving-no-public-access": [f"vertex-callers: roles/aiplatform.user is granted to allUsers: {PUBLIC}"],
    }


# ---- through the Analyzer gRPC protocol ------------------------------------------------------------------------


def test_staging_vertex_passes_with_its_enforcement() -> None:
    run = plan_run(STACK)
    report, path = pack.check_policies(run.resolved, run.inventory)
    assert path == CONFIG_DIR / "staging.json"
    assert set(report.policies) == set(BY_NAME) and set(report.policies.values()) == {"mandatory"}
    assert report.violations == [] and report.mandatory_count == 0
    assert report.resources_analyzed == len(run.inventory.to_dict()["resources"])


def test_mutated_vertex_inventory_fails_through_grpc(tmp_path: Path) -> None:
    inv = copy.deepcopy(plan_run(STACK).inventory.to_dict())
    rs = inv["resources"]
    _container(rs)["imageUri"] = f"{IMAGE}:v0.32.0"
    del _machine(rs, "canary")["reservationAffinity"]
    find(rs, CALLER, VERTEX_CALLER[1])["inputs"]["member"] = "allAuthenticatedUsers"
    find(rs, CALLER, VERTEX_CALLER[0])["inputs"]["member"] = COMPUTED_MARKER  # unknown: neither crash nor finding
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))
    out = tmp_path / "report"
    assert cli.main(["policy", "--stack", STACK, "--inventory", str(path), "--out", str(out)]) == cli.EXIT_POLICY
    assert _findings(out) == [
        ("gpu-consumes-specific-reservation", "mandatory", "vertex-canary", NO_AFFINITY),
        (
            "serving-images-pinned-by-digest",
            "mandatory",
            "vertex-stable",
            f"containerSpec.imageUri '{IMAGE}:v0.32.0' {NOT_PINNED}",
        ),
        (
            "serving-no-public-access",
            "mandatory",
            VERTEX_CALLER[1],
            f"roles/aiplatform.user is granted to allAuthenticatedUsers: {PUBLIC}",
        ),
    ]
