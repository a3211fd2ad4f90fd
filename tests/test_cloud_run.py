"""The Cloud Run target (issues 16, 23): the shipped ``dev-cloudrun`` stack and the prod fixture
(``tests/fixtures/cloud-run/Pulumi.prod-cloudrun.yaml``) planned by the real program under the mock monitor.

Derived values are asserted against hand-written arithmetic (the numbers are spelled out in each test), every
validation rule has a failing config asserting its key path and exact message, the issue's acceptance points
(C1-C5) are checked on both stacks, and the rendered command is executed for real (with a stand-in ``vllm`` on
PATH): the programs as the plan uploads them, the release verifier in ``gcs`` mode against a real Cloud Storage
JSON API on loopback (tests/gcs_emulator.py), the in-memory stager on a local folder. The rendered bodies are
validated against run.v2 in tests/test_cloud_run_provider.py; the rollout in tests/test_cloud_run_rollout.py.
"""

from __future__ import annotations

import dataclasses
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

from components import naming
from components.cloud_run import programs
from components.cloud_run import service as svc
from components.cloud_run.component import CloudRunServingArgs
from components.cloud_run.spec import COLLECTOR_CPU, COLLECTOR_MEMORY_MIB
from components.monitoring.dashboard import dashboard_queries
from components.serving import verify_release as vr
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.capacity_table import render_table
from infra.offline.stackfile import ROOT, _as_engine_string, read_stack_file
from infra.planning import capacity
from infra.resolve import resolve_stack
from infra.targets.cloud_run import compose as target
from infra.targets.cloud_run.config import GPU_SHAPES
from infra.targets.cloud_run.planning import CloudRunPoolPlan

from .conftest import CLOUD_RUN_FIXTURE, CLOUD_RUN_FIXTURES, CLOUD_RUN_STACK, member_resource, plan_run, resources
from .discovery import document
from .gcs_emulator import Gcs, running_emulator

SERVICE = "pulumi-python:dynamic/cloudrun:Service"
REVISION = "pulumi-python:dynamic/cloudrun:Revision"
TRAFFIC = "pulumi-python:dynamic/cloudrun:Traffic"
OBJECT = "gcp:storage/bucketObject:BucketObject"
MiB, GiB = 2**20, 2**30
#: Qwen3-8B at FP8 (releases/dev/*.json: catalogue qwen3-8b, fp8): the quantised layers at 1 byte, the embedding and
#: lm_head (untied: 2 x 151,936 x 4,096 = 1,244,659,712 parameters) at bf16's 2 bytes: 8.2e9 + 1,244,659,712 bytes.
W = (8.2e9 - 2 * 151_936 * 4096) * 1 + 2 * 151_936 * 4096 * 2
DEV_REVISION = "db8438d4453c4113736c3290c846f94bb7d08190"
CANARY_REVISION = "5f0e2c1d9b8a7f6e5d4c3b2a1908f7e6d5c4b3a2"
#: The verifier's metadata check (the manifest and one object listing), stated in capacity.METADATA_VERIFY_SECONDS.
METADATA_VERIFY = 10


# ---- helpers -----------------------------------------------------------------------------------------------------


def values(stack: str = CLOUD_RUN_STACK) -> dict[str, Any]:
    """Decoded stack-file values (a deep copy: tests mutate them)."""
    sf = read_stack_file(stack, CLOUD_RUN_FIXTURES if stack == CLOUD_RUN_FIXTURE else ROOT / "stacks")
    return json.loads(json.dumps(sf.values))


def resolve(v: dict[str, Any], stack: str = CLOUD_RUN_STACK):
    return resolve_stack(v, stack, ROOT)


def issues(v: dict[str, Any], stack: str = CLOUD_RUN_STACK) -> list[str]:
    with pytest.raises(ConfigError) as err:
        resolve(v, stack)
    return [str(i) for i in err.value.issues]


def plan_values(v: dict[str, Any], stack: str) -> tuple[Any, dict[str, Any]]:
    """(resolved stack, inventory) of the real program run on these values under the mock monitor."""
    from infra.entry import main as program_main
    from infra.offline.runner import run_offline

    seen: list[Any] = []
    run = run_offline(
        lambda: program_main(on_resolved=seen.append),
        project="llm-serving",
        stack=stack,
        config={k: _as_engine_string(x) for k, x in v.items()},
        secret_keys=[],
    )
    return seen[0], run.inventory().to_dict()


def inv(stack: str = CLOUD_RUN_STACK) -> dict[str, Any]:
    return plan_run(stack).inventory.to_dict()


def revision(inventory: dict[str, Any], role: str = "stable") -> dict[str, Any]:
    """The inputs of one pool's revision resource."""
    (r,) = [r for r in resources(inventory, REVISION) if r["name"] == f"cloud-run-revision-{role}"]
    return r["inputs"]


def template(inventory: dict[str, Any], role: str = "stable") -> dict[str, Any]:
    return revision(inventory, role)["template"]


def service(inventory: dict[str, Any]) -> dict[str, Any]:
    (s,) = resources(inventory, SERVICE)
    return s["inputs"]


def split(inventory: dict[str, Any]) -> list[dict[str, Any]]:
    (t,) = resources(inventory, TRAFFIC)
    return t["inputs"]["traffic"]


def vllm_container(t: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in t["containers"] if c["name"] == "vllm"]
    return c


def argv(container: dict[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def serve_args(container: dict[str, Any]) -> list[str]:
    a = argv(container)
    i = a.index("vllm")
    assert a[i + 1] == "serve"
    return a[i + 2 :]


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]


def stable_plan(stack: str = CLOUD_RUN_STACK, role: str = "stable") -> CloudRunPoolPlan:
    p = plan_run(stack).resolved.plan.pools[role]
    assert isinstance(p, CloudRunPoolPlan)
    return p


# ---- the shipped stack plans without any GKE section --------------------------------------------------------------


def test_dev_cloudrun_has_no_gke_sections_and_plans_with_zero_violations(tmp_path: Path, capsys) -> None:
    v = values()
    assert not {"llm-serving:gke", "llm-serving:gateway", "llm-serving:accelerators"} & set(v)
    assert cli.main(["plan", "--stack", CLOUD_RUN_STACK, "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert "policy: 0 violation(s): 0 mandatory, 0 advisory, " in out
    types = {r["type"] for r in json.loads((tmp_path / "plan" / "inventory.json").read_text())["resources"]}
    assert not {t for t in types if t.startswith(("kubernetes:", "gcp:container", "gcp:compute"))}
    assert "gcp:cloudrunv2/service:Service" not in types  # one template cannot create stable's and the canary's


def test_only_the_cloud_run_apis_are_enabled() -> None:
    enabled = sorted(r["inputs"]["service"] for r in resources(inv(), "gcp:projects/service:Service"))
    assert (
        enabled
        == sorted(target.SERVICES)
        == [
            "artifactregistry.googleapis.com",
            "iam.googleapis.com",
            "logging.googleapis.com",
            "monitoring.googleapis.com",
            "run.googleapis.com",
            "secretmanager.googleapis.com",
            "storage.googleapis.com",
        ]
    )


# ---- derived values (hand arithmetic) ------------------------------------------------------------------------------


def test_startup_window_is_twice_the_cold_load_estimate() -> None:
    # Streamed from the Cloud Storage volume at the stated 400 MiB/s: the verifier checks metadata only (10 s), vLLM
    # reads the mount once at 400 MiB/s, then 90 s of init.
    read = W / (400 * MiB)  # 22.52 s
    cold = METADATA_VERIFY + read + 90  # 122.52 s
    required = cold * 2  # startup_margin 1 (the least allowed): 245.04 s
    failures = math.ceil((required - 10) / 5)  # 10 s initial delay, 5 s period: ceil(47.01) = 48
    assert (round(read, 2), round(cold, 2), failures) == (22.52, 122.52, 48)
    run = stable_plan()
    assert run.capacity.cold_load_seconds == pytest.approx(cold)
    assert run.cloud_run.probes.startup_window_seconds == 10 + 5 * 48 == 250 >= 2 * cold
    c = vllm_container(template(inv()))
    assert c["startupProbe"] == {
        "httpGet": {"path": "/health", "port": 8080},
        "initialDelaySeconds": 10,
        "periodSeconds": 5,
        "timeoutSeconds": 4,
        "failureThreshold": failures,
    }
    assert c["livenessProbe"] == {
        "httpGet": {"path": "/health", "port": 8080},
        "periodSeconds": 10,
        "timeoutSeconds": 4,
        "failureThreshold": 3,
    }
    assert template(inv())["annotations"]["llm-serving.io/cold-load-seconds"] == f"{round(cold, 3):g}" == "122.518"


def test_staged_cold_load_phases_are_the_commands_order() -> None:
    # Fixture: RTX PRO 6000, volume at 800 MiB/s, staged. The command verifies by metadata (10 s), the stager copies
    # W at 800 MiB/s, vLLM reads the copy at the stated 2,000 MiB/s, then 120 s of init.
    copy_s, read_s = W / (800 * MiB), W / (2000 * MiB)
    cold = METADATA_VERIFY + copy_s + read_s + 120  # 10 + 11.26 + 4.50 + 120 = 145.76 s
    failures = math.ceil((cold * 2 - 10) / 5)  # ceil(56.31) = 57
    p = stable_plan(CLOUD_RUN_FIXTURE)
    r = p.cloud_run
    assert (r.verify_seconds, r.copy_seconds, r.weights_read_seconds) == pytest.approx((10, copy_s, read_s))
    assert r.cold_load_seconds == pytest.approx(cold) and round(cold, 2) == 145.76
    assert r.probes.startup_failure_threshold == failures == 57
    assert p.model_root == f"/staged-weights/qwen3-8b-fp8/{DEV_REVISION}"
    # The command runs the phases in the planner's order: verify (gcs, metadata), stage (copy), vLLM (read + init).
    a = argv(vllm_container(template(inv(CLOUD_RUN_FIXTURE))))
    verify, stage, serve = (
        a.index("/opt/llm-serving/verify_release.py"),
        a.index("/opt/llm-serving/stage_weights.py"),
        a.index("vllm"),
    )
    assert verify < stage < serve and a[verify + 1] == "gcs" and "dir" not in a
    assert a[stage + 1 : stage + 5] == [
        "--workers",
        "16",
        f"/weights/qwen3-8b-fp8/{DEV_REVISION}",
        f"/staged-weights/qwen3-8b-fp8/{DEV_REVISION}",
    ]


def test_concurrency_is_the_planners_max_num_seqs() -> None:
    # L4: 22.5 GiB x 0.9 - 8.80 GiB weights - 2 GiB overhead = 9.45 GiB of KV; k = 2 x 36 layers x 8 KV heads x
    # 128 x 2 bytes = 147,456 B/token; the mean context 600 + 200 = 800 tokens (50 whole 16-token blocks):
    # floor(9.45 GiB / (147,456 B x 800)) = 86 sequences.
    budget = 22.5 * GiB * 0.9 - W - 2 * GiB
    seqs = math.floor(budget / (147_456 * 800))
    assert seqs == 86
    t = template(inv())
    assert t["maxInstanceRequestConcurrency"] == seqs
    assert int(flag(serve_args(vllm_container(t)), "--max-num-seqs")) == seqs


def test_concurrency_is_capped_at_cloud_runs_1000() -> None:
    # A 70-token mean context on the 89.4 GiB RTX PRO 6000 leaves room for thousands of sequences: --max-num-seqs is
    # the planner's cap of 1,024, the Cloud Run concurrency Cloud Run's ceiling of 1,000.
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:contract"].update(prompt_tokens={"mean": 50, "p95": 100}, output_tokens={"mean": 20, "p95": 50})
    p = resolve(v, CLOUD_RUN_FIXTURE).plan.pools["stable"]
    assert isinstance(p, CloudRunPoolPlan)
    assert (p.capacity.max_num_seqs, p.cloud_run.concurrency) == (capacity.MAX_NUM_SEQS_CAP, 1000)


def test_request_timeout_covers_a_cold_start_and_the_stream() -> None:
    # Stream bound = TTFT 2 s + 1,024 tokens x 80 ms = 83.92 s. dev scales to zero: a request can wait the whole
    # startup window (250 s) first, so the timeout is ceil(250 + 83.92) = 334 s; the fixture's pools scale out
    # (1..4, 1..4): ceil(295 + 83.92) = 379 s. Cloud Run kills 10 s after SIGTERM, vLLM needs ~2 s after its drain
    # (3 s kept): the drain gets 10 - 3 = 7 s.
    stream = 2 + 1024 * 0.08
    assert template(inv())["timeout"] == f"{math.ceil(250 + stream)}s" == "334s"
    for role in ("stable", "canary"):
        assert template(inv(CLOUD_RUN_FIXTURE), role)["timeout"] == f"{math.ceil(295 + stream)}s" == "379s"
    assert flag(serve_args(vllm_container(template(inv()))), "--shutdown-timeout") == "7"
    # A fixed, warm pool (min = max >= 1) never meets a starting instance: the stream bound alone, ceil(83.92).
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:serving"]["stable"].update(min_instances=4, max_instances=4)  # the canary's bound: stage 100
    fixed = resolve(v, CLOUD_RUN_FIXTURE).plan.pools["stable"]
    assert isinstance(fixed, CloudRunPoolPlan)
    assert (fixed.cloud_run.cold_path, fixed.cloud_run.request_timeout_seconds) == (False, 84)


def test_instance_price_and_cold_start_cost() -> None:
    # GPU-second + (6 + 1 collector) vCPU-seconds + (24 + 0.5 collector) GiB-seconds at the stack's prices.
    second = 0.0001867 + (6 + COLLECTOR_CPU) * 0.000018 + (24 + COLLECTOR_MEMORY_MIB / 1024) * 0.000002
    assert second == pytest.approx(0.0003617)
    r = stable_plan()
    assert r.cloud_run.instance_hourly_usd == pytest.approx(3600 * second) == pytest.approx(1.30212)
    assert r.capacity.replica_hourly_usd == pytest.approx(3600 * second)
    cold = METADATA_VERIFY + W / (400 * MiB) + 90
    assert r.cloud_run.cold_start_usd == pytest.approx(cold * second) == pytest.approx(0.04432, abs=1e-5)
    table = render_table(plan_run(CLOUD_RUN_STACK).resolved.plan)
    assert "$0.0443 per cold start (min instances 0: scale to zero, the first request after idle waits it)" in table
    assert "10 s + 48 x 5 s = 250 s" in table
    assert "86 / 334 s (window + stream: can be cold)" in table
    assert "nvidia-l4 x1, 7 vCPU / 24.5 GiB (vllm 6 / 24), no zonal redundancy" in table
    assert "10 / 0 / 23 / 90 s" in table  # verify / copy / read / init (22.52 s read)


def test_quota_and_advice_lines() -> None:
    # Every pool at max_instances: the fixture's 4 + 4 RTX PRO 6000 instances of 20 vCPU / 80 GiB each.
    table = render_table(plan_run(CLOUD_RUN_FIXTURE).resolved.plan)
    assert (
        "stable and canary both count): GPUs 8 nvidia-rtx-pro-6000 without zonal redundancy; "
        f"{8 * 20} vCPU; {8 * 80} GiB memory"
    ) in table
    assert "advice" not in table  # 4 and 4
    v = values(CLOUD_RUN_FIXTURE)
    for role in ("stable", "canary"):
        v["llm-serving:serving"][role]["max_instances"] = 2
    small = render_table(resolve(v, CLOUD_RUN_FIXTURE).plan)
    for role in ("stable", "canary"):
        assert f"advice ({role}): max_instances 2 < 3: Google's starting point outside dev" in small
    assert "advice" not in render_table(plan_run(CLOUD_RUN_STACK).resolved.plan)  # dev may hold one GPU


def test_vllm_args_come_from_the_one_renderer() -> None:
    args = serve_args(vllm_container(template(inv())))
    assert args == list(stable_plan().vllm_args)
    assert args[args.index("--served-model-name") + 1 : args.index("--served-model-name") + 3] == [
        "qwen3-8b-fp8-2026-11-02.1",
        "qwen3-8b",
    ]
    assert flag(args, "--port") == "8080"
    assert flag(args, "--model") == f"/weights/qwen3-8b-fp8/{DEV_REVISION}"
    assert json.loads(flag(args, "--override-generation-config")) == {"max_new_tokens": 1024}
    assert "--no-enable-log-requests" in args and "--load-format" not in args


def test_shape_and_volumes_of_the_revision() -> None:
    t = template(inv())
    c = vllm_container(t)
    assert c["resources"] == {
        "cpuIdle": False,
        "startupCpuBoost": False,
        "limits": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"},
    }
    assert t["nodeSelector"] == {"accelerator": "nvidia-l4"} and t["gpuZonalRedundancyDisabled"] is True
    assert t["scaling"] == {"minInstanceCount": 0, "maxInstanceCount": 1}
    folder = programs.programs_volume("x").folder
    assert t["volumes"] == [
        {
            "name": "weights",
            "gcs": {
                "bucket": "acme-llm-dev-weights",
                "readOnly": True,
                "mountOptions": [f"only-dir=qwen3-8b-fp8/{DEV_REVISION}", "implicit-dirs", "enable-buffered-read"],
            },
        },
        {
            "name": "programs",
            "gcs": {"bucket": "acme-llm-dev-llm-dev-run", "readOnly": True, "mountOptions": [f"only-dir={folder}"]},
        },
    ]
    assert c["volumeMounts"] == [
        {"name": "weights", "mountPath": f"/weights/qwen3-8b-fp8/{DEV_REVISION}"},
        {"name": "programs", "mountPath": "/opt/llm-serving"},
    ]
    assert {e["name"]: e.get("value") for e in c["env"]} == {
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }
    (collector,) = [x for x in t["containers"] if x["name"] == "collector"]
    assert collector["dependsOn"] == ["vllm"]
    assert collector["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    assert collector["image"].startswith(
        "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar@sha256:"
    )
    assert service(inv())["service"]["launchStage"] == "GA"
    assert service(inv(CLOUD_RUN_FIXTURE))["service"]["launchStage"] == "BETA"  # RTX PRO 6000 is a Preview GPU


def test_rtx_pro_6000_instance_is_the_documented_shape() -> None:
    # vLLM 19 vCPU / 79.5 GiB + the collector's 1 vCPU / 0.5 GiB = the documented 20 vCPU / 80 GiB instance.
    for role in ("stable", "canary"):
        t = template(inv(CLOUD_RUN_FIXTURE), role)
        limits = [c["resources"]["limits"] for c in t["containers"]]
        assert limits[0] == {"cpu": "19", "memory": f"{round(79.5 * 1024)}Mi", "nvidia.com/gpu": "1"}
        assert sum(int(x["cpu"]) for x in limits) == 20
        assert sum(int(x["memory"].removesuffix("Mi")) for x in limits) == 80 * 1024


def test_staged_revision_has_an_in_memory_volume_of_the_stated_size() -> None:
    t = template(inv(CLOUD_RUN_FIXTURE))
    assert t["volumes"][2] == {"name": "staged-weights", "emptyDir": {"medium": "MEMORY", "sizeLimit": "10Gi"}}
    assert vllm_container(t)["volumeMounts"][2] == {"name": "staged-weights", "mountPath": "/staged-weights"}
    assert t["vpcAccess"] == {
        "egress": "ALL_TRAFFIC",
        "networkInterfaces": [{"network": "llm-prod", "subnetwork": "llm-prod-run", "tags": ["llm-serving"]}],
    }


# ---- the programs: uploaded, content-addressed, never inside the revision ------------------------------------------


def test_programs_are_uploaded_at_a_content_addressed_folder() -> None:
    i = inv()
    objects = {r["inputs"]["name"]: r for r in resources(i, OBJECT)}
    folder = programs.programs_volume("x").folder
    assert sorted(objects) == [f"{folder}/stage_weights.py", f"{folder}/verify_release.py"]
    for name, path in programs.FILES:
        o = objects[f"{folder}/{name}"]
        assert o["inputs"]["source"]["text"] == path.read_text(encoding="utf-8")
        assert o["inputs"]["bucket"] == "acme-llm-dev-llm-dev-run"
        assert o["options"]["retain_on_delete"] is True  # an old revision keeps starting with its programs
    # The folder is the digest of what is in it: 16 hex of SHA-256 over {name: sha256(text)}.
    import hashlib

    index = {n: hashlib.sha256(p.read_text(encoding="utf-8").encode()).hexdigest() for n, p in programs.FILES}
    digest = hashlib.sha256(json.dumps(index, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert folder == f"programs/{digest[:16]}"
    # Every revision waits for its programs.
    urns = {r["urn"] for r in resources(i, OBJECT)}
    assert urns <= set(next(r for r in resources(i, REVISION))["dependencies"])
    (bucket,) = resources(i, "gcp:storage/bucket:Bucket")
    assert bucket["inputs"]["name"] == "acme-llm-dev-llm-dev-run" and bucket["inputs"]["forceDestroy"] is True
    (prod_bucket,) = resources(inv(CLOUD_RUN_FIXTURE), "gcp:storage/bucket:Bucket")
    assert prod_bucket["options"]["protect"] is True and prod_bucket["inputs"]["forceDestroy"] is False


def test_no_program_text_inside_a_revision() -> None:
    """C4: the longest argument of any container of any revision of both stacks is a JSON generation config."""
    for stack in (CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE):
        for r in resources(inv(stack), REVISION):
            for c in r["inputs"]["template"]["containers"]:
                assert "-c" not in argv(c), (stack, c["name"])
                assert max(map(len, argv(c)), default=0) < 100, (stack, c["name"])
    # The old rendering carried the verifier inline: 42,660 characters in one argument.
    assert len(programs.VERIFY_SCRIPT.read_text(encoding="utf-8")) > 40_000


# ---- identity and access --------------------------------------------------------------------------------------------


def test_the_serving_account_reads_the_weights_and_programs_buckets_only() -> None:
    i = inv()
    sa = "serviceAccount:llm-dev-run@acme-llm-dev.iam.gserviceaccount.com"
    assert template(i)["serviceAccount"] == "llm-dev-run@acme-llm-dev.iam.gserviceaccount.com"
    readers = {r["name"]: r for r in resources(i, "gcp:storage/bucketIAMMember:BucketIAMMember")}
    assert {n: r["inputs"] for n, r in readers.items()} == {
        "cloud-run-weights-reader-acme-llm-dev-weights": {
            "bucket": "acme-llm-dev-weights",
            "role": "roles/storage.objectViewer",
            "member": sa,
        },
        "cloud-run-programs-reader": {
            "bucket": "acme-llm-dev-llm-dev-run",
            "role": "roles/storage.objectViewer",
            "member": sa,
        },
    }
    # The one project-level grant is the collector's metric writes (no narrower scope exists for them).
    (project,) = resources(i, "gcp:projects/iAMMember:IAMMember")
    assert project["inputs"] == {"project": "acme-llm-dev", "role": "roles/monitoring.metricWriter", "member": sa}
    assert resources(i, "gcp:secretmanager/secretIamMember:SecretIamMember") == []  # no hub token configured
    # The service and every revision wait for the grants: a revision started before them cannot mount the buckets.
    for typ in (SERVICE, REVISION):
        deps = next(r for r in i["resources"] if r["type"] == typ)["dependencies"]
        assert {r["urn"] for r in readers.values()} | {project["urn"]} <= set(deps), typ
    invokers = [r["name"] for r in i["resources"] if r["type"].endswith("ServiceIamMember")]
    assert invokers == [member_resource("cloud-run-invoker", "group:llm-developers@acme.example")]  # keyed by member


def test_hub_token_accessor_on_the_one_secret_when_configured() -> None:
    i = inv(CLOUD_RUN_FIXTURE)
    (secret,) = resources(i, "gcp:secretmanager/secretIamMember:SecretIamMember")
    assert secret["inputs"] == {
        "project": "acme-llm-prod",
        "secretId": "hf-hub-token",
        "role": "roles/secretmanager.secretAccessor",
        "member": "serviceAccount:llm-prod-run@acme-llm-prod.iam.gserviceaccount.com",
    }
    env = {e["name"]: e for e in vllm_container(template(i))["env"]}
    assert env["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueSource": {"secretKeyRef": {"secret": "hf-hub-token", "version": "3"}},
    }
    assert env["HF_HUB_OFFLINE"]["value"] == "1"


def test_invokers_are_the_configured_members_only() -> None:
    i = inv(CLOUD_RUN_FIXTURE)
    invokers = sorted(
        (r["inputs"]["name"], r["inputs"]["role"], r["inputs"]["member"])
        for r in resources(i, "gcp:cloudrunv2/serviceIamMember:ServiceIamMember")
    )
    assert invokers == [
        ("llm-prod", "roles/run.invoker", "group:llm-clients@acme.example"),
        ("llm-prod", "roles/run.invoker", "serviceAccount:gateway@acme-llm-prod.iam.gserviceaccount.com"),
    ]
    s = service(i)["service"]
    assert s["invokerIamDisabled"] is False and s["ingress"] == "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"


def test_component_refuses_a_public_invoker_even_past_the_config() -> None:
    args = target.serving_args(plan_run(CLOUD_RUN_STACK).resolved.config, plan_run(CLOUD_RUN_STACK).resolved.plan)
    with pytest.raises(ValueError, match="invoker_members: invoker member 'allUsers' is public or not an IAM member"):
        CloudRunServingArgs(**{**args.__dict__, "invoker_members": ("allUsers",)})


# ---- rollout: revisions and traffic as separate steps ------------------------------------------------------------


def test_traffic_names_exactly_the_revisions_the_plan_creates() -> None:
    """C3, on both stacks: each split entry is a revision resource of the plan, by name, with its pool's tag."""
    for stack in (CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE):
        i = inv(stack)
        created = {r["inputs"]["revision"] for r in resources(i, REVISION)}
        assert {e["revision"] for e in split(i)} == created
        assert all(e["type"] == "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION" for e in split(i))
        traffic_deps = set(resources(i, TRAFFIC)[0]["dependencies"])
        assert {r["urn"] for r in resources(i, REVISION)} <= traffic_deps


def test_traffic_split_by_revision_name_and_tag() -> None:
    cfg, plan = plan_run(CLOUD_RUN_FIXTURE).resolved.config, plan_run(CLOUD_RUN_FIXTURE).resolved.plan
    names = target.serving_args(cfg, plan).revision_names()
    assert names["stable"].startswith("llm-prod-qwen3-8b-fp8-2026-11-02-1-")
    assert names["canary"].startswith("llm-prod-qwen3-8b-fp8-2026-11-20-1-") and names["canary"] != names["stable"]
    by_rev = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"
    assert split(inv(CLOUD_RUN_FIXTURE)) == [
        {"type": by_rev, "revision": names["stable"], "percent": 100, "tag": "stable"},
        {"type": by_rev, "revision": names["canary"], "percent": 0, "tag": "canary"},  # dark, reachable by its tag
    ]
    i = inv(CLOUD_RUN_FIXTURE)
    # The service is created with stable's template; each pool's revision is its own resource, canary after stable.
    assert service(i)["initial_template"] == template(i, "stable")
    assert template(i, "canary")["annotations"]["llm-serving.io/release"] == "qwen3-8b-fp8-2026-11-20.1"
    stable_urn = next(r["urn"] for r in resources(i, REVISION) if r["name"].endswith("stable"))
    assert stable_urn in next(r for r in resources(i, REVISION) if r["name"].endswith("canary"))["dependencies"]
    assert all(len(n) <= 63 for n in names.values())


def test_weights_move_traffic_only() -> None:
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:serving"]["stable"]["weight"], v["llm-serving:serving"]["canary"]["weight"] = 95, 5
    _, moved = plan_values(v, CLOUD_RUN_FIXTURE)
    base = inv(CLOUD_RUN_FIXTURE)
    assert [t["percent"] for t in split(moved)] == [95, 5]
    assert resources(moved, REVISION) == resources(base, REVISION)  # no new revision for a weight change


def test_revision_names_survive_a_promotion() -> None:
    """A stable-only stack names the revision the canary stack calls stable; after the promotion (stable takes the
    canary's settings, the canary is removed) stable's revision is the canary's, unchanged."""
    names = target.serving_args(
        plan_run(CLOUD_RUN_FIXTURE).resolved.config, plan_run(CLOUD_RUN_FIXTURE).resolved.plan
    ).revision_names()
    before = values(CLOUD_RUN_FIXTURE)
    del before["llm-serving:serving"]["canary"]
    _, alone = plan_values(before, CLOUD_RUN_FIXTURE)
    assert revision(alone)["revision"] == names["stable"]
    after = values(CLOUD_RUN_FIXTURE)
    serving = after["llm-serving:serving"]
    serving["stable"] = {**serving.pop("canary"), "weight": 100}
    _, promoted = plan_values(after, CLOUD_RUN_FIXTURE)
    assert revision(promoted)["revision"] == names["canary"]
    assert split(promoted) == [
        {
            "type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION",
            "revision": names["canary"],
            "percent": 100,
            "tag": "stable",
        }
    ]


def test_any_rendered_change_names_a_new_revision() -> None:
    cfg, plan = plan_run(CLOUD_RUN_STACK).resolved.config, plan_run(CLOUD_RUN_STACK).resolved.plan
    args = target.serving_args(cfg, plan)
    spec = args.pools[0].revision
    name = svc.revision_name(args.service_name, spec, args.context)
    for change in (
        {"min_instances": 1},
        {"concurrency": 95},
        {"timeout_seconds": 325},
        {"mount_options": spec.mount_options[:-1]},
    ):
        assert svc.revision_name(args.service_name, dataclasses.replace(spec, **change), args.context) != name, change
    other = dataclasses.replace(args.context, programs=programs.programs_volume(args.programs.bucket, (("a.py", "x"),)))
    assert svc.revision_name(args.service_name, spec, other) != name  # new program bytes: a new revision
    assert svc.revision_name(args.service_name, dataclasses.replace(spec, role="canary"), args.context) == name
    assert svc.revision_name(args.service_name, spec, args.context) == name


# ---- the rendered command runs: verifier (gcs) -> [stager ->] vLLM ------------------------------------------------


def _release(folder: Path, revision: str) -> None:
    """A release folder: two files and their manifest, built with verify_release's own functions."""
    from infra.offline.release.stage import hash_file

    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (folder / "sub" / "model.safetensors").write_bytes(os.urandom(1 << 16))
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size, sha, crc = hash_file(path)
        files.append(vr.ManifestFile(path.relative_to(folder).as_posix(), size, sha, crc))
    (folder / vr.MANIFEST_NAME).write_bytes(
        vr.render_manifest(vr.build_manifest("qwen3-8b-fp8", revision, revision, files))
    )


def _upload(gcs: Gcs, folder: Path, prefix: str) -> None:
    client = Gcs.client(gcs.emulator_url)
    bucket = client.bucket(gcs.bucket)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        bucket.blob(f"{prefix}/{path.relative_to(folder).as_posix()}").upload_from_filename(str(path))


def _fake_vllm(bin_dir: Path, record: Path) -> None:
    """A ``vllm`` executable on PATH that records the argv it was exec'ed with."""
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


def _programs_as_uploaded(inventory: dict[str, Any], tmp_path: Path) -> Path:
    """The programs volume as Cloud Run mounts it: the plan's own uploaded objects of the revision's folder."""
    (vol,) = [v for v in template(inventory)["volumes"] if v["name"] == "programs"]
    folder = vol["gcs"]["mountOptions"][0].removeprefix("only-dir=")
    root = tmp_path / "programs"
    root.mkdir()
    for o in resources(inventory, OBJECT):
        name = o["inputs"]["name"]
        if name.startswith(folder + "/"):
            (root / name.removeprefix(folder + "/")).write_text(o["inputs"]["source"]["text"], encoding="utf-8")
    return root


def _run_rendered(
    inventory: dict[str, Any], role: str, replace: dict[str, str], gcs: Gcs, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    c = vllm_container(template(inventory, role))
    root = _programs_as_uploaded(inventory, tmp_path)
    a = [replace.get(x, x) for x in argv(c)]
    a = [sys.executable if x == "python3" else x.replace(naming.CLOUD_RUN_PROGRAMS_ROOT, str(root)) for x in a]
    record = tmp_path / "exec.json"
    _fake_vllm(tmp_path / "bin", record)
    env = {**Gcs.env(gcs.shim_url), "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(a, capture_output=True, text=True, timeout=60, env=env), record


@pytest.fixture
def dev_bucket() -> Iterator[Gcs]:
    with running_emulator("acme-llm-dev-weights") as g:
        yield g


@pytest.fixture
def prod_bucket() -> Iterator[Gcs]:
    with running_emulator("acme-llm-prod-weights") as g:
        yield g


def test_the_verifier_checks_object_metadata_and_execs_vllm(dev_bucket: Gcs, tmp_path: Path) -> None:
    i = inv()
    c = vllm_container(template(i))
    assert c["command"] == ["python3"]
    assert c["args"][:10] == [
        "/opt/llm-serving/verify_release.py",
        "gcs",
        "--bucket",
        "acme-llm-dev-weights",
        "--prefix",
        f"qwen3-8b-fp8/{DEV_REVISION}",
        "--expect-revision",
        DEV_REVISION,
        "--exec",
        "--",
    ]
    local = tmp_path / "release"
    _release(local, DEV_REVISION)
    _upload(dev_bucket, local, f"qwen3-8b-fp8/{DEV_REVISION}")
    proc, record = _run_rendered(i, "stable", {}, dev_bucket, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "verify_release: verified 2 files" in proc.stdout and "(sizes and crc32c from object metadata)" in proc.stdout
    )
    assert json.loads(record.read_text()) == ["serve", *serve_args(c)]
    # Metadata only: the listing and the manifest, never an object's bytes (no alt=media but the manifest's).
    media = [p for m, p, _ in dev_bucket.shim.requests if "alt=media" in p]
    assert media and all(p.split("?")[0].endswith("manifest.json") for p in media), media


def test_a_tampered_release_never_reaches_vllm(dev_bucket: Gcs, tmp_path: Path) -> None:
    i = inv()
    local = tmp_path / "release"
    _release(local, DEV_REVISION)
    (local / "config.json").write_text('{"architectures": ["Other!"]}')  # another object than the manifest lists
    _upload(dev_bucket, local, f"qwen3-8b-fp8/{DEV_REVISION}")
    proc, record = _run_rendered(i, "stable", {}, dev_bucket, tmp_path)
    assert proc.returncode == vr.EXIT_MISMATCH, proc.stdout + proc.stderr
    assert "verify_release: FAILED: 1 problem(s)" in proc.stdout and not record.exists()


def test_staging_verifies_then_copies_in_parallel_then_execs_vllm(prod_bucket: Gcs, tmp_path: Path) -> None:
    i = inv(CLOUD_RUN_FIXTURE)
    mount, staged = f"/weights/qwen3-8b-fp8/{CANARY_REVISION}", f"/staged-weights/qwen3-8b-fp8/{CANARY_REVISION}"
    local_mount, local_staged = tmp_path / "mount", tmp_path / "memory" / "copy"
    _release(local_mount, CANARY_REVISION)  # the mount shows the bucket's objects
    _upload(prod_bucket, local_mount, f"qwen3-8b-fp8/{CANARY_REVISION}")
    proc, record = _run_rendered(
        i, "canary", {mount: str(local_mount), staged: str(local_staged)}, prod_bucket, tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    verified = next(n for n, line in enumerate(lines) if line.startswith("verify_release: verified 2 files"))
    copied = next(n for n, line in enumerate(lines) if line.startswith("stage_weights: copied 3 files"))
    assert verified < copied and "on 16 threads" in lines[copied]
    assert (local_staged / "sub" / "model.safetensors").read_bytes() == (
        local_mount / "sub" / "model.safetensors"
    ).read_bytes()
    assert json.loads(record.read_text())[:3] == ["serve", "--model", str(local_staged)]


# ---- the issue's acceptance points on both stacks -------------------------------------------------------------------


@pytest.mark.parametrize("stack", [CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE])
def test_acceptance_c1_to_c5(stack: str) -> None:
    i = inv(stack)
    plans = plan_run(stack).resolved.plan.pools_of(CloudRunPoolPlan)
    for r in resources(i, REVISION):
        role = r["name"].removeprefix("cloud-run-revision-")
        t, p = r["inputs"]["template"], plans[role].cloud_run
        cold = float(t["annotations"]["llm-serving.io/cold-load-seconds"])
        stream = float(t["annotations"]["llm-serving.io/stream-bound-seconds"])
        timeout = int(t["timeout"].removesuffix("s"))
        low, high = t["scaling"]["minInstanceCount"], t["scaling"]["maxInstanceCount"]
        # C1: where instances can be cold (scale to zero, scale-out), the timeout covers cold load + stream bound.
        assert low == 0 or high > low
        assert cold + stream <= timeout <= 3600
        # C2: the containers sum to the GPU's instance shape.
        limits = [c["resources"]["limits"] for c in t["containers"]]
        cpu = sum(int(x["cpu"]) for x in limits)
        mem = (
            sum(
                int(x["memory"].removesuffix("Gi")) * 1024
                if x["memory"].endswith("Gi")
                else int(x["memory"].removesuffix("Mi"))
                for x in limits
            )
            / 1024
        )
        shape = GPU_SHAPES[t["nodeSelector"]["accelerator"]]
        assert shape.instance_cpu[0] <= cpu <= shape.instance_cpu[1] and (cpu, mem) == (
            p.instance_cpu,
            p.instance_memory_gib,
        )
        assert shape.instance_memory_gib[0] <= mem <= shape.instance_memory_gib[1]
        # C4: no program text inside the revision (test_no_program_text_inside_a_revision has the detail).
        assert max((len(a) for c in t["containers"] for a in argv(c)), default=0) < 100
        # C5: the startup window is at least twice the cold load, within Cloud Run's 1,800 s for GPU services.
        probe = vllm_container(t)["startupProbe"]
        window = probe["initialDelaySeconds"] + probe["periodSeconds"] * probe["failureThreshold"]
        assert 2 * cold <= window and probe["periodSeconds"] * probe["failureThreshold"] <= 1800
    # C3: the split names only revisions the plan creates.
    assert {e["revision"] for e in split(i)} == {r["inputs"]["revision"] for r in resources(i, REVISION)}


# ---- observability ----------------------------------------------------------------------------------------------------


def test_dashboard_and_alerts_select_the_service_and_revision() -> None:
    i = inv(CLOUD_RUN_FIXTURE)
    (dash,) = resources(i, "gcp:monitoring/dashboard:Dashboard")
    assert document("monitoring", "v1").validate("Dashboard", json.loads(dash["inputs"]["dashboardJson"])) == []
    names = target.serving_args(
        plan_run(CLOUD_RUN_FIXTURE).resolved.config, plan_run(CLOUD_RUN_FIXTURE).resolved.plan
    ).revision_names()
    queries = dashboard_queries(dash["inputs"]["dashboardJson"])
    assert queries and all('cluster="__run__",namespace="llm-prod"' in q for q in queries)
    assert any(f'revision_name="{names["canary"]}"' in q for q in queries)
    legends = {
        ds["legendTemplate"]
        for t in json.loads(dash["inputs"]["dashboardJson"])["mosaicLayout"]["tiles"]
        for ds in t["widget"].get("xyChart", {}).get("dataSets", [])
    }
    assert "p95 ${revision_name} ${model_name}" in legends
    alerts = {
        (
            r["inputs"]["userLabels"]["pool"],
            r["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]["alertRule"],
        ): r
        for r in resources(i, "gcp:monitoring/alertPolicy:AlertPolicy")
    }
    assert sorted(alerts) == sorted(
        [
            (role, a)
            for role in ("stable", "canary")
            for a in ("TtftP95OverObjective", "ItlP95OverObjective", "KvCacheSaturated", "ConcurrencyCapAtMaxInstances")
        ]
        + [(role, "NoTrafficOnServingPool") for role in ("stable", "canary")]
        + [("canary", "CanaryTtftWorseThanStable")]
    )
    # The 0 % canary's traffic alert and the canary comparison exist switched off: a weight change enables them in
    # place (components/monitoring/alerts.py).
    assert {
        a: r["inputs"]["enabled"]
        for a, r in alerts.items()
        if a[1] in ("NoTrafficOnServingPool", "CanaryTtftWorseThanStable")
    } == {
        ("stable", "NoTrafficOnServingPool"): True,
        ("canary", "NoTrafficOnServingPool"): False,
        ("canary", "CanaryTtftWorseThanStable"): False,
    }
    q = alerts[("canary", "ConcurrencyCapAtMaxInstances")]["inputs"]["conditions"][0][
        "conditionPrometheusQueryLanguage"
    ]["query"]
    cap = template(inv(CLOUD_RUN_FIXTURE), "canary")["maxInstanceRequestConcurrency"]  # the planner's max-num-seqs
    assert f'revision_name="{names["canary"]}"' in q and f">= {cap}" in q and ">= 4" in q  # concurrency, max instances


def test_a_scale_to_zero_pool_has_no_no_traffic_alert() -> None:
    rules = {
        r["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]["alertRule"]
        for r in resources(inv(), "gcp:monitoring/alertPolicy:AlertPolicy")
    }
    assert rules == {"TtftP95OverObjective", "ItlP95OverObjective", "KvCacheSaturated", "ConcurrencyCapAtMaxInstances"}


def test_emitted_promql_parses(tmp_path: Path) -> None:
    from .test_promql import PROMTOOL, check_expressions, emitted_queries

    if PROMTOOL is None:
        pytest.skip("promtool not installed: `make integration-deps` installs the Debian prometheus package")
    for stack in (CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE):
        exprs = emitted_queries(inv(stack))
        res = check_expressions(exprs, tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr


# ---- determinism --------------------------------------------------------------------------------------------------


def test_two_plans_are_byte_identical(tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert cli.main(["plan", "--stack", CLOUD_RUN_STACK, "--out", str(tmp_path / out)]) == 0
    for name in ("inventory.json", "capacity.json", "policy-report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


# ---- every validation rule, with a failing config --------------------------------------------------------------------


def _stable(v: dict[str, Any]) -> dict[str, Any]:
    return v["llm-serving:serving"]["stable"]


def test_vllm_container_shape_rules() -> None:
    v = values()
    _stable(v).update(cpu=5)
    assert issues(v) == ["llm-serving:serving.stable.cpu: the nvidia-l4 vLLM container takes 4 or 6 or 8 vCPU, got 5"]
    v = values()
    _stable(v).update(memory_gib=30)
    assert issues(v) == [
        "llm-serving:serving.stable.memory_gib: the nvidia-l4 vLLM container with 6 vCPU takes 16-24 GiB, got 30"
    ]
    v = values()
    _stable(v).update(cpu=4, memory_gib=24)
    assert issues(v) == [
        "llm-serving:serving.stable.memory_gib: the nvidia-l4 vLLM container with 4 vCPU takes 16 GiB, got 24"
    ]
    v = values()
    _stable(v).update(memory_gib=23.3)
    (issue,) = issues(v)
    assert issue.startswith("llm-serving:serving.stable.memory_gib: Input should be a multiple of 0.5")
    v = values()
    _stable(v).update(gpu_count=2)
    assert issues(v) == ["llm-serving:serving.stable.gpu_count: Input should be less than or equal to 1 (got 2)"]
    v = values(CLOUD_RUN_FIXTURE)
    _stable(v).update(gpu_zonal_redundancy_disabled=False)
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:serving.stable.gpu_zonal_redundancy_disabled: nvidia-rtx-pro-6000 is offered only with GPU "
        "zonal redundancy turned off: set it to true"
    ]
    assert GPU_SHAPES["nvidia-rtx-pro-6000"].requires_zonal_redundancy_disabled
    assert not GPU_SHAPES["nvidia-l4"].requires_zonal_redundancy_disabled


def test_the_instance_shape_is_the_sum_of_its_containers() -> None:
    """C2's refusal: vLLM 8 vCPU / 32 GiB is a valid container, but with the collector the L4 instance would be
    9 / 32.5 (issue 23); the RTX PRO 6000 at vLLM 20 / 80 would render 21 / 80.5 instead of the documented 20 / 80."""
    v = values()
    _stable(v).update(cpu=8, memory_gib=32)
    assert issues(v) == [
        "llm-serving:serving.stable.cpu: the instance's containers total 9 vCPU / 32.5 GiB (vllm 8 vCPU / 32 GiB + "
        "collector 1 vCPU / 0.5 GiB), but a nvidia-l4 instance takes 4-8 vCPU and 16-32 GiB: lower cpu / memory_gib "
        "so the sum fits"
    ]
    v = values(CLOUD_RUN_FIXTURE)
    for role in ("stable", "canary"):
        v["llm-serving:serving"][role].update(cpu=20, memory_gib=80)
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        f"llm-serving:serving.{role}.cpu: the instance's containers total 21 vCPU / 80.5 GiB (vllm 20 vCPU / 80 GiB + "
        "collector 1 vCPU / 0.5 GiB), but a nvidia-rtx-pro-6000 instance takes 20 vCPU and 80 GiB: lower cpu / "
        "memory_gib so the sum fits"
        for role in ("canary", "stable")
    ]
    v = values(CLOUD_RUN_FIXTURE)
    _stable(v).update(memory_gib=79)
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:serving.stable.memory_gib: the instance's containers total 20 vCPU / 79.5 GiB (vllm 19 vCPU / "
        "79 GiB + collector 1 vCPU / 0.5 GiB), but a nvidia-rtx-pro-6000 instance takes 20 vCPU and 80 GiB: lower "
        "cpu / memory_gib so the sum fits"
    ]


def test_the_gpu_must_be_offered_in_the_region() -> None:
    v = values()
    v["gcp:region"], v["llm-serving:zones"] = "us-west1", ["us-west1-a"]
    found = issues(v)
    assert (
        "llm-serving:serving.stable.gpu: Cloud Run offers nvidia-l4 in asia-south1, asia-southeast1, europe-west1, "
        "europe-west4, us-central1, us-east4 (asia-south1 by invitation), not in us-west1: choose one of those regions "
        "for the stack, or serve this pool on gke"
    ) in found
    assert GPU_SHAPES["nvidia-rtx-pro-6000"].regions is None  # unconfirmed: a precondition (docs/cloud-run.md)


def test_instance_bounds_and_invokers() -> None:
    v = values()
    _stable(v).update(min_instances=2, max_instances=1)
    assert issues(v) == ["llm-serving:serving.stable.max_instances: must be >= min_instances (2), got 1"]
    v = values()
    _stable(v).update(invoker_members=["allUsers", "alice@acme.example"])
    assert issues(v) == [
        "llm-serving:serving.stable.invoker_members[0]: allUsers would let anyone call the service and spend its "
        "GPUs: name principals (user:, group:, serviceAccount:, domain:, principal:, principalSet:)",
        "llm-serving:serving.stable.invoker_members[1]: 'alice@acme.example' is not an IAM member: <type>:<id> with "
        "type user, group, serviceAccount, domain, principal or principalSet",
    ]
    v = values()
    _stable(v).update(invoker_members=[])
    assert issues(v) == [
        "llm-serving:serving.stable.invoker_members: List should have at least 1 item after validation, not 0"
    ]


def test_mount_option_rules() -> None:
    v = values()
    _stable(v)["loading"]["extra_mount_options"] = ["only-dir=other", "max-conns-per-host=10", "max-conns-per-host=20"]
    assert issues(v) == [
        "llm-serving:serving.stable.loading.extra_mount_options[0]: 'only-dir' is set by the program (only-dir = the "
        "release folder, implicit-dirs, enable-buffered-read from buffered_read); remove it",
        "llm-serving:serving.stable.loading.extra_mount_options[2]: 'max-conns-per-host' is given twice",
    ]
    v = values()
    _stable(v)["loading"]["extra_mount_options"] = ["--implicit-dirs"]
    (issue,) = issues(v)
    assert issue.startswith("llm-serving:serving.stable.loading.extra_mount_options[0]: String should match pattern")


def test_cloud_run_section_is_required_and_the_collector_pinned() -> None:
    v = values()
    del v["llm-serving:cloud_run"]
    assert issues(v) == [
        "llm-serving:cloud_run: required when a pool targets cloud_run (stable): the service name, "
        "image repository and metrics collector image"
    ]
    v = values()
    v["llm-serving:cloud_run"]["collector_image"] = (
        "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar:latest"
    )
    (issue,) = issues(v)
    assert issue.startswith("llm-serving:cloud_run.collector_image: String should match pattern '^us-docker")


def test_programs_bucket_can_be_named() -> None:
    v = values()
    v["llm-serving:cloud_run"]["programs_bucket"] = "acme-programs"
    _, planned = plan_values(v, CLOUD_RUN_STACK)
    (bucket,) = resources(planned, "gcp:storage/bucket:Bucket")
    assert bucket["inputs"]["name"] == "acme-programs"
    (vol,) = [x for x in template(planned)["volumes"] if x["name"] == "programs"]
    assert vol["gcs"]["bucket"] == "acme-programs"
    v["llm-serving:cloud_run"]["programs_bucket"] = "Acme"
    (issue,) = issues(v)
    assert issue.startswith("llm-serving:cloud_run.programs_bucket: String should match pattern")


def test_release_must_fit_one_gpu() -> None:
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:releases"][0]["tensor_parallel_size"] = 2
    found = issues(v, CLOUD_RUN_FIXTURE)
    assert (
        "llm-serving:serving.stable.release: release 'qwen3-8b-fp8-2026-11-02.1' runs on tensor_parallel_size 2 "
        "GPUs; a Cloud Run instance attaches 1 (gpu_count): serve it on gke, or release it for one GPU"
    ) in found


def test_service_wide_settings_must_agree() -> None:
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:serving"]["canary"].update(ingress="INGRESS_TRAFFIC_ALL", invoker_members=["group:x@acme.example"])
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:serving.canary.ingress: INGRESS_TRAFFIC_ALL differs from stable's "
        "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER: both pools are revisions of one Cloud Run service, whose ingress "
        "setting is service-wide",
        "llm-serving:serving.canary.invoker_members: differ from stable's: both pools are revisions of one Cloud Run "
        "service, whose invoker IAM is service-wide; list the same members",
    ]


def test_a_canary_equal_to_stable_is_refused() -> None:
    v = values(CLOUD_RUN_FIXTURE)
    serving = v["llm-serving:serving"]
    serving["canary"] = {**serving["stable"], "weight": 0}
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:serving.canary: renders the same revision as stable (same release and settings): after a "
        "promotion, remove the canary pool; the stable tag then points at the revision the canary tested"
    ]


def test_a_split_across_targets_is_refused() -> None:
    v = json.loads(json.dumps(read_stack_file("dev").values))
    v["llm-serving:serving"]["canary"] = {**_stable(values()), "weight": 0}
    v["llm-serving:cloud_run"] = values()["llm-serving:cloud_run"]
    assert (
        "llm-serving:serving.canary.target: stable targets gke and canary cloud_run: a traffic split works within "
        "one target (the Inference Gateway's route or one Cloud Run service's revisions); put both pools on one"
    ) in issues(v, "dev")


def test_prod_rules() -> None:
    v = values(CLOUD_RUN_FIXTURE)
    _stable(v)["min_instances"] = 0
    v["llm-serving:cloud_run"]["protect"] = False
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:cloud_run.protect: prod must protect the Cloud Run service from deletion",
        "llm-serving:serving.stable.min_instances: prod keeps at least 1 warm instance per Cloud Run pool, got 0: "
        "from zero the first request waits a whole cold load",
    ]


def test_images_come_from_the_stack_registry() -> None:
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:releases"][0]["image"] = "docker.io/vllm/vllm-openai@sha256:" + "1" * 64
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:releases[0].image: Cloud Run pools pull from the stack's Artifact Registry repository "
        "us-central1-docker.pkg.dev/acme-llm-prod/serving/..., got docker.io/vllm/vllm-openai@sha256:" + "1" * 64
    ]


def test_staging_memory_rule() -> None:
    # The seed's reasoning, computed: a 10 GiB copy + 16 GiB server + 1 GiB gcsfuse = 27 GiB fits the RTX PRO 6000's
    # 79.5 GiB vLLM container, not an L4's 24 GiB.
    v = values()
    _stable(v)["loading"]["staging"] = {"size_gib": 10, "process_memory_gib": 16}
    assert issues(v) == [
        "llm-serving:serving.stable.loading.staging: the staged copy does not fit the instance: 10 GiB copy + 16 GiB "
        "server + 1 GiB gcsfuse = 27 GiB > memory_gib 24 GiB; read the weights from the volume instead (remove "
        "loading.staging) or choose a shape with more memory for vLLM (nvidia-l4: up to 31.5 GiB, "
        "nvidia-rtx-pro-6000: up to 79.5 GiB)"
    ]
    v = values(CLOUD_RUN_FIXTURE)
    _stable(v)["loading"]["staging"]["size_gib"] = 7
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:serving.stable.loading.staging.size_gib: 7 GiB cannot hold the release's weights (8.8 GiB = P x "
        "b_w, so at least 9 GiB; the staged folder is larger when the checkpoint keeps some tensors at 16 bits)"
    ]


def test_the_startup_margin_keeps_twice_the_estimate() -> None:
    v = values()
    _stable(v)["startup_margin"] = 0.5
    assert issues(v) == [
        "llm-serving:serving.stable.startup_margin: Input should be greater than or equal to 1 (got 0.5)"
    ]


def test_an_uncoverable_cold_load_is_an_error() -> None:
    # 5 MiB/s: 10 s verify + 9.44e9 B / (5 MiB/s) + 90 = 1,901 s; x 2 = 3,803 s needs 759 x 5 s = 3,795 s > 1,800 s.
    v = values()
    _stable(v)["loading"]["throughput_mib_s"] = 5
    cold = METADATA_VERIFY + W / (5 * MiB) + 90
    n = math.ceil((cold * 2 - 10) / 5)
    assert (round(cold), n) == (1901, 759)
    assert issues(v) == [
        f"llm-serving:serving.stable.loading: the startup probe cannot cover the cold-load estimate: {cold:.0f} s x (1 "
        f"+ margin 1) = {cold * 2:.0f} s needs 10 s + {n} x 5 s, but Cloud Run allows failureThreshold x "
        f"periodSeconds of at most 1800 s for GPU services ({n} x 5 s = {n * 5} s); load faster "
        "(loading.throughput_mib_s, loading.staging) or lower startup_margin knowingly (at least 1: the window keeps "
        "twice the estimate)"
    ]


def test_a_stream_longer_than_cloud_runs_timeout_is_an_error() -> None:
    v = values()
    v["llm-serving:contract"]["itl_p95_ms"] = 4000  # 2 s + 1,024 x 4 s = 4,098 s > 3,600 s
    assert issues(v) == [
        "llm-serving:serving.stable.target: the longest allowed stream (4098 s = TTFT objective + max_output_tokens x "
        "ITL objective) exceeds Cloud Run's request timeout of at most 3600 s: Cloud Run would cut the longest "
        "legitimate streams; lower contract.max_output_tokens or serve this pool on gke"
    ]


def test_a_cold_start_plus_the_stream_beyond_cloud_runs_timeout_is_refused() -> None:
    """C1's refusal: the stream alone fits (2 s + 1,024 x 3.3 s = 3,381.2 s), but a request on a cold instance waits
    the 250 s startup window first: ceil(3,631.2) = 3,632 s > 3,600 s. A warm, fixed pool has no cold path."""
    v = values()
    v["llm-serving:contract"]["itl_p95_ms"] = 3300
    assert issues(v) == [
        "llm-serving:serving.stable.min_instances: the pool scales to zero, so a request can wait for an instance's "
        "start: up to its startup window (250 s, the cold load 123 s x (1 + margin 1)) plus the longest stream "
        "(3381 s) = 3632 s, beyond Cloud Run's request timeout of at most 3600 s; keep instances warm (min_instances = "
        "max_instances), load faster or lower contract.max_output_tokens"
    ]
    _stable(v).update(min_instances=1, max_instances=1)
    p = resolve(v).plan.pools["stable"]
    assert isinstance(p, CloudRunPoolPlan) and p.cloud_run.request_timeout_seconds == math.ceil(2 + 1024 * 3.3)


def test_an_unknown_target_names_the_known_ones() -> None:
    v = values()
    _stable(v)["target"] = "cloudrun"
    assert issues(v) == [
        "llm-serving:serving.stable.target: unknown serving target 'cloudrun'; known: gke, cloud_run, vertex"
    ]


def test_gke_keys_are_not_cloud_run_keys() -> None:
    v = values()
    _stable(v)["min_replicas"] = 1
    assert issues(v) == ["llm-serving:serving.stable.min_replicas: unknown key (not part of the schema)"]
