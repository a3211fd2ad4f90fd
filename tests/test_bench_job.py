"""The in-cluster benchmark (``gke.bench``): off in every shipped stack; enabled in a copy of prod, the real program
renders the Job, its namespace, KSA, Workload Identity grants with their exact IAM conditions, the Service onto the
pool's own Deployment selector and the NetworkPolicies both ways, and the policy pack still passes; bad config is
one error per key; and the record goes to Cloud Storage create-only and comes back validated
(``bench --record-uri``, ``bench fetch``) against a real Cloud Storage JSON API on loopback (tests/gcs_emulator.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from components import naming
from components.bench_job import (
    BenchJobArgs,
    bench_args,
    record_create_condition,
    release_read_condition,
    selector_labels,
)
from components.identity import namespace_labels
from infra.config import ConfigError
from infra.config import bench as bench_config
from infra.offline import cli
from infra.offline.bench import cli as bench_cli
from infra.offline.bench import runner as bench_runner
from infra.offline.bench import scrape as bench_scrape
from infra.offline.bench import store
from infra.offline.bench.record import write_measurement
from infra.offline.planrun import run_plan
from infra.offline.stackfile import ROOT, STACKS_DIR, available_stacks, read_stack_file
from infra.resolve import resolve_stack
from infra.targets.gke.config import GkeConfig
from infra.targets.gke.planning.bench import BENCH_OVERHEAD_SECONDS, POD_START_SECONDS, bench_deadline
from infra.targets.gke.rules.bench import bench_pool_is_a_gke_pool

from .conftest import STACKS, member_resource, one, resources
from .gcs_emulator import BUCKET, Gcs, running_emulator
from .test_bench_record import CURVE, record, target
from .test_policies import evaluate, find

JOB = "kubernetes:batch/v1:Job"
SERVICE = "kubernetes:core/v1:Service"
NAMESPACE = "kubernetes:core/v1:Namespace"
KSA = "kubernetes:core/v1:ServiceAccount"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
REPO_IAM = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
BENCH_JOB = "llm-serving:bench:BenchJob"
IMAGE = "us-central1-docker.pkg.dev/acme-llm-prod/serving/llm-serving-bench@sha256:" + "ab" * 32
WEIGHTS = "acme-llm-prod-weights"
#: prod's canary release and its folder in the weights bucket (stacks/releases/prod/qwen3-32b-fp8-2026-11-20.1.json).
CANARY_RELEASE = "qwen3-32b-fp8-2026-11-20.1"
CANARY_FOLDER = "qwen3-32b-fp8/281de45e51aa15309f463357b6f785685134723b/"
STABLE_RELEASE = "qwen3-32b-fp8-2026-08-23.1"
PRINCIPAL = (
    "principal://iam.googleapis.com/projects/<known-after-apply:project-number>/locations/global/"
    "workloadIdentityPools/acme-llm-prod.svc.id.goog/subject/ns/llm-bench/sa/bench"
)


# ---- a prod copy with the Job enabled -------------------------------------------------------------------------


def prod_with_bench(stacks_dir: Path, bench: dict[str, Any] | None) -> Path:
    """``stacks_dir`` holding the shipped stack files, prod's with ``gke.bench`` set (release files stay the
    repository's: stack files name them relative to the project root)."""
    stacks_dir.mkdir(parents=True, exist_ok=True)
    for path in STACKS_DIR.glob("Pulumi.*.yaml"):
        (stacks_dir / path.name).write_bytes(path.read_bytes())
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.prod.yaml").read_text())
    if bench is not None:
        doc["config"]["llm-serving:gke"]["bench"] = bench
    (stacks_dir / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return stacks_dir


@pytest.fixture(scope="module")
def enabled(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """prod with the Job on the canary pool, sweep defaults: (stacks dir, inventory)."""
    d = prod_with_bench(tmp_path_factory.mktemp("bench-canary"), {"image": IMAGE, "pool": "canary"})
    return d, run_plan("prod", d).inventory.to_dict()


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> dict[str, Any]:
    """prod with a quick Job on the stable pool, three explicit rates of 30 s."""
    d = prod_with_bench(
        tmp_path_factory.mktemp("bench-stable"),
        {"image": IMAGE, "pool": "stable", "quick": True, "rates": "0.5,1,2", "duration_seconds": 30},
    )
    return run_plan("prod", d).inventory.to_dict()


def inputs(inv: dict[str, Any], typ: str, name: str) -> dict[str, Any]:
    return one(inv, typ, name)["inputs"]


def job_pod(inv: dict[str, Any], role: str) -> dict[str, Any]:
    return inputs(inv, JOB, f"bench-{role}-job")["spec"]["template"]["spec"]


# ---- off by default -----------------------------------------------------------------------------------------------


def test_disabled_in_every_shipped_stack(plans):
    for stack in available_stacks():  # every stack file shipped, planned or not
        gke = read_stack_file(stack).values.get("llm-serving:gke") or {}
        assert "bench" not in gke, stack
    for stack in STACKS:
        cfg, _, inv = plans[stack]
        assert cfg.gke is not None and cfg.gke.bench is None
        assert resources(inv, BENCH_JOB) == [] and resources(inv, JOB) == []
        assert not [r for r in resources(inv, NAMESPACE) if r["inputs"]["metadata"]["name"] == naming.BENCH_NAMESPACE]
        assert not [r for r in inv["resources"] if naming.BENCH_NAMESPACE in json.dumps(r["inputs"])]
        assert "bench" not in inv["outputs"]


# ---- what the program renders with the Job enabled ------------------------------------------------------------


def test_namespace_and_ksa(enabled):
    _, inv = enabled
    ns = inputs(inv, NAMESPACE, "bench-canary-ns")
    assert ns["metadata"] == {"name": "llm-bench", "labels": namespace_labels("llm-bench")}
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    ksa = inputs(inv, KSA, "bench-canary-ksa")
    assert (ksa["metadata"]["name"], ksa["metadata"]["namespace"]) == ("bench", "llm-bench")
    assert ksa["automountServiceAccountToken"] is False


def test_grants_are_the_release_folder_and_the_measurements_prefix_only(enabled):
    _, inv = enabled
    reader = inputs(inv, BUCKET_IAM, "bench-canary-release-reader")
    assert reader == {
        "bucket": WEIGHTS,
        "role": "roles/storage.objectViewer",
        "member": PRINCIPAL,
        "condition": {
            "title": "bench-canary-release-folder",
            "description": f"Read gs://{WEIGHTS}/{CANARY_FOLDER} only: the tokenizer of {CANARY_RELEASE}",
            # objects of the canary's release folder, or a listing whose prefix is inside it (list requests name
            # the bucket as their resource, so resource.name alone would refuse every listing)
            "expression": (
                f'resource.name.startsWith("projects/_/buckets/{WEIGHTS}/objects/{CANARY_FOLDER}") || '
                f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith('
                f'"{CANARY_FOLDER}")'
            ),
        },
    }
    creator = inputs(inv, BUCKET_IAM, "bench-canary-record-creator")
    assert creator == {
        "bucket": WEIGHTS,
        "role": "roles/storage.objectCreator",
        "member": PRINCIPAL,
        "condition": {
            "title": "bench-canary-measurements",
            "description": f"Create measurement records under gs://{WEIGHTS}/measurements/ only",
            "expression": f'resource.name.startsWith("projects/_/buckets/{WEIGHTS}/objects/measurements/")',
        },
    }
    # Nothing else is granted to the bench's principal, and the stable release's folder is not readable.
    granted = [r["name"] for r in inv["resources"] if r["inputs"].get("member") == PRINCIPAL]
    assert sorted(granted) == ["bench-canary-record-creator", "bench-canary-release-reader"]
    writer = member_resource(
        "platform-weights-writer", "serviceAccount:release-pipeline@acme-llm-prod.iam.gserviceaccount.com"
    )
    assert "281de45e" not in json.dumps(inputs(inv, BUCKET_IAM, writer))
    # The grants wait for the cluster (the principal is built from its workload_pool output) and the bucket.
    deps = one(inv, BUCKET_IAM, "bench-canary-release-reader")["dependencies"]
    assert any(d.endswith("::platform-cluster-gke") for d in deps)
    assert any(d.endswith("::platform-weights-bucket") for d in deps)
    # The system nodes pull the bench image: reader on the stack's repository for their service account only.
    assert inputs(inv, REPO_IAM, "bench-canary-image-reader") == {
        "project": "acme-llm-prod",
        "location": "us-central1",
        "repository": "serving",
        "role": "roles/artifactregistry.reader",
        "member": "serviceAccount:llm-prod-system@acme-llm-prod.iam.gserviceaccount.com",
    }


def test_service_selects_the_pools_deployment(enabled):
    _, inv = enabled
    svc = inputs(inv, SERVICE, "bench-canary-service")
    deployment = inputs(inv, DEPLOYMENT, "vllm-canary-deployment")
    assert svc["metadata"]["namespace"] == deployment["metadata"]["namespace"] == "llm-serving-canary"
    assert svc["metadata"]["name"] == "vllm-canary-bench"
    assert svc["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": 8000, "protocol": "TCP"}]


def test_network_policies_both_ways(enabled):
    _, inv = enabled
    bench = inputs(inv, NETPOL, "bench-canary-netpol")
    assert bench["metadata"]["namespace"] == "llm-bench"
    assert bench["spec"]["podSelector"] == {"matchLabels": selector_labels("canary")}
    assert bench["spec"]["policyTypes"] == ["Ingress", "Egress"] and bench["spec"]["ingress"] == []

    def ns(*names: str) -> dict[str, object]:
        return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(names)}]}

    assert bench["spec"]["egress"] == [
        # the pool's pods on the vLLM port (Service traffic is matched after translation to the pod)
        {
            "to": [
                {
                    "namespaceSelector": ns("llm-serving-canary"),
                    "podSelector": {
                        "matchLabels": {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "vllm-canary"}
                    },
                }
            ],
            "ports": [{"protocol": "TCP", "port": 8000}],
        },
        {
            "to": [
                {
                    "namespaceSelector": ns("kube-system"),
                    "podSelector": {
                        "matchExpressions": [
                            {"key": "k8s-app", "operator": "In", "values": ["kube-dns", "node-local-dns"]}
                        ]
                    },
                }
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        },
        {
            "to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}],
            "ports": [{"protocol": "TCP", "port": 80}, {"protocol": "TCP", "port": 988}],
        },
        {"to": [{"ipBlock": {"cidr": "169.254.169.252/32"}}], "ports": [{"protocol": "TCP", "port": 988}]},
        {"to": [{"ipBlock": {"cidr": "199.36.153.8/30"}}], "ports": [{"protocol": "TCP", "port": 443}]},
    ]
    peer = {"namespaceSelector": ns("llm-bench"), "podSelector": {"matchLabels": selector_labels("canary")}}
    canary_from = inputs(inv, NETPOL, "vllm-canary-netpol")["spec"]["ingress"][0]["from"]
    stable_from = inputs(inv, NETPOL, "vllm-stable-netpol")["spec"]["ingress"][0]["from"]
    assert canary_from[-1] == peer and peer not in stable_from  # only the measured pool admits the bench
    assert all("llm-bench" not in json.dumps(p) for p in stable_from)


def test_job(enabled):
    _, inv = enabled
    job = inputs(inv, JOB, "bench-canary-job")
    assert job["metadata"]["name"] == "bench-canary" and job["metadata"]["namespace"] == "llm-bench"
    assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    spec = job["spec"]
    # Automatic sweep: at most 10 doubling rates (1 .. 512 req/s) + 2 bisection rates (bounded by the start rate) + 3
    # re-measurements (bounded by the longest run) = 15 runs, each bounded by guidellm's run timeout 240 (start-up)
    # + the run + 120 (drain). A run is max(120 s, 400 arrivals / (rate x 0.9)): 444.4 s at 1 req/s, 222.2 s at 2,
    # 120 s from 4 up. 6 x 444.4 + 222.2 + 8 x 120 = 3848.9 s of load + 15 x 360 = 9248.9 -> 9249 s; + 600 s outside
    # the rates + 900 s pod start = 10749 s.
    load = 6 * 400 / 0.9 + 400 / 1.8 + 8 * 120
    assert spec["activeDeadlineSeconds"] == math.ceil(load + 15 * 360) + 600 + 900 == 10749
    assert (spec["backoffLimit"], spec["completions"], spec["parallelism"]) == (0, 1, 1)
    assert spec["ttlSecondsAfterFinished"] == 7 * 24 * 3600
    template = spec["template"]
    assert template["metadata"]["labels"] == {**selector_labels("canary"), "app.kubernetes.io/part-of": "llm-serving"}
    assert template["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    assert template["metadata"]["annotations"]["llm-serving.io/release"] == CANARY_RELEASE
    pod = template["spec"]
    assert (
        pod["restartPolicy"],
        pod["serviceAccountName"],
        pod["automountServiceAccountToken"],
        pod["enableServiceLinks"],
    ) == ("Never", "bench", False, False)
    assert pod["nodeSelector"] == {"llm-serving.io/pool-kind": "system"}
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    [c] = pod["containers"]
    assert c["image"] == IMAGE
    assert c["command"] == ["llm-serving"]
    assert c["args"] == [
        "bench",
        "--stack",
        "prod",
        "--pool",
        "canary",
        "--url",
        "http://vllm-canary-bench.llm-serving-canary.svc:8000",
        "--tokenizer",
        "/tokenizer",
        "--out",
        "/tmp/bench",
        "--record-uri",
        f"gs://{WEIGHTS}/measurements/prod-canary-{CANARY_RELEASE}.json",
    ]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "3Gi"},
        "limits": {"memory": "4Gi", "ephemeral-storage": "3Gi"},
    }
    assert c["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "tokenizer", "mountPath": "/tokenizer", "readOnly": True},
    ]
    assert pod["volumes"] == [
        {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
        {
            "name": "tokenizer",
            "csi": {
                "driver": "gcsfuse.csi.storage.gke.io",
                "readOnly": True,
                "volumeAttributes": {
                    "bucketName": WEIGHTS,
                    "mountOptions": f"implicit-dirs,only-dir={CANARY_FOLDER.rstrip('/')}",
                },
            },
        },
    ]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["HOME"].startswith("/tmp/") and env["HF_HUB_OFFLINE"] == "1"
    # Load starts only after the measured pool's rollout, the grants, the Service and both NetworkPolicies.
    deps = one(inv, JOB, "bench-canary-job")["dependencies"]
    for needed in (
        "::vllm-canary-deployment",
        "::vllm-canary-netpol",
        "::bench-canary-netpol",
        "::bench-canary-service",
        "::bench-canary-release-reader",
        "::bench-canary-record-creator",
        "::bench-canary-image-reader",
    ):
        assert any(d.endswith(needed) for d in deps), needed
    assert not any(d.endswith("::vllm-stable-deployment") for d in deps)
    assert inv["outputs"]["bench"] == {
        "job": "bench-canary",
        "record_uri": f"gs://{WEIGHTS}/measurements/prod-canary-{CANARY_RELEASE}.json",
    }


def test_quick_job_with_rates_and_duration(quick):
    pod = job_pod(quick, "stable")
    assert pod["containers"][0]["args"] == [
        "bench",
        "--stack",
        "prod",
        "--pool",
        "stable",
        "--url",
        "http://vllm-stable-bench.llm-serving-stable.svc:8000",
        "--tokenizer",
        "/tokenizer",
        "--quick",
        "--rates",
        "0.5,1,2",
        "--duration-seconds",
        "30",
        "--out",
        "/tmp/bench",
        "--record-uri",
        f"gs://{WEIGHTS}/measurements/prod-stable-{STABLE_RELEASE}.json",
    ]
    # 3 explicit rates, the 30 s floor raised to 400 arrivals: 888.9 s at 0.5 req/s, 444.4 at 1, 222.2 at 2; + 3
    # re-measurements of 888.9 s: 4222.2 s of load + 6 x 360 = 6382.2 -> 6383 s, + 600 + 900 = 7883 s.
    load = 4 * 400 / 0.45 + 400 / 0.9 + 400 / 1.8
    deadline = inputs(quick, JOB, "bench-stable-job")["spec"]["activeDeadlineSeconds"]
    assert deadline == math.ceil(load + 6 * 360) + 1500 == 7883
    assert inputs(quick, SERVICE, "bench-stable-service")["metadata"]["namespace"] == "llm-serving-stable"
    assert "llm-bench" in json.dumps(inputs(quick, NETPOL, "vllm-stable-netpol")["spec"]["ingress"])
    assert "llm-bench" not in json.dumps(inputs(quick, NETPOL, "vllm-canary-netpol")["spec"]["ingress"])


def test_deadline_arithmetic_and_its_sources():
    def cfg(**kw):
        return bench_config.BenchConfig(image=IMAGE, pool="stable", **kw)

    # quick, automatic: rates 1, 2, 4 with a 10 s floor run 444.4, 222.2, 111.1 s (400 arrivals after a 10 %
    # warm-up), + 3 re-measurements of 444.4 s: 2111.1 s of load + 6 x 360 = 4271.1 -> 4272, + 600 + 900
    assert (
        bench_deadline(cfg(quick=True)).active_deadline_seconds
        == math.ceil(4 * 400 / 0.9 + 400 / 1.8 + 400 / 3.6 + 6 * 360) + 1500
        == 5772
    )
    # explicit rates override the automatic ones: 1, 2, 4 run 444.4, 222.2, 111.1 s; 8 and 16 the 60 s floor
    assert (
        bench_deadline(cfg(rates="1,2,4,8,16", duration_seconds=60)).active_deadline_seconds
        == math.ceil(4 * 400 / 0.9 + 400 / 1.8 + 400 / 3.6 + 2 * 60 + 8 * 360) + 1500
        == 6612
    )
    # "auto" is the automatic sweep: 10 + 2 rates and 3 re-measurements
    assert bench_deadline(cfg(rates="auto")).runs == 15
    # The numbers are the bench's own: its guidellm run timeout and what it does outside the rates.
    assert bench_runner.STARTUP_ALLOWANCE_S == bench_config.RUN_STARTUP_ALLOWANCE_S == 240
    assert bench_runner.DRAIN_ALLOWANCE_S == bench_config.RUN_DRAIN_ALLOWANCE_S == 120
    # The CLI imports the config's constant (mypy: an import is no re-export); this guards against a local copy.
    assert bench_cli.QUICK_DURATION_S == bench_config.QUICK_DURATION_S  # type: ignore[attr-defined]
    assert BENCH_OVERHEAD_SECONDS >= (
        bench_runner.VERSION_TIMEOUT_S + bench_cli.HEALTH_TIMEOUT_S + bench_runner.EXPORT_TIMEOUT_S
    )
    assert POD_START_SECONDS == 900


def test_manifests_validate_with_kubernetes_validate(enabled):
    kv = pytest.importorskip("kubernetes_validate")
    d, inv = enabled
    minor = read_stack_file("prod", d).values["llm-serving:gke"]["min_version"]  # "1.34": the API validated against
    objs = [
        r["inputs"]
        for r in inv["resources"]
        if r["parent"] and r["parent"].endswith("::bench-canary") and r["type"].startswith("kubernetes:")
    ]
    assert sorted(o["kind"] for o in objs) == ["Job", "Namespace", "NetworkPolicy", "Service", "ServiceAccount"]
    for obj in [*objs, inputs(inv, NETPOL, "vllm-canary-netpol")]:
        kv.validate(obj, minor, strict=True)


def test_policies_pass_with_the_job_enabled(enabled, capsys):
    d, _ = enabled
    assert cli.main(["policy", "--stack", "prod", "--stacks-dir", str(d)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stack prod (prod), policy config ") and "bench-canary" not in out  # no finding on them


def test_policies_see_the_bench_objects(enabled, plans):
    """The pack checks what the Job adds (not only the serving objects): a tag on the Job's image, or a grant to the
    bench's Workload Identity principal that does not wait for the cluster, is a violation."""
    _, inv = enabled
    rs = copy.deepcopy(inv["resources"])
    assert evaluate("serving-images-pinned-by-digest", rs, {}) == []
    find(rs, ":Job", "bench-canary-job")["inputs"]["spec"]["template"]["spec"]["containers"][0]["image"] = (
        "x/bench:latest"
    )
    assert evaluate("serving-images-pinned-by-digest", rs, {}) == [
        "bench-canary-job: container 'bench' image 'x/bench:latest' uses the mutable :latest tag: use a released "
        "version tag or, better, <repository>@sha256:<digest>"
    ]
    rs = copy.deepcopy(inv["resources"])
    assert evaluate("create-after-dependencies", rs, {}) == []
    grant = find(rs, ":BucketIAMMember", "bench-canary-record-creator")
    grant["dependencies"] = []  # as if it were neither a child of the bench (which waits) nor built from the pool
    typ = "gcp:storage/bucketIAMMember:BucketIAMMember bench-canary-record-creator"
    assert evaluate("create-after-dependencies", rs, {}) == [
        f"bench-canary-record-creator: {typ} grants to the Workload Identity principal of pool "
        "acme-llm-prod.svc.id.goog, but does not depend on the GKE cluster that creates that pool: on a fresh project "
        "the grant is rejected",
        f"bench-canary-record-creator: {typ} is created through storage.googleapis.com, which this stack enables, but "
        "does not depend on its enablement (platform-services-storage): on a fresh project it can be created before "
        "the API is on",
    ]


# ---- config errors ------------------------------------------------------------------------------------------------


def _errors(bench: dict[str, Any], **serving: Any) -> dict[str, str]:
    v = json.loads(json.dumps(read_stack_file("prod").values))
    v["llm-serving:gke"]["bench"] = bench
    for key, value in serving.items():
        if value is None:
            del v["llm-serving:serving"][key]
        else:
            v["llm-serving:serving"][key] = value
    with pytest.raises(ConfigError) as exc:
        resolve_stack(v, "prod", ROOT)
    return {i.path: i.message for i in exc.value.issues}


@pytest.mark.parametrize(
    "bench, path, message",
    [
        (
            {"image": "us-central1-docker.pkg.dev/acme-llm-prod/serving/bench:v1", "pool": "canary"},
            "image",
            "must be pinned by digest as <repository>@sha256:<64 hex>, got "
            "'us-central1-docker.pkg.dev/acme-llm-prod/serving/bench:v1'",
        ),
        (
            {"image": "ghcr.io/acme/bench@sha256:" + "ab" * 32, "pool": "canary"},
            "image",
            "the bench image must come from the stack's Artifact Registry repository "
            "us-central1-docker.pkg.dev/acme-llm-prod/serving/..., got ghcr.io/acme/bench@sha256:" + "ab" * 32,
        ),
        ({"pool": "canary"}, "image", "required key is missing"),
        ({"image": IMAGE, "pool": "nightly"}, "pool", "Input should be 'stable' or 'canary' (got 'nightly')"),
        (
            {"image": IMAGE, "pool": "canary", "rates": "1,-2"},
            "rates",
            "rates must be distinct positive numbers, got '1,-2'",
        ),
        (
            {"image": IMAGE, "pool": "canary", "rates": "1,1"},
            "rates",
            "rates must be distinct positive numbers, got '1,1'",
        ),
        (
            {"image": IMAGE, "pool": "canary", "rates": "fast"},
            "rates",
            "expected 'auto' or comma-separated req/s, got 'fast'",
        ),
        (
            {"image": IMAGE, "pool": "canary", "rates": ",".join(str(i) for i in range(1, 26))},
            "rates",
            "at most 24 rates, got 25",
        ),
        (
            {"image": IMAGE, "pool": "canary", "rates": "1,20000"},
            "rates",
            "each rate must be at most 10000 req/s, got 20000",
        ),
        (
            {"image": IMAGE, "pool": "canary", "duration_seconds": 5},
            "duration_seconds",
            "Input should be greater than or equal to 10 (got 5)",
        ),
        (
            {"image": IMAGE, "pool": "canary", "duration_seconds": 3600},
            "duration_seconds",
            "Input should be less than or equal to 1800 (got 3600)",
        ),
        ({"image": IMAGE, "pool": "canary", "quick": "yes"}, "quick", "Input should be a valid boolean (got 'yes')"),
        ({"image": IMAGE, "pool": "canary", "nodes": 2}, "nodes", "unknown key (not part of the schema)"),
    ],
)
def test_config_errors_name_the_key(bench, path, message):
    assert _errors(bench) == {f"llm-serving:gke.bench.{path}": message}


def test_the_benchmarked_pool_must_exist_and_run_on_gke():
    no_canary = _errors(
        {"image": IMAGE, "pool": "canary"},
        canary=None,
        stable={**read_stack_file("prod").values["llm-serving:serving"]["stable"], "weight": 100},
    )
    assert no_canary == {"llm-serving:gke.bench.pool": "no 'canary' pool to benchmark: serving has stable"}
    # A pool of another target (a Cloud Run pool has no Deployment in the cluster to send load to):
    bench = bench_config.BenchConfig(image=IMAGE, pool="canary")
    # Partial GkeConfigs on purpose (model_construct skips validation; the rule reads only ``bench``): the pydantic
    # plugin types model_construct with every required field.
    cfg = SimpleNamespace(
        gke=GkeConfig.model_construct(bench=bench),  # type: ignore[call-arg]
        pools=lambda: [("stable", SimpleNamespace(target="gke")), ("canary", SimpleNamespace(target="cloud_run"))],
    )
    assert list(bench_pool_is_a_gke_pool(cfg)) == [
        (
            ("gke", "bench", "pool"),
            ("serving.canary targets cloud_run; the benchmark Job runs in the GKE cluster and measures a gke pool"),
        )
    ]
    no_bench = GkeConfig.model_construct(bench=None)  # type: ignore[call-arg]
    assert list(bench_pool_is_a_gke_pool(SimpleNamespace(gke=no_bench, pools=list))) == []


def test_component_args_refuse_what_config_refuses():
    plan_release = resolve_stack(json.loads(json.dumps(read_stack_file("prod").values)), "prod", ROOT)
    rel = plan_release.plan.pools["canary"].release
    ok: dict[str, Any] = dict(
        stack="prod",
        role="canary",
        release=rel,
        image=IMAGE,
        quick=False,
        rates=None,
        duration_seconds=None,
        active_deadline_seconds=60,
        pool_namespace="llm-serving-canary",
        pool_selector={"a": "b"},
        project="p",
        region="r",
        project_number="1",
        workload_pool="p.svc.id.goog",
        weights_bucket=WEIGHTS,
        image_repository="serving",
        system_node_member="serviceAccount:s@p.iam.gserviceaccount.com",
    )
    assert bench_args(BenchJobArgs(**ok))[-1] == f"gs://{WEIGHTS}/measurements/prod-canary-{CANARY_RELEASE}.json"
    assert release_read_condition(BenchJobArgs(**ok)).title == "bench-canary-release-folder"
    assert record_create_condition(BenchJobArgs(**ok)).title == "bench-canary-measurements"
    for key, value, message in (
        ("image", "x/bench:v1", "BenchJobArgs.image: must be pinned by digest"),
        ("active_deadline_seconds", 0, "BenchJobArgs.active_deadline_seconds: must be >= 1"),
        ("pool_selector", {}, "BenchJobArgs.pool_selector: the pool's Deployment selector"),
    ):
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            BenchJobArgs(**{**ok, key: value})


# ---- the record in Cloud Storage: upload create-only, fetch validated ---------------------------------------------


@pytest.fixture(scope="module")
def gcs_module() -> Iterator[Gcs]:
    with running_emulator() as gcs:
        yield gcs


@pytest.fixture
def gcs(gcs_module: Gcs, monkeypatch) -> Gcs:
    gcs_module.wipe()
    # The CLI's client reads STORAGE_EMULATOR_HOST (and then authenticates anonymously), as in CI.
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_module.shim_url)
    return gcs_module


NAME = f"measurements/prod-canary-{CANARY_RELEASE}.json"
URI = f"gs://{BUCKET}/{NAME}"


def record_bytes(tmp_path: Path, points=CURVE) -> bytes:
    path = tmp_path / f"r{len(list(tmp_path.glob('r*.json')))}.json"
    write_measurement(record(points), path)
    return path.read_bytes()


def stored(gcs: Gcs, name: str = NAME) -> bytes | None:
    blob = Gcs.client(gcs.shim_url).bucket(gcs.bucket).get_blob(name)
    return None if blob is None else blob.download_as_bytes()


def test_upload_is_create_only_and_never_overwrites(gcs: Gcs, tmp_path: Path):
    client = Gcs.client(gcs.shim_url)
    first = record_bytes(tmp_path)
    assert store.upload_record(client, BUCKET, NAME, first) == "written"
    assert stored(gcs) == first
    uploads = [q for m, q, _ in gcs.shim.requests if m == "POST" and q.startswith("/upload/")]
    assert uploads and all("ifGenerationMatch=0" in q for q in uploads)
    # A retried request of ours that already landed leaves the same bytes: that is not a second record.
    assert store.upload_record(client, BUCKET, NAME, first) == "unchanged"
    other = record_bytes(tmp_path, CURVE[:3])
    assert other != first
    with pytest.raises(store.RecordStoreError) as exc:
        store.upload_record(client, BUCKET, NAME, other)
    assert str(exc.value) == (
        f"{URI}: already exists; a measurement record is written once and never overwritten "
        "(measure again under a new name, or retire the old object deliberately)"
    )
    assert stored(gcs) == first  # never overwritten


def test_fetch_round_trip(gcs: Gcs, tmp_path: Path, capsys):
    data = record_bytes(tmp_path)
    store.upload_record(Gcs.client(gcs.shim_url), BUCKET, NAME, data)
    to = tmp_path / "stacks" / "measurements" / f"prod-canary-{CANARY_RELEASE}.json"
    assert cli.main(["bench", "fetch", URI, "--to", str(to)]) == 0
    assert to.read_bytes() == data  # byte for byte as stored
    err = capsys.readouterr().err
    assert err.startswith(
        f"wrote {to}: release {record(CURVE).release} on a3-highgpu-2g (TP 2), measured "
        "2026-08-24T09:30:15Z; operating point 4 req/s achieved (4 offered): θ_o 1400.0, θ_i 7200.0 tokens/s per "
        "replica."
    )
    assert f"measured: stacks/measurements/{to.name}" in err
    assert sorted(p.name for p in to.parent.iterdir()) == [to.name]  # no temporary file left behind
    # The file is a record a pool can cite: the stack loader reads it back identical.
    from infra.config.measurement import load_measurement_file

    assert load_measurement_file(f"stacks/measurements/{to.name}", tmp_path) == record(CURVE)
    # Fetching again over it is refused and leaves it alone.
    assert cli.main(["bench", "fetch", URI, "--to", str(to)]) == 2
    assert capsys.readouterr().err == f"error: --to {to}: already exists; a measurement record is written once\n"
    assert to.read_bytes() == data


def _put(gcs: Gcs, data: bytes, name: str = NAME) -> None:
    Gcs.client(gcs.emulator_url).bucket(gcs.bucket).blob(name).upload_from_string(data)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda d: d.pop("curve"),
            f"error: {URI}: not a valid measurement record, 1 problem(s): curve: Field required\n",
        ),
        (
            lambda d: d.update(operating_point=None),
            f"error: {URI}: not a valid measurement record, 1 problem(s): operating_point: exactly one of "
            "operating_point and no_operating_point_reason is set\n",
        ),
        (
            lambda d: d["curve"][0].update(arrivals=-1),
            f"error: {URI}: not a valid measurement record, 1 problem(s): curve.0.arrivals: Input should be greater than or "
            "equal to 0\n",
        ),
    ],
)
def test_fetched_record_that_fails_the_schema_is_refused_and_nothing_is_written(
    gcs: Gcs, tmp_path: Path, capsys, mutate, message
):
    doc = json.loads(record_bytes(tmp_path))
    mutate(doc)
    _put(gcs, json.dumps(doc).encode())
    out = tmp_path / "out"
    out.mkdir()
    assert cli.main(["bench", "fetch", URI, "--to", str(out / "m.json")]) == 2
    assert capsys.readouterr().err == message
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    "data, message",
    [
        (b'{"a": 1, "a": 2}', f"error: {URI}: a: duplicate key 'a': JSON parsers keep only the last one, silently\n"),
        (b"not json", f"error: {URI}:1:1: not valid JSON: Expecting value\n"),
        (
            b"{}" + b" " * store.MAX_RECORD_BYTES,
            f"error: {URI}: {store.MAX_RECORD_BYTES + 2} bytes, more than the {store.MAX_RECORD_BYTES} a stack reads a record "
            "under (MAX_JSON_BYTES); refused\n",
        ),
    ],
)
def test_fetched_bytes_that_are_not_a_record_are_refused(gcs: Gcs, tmp_path: Path, capsys, data, message):
    _put(gcs, data)
    assert cli.main(["bench", "fetch", URI, "--to", str(tmp_path / "m.json")]) == 2
    assert capsys.readouterr().err == message
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["gs://llm-weights-test/measurements/none.json", "--to", "{t}/m.json"],
            "error: gs://llm-weights-test/measurements/none.json: no such object\n",
        ),
        (
            ["gs://Bad_Bucket/m.json", "--to", "{t}/m.json"],
            "error: bench fetch 'gs://Bad_Bucket/m.json': expected gs://<bucket>/<path>.json (bucket: 3-63 of a-z 0-9 - _; "
            "path: segments of A-Z a-z 0-9 . _ -)\n",
        ),
        (
            ["gs://llm-weights-test/../m.json", "--to", "{t}/m.json"],
            "error: bench fetch 'gs://llm-weights-test/../m.json': expected gs://<bucket>/<path>.json (bucket: 3-63 of "
            "a-z 0-9 - _; path: segments of A-Z a-z 0-9 . _ -)\n",
        ),
        (
            [URI, "--to", "{t}/m.yaml"],
            "error: --to {t}/m.yaml: the file name must be <name>.json of A-Z a-z 0-9 . _ - (what serving.<role>.measured "
            "cites as stacks/measurements/<name>.json)\n",
        ),
    ],
)
def test_fetch_misuse_is_one_line(gcs: Gcs, tmp_path: Path, capsys, argv, message):
    assert cli.main(["bench", "fetch", *[a.format(t=tmp_path) for a in argv]]) == 2
    assert capsys.readouterr().err == message.format(t=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_fetch_needs_to(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "fetch", URI])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "llm-serving bench fetch: error: the following arguments are required: --to (see --help)\n"
    )


# ---- bench --record-uri: the run uploads its record, create-only ---------------------------------------------------


class QuietScraper(bench_scrape.MetricsScraper):
    """A scraper that never touches the network (the points it would summarise are CURVE's, gauges included)."""

    def check(self) -> bench_scrape.Sample:
        return bench_scrape.Sample(0.0, 0.0, 0.0, {math.inf: 0.0})

    def start(self) -> QuietScraper:
        return self

    def stop(self) -> None:
        pass


def _bench(tmp_path: Path, monkeypatch, *argv: str) -> int:
    """``llm-serving bench`` with everything that needs guidellm and a server replaced: the sweep measures CURVE."""
    points = {p.offered_rps: p for p in CURVE}
    monkeypatch.setattr(bench_cli, "resolve_guidellm", lambda explicit: Path("/bin/true"))
    monkeypatch.setattr(bench_cli, "guidellm_version", lambda exe: "0.8.1")
    monkeypatch.setattr(bench_cli, "_check_health", lambda url: None)
    monkeypatch.setattr(bench_cli, "measure_rate_fn", lambda *a, **k: lambda rate, index: (points[rate], ()))
    monkeypatch.setattr(bench_cli, "MetricsScraper", QuietScraper)
    p = argparse.ArgumentParser(prog="llm-serving")
    bench_cli.register(
        p.add_subparsers(dest="command", required=True), lambda args: target(tokenizer_path=str(tmp_path))
    )
    args = p.parse_args(["bench", "--rates", "1,2,4,8", *argv])
    return args.fn(args)


def test_bench_uploads_its_record(gcs: Gcs, tmp_path: Path, monkeypatch, capsys):
    out = tmp_path / "run"
    assert _bench(tmp_path, monkeypatch, "--out", str(out), "--record-uri", URI) == 0
    assert stored(gcs) == (out / "measurement.json").read_bytes()
    assert f"{URI}(written)" in "".join(capsys.readouterr().err.split())  # rich wraps the console


def test_bench_never_overwrites_an_existing_record(gcs: Gcs, tmp_path: Path, monkeypatch, capsys):
    _put(gcs, b'{"earlier": "record"}')
    out = tmp_path / "run"
    assert _bench(tmp_path, monkeypatch, "--out", str(out), "--record-uri", URI) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == (
        f"error: {URI}: already exists; a measurement record is written once and never overwritten (measure again "
        f"under a new name, or retire the old object deliberately); the record is on stdout and in {out}/measurement.json"
    )
    assert captured.out == (out / "measurement.json").read_text()  # recoverable from the Job's log
    assert stored(gcs) == b'{"earlier": "record"}'


def test_bad_record_uri_is_refused_before_any_load(tmp_path: Path, monkeypatch, capsys):
    def no_load(*a, **k):
        raise AssertionError("the sweep must not start")

    monkeypatch.setattr(bench_cli, "sweep", no_load)
    assert _bench(tmp_path, monkeypatch, "--out", str(tmp_path / "run"), "--record-uri", "s3://b/m.json") == 2
    assert capsys.readouterr().err == (
        "error: --record-uri 's3://b/m.json': expected gs://<bucket>/<path>.json "
        "(bucket: 3-63 of a-z 0-9 - _; path: segments of A-Z a-z 0-9 . _ -)\n"
    )
    assert not (tmp_path / "run").exists()
