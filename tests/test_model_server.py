"""The vLLM ModelServer : derived vLLM flags, probe windows, scale-down protocol, pool diff, isolation.

Tests start from the real stack plans (``plans`` fixture) and assert what the code derives from the planner
and the contract; config rules are checked with a bad input each (exact key path + message, nothing
registered)."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.naming import deployment_name, weights_mount_path
from components.serving.model_server import GOOGLE_API_RANGES, PROBE_SCRIPT, VERIFY_SCRIPT
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.stackfile import ROOT, read_stack_file
from infra.planning import capacity
from infra.planning import probes as probes_mod
from infra.planning.plan import release_info
from infra.planning.vllm_args import render_vllm_args, streamer_extra_config
from infra.targets.gke.planning import gke_vllm_inputs
from tests.conftest import GKE_STACKS, STACKS, one, resources, serving_roles

from .conftest import load_config, resolve_values

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
MODEL_SERVER = "llm-serving:serving:ModelServer"


# ---- helpers ---------------------------------------------------------------------------------------------


def deployment(inv: dict[str, Any], role: str) -> dict[str, Any]:
    return one(inv, DEPLOYMENT, f"vllm-{role}-deployment")


def container(dep: dict[str, Any]) -> dict[str, Any]:
    (c,) = dep["inputs"]["spec"]["template"]["spec"]["containers"]
    return c


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, f"{name} appears {args.count(name)} times in {args}"
    return args[args.index(name) + 1]


def pool_cases(plans) -> list[tuple[str, str]]:
    return [(s, role) for s in STACKS for role, _ in plans[s][0].pools()]


def leaf_diff(a: Any, b: Any, path: str = "") -> dict[str, tuple[Any, Any]]:
    """Every leaf path where two JSON documents differ (lists by index, dicts by key)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for k in sorted(set(a) | set(b)):
            out.update(leaf_diff(a.get(k), b.get(k), f"{path}.{k}" if path else k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = {}
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out.update(leaf_diff(x, y, f"{path}[{i}]"))
        return out
    return {} if a == b else {path: (a, b)}


# ---- vLLM flags ------------------------------------------------------------------------------------------


def test_max_num_seqs_and_batched_tokens_are_the_planners(plans):
    for stack, role in pool_cases(plans):
        _, plan, inv = plans[stack]
        args = container(deployment(inv, role))["args"]
        p = plan.pools[role].capacity
        assert int(flag(args, "--max-num-seqs")) == p.max_num_seqs, (stack, role)
        assert int(flag(args, "--max-num-batched-tokens")) == p.max_num_batched_tokens, (stack, role)
        # The planner's concurrency is the KV budget at the mean context, capped: not vLLM's default of 256.
        assert p.max_num_seqs == min(p.max_seqs_at_mean_context, capacity.MAX_NUM_SEQS_CAP)


def test_release_limits_and_explicit_scheduler_switches(plans):
    for stack, role in pool_cases(plans):
        cfg, _, inv = plans[stack]
        pool = dict(cfg.pools())[role]
        rel = cfg.release(pool.release)
        c = container(deployment(inv, role))
        args = c["args"]
        assert c["command"] == ["vllm", "serve"]
        assert flag(args, "--served-model-name") == rel.release
        assert int(flag(args, "--tensor-parallel-size")) == rel.tensor_parallel_size
        assert int(flag(args, "--max-model-len")) == rel.max_model_len
        assert float(flag(args, "--gpu-memory-utilization")) == pool.gpu_memory_utilization
        assert flag(args, "--port") == "8000"
        for switch in (
            "--enable-chunked-prefill",
            "--enable-prefix-caching",
            "--no-enable-log-requests",
            "--no-enable-log-outputs",
        ):
            assert args.count(switch) == 1, switch
        assert flag(args, "--dtype") == rel.dtype and flag(args, "--kv-cache-dtype") == rel.kv_cache_dtype
        assert flag(args, "--quantization") == rel.quantization


@pytest.mark.parametrize(
    "stack,role,path",
    [("prod", "stable", "gcs_streaming"), ("staging", "stable", "hyperdisk_ml"), ("dev", "stable", "gcs_fuse")],
)
def test_model_location_follows_the_loading_path(plans, stack, role, path):
    cfg, _, inv = plans[stack]
    pool = dict(cfg.pools())[role]
    assert pool.loading.path == path
    rel = cfg.release(pool.release)
    spec = deployment(inv, role)["inputs"]["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    weights = [v for v in spec["volumes"] if v["name"] == "weights"]
    if path == "gcs_streaming":
        assert flag(args, "--model") == f"gs://{rel.weights_bucket}/{rel.weights_prefix}/"
        assert flag(args, "--load-format") == "runai_streamer"
        extra = json.loads(flag(args, "--model-loader-extra-config"))
        # TP 2: each rank streams its own shards.
        assert extra == {"concurrency": pool.loading.streamer_concurrency, "distributed": True}
        assert weights == []
    else:
        # Mounted at /weights/<model>/<revision>: the root vLLM reports names the revision, as a gs:// URI does.
        assert flag(args, "--model") == f"/weights/{rel.weights_prefix}" and "--load-format" not in args
        (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "weights"]
        assert mount == {"name": "weights", "mountPath": f"/weights/{rel.weights_prefix}", "readOnly": True}
        (vol,) = weights
        if path == "hyperdisk_ml":
            claims = [
                r["inputs"]["metadata"]["name"] for r in resources(inv, "kubernetes:core/v1:PersistentVolumeClaim")
            ]
            assert vol["persistentVolumeClaim"]["claimName"] in claims
            assert vol["persistentVolumeClaim"]["readOnly"] is True
        else:
            assert vol["csi"]["driver"] == "gcsfuse.csi.storage.gke.io" and vol["csi"]["readOnly"] is True
            assert vol["csi"]["volumeAttributes"] == {
                "bucketName": rel.weights_bucket,
                "mountOptions": f"implicit-dirs,only-dir={rel.weights_prefix}",
            }
            assert (
                deployment(inv, role)["inputs"]["spec"]["template"]["metadata"]["annotations"]["gke-gcsfuse/volumes"]
                == "true"
            )


def test_streamer_is_distributed_only_with_tensor_parallelism():
    assert json.loads(streamer_extra_config(16, 1)) == {"concurrency": 16}
    assert json.loads(streamer_extra_config(8, 4)) == {"concurrency": 8, "distributed": True}


def test_speculative_option_renders(plans):
    cfg, plan, _ = plans["dev"]
    doc = cfg.serving.stable.model_dump()
    doc["model_server"].update(speculative={"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4})
    pool = type(cfg.serving.stable).model_validate(doc, strict=False)
    args = render_vllm_args(
        gke_vllm_inputs(cfg.release(pool.release), pool, plan.pools["stable"].capacity, 60, "qwen3-8b", 1024)
    )
    assert json.loads(flag(args, "--speculative-config")) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
    }
    assert "--enable-lora" not in args and "--lora-modules" not in args


def test_every_pool_serves_the_public_name_after_its_release_id_and_caps_output(plans):
    for stack, role in pool_cases(plans):
        cfg, _, inv = plans[stack]
        args = container(deployment(inv, role))["args"]
        i = args.index("--served-model-name")
        # Both names follow the one flag (vLLM takes nargs="+"); the release id first: responses name it.
        assert args[i + 1 : i + 3] == [dict(cfg.pools())[role].release, cfg.serving.model_name]
        assert args[i + 3].startswith("--")
        assert json.loads(flag(args, "--override-generation-config")) == {
            "max_new_tokens": cfg.contract.max_output_tokens
        }
        assert "--enable-server-load-tracking" in args


# ---- probes and the scale-down protocol -------------------------------------------------------------------


def test_startup_window_covers_the_cold_load_estimate_with_the_margin(plans):
    for stack, role in pool_cases(plans):
        cfg, plan, inv = plans[stack]
        o = dict(cfg.pools())[role].model_server
        probe = container(deployment(inv, role))["startupProbe"]
        window = probe["periodSeconds"] * probe["failureThreshold"]
        required = plan.pools[role].capacity.cold_load_seconds * (1 + o.startup_margin)
        assert probe["exec"]["command"][2] == "startup"
        assert window >= required, (stack, role)
        assert window - probe["periodSeconds"] < required, "the window is the smallest that covers the estimate"
        assert window <= o.max_startup_seconds


def test_grace_period_covers_prestop_plus_the_longest_stream(plans):
    for stack, role in pool_cases(plans):
        cfg, _, inv = plans[stack]
        pod = deployment(inv, role)["inputs"]["spec"]["template"]["spec"]
        c = pod["containers"][0]
        pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        bound = cfg.contract.stream_bound_seconds
        assert bound == (cfg.contract.ttft_p95_ms + cfg.contract.max_output_tokens * cfg.contract.itl_p95_ms) / 1000
        assert pod["terminationGracePeriodSeconds"] >= pre_stop + bound
        # vLLM drains (rather than aborts) in-flight streams for at least the stream bound after SIGTERM,
        # and the kubelet waits for that drain.
        drain = int(flag(c["args"], "--shutdown-timeout"))
        assert bound <= drain < bound + 1
        assert pod["terminationGracePeriodSeconds"] >= pre_stop + drain


def test_probes_check_identity_and_only_startup_generates(plans):
    for stack, role in pool_cases(plans):
        cfg, _plan, inv = plans[stack]
        pool = dict(cfg.pools())[role]
        rel = cfg.release(pool.release)
        dep = deployment(inv, role)
        c = container(dep)
        mount = next(m for m in c["volumeMounts"] if m["name"] == "scripts")
        script = f"{mount['mountPath']}/probe.py"
        mounted = pool.loading.path != "gcs_streaming"
        root = f"/weights/{rel.weights_prefix}" if mounted else rel.weights_uri
        assert flag(c["args"], "--model") == root
        for kind, mode in (("startupProbe", "startup"), ("readinessProbe", "readiness")):
            probe = c[kind]
            cmd = probe["exec"]["command"]
            assert cmd[:3] == ["python3", script, mode]
            assert flag(cmd, "--port") == "8000" and flag(cmd, "--release-id") == rel.release
            assert flag(cmd, "--public-name") == cfg.serving.model_name
            assert flag(cmd, "--model-root") == root and flag(cmd, "--max-model-len") == str(rel.max_model_len)
            assert int(flag(cmd, "--deadline-seconds")) < probe["timeoutSeconds"]
        startup = c["startupProbe"]["exec"]["command"]
        # The manifest on a mounted volume proves the revision; a gs:// stream has no file to read.
        if mounted:
            assert flag(startup, "--manifest") == f"{root}/manifest.json"
            assert flag(startup, "--expect-revision") == rel.model_revision
        else:
            assert "--manifest" not in startup
        # Startup's one generated token gets 3 x the TTFT objective (floor 4 s); readiness never generates.
        assert int(flag(startup, "--deadline-seconds")) == max(4, math.ceil(3 * cfg.contract.ttft_p95_ms / 1000))
        r = c["readinessProbe"]
        assert r["timeoutSeconds"] < r["periodSeconds"] and r["failureThreshold"] == 3
        live = c["livenessProbe"]
        lcmd = live["exec"]["command"]
        assert lcmd[:3] == ["python3", script, "liveness"]
        # Stall window: 60 s, or 10 TTFT objectives if longer; the state file sits on the /tmp emptyDir.
        assert int(flag(lcmd, "--stall-seconds")) == max(60, math.ceil(10 * cfg.contract.ttft_p95_ms / 1000))
        assert flag(lcmd, "--state-file").startswith("/tmp/")
        assert live["periodSeconds"] == 10 and live["failureThreshold"] == 2
        # The ConfigMap ships exactly the repository's scripts; their hash rolls the pods when one changes.
        files = {"probe.py": PROBE_SCRIPT.read_text(), "verify_release.py": VERIFY_SCRIPT.read_text()}
        cm = one(inv, CONFIG_MAP, f"vllm-{role}-scripts")["inputs"]
        assert cm["data"] == files
        vol = next(v for v in dep["inputs"]["spec"]["template"]["spec"]["volumes"] if v["name"] == "scripts")
        assert vol["configMap"]["name"] == cm["metadata"]["name"]
        ann = dep["inputs"]["spec"]["template"]["metadata"]["annotations"]
        digest = hashlib.sha256(
            b"probe.py\0"
            + files["probe.py"].encode()
            + b"\0verify_release.py\0"
            + files["verify_release.py"].encode()
            + b"\0"
        ).hexdigest()
        assert ann["llm-serving.io/scripts-sha256"] == digest


def test_startup_threshold_is_an_error_when_it_cannot_be_covered():
    assert probes_mod.startup_failure_threshold(100, 0.5, 10, 1800) == 15
    with pytest.raises(probes_mod.ProbeError, match=r"100 s x \(1 \+ margin 0.5\) = 150 s needs 15 x 10 s = 150 s"):
        probes_mod.startup_failure_threshold(100, 0.5, 10, 120)


# ---- rollout, replicas, disruption -----------------------------------------------------------------------


def test_rollout_replicas_and_disruption_budget(plans):
    for stack, role in pool_cases(plans):
        cfg, _, inv = plans[stack]
        pool = dict(cfg.pools())[role]
        dep = deployment(inv, role)
        spec = dep["inputs"]["spec"]
        assert spec["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": capacity.ROLLOUT_SURGE_REPLICAS, "maxUnavailable": 0},
        }
        assert spec["replicas"] == pool.min_replicas
        assert dep["options"]["ignore_changes"] == ["spec.replicas"]  # the HPA owns the live count
        startup = spec["template"]["spec"]["containers"][0]["startupProbe"]
        assert spec["progressDeadlineSeconds"] > startup["periodSeconds"] * startup["failureThreshold"]
        pdb = one(inv, PDB, f"vllm-{role}-pdb")["inputs"]["spec"]
        assert pdb["maxUnavailable"] == capacity.FAILURE_HEADROOM_REPLICAS
        assert pdb["selector"] == spec["selector"]
        assert pdb["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_gpus_placement_and_resources(plans):
    for stack, role in pool_cases(plans):
        cfg, _, inv = plans[stack]
        pool = dict(cfg.pools())[role]
        rel = cfg.release(pool.release)
        pod = deployment(inv, role)["inputs"]["spec"]["template"]["spec"]
        res = pod["containers"][0]["resources"]
        assert res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"] == str(rel.tensor_parallel_size)
        assert res["requests"]["memory"] == res["limits"]["memory"] == f"{pool.model_server.memory_gib}Gi"
        assert "cpu" not in res["limits"]
        assert pod["nodeSelector"] == {"llm-serving.io/accelerator": pool.accelerator}
        assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in pod[
            "tolerations"
        ]
        (spread,) = pod["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
        assert spread["labelSelector"] == deployment(inv, role)["inputs"]["spec"]["selector"]
        assert spread["whenUnsatisfiable"] == "DoNotSchedule"
        shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{pool.model_server.shm_gib}Gi"}


# ---- identity: labels, annotations, and the stable/canary diff -------------------------------------------


def test_labels_and_release_identity_annotations(plans):
    for stack, role in pool_cases(plans):
        cfg, _, inv = plans[stack]
        rel = cfg.release(dict(cfg.pools())[role].release)
        dep = deployment(inv, role)["inputs"]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        assert labels["llm-serving.io/pool"] == role and labels["llm-serving.io/release"] == rel.release
        assert labels["inference.networking.k8s.io/engine-type"] == "vllm"
        assert labels["app.kubernetes.io/instance"] == deployment_name(role) == dep["metadata"]["name"]
        for meta in (dep["metadata"], dep["spec"]["template"]["metadata"]):
            ann = meta["annotations"]
            assert ann["llm-serving.io/image-digest"] == rel.digest
            assert ann["llm-serving.io/model-revision"] == rel.model_revision
            assert ann["llm-serving.io/tokenizer-revision"] == rel.tokenizer_revision
            assert ann["llm-serving.io/weight-manifest"] == rel.weight_manifest
            assert ann["llm-serving.io/sampling-defaults-version"] == str(rel.sampling_defaults_version)
        assert container(deployment(inv, role))["image"] == rel.image and "@sha256:" in rel.image


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stable_and_canary_differ_only_in_release_and_role_derived_fields(plans, stack):
    """The two pools of dev and prod share every pool setting except the release: their Deployments may differ
    only where a value is derived from the release identity or is the pool's own name."""
    cfg, _, inv = plans[stack]
    a, b = cfg.release(cfg.serving.stable.release), cfg.release(cfg.serving.canary.release)
    diff = leaf_diff(deployment(inv, "stable")["inputs"], deployment(inv, "canary")["inputs"])

    # Substituting the stable release's identity and the role name must turn every differing value into the
    # canary's: nothing else may differ.
    subs = [
        (a.release, b.release),
        (a.model_revision, b.model_revision),
        (a.tokenizer_revision, b.tokenizer_revision),
        (a.digest, b.digest),
        (a.image, b.image),
        ("vllm-stable", "vllm-canary"),
        ("llm-serving-stable", "llm-serving-canary"),
    ]
    whole = {str(a.sampling_defaults_version): str(b.sampling_defaults_version), "stable": "canary"}
    for path, (x, y) in diff.items():
        assert isinstance(x, str), path
        z = whole.get(x, x)
        for old, new in subs:
            z = z.replace(old, new)
        assert z == y, f"{path}: {x!r} -> {y!r} is not derived from the release or role"

    paths = set(diff)
    ra, rb = release_info(a).annotations(), release_info(b).annotations()
    release_keys = [k for k, v in ra.items() if v != rb[k]]
    tmpl = "spec.template"
    expected = {
        # role-derived
        "metadata.name",
        "metadata.namespace",
        "metadata.labels.app.kubernetes.io/instance",
        "metadata.labels.llm-serving.io/pool",
        "spec.selector.matchLabels.app.kubernetes.io/instance",
        f"{tmpl}.metadata.labels.app.kubernetes.io/instance",
        f"{tmpl}.metadata.labels.llm-serving.io/pool",
        f"{tmpl}.spec.topologySpreadConstraints[0].labelSelector.matchLabels.app.kubernetes.io/instance",
        # release-derived
        "metadata.labels.llm-serving.io/release",
        f"{tmpl}.metadata.labels.llm-serving.io/release",
        *(f"metadata.annotations.{k}" for k in release_keys),
        *(f"{tmpl}.metadata.annotations.{k}" for k in release_keys),
        f"{tmpl}.spec.containers[0].image",
    }
    assert expected <= paths
    rest = paths - expected
    args_idx = {p for p in rest if p.startswith(f"{tmpl}.spec.containers[0].args[")}
    probes = ("startupProbe", "readinessProbe")
    cmd_idx = {p for p in rest if any(p.startswith(f"{tmpl}.spec.containers[0].{k}.exec.command[") for k in probes)}
    mount_idx = {p for p in rest if p.startswith(f"{tmpl}.spec.containers[0].volumeMounts[")}
    vol_idx = {p for p in rest if p.startswith(f"{tmpl}.spec.volumes[")}
    # The verifier checks each pool's own release: its image and the release's folder / path and revision.
    init = f"{tmpl}.spec.initContainers[0]"
    init_idx = {p for p in rest if p.startswith(f"{init}.command[") or p.startswith(f"{init}.volumeMounts[")}
    assert f"{init}.image" in rest
    assert rest == args_idx | cmd_idx | mount_idx | vol_idx | init_idx | {f"{init}.image"}
    i_a = deployment(inv, "stable")["inputs"]["spec"]["template"]["spec"]["initContainers"][0]
    changed_init = {i_a["command"][int(p.rsplit("[", 1)[1][:-1]) - 1] for p in init_idx if ".command[" in p}
    assert changed_init <= {"--prefix", "--path", "--expect-revision"} and "--expect-revision" in changed_init
    c_a, c_b = container(deployment(inv, "stable")), container(deployment(inv, "canary"))
    changed_flags = {c_a["args"][int(p.rsplit("[", 1)[1][:-1]) - 1] for p in args_idx}
    # Only the model location (it names the revision, streamed or mounted) and the release's served name change.
    assert changed_flags == {"--served-model-name", "--model"}
    changed_probe_flags = {c_a[p.split(".")[4]]["exec"]["command"][int(p.rsplit("[", 1)[1][:-1]) - 1] for p in cmd_idx}
    assert changed_probe_flags <= {"--release-id", "--model-root", "--expect-revision", "--manifest"}
    assert {"--release-id", "--model-root"} <= changed_probe_flags
    assert {c_a["volumeMounts"][int(p.split("volumeMounts[")[1].split("]")[0])]["mountPath"] for p in mount_idx} <= {
        weights_mount_path(a.weights_prefix)
    }
    assert c_a["args"] != c_b["args"]


# ---- isolation -------------------------------------------------------------------------------------------


def test_pod_security(plans):
    for stack, role in pool_cases(plans):
        _, _, inv = plans[stack]
        pod = deployment(inv, role)["inputs"]["spec"]["template"]["spec"]
        c = pod["containers"][0]
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0
        assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"} == pod["securityContext"]["seccompProfile"]
        assert sc["readOnlyRootFilesystem"] is True
        # Every writable mount is an emptyDir; everything else is mounted read-only.
        vols = {v["name"]: v for v in pod["volumes"]}
        for m in c["volumeMounts"]:
            assert m.get("readOnly") is True or "emptyDir" in vols[m["name"]], m
        writable = {m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")}
        env = {e["name"]: e["value"] for e in c["env"]}
        assert {"/tmp", "/dev/shm", env["HOME"]} == writable
        for var in ("HF_HOME", "VLLM_CACHE_ROOT", "XDG_CACHE_HOME", "TRITON_CACHE_DIR"):
            assert env[var].startswith(env["HOME"] + "/"), var
        assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1"
        assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
        assert pod["serviceAccountName"] == "model-server"


def test_network_policy(plans):
    for stack, role in pool_cases(plans):
        cfg, _, inv = plans[stack]
        np = one(inv, NETPOL, f"vllm-{role}-netpol")["inputs"]["spec"]
        assert np["podSelector"] == deployment(inv, role)["inputs"]["spec"]["selector"]
        assert np["policyTypes"] == ["Ingress", "Egress"]
        (ingress,) = np["ingress"]
        assert ingress["ports"] == [{"port": 8000, "protocol": "TCP"}]
        peers = ingress["from"]
        cidrs = {p["ipBlock"]["cidr"] for p in peers if "ipBlock" in p}
        assert cfg.gke.ranges.proxy_only in cidrs
        assert cidrs - {cfg.gke.ranges.proxy_only} == {"35.191.0.0/16", "130.211.0.0/22"}
        assert {"podSelector": {"matchLabels": {"llm-d-router-gateway": f"vllm-{role}-epp"}}} in peers
        gmp = next(p for p in peers if "namespaceSelector" in p)
        assert gmp["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "collector"}}
        assert "gke-gmp-system" in gmp["namespaceSelector"]["matchExpressions"][0]["values"]
        egress_ports = {(p["protocol"], p["port"]) for rule in np["egress"] for p in rule["ports"]}
        assert egress_ports == {("UDP", 53), ("TCP", 53), ("TCP", 80), ("TCP", 988), ("TCP", 443)}
        https = next(r for r in np["egress"] if r["ports"] == [{"port": 443, "protocol": "TCP"}])
        assert {p["ipBlock"]["cidr"] for p in https["to"]} == set(GOOGLE_API_RANGES)
        for rule in np["egress"]:
            for peer in rule["to"]:
                assert peer.get("ipBlock", {}).get("cidr") != "0.0.0.0/0"


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_manifests_validate_with_kubernetes_validate(plans, stack):
    kv = pytest.importorskip("kubernetes_validate")
    cfg, plan, inv = plans[stack]
    objs = [
        r["inputs"]
        for typ in (DEPLOYMENT, CONFIG_MAP, PDB, NETPOL)
        for r in resources(inv, typ)
        if r["parent"] and r["parent"].split("::")[-2].endswith((MODEL_SERVER, "llm-serving:cohost:CoHostServer"))
    ]
    assert len(objs) == 4 * len(serving_roles(cfg, plan))
    for obj in objs:
        kv.validate(obj, cfg.gke.minor_version, strict=True)


def test_components_are_parented_and_use_the_cluster_provider(plans):
    _, _, inv = plans["prod"]
    servers = resources(inv, MODEL_SERVER)
    assert sorted(r["name"] for r in servers) == ["vllm-canary", "vllm-stable"]
    for typ in (DEPLOYMENT, CONFIG_MAP, PDB, NETPOL):
        for r in resources(inv, typ):
            if r["name"].startswith(("vllm-stable-", "vllm-canary-")) and r["parent"].endswith(
                ("::vllm-stable", "::vllm-canary")
            ):
                assert r["provider"].endswith("::platform-k8s")
                assert any("kubernetes:core/v1:Namespace::" in d for d in r["dependencies"])
                assert any("gcp:container/nodePool:NodePool::" in d for d in r["dependencies"])


# ---- config rules ----------------------------------------------------------------------------------------


def _values(stack: str = "dev") -> dict[str, Any]:
    v = copy.deepcopy(read_stack_file(stack).values)
    v["llm-serving:releases"] = [json.loads((ROOT / p).read_text()) for p in v["llm-serving:releases"]]
    return v


def _errors(v: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        load_config(v)
    return {i.path: i.message for i in exc.value.issues}


def _ms(v: dict[str, Any], role: str = "stable") -> dict[str, Any]:
    return v["llm-serving:serving"][role].setdefault("model_server", {})


def _mut_window(c):
    _ms(c)["max_startup_seconds"] = 60


def _mut_shm(c):
    _ms(c).update(memory_gib=8, shm_gib=6)


def _mut_lora(c):
    _ms(c)["lora"] = {"max_loras": 2, "max_lora_rank": 16}


def _mut_lookup(c):
    _ms(c)["speculative"] = {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 2,
        "prompt_lookup_min": 5,
    }


def _window_message() -> str:
    cold = resolve_values(read_stack_file("dev").values).plan.pools["stable"].capacity.cold_load_seconds
    n = math.ceil(cold * 1.5 / 10)
    return (
        f"the startup probe cannot cover the cold-load estimate: {cold:.0f} s x (1 + margin 0.5) = "
        f"{cold * 1.5:.0f} s needs {n} x 10 s = {n * 10} s, above max_startup_seconds 60; load faster "
        "(loading.throughput_mib_s / path), or raise max_startup_seconds knowingly"
    )


RULES = [
    (_mut_window, "llm-serving:serving.stable.model_server.max_startup_seconds", None),
    (
        _mut_shm,
        "llm-serving:serving.stable.model_server.shm_gib",
        "/dev/shm is charged to the pod's memory: 6 GiB may use at most half of memory_gib (8 GiB), the rest is "
        "for the server processes",
    ),
    (
        _mut_lora,
        "llm-serving:serving.stable.model_server.lora",
        "LoRA adapters are not served: nothing stages, verifies, lists or routes adapters end to end, and "
        "--enable-lora alone only costs memory; remove the key",
    ),
    (
        _mut_lookup,
        "llm-serving:serving.stable.model_server.speculative.prompt_lookup_min",
        "must be <= prompt_lookup_max (2), got 5",
    ),
]


@pytest.mark.parametrize("mutate,path,message", RULES, ids=[r[0].__name__ for r in RULES])
def test_model_server_rule(mutate, path, message):
    v = _values()
    mutate(v)
    assert _errors(v)[path] == (message or _window_message())


@pytest.mark.parametrize("mutate,path", [(r[0], r[1]) for r in RULES[:2]], ids=["window", "shm"])
def test_bad_model_server_config_registers_nothing(tmp_path: Path, capsys, mutate, path):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    mutate(doc["config"])
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    out = tmp_path / "plan"
    code = cli.main(["plan", "--stack", "dev", "--stacks-dir", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}: " in err
    assert "nothing was registered." in err
    assert not out.exists()


def test_hyperdisk_pool_needs_its_claim(plans):
    from components.serving.model_server import ModelServerArgs, PodResources

    cfg, plan, _ = plans["staging"]
    pool = cfg.serving.stable
    p = plan.pools["stable"]
    assert pool.loading.path == "hyperdisk_ml"
    with pytest.raises(
        ValueError,
        match=re.escape(
            "ModelServerArgs.hyperdisk_claim: pool 'stable' loads via hyperdisk_ml but no Hyperdisk ML claim was given"
        ),
    ):
        ModelServerArgs(
            role="stable",
            release=p.release,
            vllm_args=p.vllm_args,
            probes=p.probes,
            public_model_name=plan.public_model_name,
            model_root=p.model_root,
            verify_workers=4,
            resources=PodResources(cpu=4, memory_gib=32, shm_gib=4, gpus=p.release.tensor_parallel_size),
            accelerator=pool.accelerator,
            loading_path="hyperdisk_ml",
            min_replicas=1,
            max_surge=1,
            rollout_replicas=2,
            max_unavailable_disruptions=1,
            namespace="llm-serving-stable",
            service_account="model-server",
            proxy_only_cidr=cfg.gke.ranges.proxy_only,
            stream_bound_seconds=p.probes.stream_bound_seconds,
            contract_max_model_len=cfg.contract.max_model_len,
            contract_max_input_tokens=cfg.contract.max_input_tokens,
            contract_max_output_tokens=cfg.contract.max_output_tokens,
        )


def test_every_pod_verifies_its_release_before_the_server_starts(plans):
    for stack, role in pool_cases(plans):
        cfg, plan, inv = plans[stack]
        pool = dict(cfg.pools())[role]
        rel = cfg.release(pool.release)
        spec = deployment(inv, role)["inputs"]["spec"]["template"]["spec"]
        (init,) = spec["initContainers"]
        assert init["name"] == "verify-release" and init["image"] == rel.image  # pinned by digest
        cmd = init["command"]
        assert cmd[:2] == ["python3", "/etc/llm-serving/scripts/verify_release.py"]
        assert flag(cmd, "--expect-revision") == rel.model_revision
        if pool.loading.path == "gcs_streaming":
            # Metadata only: what the streamer reads, gs://<bucket>/<prefix>/.
            assert cmd[2] == "gcs" and flag(cmd, "--bucket") == rel.weights_bucket
            assert flag(cmd, "--prefix") == rel.weights_prefix
            assert plan.pools[role].capacity.verify_seconds == 10
        else:
            # Hashes the mounted copy vLLM loads, one thread per requested core.
            assert cmd[2] == "dir" and flag(cmd, "--path") == flag(container(deployment(inv, role))["args"], "--model")
            assert flag(cmd, "--workers") == str(math.floor(pool.model_server.cpu))
            rate = min(pool.loading.throughput_mib_s, 800 * math.floor(pool.model_server.cpu))
            assert plan.pools[role].capacity.verify_seconds == pytest.approx(
                plan.pools[role].capacity.weights_gib * 1024 / rate
            )
        # Runs as the server does (non-root, read-only) and asks no more CPU than the server.
        assert init["securityContext"] == container(deployment(inv, role))["securityContext"]
        assert init["resources"]["requests"]["cpu"] == container(deployment(inv, role))["resources"]["requests"]["cpu"]
