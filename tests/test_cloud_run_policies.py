"""The policies that judge Cloud Run resources: the cross-target ones through the Cloud Run adapter
(``policies/rules/_adapters/cloud_run.py``) and the Cloud Run-only ``cloudrun-no-hub-download``.

Same method as tests/test_policies.py, whose engine marshalling (``evaluate``) and config merge (``policy_config``:
the environment file plus the planner's facts, as the policy command sends them) are reused: the compliant baseline
is the inventory of the prod Cloud Run fixture (tests/fixtures/cloud-run/Pulumi.prod-cloudrun.yaml, the real program
under the mock monitor), each case changes ONE thing and expects the exact messages, written out by hand. Preview
unknowns must neither crash a policy nor invent a finding, and the acceptance tests go through the real Analyzer gRPC
protocol: the fixture under prod's enforcement, the shipped dev-cloudrun stack under dev's, a mutated inventory.
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
from infra.resolve import ResolvedStack
from infra.targets.cloud_run.planning import CloudRunPoolPlan

from .conftest import CLOUD_RUN_FIXTURE, CLOUD_RUN_FIXTURES, CLOUD_RUN_INVOKER, CLOUD_RUN_STACK, plan_run
from .test_policies import (
    BY_NAME,
    CONFIG_DIR,
    EXPECTED_LEVEL,
    Mutation,
    _findings,
    _unknown_everywhere,
    evaluate,
    find,
    policy_config,
)

CLOUD_RUN_POLICIES = (
    "cloudrun-no-hub-download",
    "cloudrun-no-program-text-in-revision",
    "cloudrun-timeout-covers-cold-start",
    "cloudrun-traffic-names-created-revisions",
    "serving-images-pinned-by-digest",
    "serving-keeps-warm-minimum",
    "serving-no-public-access",
    "startup-window-covers-cold-load",
    "vllm-no-request-logging",
)
SERVICE = "pulumi-python:dynamic/cloudrun:Service"
REVISION = "pulumi-python:dynamic/cloudrun:Revision"
TRAFFIC = "pulumi-python:dynamic/cloudrun:Traffic"
IAM_MEMBER = "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"
IAM_BINDING = "gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding"
IAM_POLICY = "gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy"
#: The cases change the canary's revision (its release, image and staged weights); stable's passes beside it.
CANARY_REVISION = "5f0e2c1d9b8a7f6e5d4c3b2a1908f7e6d5c4b3a2"
IMAGE = "us-central1-docker.pkg.dev/acme-llm-prod/serving/vllm-openai"
COLLECTOR = "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar"
STAGED_MODEL = f"/staged-weights/qwen3-8b-fp8/{CANARY_REVISION}"
#: The two revisions' caller-chosen names, as the plan renders them (asserted in tests/test_cloud_run.py).
_NAMES = {
    r["name"]: r["inputs"]["revision"]
    for r in plan_run(CLOUD_RUN_FIXTURE).inventory.to_dict()["resources"]
    if r["type"] == "pulumi-python:dynamic/cloudrun:Revision"
}
STABLE_NAME, CANARY_NAME = _NAMES["cloud-run-revision-stable"], _NAMES["cloud-run-revision-canary"]
VERIFIER_TEXT = (Path(__file__).resolve().parents[1] / "components" / "serving" / "verify_release.py").read_text()
#: The canary's cold load on the RTX PRO 6000 shape, staged: 10 s verify (metadata) + 11.26 s copy + 4.50 s read +
#: 120 s init (tests/test_cloud_run.py spells the arithmetic out); rendered on the template, rounded to ms.
COLD = "145.762"
#: Twice that: what a Cloud Run startup window must cover.
TWICE = "291.524"


# ---- baseline and helpers ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cloud_run() -> tuple[ResolvedStack, list[dict[str, Any]]]:
    run = plan_run(CLOUD_RUN_FIXTURE)
    return run.resolved, run.inventory.to_dict()["resources"]


def _service(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return find(rs, SERVICE, "cloud-run-service")["inputs"]


def _template(rs: list[dict[str, Any]], role: str = "canary") -> dict[str, Any]:
    t: dict[str, Any] = find(rs, REVISION, f"cloud-run-revision-{role}")["inputs"]["template"]
    return t


def _split(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    t: list[dict[str, Any]] = find(rs, TRAFFIC, "cloud-run-traffic")["inputs"]["traffic"]
    return t


def _container(rs: list[dict[str, Any]], name: str = "vllm") -> dict[str, Any]:
    (c,) = [c for c in _template(rs)["containers"] if c["name"] == name]
    return c


def _replace_arg(rs: list[dict[str, Any]], old: str, new: str) -> None:
    args = _container(rs)["args"]
    args[args.index(old)] = new


def _insert_arg(rs: list[dict[str, Any]], after: str, new: str) -> None:
    args = _container(rs)["args"]
    args.insert(args.index(after) + 1, new)


def _set_flag(rs: list[dict[str, Any]], flag: str, value: str) -> None:
    args = _container(rs)["args"]
    args[args.index(flag) + 1] = value


def _set_env(rs: list[dict[str, Any]], name: str, value: str | None) -> None:
    """Set (or with None remove) a literal env var of the vLLM container."""
    envs = [e for e in _container(rs)["env"] if e["name"] != name]
    _container(rs)["env"] = envs + ([{"name": name, "value": value}] if value is not None else [])


def _add(rs: list[dict[str, Any]], typ: str, name: str, inputs: dict[str, Any]) -> None:
    """A new resource of the fixture's stack, depending on what invoker-0 depends on (the service, the APIs)."""
    deps = list(find(rs, IAM_MEMBER, CLOUD_RUN_INVOKER[0])["dependencies"])
    rs.append(
        {
            "type": typ,
            "name": name,
            "urn": f"urn:pulumi:{CLOUD_RUN_FIXTURE}::llm-serving::{typ}::{name}",
            "inputs": inputs,
            "options": {"protect": False},
            "custom": True,
            "dependencies": deps,
        }
    )


def _invoker_inputs(**extra: Any) -> dict[str, Any]:
    return {
        "location": "us-central1",
        "name": "llm-prod",
        "project": "acme-llm-prod",
        "role": "roles/run.invoker",
        **extra,
    }


def _startup(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return _container(rs)["startupProbe"]


def _unset_timeout_slower_load(rs: list[dict[str, Any]]) -> None:
    """No timeout (run.v2: 300 s), and a slower cold load (250 s, the startup window widened to cover it twice)."""
    _template(rs).pop("timeout")
    _template(rs)["annotations"]["llm-serving.io/cold-load-seconds"] = "250"
    _startup(rs)["failureThreshold"] = 100


def test_the_cloud_run_policies_are_every_policy_reading_cloud_run() -> None:
    from .test_policies import CROSS_TARGET

    only_cloud_run = {n for n in BY_NAME if n.startswith("cloudrun-")}
    assert only_cloud_run == {
        "cloudrun-no-hub-download",
        "cloudrun-no-program-text-in-revision",
        "cloudrun-timeout-covers-cold-start",
        "cloudrun-traffic-names-created-revisions",
    }
    assert set(CLOUD_RUN_POLICIES) == only_cloud_run | {n for n, ts in CROSS_TARGET.items() if "cloud_run" in ts}


def test_the_template_states_the_planners_cold_load(cloud_run: tuple[ResolvedStack, list[dict[str, Any]]]) -> None:
    """The startup-window policy reads the estimate from each revision's template (its coldLoadSeconds config is
    only the fallback): the rendered figure must be the planner's, per pool."""
    resolved, rs = cloud_run
    pool = resolved.plan.pools["canary"]
    assert isinstance(pool, CloudRunPoolPlan)
    assert (
        _template(rs)["annotations"]["llm-serving.io/cold-load-seconds"]
        == COLD
        == (f"{round(pool.capacity.cold_load_seconds, 3):g}")
    )


@pytest.mark.parametrize("name", CLOUD_RUN_POLICIES)
def test_prod_cloud_run_baseline_passes(name: str, cloud_run: tuple[ResolvedStack, list[dict[str, Any]]]) -> None:
    resolved, rs = cloud_run
    assert resolved.config.environment == "prod"
    assert evaluate(name, copy.deepcopy(rs), policy_config(name, resolved)) == []


# ---- one change -> the exact messages --------------------------------------------------------------------------

MOVES = "a tag can move to another image between two instance starts; use <repository>@sha256:<64 hex>"
NOT_PINNED = f"is not pinned by digest: {MOVES}"
LATEST = f"uses the mutable :latest tag: {MOVES}"
NOT_MOUNTED = (
    "not a folder of a volume this container mounts: vLLM would fetch it from a model hub (or a bucket) at "
    "every start; mount the release folder and serve from it"
)
PUBLIC = "the service would answer anyone, spending its GPUs; grant it to named principals only"
LOGGED = (
    "prompts and completions would reach Cloud Logging with the container's output; remove it (log request ids, "
    "token counts and timings instead)"
)
NO_WARM = (
    "template.scaling.minInstanceCount is 0: keep at least 1 warm instance; a cold GPU instance loads its weights "
    "for minutes before it answers"
)

# (policy, case id, mutation, expected messages)
CLOUD_RUN_CASES: list[tuple[str, str, Mutation, list[str]]] = [
    (
        "serving-images-pinned-by-digest",
        "vllm-tag",
        lambda rs: _container(rs).update(image=f"{IMAGE}:v0.32.0"),
        [f"cloud-run-revision-canary: container 'vllm' image '{IMAGE}:v0.32.0' {NOT_PINNED}"],
    ),
    (
        "serving-images-pinned-by-digest",
        "collector-latest",
        lambda rs: _container(rs, "collector").update(image=f"{COLLECTOR}:latest"),
        [f"cloud-run-revision-canary: container 'collector' image '{COLLECTOR}:latest' {LATEST}"],
    ),
    (
        "serving-images-pinned-by-digest",
        "collector-untagged",
        lambda rs: _container(rs, "collector").update(image=COLLECTOR),
        [
            f"cloud-run-revision-canary: container 'collector' image '{COLLECTOR}' has no tag or digest (that means :latest): {MOVES}"
        ],
    ),
    (
        "serving-images-pinned-by-digest",
        "short-digest",
        lambda rs: _container(rs).update(image=f"{IMAGE}@sha256:3333"),
        [f"cloud-run-revision-canary: container 'vllm' image '{IMAGE}@sha256:3333' {NOT_PINNED}"],
    ),
    (
        "serving-keeps-warm-minimum",
        "scale-to-zero",
        lambda rs: _template(rs)["scaling"].update(minInstanceCount=0),
        [f"cloud-run-revision-canary: {NO_WARM}"],
    ),
    (
        "serving-keeps-warm-minimum",
        "unset-is-zero",
        lambda rs: _template(rs)["scaling"].pop("minInstanceCount"),
        [f"cloud-run-revision-canary: {NO_WARM}"],
    ),
    (
        "cloudrun-no-hub-download",
        "hub-offline-off",
        lambda rs: _set_env(rs, "HF_HUB_OFFLINE", "0"),
        [
            "cloud-run-revision-canary: HF_HUB_OFFLINE is '0': set it to '1' so no library behind vLLM reaches a model hub at "
            "start"
        ],
    ),
    (
        "cloudrun-no-hub-download",
        "hub-offline-unset",
        lambda rs: _set_env(rs, "HF_HUB_OFFLINE", None),
        [
            "cloud-run-revision-canary: HF_HUB_OFFLINE is None: set it to '1' so no library behind vLLM reaches a model hub at "
            "start"
        ],
    ),
    (
        "cloudrun-no-hub-download",
        "hub-model-id",
        lambda rs: _set_flag(rs, "--model", "Qwen/Qwen3-8B"),
        [f"cloud-run-revision-canary: --model is 'Qwen/Qwen3-8B', {NOT_MOUNTED}"],
    ),
    (
        "cloudrun-no-hub-download",
        "bucket-uri",
        lambda rs: _set_flag(rs, "--model", f"gs://acme-llm-prod-weights/qwen3-8b-fp8/{CANARY_REVISION}/"),
        [
            f"cloud-run-revision-canary: --model is 'gs://acme-llm-prod-weights/qwen3-8b-fp8/{CANARY_REVISION}/', {NOT_MOUNTED}"
        ],
    ),
    (
        "cloudrun-no-hub-download",
        "unmounted-folder",
        lambda rs: _set_flag(rs, "--model", f"/models/qwen3-8b-fp8/{CANARY_REVISION}"),
        [f"cloud-run-revision-canary: --model is '/models/qwen3-8b-fp8/{CANARY_REVISION}', {NOT_MOUNTED}"],
    ),
    (
        "cloudrun-no-hub-download",
        "sibling-of-a-mount",
        lambda rs: _set_flag(rs, "--model", f"/staged-weights-old/qwen3-8b-fp8/{CANARY_REVISION}"),
        [f"cloud-run-revision-canary: --model is '/staged-weights-old/qwen3-8b-fp8/{CANARY_REVISION}', {NOT_MOUNTED}"],
    ),
    (
        "cloudrun-no-hub-download",
        "staging-mount-removed",
        lambda rs: _container(rs).update(volumeMounts=_container(rs)["volumeMounts"][:1]),
        [f"cloud-run-revision-canary: --model is '{STAGED_MODEL}', {NOT_MOUNTED}"],
    ),
    (
        "cloudrun-no-hub-download",
        "positional-model-wins",
        lambda rs: _insert_arg(rs, "serve", "Qwen/Qwen3-8B"),
        [
            f"cloud-run-revision-canary: the model vllm serve loads is 'Qwen/Qwen3-8B' (the positional model tag, which overrides "
            f"--model), {NOT_MOUNTED}"
        ],
    ),
    (
        "cloudrun-no-hub-download",
        "no-vllm-serve",
        lambda rs: _replace_arg(rs, "serve", "run-batch"),
        ["cloud-run-revision-canary: the vLLM container runs no `vllm serve`: its model source cannot be checked"],
    ),
    (
        "vllm-no-request-logging",
        "enable-log-requests",
        lambda rs: _replace_arg(rs, "--no-enable-log-requests", "--enable-log-requests"),
        [f"cloud-run-revision-canary: container 'vllm' sets --enable-log-requests: {LOGGED}"],
    ),
    (
        "vllm-no-request-logging",
        "enable-log-outputs",
        lambda rs: _replace_arg(rs, "--no-enable-log-outputs", "--enable-log-outputs"),
        [f"cloud-run-revision-canary: container 'vllm' sets --enable-log-outputs: {LOGGED}"],
    ),
    (
        "vllm-no-request-logging",
        "re-enabled-after-the-no-flag",  # argparse keeps the last of the pair
        lambda rs: _container(rs)["args"].append("--enable-log-requests"),
        [f"cloud-run-revision-canary: container 'vllm' sets --enable-log-requests: {LOGGED}"],
    ),
    (
        "vllm-no-request-logging",
        "debug-response-env",
        lambda rs: _set_env(rs, "VLLM_DEBUG_LOG_API_SERVER_RESPONSE", "True"),
        [
            "cloud-run-revision-canary: container 'vllm' sets VLLM_DEBUG_LOG_API_SERVER_RESPONSE=True: response bodies would "
            "reach Cloud Logging; remove it"
        ],
    ),
    (
        "serving-no-public-access",
        "member-all-users",
        lambda rs: find(rs, IAM_MEMBER, CLOUD_RUN_INVOKER[0])["inputs"].update(member="allUsers"),
        [f"{CLOUD_RUN_INVOKER[0]}: roles/run.invoker is granted to allUsers: {PUBLIC}"],
    ),
    (
        "serving-no-public-access",
        "member-all-authenticated-users",
        lambda rs: find(rs, IAM_MEMBER, CLOUD_RUN_INVOKER[1])["inputs"].update(member="allAuthenticatedUsers"),
        [f"{CLOUD_RUN_INVOKER[1]}: roles/run.invoker is granted to allAuthenticatedUsers: {PUBLIC}"],
    ),
    (
        "serving-no-public-access",
        "binding-all-users",
        lambda rs: _add(
            rs,
            IAM_BINDING,
            "cloud-run-invokers",
            _invoker_inputs(members=["group:llm-clients@acme.example", "allUsers"]),
        ),
        [f"cloud-run-invokers: roles/run.invoker is granted to allUsers: {PUBLIC}"],
    ),
    (
        "serving-no-public-access",
        "policy-all-authenticated-users",
        lambda rs: _add(
            rs,
            IAM_POLICY,
            "cloud-run-iam-policy",
            {
                "location": "us-central1",
                "name": "llm-prod",
                "project": "acme-llm-prod",
                "policyData": json.dumps(
                    {"bindings": [{"role": "roles/run.invoker", "members": ["allAuthenticatedUsers"]}]}
                ),
            },
        ),
        [f"cloud-run-iam-policy: roles/run.invoker is granted to allAuthenticatedUsers: {PUBLIC}"],
    ),
    (
        "serving-no-public-access",
        "v1-iam-member-all-users",
        lambda rs: _add(
            rs,
            "gcp:cloudrun/iamMember:IamMember",
            "cloud-run-public-access",
            {
                "location": "us-central1",
                "project": "acme-llm-prod",
                "service": "llm-prod",
                "role": "roles/run.invoker",
                "member": "allUsers",
            },
        ),
        [f"cloud-run-public-access: roles/run.invoker is granted to allUsers: {PUBLIC}"],
    ),
    (
        "serving-no-public-access",
        "invoker-iam-disabled",
        lambda rs: _service(rs)["service"].update(invokerIamDisabled=True),
        [
            "cloud-run-service: service.invokerIamDisabled is true: the service answers anyone who reaches its URL; set it to false "
            "and grant roles/run.invoker to named principals"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "window-too-short",
        lambda rs: _startup(rs).update(failureThreshold=20),
        [
            f"cloud-run-revision-canary: startupProbe window is 110 s (initialDelaySeconds 10 + periodSeconds 5 x "
            f"failureThreshold 20), below 2 x the cold-load estimate of {COLD} s ({TWICE} s): set failureThreshold to "
            "at least 57"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "run-v2-defaults",
        lambda rs: _container(rs).update(startupProbe={"httpGet": {"path": "/health", "port": 8080}}),
        [
            f"cloud-run-revision-canary: startupProbe window is 30 s (initialDelaySeconds 0 + periodSeconds 10 x "
            f"failureThreshold 3), below 2 x the cold-load estimate of {COLD} s ({TWICE} s): set failureThreshold to "
            "at least 30"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "estimate-from-the-template",
        lambda rs: _template(rs)["annotations"].update({"llm-serving.io/cold-load-seconds": "200"}),
        [
            "cloud-run-revision-canary: startupProbe window is 295 s (initialDelaySeconds 10 + periodSeconds 5 x "
            "failureThreshold 57), below 2 x the cold-load estimate of 200 s (400 s): set failureThreshold to at least 78"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "no-startup-probe",
        lambda rs: _container(rs).pop("startupProbe"),
        [
            "cloud-run-revision-canary: container 'vllm' has no startupProbe: Cloud Run's default TCP probe gives up long before a "
            "GPU cold load ends; add one whose window covers the cold load"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "above-cloud-run-gpu-limit",
        lambda rs: _startup(rs).update(periodSeconds=60, failureThreshold=31),
        [
            "cloud-run-revision-canary: startupProbe periodSeconds 60 x failureThreshold 31 = 1860 s exceeds the 1800 s Cloud Run "
            "accepts for GPU services: the revision would be refused"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "no-estimate",
        lambda rs: _template(rs)["annotations"].pop("llm-serving.io/cold-load-seconds"),
        [
            "cloud-run-revision-canary: the cold-load estimate is unknown: render annotation llm-serving.io/cold-load-seconds "
            "(seconds) on the revision template or set this policy's coldLoadSeconds for "
            f"'{CANARY_NAME}'"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "covers-the-estimate-once-not-twice",
        lambda rs: _startup(rs).update(failureThreshold=30),  # 160 s: above 145.76 s, below 291.52 s
        [
            f"cloud-run-revision-canary: startupProbe window is 160 s (initialDelaySeconds 10 + periodSeconds 5 x "
            f"failureThreshold 30), below 2 x the cold-load estimate of {COLD} s ({TWICE} s): set failureThreshold to "
            "at least 57"
        ],
    ),
    (
        "cloudrun-timeout-covers-cold-start",
        "stream-bound-only",
        lambda rs: _template(rs).update(timeout="84s"),
        [
            f"cloud-run-revision-canary: template.timeout is 84 s, but the revision scales out above 1 instance(s): a "
            f"request can wait the cold load ({COLD} s) and then stream for the stream bound (83.92 s), 229.682 s; "
            "Cloud Run's deadline includes the instance's start, so such requests end in 504"
        ],
    ),
    (
        "cloudrun-timeout-covers-cold-start",
        "unset-is-300s-then-a-slower-load",
        lambda rs: _unset_timeout_slower_load(rs),
        [
            "cloud-run-revision-canary: template.timeout is 300 s, but the revision scales out above 1 instance(s): a "
            "request can wait the cold load (250 s) and then stream for the stream bound (83.92 s), 333.92 s; Cloud "
            "Run's deadline includes the instance's start, so such requests end in 504"
        ],
    ),
    (
        "cloudrun-timeout-covers-cold-start",
        "no-stream-bound",
        lambda rs: _template(rs)["annotations"].pop("llm-serving.io/stream-bound-seconds"),
        [
            "cloud-run-revision-canary: the revision scales out above 1 instance(s), so a request can wait for an "
            "instance's start, but its template states no llm-serving.io/stream-bound-seconds (seconds): the timeout "
            "cannot be shown to cover the start and the stream"
        ],
    ),
    (
        "cloudrun-traffic-names-created-revisions",
        "a-revision-nobody-creates",
        lambda rs: _split(rs)[0].update(revision="llm-prod-hand-made-00001"),
        [
            "cloud-run-traffic: traffic[0] names revision 'llm-prod-hand-made-00001', which no revision resource of this "
            "stack creates: the first `pulumi up` (or any rebuild) fails with a 404 (created: "
            f"['{STABLE_NAME}', '{CANARY_NAME}'])"
        ],
    ),
    (
        "cloudrun-traffic-names-created-revisions",
        "latest-instead-of-a-name",
        lambda rs: _split(rs)[1].update(type="TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST"),
        [
            "cloud-run-traffic: traffic[1] is 'TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST', not a revision by name: only a "
            "split by name stays where it is when a new revision is created"
        ],
    ),
    (
        "cloudrun-traffic-names-created-revisions",
        "tag-twice-and-not-100",
        lambda rs: _split(rs)[1].update(tag="stable", percent=10),
        [
            "cloud-run-traffic: traffic names the tag stable more than once: Cloud Run refuses it",
            "cloud-run-traffic: traffic percents sum to 110, not 100",
        ],
    ),
    (
        "cloudrun-no-program-text-in-revision",
        "verifier-inline",
        lambda rs: _container(rs).update(command=["python3"], args=["-c", VERIFIER_TEXT, *_container(rs)["args"][1:]]),
        [
            f"cloud-run-revision-canary: container 'vllm' runs an inline program (`python3 -c`, {len(VERIFIER_TEXT):,} "
            "characters): every edit of it names a new revision of every pool; run it from a mounted file"
        ],
    ),
    (
        "cloudrun-no-program-text-in-revision",
        "program-text-as-an-argument",
        lambda rs: _container(rs, "collector").update(args=["--config", "x" * 5000]),
        [
            "cloud-run-revision-canary: container 'collector' argument 1 is 5,000 characters (more than 4,096): "
            "program text, not an argument; run it from a mounted file"
        ],
    ),
]


@pytest.mark.parametrize(
    ("name", "case", "mutate", "expected"), CLOUD_RUN_CASES, ids=[f"{c[0]}:{c[1]}" for c in CLOUD_RUN_CASES]
)
def test_one_change_one_violation(
    name: str, case: str, mutate: Mutation, expected: list[str], cloud_run: tuple[ResolvedStack, list[dict[str, Any]]]
) -> None:
    resolved, resources = cloud_run
    rs = copy.deepcopy(resources)
    mutate(rs)
    assert evaluate(name, rs, policy_config(name, resolved)) == sorted(expected)
    # One change breaks one policy: the other Cloud Run policies still pass.
    assert {
        other: evaluate(other, rs, policy_config(other, resolved)) for other in CLOUD_RUN_POLICIES if other != name
    } == {other: [] for other in CLOUD_RUN_POLICIES if other != name}


def test_every_cloud_run_policy_has_cases() -> None:
    assert {c[0] for c in CLOUD_RUN_CASES} == set(CLOUD_RUN_POLICIES)


def test_the_hub_token_alone_is_no_hub_download(cloud_run: tuple[ResolvedStack, list[dict[str, Any]]]) -> None:
    """The passing baseline gives vLLM an HF_TOKEN from Secret Manager: a token alone downloads nothing, what the
    hub policy checks is the offline switch and where --model points."""
    _, rs = cloud_run
    env = {e["name"]: e for e in _container(rs)["env"]}
    assert env["HF_TOKEN"]["valueSource"] == {"secretKeyRef": {"secret": "hf-hub-token", "version": "3"}}
    assert env["HF_HUB_OFFLINE"]["value"] == "1"


def test_cold_load_fact_by_revision_name_without_the_annotation(
    cloud_run: tuple[ResolvedStack, list[dict[str, Any]]],
) -> None:
    """A revision without the annotation is judged by the policy's coldLoadSeconds, keyed by the revision's name."""
    resolved, resources = cloud_run
    name = "startup-window-covers-cold-load"
    rs = copy.deepcopy(resources)
    _template(rs)["annotations"].pop("llm-serving.io/cold-load-seconds")
    cfg = policy_config(name, resolved)
    assert evaluate(name, rs, {**cfg, "coldLoadSeconds": {CANARY_NAME: float(COLD)}}) == []
    assert evaluate(name, rs, {**cfg, "coldLoadSeconds": {CANARY_NAME: 200}}) == [
        "cloud-run-revision-canary: startupProbe window is 295 s (initialDelaySeconds 10 + periodSeconds 5 x "
        "failureThreshold 57), below 2 x the cold-load estimate of 200 s (400 s): set failureThreshold to at least 78"
    ]
    # The annotation, when rendered, wins over a stale fact.
    assert evaluate(name, copy.deepcopy(resources), {**cfg, "coldLoadSeconds": {CANARY_NAME: 200}}) == []


# ---- environments: dev may scale to zero and be public, staging and prod may not ------------------------------------


@pytest.mark.parametrize(
    ("env", "scale_to_zero", "public"), [("dev", True, True), ("staging", True, False), ("prod", False, False)]
)
def test_environment_files_decide_scale_to_zero_and_public_invokers(
    env: str, scale_to_zero: bool, public: bool, cloud_run: tuple[ResolvedStack, list[dict[str, Any]]]
) -> None:
    resolved, resources = cloud_run
    rs = copy.deepcopy(resources)
    _template(rs)["scaling"]["minInstanceCount"] = 0
    find(rs, IAM_MEMBER, CLOUD_RUN_INVOKER[0])["inputs"]["member"] = "allUsers"
    warm, public_access = "serving-keeps-warm-minimum", "serving-no-public-access"
    assert evaluate(warm, rs, policy_config(warm, resolved, env)) == (
        [] if scale_to_zero else [f"cloud-run-revision-canary: {NO_WARM}"]
    )
    assert evaluate(public_access, rs, policy_config(public_access, resolved, env)) == (
        [] if public else [f"{CLOUD_RUN_INVOKER[0]}: roles/run.invoker is granted to allUsers: {PUBLIC}"]
    )


def test_dev_cloudrun_scales_to_zero_only_under_devs_config() -> None:
    """The shipped dev-cloudrun stack passes because dev.json allows scale to zero, not because nothing is checked."""
    run = plan_run(CLOUD_RUN_STACK)
    rs = run.inventory.to_dict()["resources"]
    name = "serving-keeps-warm-minimum"
    assert evaluate(name, copy.deepcopy(rs), policy_config(name, run.resolved, "dev")) == []
    assert evaluate(name, copy.deepcopy(rs), policy_config(name, run.resolved, "prod")) == [
        f"cloud-run-revision-stable: {NO_WARM}"
    ]
    for other in CLOUD_RUN_POLICIES:
        assert evaluate(other, copy.deepcopy(rs), policy_config(other, run.resolved, "dev")) == [], other


# ---- unknown values at preview -------------------------------------------------------------------------------

#: Properties the program could compute from other resources' outputs. Not names (of containers, env vars): the
#: program always writes those as literals.
CLOUD_RUN_UNKNOWN_KEYS = [
    {"image"},
    {"args"},
    {"command"},
    {"env"},
    {"timeout"},
    {"traffic"},
    {"revision"},
    {"percent"},
    {"llm-serving.io/stream-bound-seconds"},
    {"maxInstanceCount"},
    {"value"},
    {"valueSource"},
    {"volumeMounts"},
    {"mountPath"},
    {"startupProbe"},
    {"failureThreshold"},
    {"periodSeconds", "initialDelaySeconds"},
    {"annotations"},
    {"llm-serving.io/cold-load-seconds"},
    {"scaling"},
    {"minInstanceCount"},
    {"resources"},
    {"limits"},
    {"containers"},
    {"template"},
    {"invokerIamDisabled"},
    {"member"},
    {"role"},
]


@pytest.mark.parametrize("keys", CLOUD_RUN_UNKNOWN_KEYS, ids=lambda k: ",".join(sorted(k)))
def test_unknown_values_never_crash_or_invent_violations(
    keys: set[str], cloud_run: tuple[ResolvedStack, list[dict[str, Any]]]
) -> None:
    resolved, resources = cloud_run
    rs = _unknown_everywhere(resources, keys)
    assert {n: evaluate(n, rs, policy_config(n, resolved)) for n in CLOUD_RUN_POLICIES} == {
        n: [] for n in CLOUD_RUN_POLICIES
    }


def test_unknown_list_items_and_iam_documents(cloud_run: tuple[ResolvedStack, list[dict[str, Any]]]) -> None:
    """Unknown single items (an argument, a member, a whole binding list or policy document) are skipped; a known
    public member beside an unknown one is still reported."""
    resolved, resources = cloud_run
    rs = copy.deepcopy(resources)
    _set_flag(rs, "--model", COMPUTED_MARKER)
    _container(rs)["volumeMounts"][0]["mountPath"] = COMPUTED_MARKER
    _container(rs)["args"][_container(rs)["args"].index("--no-enable-log-requests")] = COMPUTED_MARKER
    _add(rs, IAM_BINDING, "cloud-run-invokers-unknown", _invoker_inputs(members=COMPUTED_MARKER))
    _add(
        rs,
        IAM_POLICY,
        "cloud-run-iam-policy",
        {"location": "us-central1", "name": "llm-prod", "project": "acme-llm-prod", "policyData": COMPUTED_MARKER},
    )
    _add(rs, IAM_BINDING, "cloud-run-invokers", _invoker_inputs(members=[COMPUTED_MARKER, "allUsers"]))
    found = {n: evaluate(n, rs, policy_config(n, resolved)) for n in CLOUD_RUN_POLICIES}
    assert found == {
        **{n: [] for n in CLOUD_RUN_POLICIES},
        "serving-no-public-access": [f"cloud-run-invokers: roles/run.invoker is granted to allUsers: {PUBLIC}"],
    }


def test_unknown_value_is_skipped_but_the_rest_still_checked(
    cloud_run: tuple[ResolvedStack, list[dict[str, Any]]],
) -> None:
    resolved, resources = cloud_run
    rs = copy.deepcopy(resources)
    _container(rs)["env"] = COMPUTED_MARKER  # offline switch and logging env unknown at preview ...
    _container(rs)["startupProbe"]["failureThreshold"] = COMPUTED_MARKER
    _container(rs, "collector")["image"] = f"{COLLECTOR}:latest"  # ... a tag is still a tag
    _replace_arg(rs, "--no-enable-log-outputs", "--enable-log-outputs")
    found = {n: evaluate(n, rs, policy_config(n, resolved)) for n in CLOUD_RUN_POLICIES}
    assert found == {
        **{n: [] for n in CLOUD_RUN_POLICIES},
        "serving-images-pinned-by-digest": [
            f"cloud-run-revision-canary: container 'collector' image '{COLLECTOR}:latest' {LATEST}"
        ],
        "vllm-no-request-logging": [f"cloud-run-revision-canary: container 'vllm' sets --enable-log-outputs: {LOGGED}"],
    }


# ---- through the Analyzer gRPC protocol ------------------------------------------------------------------------


@pytest.mark.parametrize("stack", [CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE])
def test_cloud_run_stack_passes_with_its_enforcement(stack: str) -> None:
    """tests/test_policies.py covers dev, staging and prod (GKE); these are the Cloud Run stacks, the whole pack."""
    run = plan_run(stack)
    env = run.resolved.config.environment
    report, path = pack.check_policies(run.resolved, run.inventory)
    assert path == CONFIG_DIR / f"{env}.json" and env == {"dev-cloudrun": "dev", "prod-cloudrun": "prod"}[stack]
    assert set(report.policies) == set(BY_NAME)
    assert set(report.policies.values()) == {EXPECTED_LEVEL[env]}
    assert report.violations == [] and report.mandatory_count == 0
    assert report.resources_analyzed == len(run.inventory.to_dict()["resources"])


def test_mutated_cloud_run_inventory_fails_through_grpc_with_unknowns(tmp_path: Path) -> None:
    inv = copy.deepcopy(plan_run(CLOUD_RUN_FIXTURE).inventory.to_dict())
    rs = inv["resources"]
    _container(rs, "collector")["image"] = f"{COLLECTOR}:latest"
    _template(rs)["scaling"]["minInstanceCount"] = 0
    _set_env(rs, "HF_HUB_OFFLINE", "0")
    _replace_arg(rs, "--no-enable-log-requests", "--enable-log-requests")
    find(rs, IAM_MEMBER, CLOUD_RUN_INVOKER[1])["inputs"]["member"] = "allAuthenticatedUsers"
    _startup(rs)["failureThreshold"] = 20
    # Preview unknowns travel as the engine's sentinel and must neither crash nor hide the findings above.
    _service(rs)["service"]["invokerIamDisabled"] = COMPUTED_MARKER
    _container(rs)["volumeMounts"] = COMPUTED_MARKER
    _add(rs, IAM_BINDING, "cloud-run-invokers", _invoker_inputs(members=COMPUTED_MARKER))
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))
    out = tmp_path / "report"
    assert (
        cli.main(
            [
                "policy",
                "--stack",
                CLOUD_RUN_FIXTURE,
                "--stacks-dir",
                str(CLOUD_RUN_FIXTURES),
                "--inventory",
                str(path),
                "--out",
                str(out),
            ]
        )
        == cli.EXIT_POLICY
    )
    assert _findings(out) == [
        (
            "cloudrun-no-hub-download",
            "mandatory",
            "cloud-run-revision-canary",
            "HF_HUB_OFFLINE is '0': set it to '1' so no library behind vLLM reaches a model hub at start",
        ),
        (
            "serving-images-pinned-by-digest",
            "mandatory",
            "cloud-run-revision-canary",
            f"container 'collector' image '{COLLECTOR}:latest' {LATEST}",
        ),
        ("serving-keeps-warm-minimum", "mandatory", "cloud-run-revision-canary", NO_WARM),
        (
            "serving-no-public-access",
            "mandatory",
            CLOUD_RUN_INVOKER[1],
            f"roles/run.invoker is granted to allAuthenticatedUsers: {PUBLIC}",
        ),
        (
            "startup-window-covers-cold-load",
            "mandatory",
            "cloud-run-revision-canary",
            f"startupProbe window is 110 s (initialDelaySeconds 10 + periodSeconds 5 x failureThreshold 20), below 2 x "
            f"the cold-load estimate of {COLD} s ({TWICE} s): set failureThreshold to at least 57",
        ),
        (
            "vllm-no-request-logging",
            "mandatory",
            "cloud-run-revision-canary",
            f"container 'vllm' sets --enable-log-requests: {LOGGED}",
        ),
    ]


def test_prompt_logging_the_last_switch_wins() -> None:
    """vLLM's boolean flags have a ``--no-`` form and argparse keeps the last: only a flag left on is a finding (both
    the GKE and the Cloud Run logging policies read it through this helper)."""
    from policies.rules._common import prompt_logging_flags

    assert prompt_logging_flags(["--enable-log-requests", "--no-enable-log-requests"]) == []
    assert prompt_logging_flags(["--no-enable-log-outputs", "--enable-log-outputs"]) == ["--enable-log-outputs"]
    assert prompt_logging_flags(["--enable-log-requests=false", "--enable-log-outputs", "--port", "8080"]) == [
        "--enable-log-outputs"
    ]
