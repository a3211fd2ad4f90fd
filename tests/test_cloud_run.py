"""The Cloud Run target (issue 16): the shipped ``dev-cloudrun`` stack and the prod fixture
(``tests/fixtures/cloud-run/Pulumi.prod-cloudrun.yaml``) planned by the real program under the mock monitor.

Derived values are asserted against hand-written arithmetic (the numbers are spelled out in each test), every
validation rule has a failing config asserting its key path and exact message, the rendered Service body is checked
against Google's run.v2 discovery document, and the release verifier wrapping is executed for real (with a stand-in
``vllm`` on PATH) on a staged release folder.
"""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
from tests import api_mapping as am
from tests.discovery import document

from .conftest import CLOUD_RUN_FIXTURE, CLOUD_RUN_FIXTURES, CLOUD_RUN_STACK, plan_run, resources

SERVICE = "gcp:cloudrunv2/service:Service"
MiB, GiB = 2**20, 2**30
#: Qwen3-8B at FP8 (releases/dev/*.json: catalogue qwen3-8b, fp8): the quantised layers at 1 byte, the embedding and
#: lm_head (untied: 2 x 151,936 x 4,096 = 1,244,659,712 parameters) at bf16's 2 bytes: 8.2e9 + 1,244,659,712 bytes.
W = (8.2e9 - 2 * 151_936 * 4096) * 1 + 2 * 151_936 * 4096 * 2
DEV_REVISION = "db8438d4453c4113736c3290c846f94bb7d08190"
CANARY_REVISION = "5f0e2c1d9b8a7f6e5d4c3b2a1908f7e6d5c4b3a2"


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


def service(inventory: dict[str, Any]) -> dict[str, Any]:
    (s,) = resources(inventory, SERVICE)
    return s["inputs"]


def vllm_container(inputs: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in inputs["template"]["containers"] if c["name"] == "vllm"]
    return c


def serve_args(container: dict[str, Any]) -> list[str]:
    argv = container["commands"] + container["args"]
    i = argv.index("vllm")
    assert argv[i + 1] == "serve"
    return argv[i + 2 :]


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]


# ---- the shipped stack plans without any GKE section --------------------------------------------------------------


def test_dev_cloudrun_has_no_gke_sections_and_plans_with_zero_violations(tmp_path: Path, capsys) -> None:
    v = values()
    assert not {"llm-serving:gke", "llm-serving:gateway", "llm-serving:accelerators"} & set(v)
    assert cli.main(["plan", "--stack", CLOUD_RUN_STACK, "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert "policy: 0 violation(s): 0 mandatory, 0 advisory, " in out
    types = {r["type"] for r in json.loads((tmp_path / "plan" / "inventory.json").read_text())["resources"]}
    assert not {t for t in types if t.startswith(("kubernetes:", "gcp:container", "gcp:compute"))}


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


def test_startup_failure_count_follows_from_the_cold_load_estimate() -> None:
    # Streamed from the Cloud Storage volume at the stated 400 MiB/s: the verifier hashes the mount at
    # min(400, 800 MiB/s x 6 threads) = 400 MiB/s, then vLLM reads it again at 400 MiB/s, then 90 s of init.
    read = W / (400 * MiB)  # 22.52 s
    cold = read + read + 90  # 135.04 s
    required = cold * 1.5  # margin 0.5: 202.55 s
    failures = math.ceil((required - 10) / 5)  # 10 s initial delay, 5 s period: ceil(38.51) = 39
    assert (round(read, 2), round(cold, 2), failures) == (22.52, 135.04, 39)
    run = plan_run(CLOUD_RUN_STACK).resolved.plan.pools["stable"]
    assert isinstance(run, CloudRunPoolPlan)
    assert run.capacity.cold_load_seconds == pytest.approx(cold)
    assert run.cloud_run.probes.startup_window_seconds == 10 + 5 * 39 == 205
    c = vllm_container(service(inv()))
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
    assert service(inv())["template"]["annotations"]["llm-serving.io/cold-load-seconds"] == f"{round(cold, 3):g}"


def test_staged_cold_load_copies_verifies_in_memory_then_reads_the_copy() -> None:
    # Fixture: RTX PRO 6000, 20 vCPU, volume at 800 MiB/s, staged. Copy W at 800 MiB/s; hash the copy at
    # 800 MiB/s x 20 threads; vLLM reads the copy at the stated 2,000 MiB/s; 120 s init.
    copy_s, verify_s, read_s = W / (800 * MiB), W / (800 * 20 * MiB), W / (2000 * MiB)
    cold = copy_s + verify_s + read_s + 120  # 11.26 + 0.56 + 4.50 + 120 = 136.33 s
    failures = math.ceil((cold * 1.5 - 10) / 5)  # ceil(38.90) = 39
    p = plan_run(CLOUD_RUN_FIXTURE).resolved.plan.pools["stable"]
    assert isinstance(p, CloudRunPoolPlan)
    r = p.cloud_run
    assert (r.copy_seconds, r.verify_seconds, r.weights_read_seconds) == pytest.approx((copy_s, verify_s, read_s))
    assert r.cold_load_seconds == pytest.approx(cold) and round(cold, 2) == 136.33
    assert r.probes.startup_failure_threshold == failures == 39
    assert p.model_root == f"/staged-weights/qwen3-8b-fp8/{DEV_REVISION}"


def test_concurrency_is_the_planners_max_num_seqs() -> None:
    # L4: 22.5 GiB x 0.9 - 8.80 GiB weights - 2 GiB overhead = 9.45 GiB of KV; k = 2 x 36 layers x 8 KV heads x
    # 128 x 2 bytes = 147,456 B/token; the mean context 600 + 200 = 800 tokens (50 whole 16-token blocks):
    # floor(9.45 GiB / (147,456 B x 800)) = 86 sequences.
    budget = 22.5 * GiB * 0.9 - W - 2 * GiB
    seqs = math.floor(budget / (147_456 * 800))
    assert seqs == 86
    inputs = service(inv())
    assert inputs["template"]["maxInstanceRequestConcurrency"] == seqs
    assert int(flag(serve_args(vllm_container(inputs)), "--max-num-seqs")) == seqs


def test_concurrency_is_capped_at_cloud_runs_1000() -> None:
    # A 70-token mean context on the 89.4 GiB RTX PRO 6000 leaves room for thousands of sequences: --max-num-seqs is
    # the planner's cap of 1,024, the Cloud Run concurrency Cloud Run's ceiling of 1,000.
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:contract"].update(prompt_tokens={"mean": 50, "p95": 100}, output_tokens={"mean": 20, "p95": 50})
    p = resolve(v, CLOUD_RUN_FIXTURE).plan.pools["stable"]
    assert isinstance(p, CloudRunPoolPlan)
    assert (p.capacity.max_num_seqs, p.cloud_run.concurrency) == (capacity.MAX_NUM_SEQS_CAP, 1000)


def test_request_timeout_covers_the_stream_bound_and_vllm_drains_within_sigterm_grace() -> None:
    # Stream bound = TTFT 2 s + 1,024 tokens x 80 ms = 83.92 s -> 84 s; Cloud Run kills 10 s after SIGTERM, and vLLM
    # needs ~2 s after its drain to exit (3 s kept): the drain gets 10 - 3 = 7 s.
    inputs = service(inv())
    assert inputs["template"]["timeout"] == f"{math.ceil(2 + 1024 * 0.08)}s" == "84s"
    assert flag(serve_args(vllm_container(inputs)), "--shutdown-timeout") == "7"


def test_instance_price_and_cold_start_cost() -> None:
    # GPU-second + (6 + 1 collector) vCPU-seconds + (24 + 0.5 collector) GiB-seconds at the stack's prices.
    second = 0.0001867 + (6 + COLLECTOR_CPU) * 0.000018 + (24 + COLLECTOR_MEMORY_MIB / 1024) * 0.000002
    assert second == pytest.approx(0.0003617)
    r = plan_run(CLOUD_RUN_STACK).resolved.plan.pools["stable"]
    assert isinstance(r, CloudRunPoolPlan)
    assert r.cloud_run.instance_hourly_usd == pytest.approx(3600 * second) == pytest.approx(1.30212)
    assert r.capacity.replica_hourly_usd == pytest.approx(3600 * second)
    assert r.cloud_run.cold_start_usd == pytest.approx(r.capacity.cold_load_seconds * second)
    table = render_table(plan_run(CLOUD_RUN_STACK).resolved.plan)
    assert "$0.0488 per cold start (min instances 0: scale to zero, the first request after idle waits it)" in table
    assert "10 s + 39 x 5 s = 205 s" in table


def test_vllm_args_come_from_the_one_renderer() -> None:
    args = serve_args(vllm_container(service(inv())))
    assert args == list(plan_run(CLOUD_RUN_STACK).resolved.plan.pools["stable"].vllm_args)
    assert args[args.index("--served-model-name") + 1 : args.index("--served-model-name") + 3] == [
        "qwen3-8b-fp8-2026-11-02.1",
        "qwen3-8b",
    ]
    assert flag(args, "--port") == "8080"
    assert flag(args, "--model") == f"/weights/qwen3-8b-fp8/{DEV_REVISION}"
    assert json.loads(flag(args, "--override-generation-config")) == {"max_new_tokens": 1024}
    assert "--no-enable-log-requests" in args and "--load-format" not in args


def test_shape_and_volume_of_the_revision() -> None:
    t = service(inv())["template"]
    c = vllm_container(service(inv()))
    assert c["resources"] == {
        "cpuIdle": False,
        "startupCpuBoost": False,
        "limits": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"},
    }
    assert t["nodeSelector"] == {"accelerator": "nvidia-l4"} and t["gpuZonalRedundancyDisabled"] is True
    assert t["scaling"] == {"minInstanceCount": 0, "maxInstanceCount": 1}
    assert t["volumes"] == [
        {
            "name": "weights",
            "gcs": {
                "bucket": "acme-llm-dev-weights",
                "readOnly": True,
                "mountOptions": [f"only-dir=qwen3-8b-fp8/{DEV_REVISION}", "implicit-dirs", "enable-buffered-read"],
            },
        }
    ]
    assert c["volumeMounts"] == [{"name": "weights", "mountPath": f"/weights/qwen3-8b-fp8/{DEV_REVISION}"}]
    assert {e["name"]: e.get("value") for e in c["envs"]} == {
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }
    (collector,) = [x for x in t["containers"] if x["name"] == "collector"]
    assert collector["dependsOns"] == ["vllm"]
    assert collector["image"].startswith(
        "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar@sha256:"
    )
    assert service(inv())["launchStage"] == "GA"
    assert service(inv(CLOUD_RUN_FIXTURE))["launchStage"] == "BETA"  # RTX PRO 6000 is a Preview GPU


def test_staged_revision_has_an_in_memory_volume_of_the_stated_size() -> None:
    t = service(inv(CLOUD_RUN_FIXTURE))["template"]
    assert t["volumes"][1] == {"name": "staged-weights", "emptyDir": {"medium": "MEMORY", "sizeLimit": "10Gi"}}
    assert vllm_container(service(inv(CLOUD_RUN_FIXTURE)))["volumeMounts"][1] == {
        "name": "staged-weights",
        "mountPath": "/staged-weights",
    }
    assert t["vpcAccess"] == {
        "egress": "ALL_TRAFFIC",
        "networkInterfaces": [{"network": "llm-prod", "subnetwork": "llm-prod-run", "tags": ["llm-serving"]}],
    }


# ---- identity and access --------------------------------------------------------------------------------------------


def test_the_serving_account_reads_the_weights_bucket_only() -> None:
    i = inv()
    sa = "serviceAccount:llm-dev-run@acme-llm-dev.iam.gserviceaccount.com"
    assert service(i)["template"]["serviceAccount"] == "llm-dev-run@acme-llm-dev.iam.gserviceaccount.com"
    (bucket,) = resources(i, "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert bucket["inputs"] == {"bucket": "acme-llm-dev-weights", "role": "roles/storage.objectViewer", "member": sa}
    # The one project-level grant is the collector's metric writes (no narrower scope exists for them).
    (project,) = resources(i, "gcp:projects/iAMMember:IAMMember")
    assert project["inputs"] == {"project": "acme-llm-dev", "role": "roles/monitoring.metricWriter", "member": sa}
    assert resources(i, "gcp:secretmanager/secretIamMember:SecretIamMember") == []  # no hub token configured
    grants = [r for r in i["resources"] if r["type"].endswith(("IAMMember", "IamMember", "IAMBinding", "IamBinding"))]
    assert sorted(r["name"] for r in grants) == [
        "cloud-run-invoker-0",
        "cloud-run-metric-writer",
        "cloud-run-weights-reader-acme-llm-dev-weights",
    ]
    # The service waits for the grants: a revision started before them cannot mount the bucket.
    deps = next(r for r in i["resources"] if r["type"] == SERVICE)["dependencies"]
    assert bucket["urn"] in deps and project["urn"] in deps


def test_hub_token_accessor_on_the_one_secret_when_configured() -> None:
    i = inv(CLOUD_RUN_FIXTURE)
    (secret,) = resources(i, "gcp:secretmanager/secretIamMember:SecretIamMember")
    assert secret["inputs"] == {
        "project": "acme-llm-prod",
        "secretId": "hf-hub-token",
        "role": "roles/secretmanager.secretAccessor",
        "member": "serviceAccount:llm-prod-run@acme-llm-prod.iam.gserviceaccount.com",
    }
    env = {e["name"]: e for e in vllm_container(service(i))["envs"]}
    assert env["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueSource": {"secretKeyRef": {"secret": "hf-hub-token", "version": "3"}},
    }
    assert env["HF_HUB_OFFLINE"]["value"] == "1"


def test_invokers_are_the_configured_members_only() -> None:
    i = inv(CLOUD_RUN_FIXTURE)
    invokers = sorted(
        (r["inputs"]["role"], r["inputs"]["member"])
        for r in resources(i, "gcp:cloudrunv2/serviceIamMember:ServiceIamMember")
    )
    assert invokers == [
        ("roles/run.invoker", "group:llm-clients@acme.example"),
        ("roles/run.invoker", "serviceAccount:gateway@acme-llm-prod.iam.gserviceaccount.com"),
    ]
    s = service(i)
    assert s["invokerIamDisabled"] is False and s["ingress"] == "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"


def test_component_refuses_a_public_invoker_even_past_the_config() -> None:
    args = target.serving_args(plan_run(CLOUD_RUN_STACK).resolved.config, plan_run(CLOUD_RUN_STACK).resolved.plan)
    with pytest.raises(ValueError, match="invoker_members: invoker member 'allUsers' is public or not an IAM member"):
        CloudRunServingArgs(**{**args.__dict__, "invoker_members": ("allUsers",)})


# ---- rollout: tagged revisions ---------------------------------------------------------------------------------------


def test_traffic_split_by_revision_name_and_tag() -> None:
    cfg, plan = plan_run(CLOUD_RUN_FIXTURE).resolved.config, plan_run(CLOUD_RUN_FIXTURE).resolved.plan
    names = target.serving_args(cfg, plan).revision_names()
    assert names["stable"].startswith("llm-prod-qwen3-8b-fp8-2026-11-02-1-")
    assert names["canary"].startswith("llm-prod-qwen3-8b-fp8-2026-11-20-1-") and names["canary"] != names["stable"]
    s = service(inv(CLOUD_RUN_FIXTURE))
    by_rev = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"
    assert s["traffics"] == [
        {"type": by_rev, "revision": names["stable"], "percent": 100, "tag": "stable"},
        {"type": by_rev, "revision": names["canary"], "percent": 0, "tag": "canary"},  # dark, reachable by its tag
    ]
    # The template is the newest pool's: the canary's revision, its release's image and weights.
    assert s["template"]["revision"] == names["canary"]
    assert s["template"]["annotations"]["llm-serving.io/release"] == "qwen3-8b-fp8-2026-11-20.1"
    assert all(len(n) <= 63 for n in names.values())


def test_weights_move_traffic_only() -> None:
    v = values(CLOUD_RUN_FIXTURE)
    v["llm-serving:serving"]["stable"]["weight"], v["llm-serving:serving"]["canary"]["weight"] = 95, 5
    _, moved = plan_values(v, CLOUD_RUN_FIXTURE)
    base = service(inv(CLOUD_RUN_FIXTURE))
    assert [t["percent"] for t in service(moved)["traffics"]] == [95, 5]
    assert service(moved)["template"] == base["template"]  # no new revision for a weight change


def test_revision_names_survive_a_promotion() -> None:
    """A stable-only stack's template names the revision the canary stack's traffic calls stable; after the promotion
    (stable takes the canary's settings, the canary is removed) the template is the canary's revision unchanged."""
    names = target.serving_args(
        plan_run(CLOUD_RUN_FIXTURE).resolved.config, plan_run(CLOUD_RUN_FIXTURE).resolved.plan
    ).revision_names()
    before = values(CLOUD_RUN_FIXTURE)
    del before["llm-serving:serving"]["canary"]
    _, alone = plan_values(before, CLOUD_RUN_FIXTURE)
    assert service(alone)["template"]["revision"] == names["stable"]
    after = values(CLOUD_RUN_FIXTURE)
    serving = after["llm-serving:serving"]
    serving["stable"] = {**serving.pop("canary"), "weight": 100}
    _, promoted = plan_values(after, CLOUD_RUN_FIXTURE)
    assert service(promoted)["template"]["revision"] == names["canary"]
    assert service(promoted)["traffics"] == [
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
    import dataclasses

    for change in (
        {"min_instances": 1},
        {"concurrency": 95},
        {"timeout_seconds": 85},
        {"mount_options": spec.mount_options[:-1]},
    ):
        assert svc.revision_name(args.service_name, dataclasses.replace(spec, **change), args.context) != name, change
    assert svc.revision_name(args.service_name, spec, args.context) == name


# ---- the verifier runs before vLLM, for real ------------------------------------------------------------------------


def _release(folder: Path, revision: str) -> None:
    """A staged release folder: two files and their manifest, built with verify_release's own functions."""
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


def _fake_vllm(bin_dir: Path, record: Path) -> None:
    """A ``vllm`` executable on PATH that records the argv it was exec'ed with."""
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


def _run_rendered(
    container: dict[str, Any], replace: dict[str, str], tmp_path: Path
) -> tuple[subprocess.CompletedProcess, Path]:
    argv = [replace.get(a, a) for a in container["commands"] + container["args"]]
    argv[0] = sys.executable if argv[0] == "python3" else argv[0]
    argv = [sys.executable if a == "python3" else a for a in argv]
    record = tmp_path / "exec.json"
    _fake_vllm(tmp_path / "bin", record)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env), record


def test_the_verifier_wraps_vllm_and_execs_it_after_a_match(tmp_path: Path) -> None:
    c = vllm_container(service(inv()))
    mount = f"/weights/qwen3-8b-fp8/{DEV_REVISION}"
    assert c["commands"] == ["python3"]
    assert c["args"][:2] == ["-c", svc.VERIFY_SCRIPT.read_text(encoding="utf-8")]  # the very same verifier code
    assert c["args"][2:11] == [
        "dir",
        "--path",
        mount,
        "--workers",
        "6",
        "--expect-revision",
        DEV_REVISION,
        "--exec",
        "--",
    ]
    assert len(c["args"][1].encode()) < svc.MAX_ARG_BYTES  # one execve argument (MAX_ARG_STRLEN)
    local = tmp_path / "mount"
    _release(local, DEV_REVISION)
    proc, record = _run_rendered(c, {mount: str(local)}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verify_release: verified 2 files" in proc.stdout
    served = serve_args(vllm_container(service(inv())))
    assert json.loads(record.read_text()) == ["serve", *[str(local) if a == mount else a for a in served]]


def test_a_tampered_release_never_reaches_vllm(tmp_path: Path) -> None:
    c = vllm_container(service(inv()))
    mount = f"/weights/qwen3-8b-fp8/{DEV_REVISION}"
    local = tmp_path / "mount"
    _release(local, DEV_REVISION)
    (local / "config.json").write_text('{"architectures": ["Other"]}')  # same size class, other bytes
    proc, record = _run_rendered(c, {mount: str(local)}, tmp_path)
    assert proc.returncode == vr.EXIT_MISMATCH, proc.stdout
    assert "verify_release: FAILED: 1 problem(s)" in proc.stdout and not record.exists()


def test_staging_copies_then_verifies_the_copy_then_execs_vllm(tmp_path: Path) -> None:
    c = vllm_container(service(inv(CLOUD_RUN_FIXTURE)))
    mount, staged = f"/weights/qwen3-8b-fp8/{CANARY_REVISION}", f"/staged-weights/qwen3-8b-fp8/{CANARY_REVISION}"
    assert c["args"][:4] == ["-c", svc.STAGE_SCRIPT.read_text(encoding="utf-8"), mount, staged]
    assert c["args"][4:8] == ["python3", "-c", svc.VERIFY_SCRIPT.read_text(encoding="utf-8"), "dir"]
    assert c["args"][8:10] == ["--path", staged]
    local_mount, local_staged = tmp_path / "mount", tmp_path / "memory" / "copy"
    _release(local_mount, CANARY_REVISION)
    proc, record = _run_rendered(c, {mount: str(local_mount), staged: str(local_staged)}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stage_weights: copied 3 files" in proc.stdout and "verify_release: verified 2 files" in proc.stdout
    assert (local_staged / "sub" / "model.safetensors").read_bytes() == (
        local_mount / "sub" / "model.safetensors"
    ).read_bytes()
    assert json.loads(record.read_text())[:3] == ["serve", "--model", str(local_staged)]


# ---- the Service body against Google's run.v2 discovery document ------------------------------------------------------


@pytest.mark.parametrize("stack", [CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE])
def test_service_body_validates_against_run_v2(stack: str) -> None:
    doc = document("run", "v2")
    body = am.cloud_run_service_body(service(inv(stack)))
    assert (
        doc.validate(
            "GoogleCloudRunV2Service", body, required=("template", "template.containers[].image", "traffic[].type")
        )
        == []
    )
    assert am.enum_problems(stack, inv(stack)) == []
    assert am.unmapped_enum_like_inputs(inv(stack)) == set()


def test_a_broken_service_body_fails_validation() -> None:
    doc = document("run", "v2")
    body = am.cloud_run_service_body(service(inv()))
    body["ingres"] = "INGRESS_TRAFFIC_ALL"
    body["traffic"][0]["type"] = "REVISION"
    body["template"]["maxInstanceRequestConcurrency"] = "96"
    assert doc.validate("GoogleCloudRunV2Service", body) == [
        "$.ingres: unknown field (GoogleCloudRunV2Service has no field 'ingres'); did you mean 'ingress'?",
        '$.template.maxInstanceRequestConcurrency: expected integer (int32), got string "96"',
        '$.traffic[0].type: "REVISION" is not a value of GoogleCloudRunV2TrafficTarget.type; allowed: '
        + ", ".join(doc.enum_values("GoogleCloudRunV2TrafficTarget", "type")),
    ]


def test_config_choices_are_values_the_api_lists() -> None:
    import typing

    from infra.targets.cloud_run.config import CloudRunPool, DirectVpcEgress

    doc = document("run", "v2")
    assert set(typing.get_args(CloudRunPool.model_fields["ingress"].annotation)) <= set(
        doc.enum_values("GoogleCloudRunV2Service", "ingress")
    )
    assert set(typing.get_args(DirectVpcEgress.model_fields["egress"].annotation)) <= set(
        doc.enum_values("GoogleCloudRunV2VpcAccess", "egress")
    )


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
        + [("stable", "NoTrafficOnServingPool")]
    )  # the 0 % canary gets no traffic alert, no canary comparison
    q = alerts[("canary", "ConcurrencyCapAtMaxInstances")]["inputs"]["conditions"][0][
        "conditionPrometheusQueryLanguage"
    ]["query"]
    # concurrency: floor((89.4 GiB x 0.9 - 8.80 GiB weights - 2 GiB) / (147,456 B x 800)) = 634; max instances 2
    assert f'revision_name="{names["canary"]}"' in q and ">= 634" in q and ">= 2" in q


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


def test_gpu_shape_rules() -> None:
    v = values()
    _stable(v).update(cpu=5)
    assert issues(v) == ["llm-serving:serving.stable.cpu: nvidia-l4 instances take 4 or 6 or 8 vCPU, got 5"]
    v = values()
    _stable(v).update(memory_gib=30)
    assert issues(v) == ["llm-serving:serving.stable.memory_gib: nvidia-l4 with 6 vCPU takes 16-24 GiB, got 30"]
    v = values()
    _stable(v).update(cpu=4, memory_gib=24)
    assert issues(v) == ["llm-serving:serving.stable.memory_gib: nvidia-l4 with 4 vCPU takes 16 GiB, got 24"]
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
    # The seed's reasoning, computed: a 10 GiB copy + 16 GiB server + 1 GiB gcsfuse = 27 GiB fits RTX PRO 6000's
    # 80 GiB, not an L4's 24 GiB.
    v = values()
    _stable(v)["loading"]["staging"] = {"size_gib": 10, "process_memory_gib": 16}
    assert issues(v) == [
        "llm-serving:serving.stable.loading.staging: the staged copy does not fit the instance: 10 GiB copy + 16 GiB "
        "server + 1 GiB gcsfuse = 27 GiB > memory_gib 24 GiB; read the weights from the volume instead (remove "
        "loading.staging) or choose a shape with more memory (nvidia-l4: up to 32 GiB, nvidia-rtx-pro-6000: up to "
        "80 GiB)"
    ]
    v = values(CLOUD_RUN_FIXTURE)
    _stable(v)["loading"]["staging"]["size_gib"] = 7
    assert issues(v, CLOUD_RUN_FIXTURE) == [
        "llm-serving:serving.stable.loading.staging.size_gib: 7 GiB cannot hold the release's weights (8.8 GiB = P x "
        "b_w, so at least 9 GiB; the staged folder is larger when the checkpoint keeps some tensors at 16 bits)"
    ]


def test_an_uncoverable_cold_load_is_an_error() -> None:
    # 5 MiB/s: 2 x 9.44e9 / (5 MiB/s) + 90 = 3,693 s; x 1.5 = 5,540 s needs 1,106 x 5 s = 5,530 s > Cloud Run's 1,800 s.
    v = values()
    _stable(v)["loading"]["throughput_mib_s"] = 5
    cold = 2 * W / (5 * MiB) + 90
    n = math.ceil((cold * 1.5 - 10) / 5)
    assert (round(cold), n) == (3693, 1106)
    assert issues(v) == [
        f"llm-serving:serving.stable.loading: the startup probe cannot cover the cold-load estimate: {cold:.0f} s x (1 "
        f"+ margin 0.5) = {cold * 1.5:.0f} s needs 10 s + {n} x 5 s, but Cloud Run allows failureThreshold x "
        f"periodSeconds of at most 1800 s for GPU services ({n} x 5 s = {n * 5} s); load faster "
        "(loading.throughput_mib_s, loading.staging) or lower startup_margin knowingly"
    ]


def test_a_stream_longer_than_cloud_runs_timeout_is_an_error() -> None:
    v = values()
    v["llm-serving:contract"]["itl_p95_ms"] = 4000  # 2 s + 1,024 x 4 s = 4,098 s > 3,600 s
    assert issues(v) == [
        "llm-serving:serving.stable.target: the longest allowed stream (4098 s = TTFT objective + max_output_tokens x "
        "ITL objective) exceeds Cloud Run's request timeout of at most 3600 s: Cloud Run would cut the longest "
        "legitimate streams; lower contract.max_output_tokens or serve this pool on gke"
    ]


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
