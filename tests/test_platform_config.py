"""Bad-config tests of the ``gke`` section and its cross-section rules: each fails with its exact key path and
message, and the plan stops before registering anything (exit 2)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import ConfigError
from infra.offline import cli
from infra.offline.stackfile import ROOT, read_stack_file
from infra.targets.gke.config import gke_section
from infra.targets.gke.config.platform import INFERENCE_GATEWAY_MIN_GKE, parse_gke_version

from .conftest import load_config

P = "llm-serving:"


def values(stack: str) -> dict[str, Any]:
    """The stack's decoded config with release files inlined (so tests can mutate releases)."""
    v = copy.deepcopy(read_stack_file(stack).values)
    v[P + "releases"] = [json.loads((ROOT / p).read_text()) for p in v[P + "releases"]]
    return v


def issues(v: dict[str, Any]) -> set[tuple[str, str]]:
    with pytest.raises(ConfigError) as exc:
        load_config(v)
    return {(i.path, i.message) for i in exc.value.issues}


def gke(v: dict[str, Any]) -> dict[str, Any]:
    return v[P + "gke"]


def _two_zone_hyperdisk_canary(v: dict[str, Any]) -> None:
    """Staging: the canary loads the stable release from Hyperdisk ML, but on GPUs in another zone."""
    acc = copy.deepcopy(v[P + "accelerators"]["h100-tp2"])
    acc.update(zone="us-central1-b", reservation=None)
    v[P + "accelerators"]["h100-b"] = acc
    v[P + "serving"]["canary"].update(
        release=v[P + "serving"]["stable"]["release"],
        accelerator="h100-b",
        loading=dict(v[P + "serving"]["stable"]["loading"]),
    )


#: Changes the values in place (whatever it returns is ignored).
Mutation = Callable[[dict[str, Any]], object]
CASES: list[tuple[str, str, Mutation, str, str]] = [
    # ---- section rules ----
    (
        "master-not-28",
        "dev",
        lambda v: gke(v)["ranges"].update(master="172.16.0.0/27"),
        "gke.ranges.master",
        "the GKE control-plane range must be a /28, got 172.16.0.0/27",
    ),
    (
        "ranges-overlap",
        "dev",
        lambda v: gke(v)["ranges"].update(services="10.10.8.0/22"),
        "gke.ranges.services",
        "10.10.8.0/22 overlaps subnet (10.10.0.0/20)",
    ),
    (
        "host-bits",
        "dev",
        lambda v: gke(v)["ranges"].update(subnet="10.10.0.1/20"),
        "gke.ranges.subnet",
        "not an IPv4 network in CIDR form (host bits clear): '10.10.0.1/20'",
    ),
    (
        "public-range",
        "dev",
        lambda v: gke(v)["ranges"].update(services="8.8.0.0/20"),
        "gke.ranges.services",
        "8.8.0.0/20 is not a private range",
    ),
    (
        "open-control-plane",
        "dev",
        lambda v: gke(v)["authorized_networks"][0].update(cidr="0.0.0.0/0"),
        "gke.authorized_networks[0].cidr",
        "0.0.0.0/0 would open the control plane to the internet",
    ),
    (
        "gke-too-old",
        "dev",
        lambda v: gke(v).update(min_version="1.33.5-gke.1000000"),
        "gke.min_version",
        "1.33.5-gke.1000000 is older than 1.34.0-gke.1626000, the first GKE version that "
        "installs the InferencePool CRD (Inference Gateway)",
    ),
    (
        "gke-just-too-old",
        "dev",
        lambda v: gke(v).update(min_version="1.34.0-gke.1625999"),
        "gke.min_version",
        "1.34.0-gke.1625999 is older than 1.34.0-gke.1626000, the first GKE version that "
        "installs the InferencePool CRD (Inference Gateway)",
    ),
    (
        "gke-version-format",
        "dev",
        lambda v: gke(v).update(min_version="1.34.1"),
        "gke.min_version",
        "not a GKE minor version like 1.34 or a version like 1.34.0-gke.1626000: '1.34.1'",
    ),
    (
        "gke-minor-too-old",
        "dev",
        lambda v: gke(v).update(min_version="1.33"),
        "gke.min_version",
        "1.33 is older than 1.34, the first minor version with a release that installs the "
        "InferencePool CRD (1.34.0-gke.1626000)",
    ),
    (
        "maintenance-window-short",
        "dev",
        lambda v: gke(v)["maintenance"].update(duration_hours=3, days=["SA", "SU", "WE"]),
        "gke.maintenance.duration_hours",
        "GKE requires windows of at least 4 h, got 3",
    ),
    (
        "maintenance-too-little",
        "dev",
        lambda v: gke(v)["maintenance"].update(days=["SU"], duration_hours=8),
        "gke.maintenance.duration_hours",
        "1 day(s) x 8 h gives 32 h per 32 days; GKE requires at least 48 h",
    ),
    (
        "maintenance-duplicate-day",
        "dev",
        lambda v: gke(v)["maintenance"].update(days=["SU", "SU", "SA"]),
        "gke.maintenance.days",
        "days must be unique, got ['SU', 'SU', 'SA']",
    ),
    (
        "system-pool-bounds",
        "dev",
        lambda v: gke(v)["system_pool"].update(min_nodes_per_zone=3, max_nodes_per_zone=2),
        "gke.system_pool.max_nodes_per_zone",
        "must be >= min_nodes_per_zone (3), got 2",
    ),
    (
        "soft-delete",
        "dev",
        lambda v: gke(v)["weights"].update(soft_delete_days=3),
        "gke.weights.soft_delete_days",
        "Cloud Storage soft delete is 0 (off) or 7-90 days, got 3",
    ),
    # ---- cross-section rules ----
    (
        "prod-zonal",
        "prod",
        lambda v: gke(v).update(location_type="zonal"),
        "gke.location_type",
        "prod needs a regional cluster: a zonal control plane is a single point of failure",
    ),
    (
        "prod-unprotected",
        "prod",
        lambda v: gke(v).update(protect=False),
        "gke.protect",
        "prod must protect the cluster, reservations, weights bucket and disks",
    ),
    (
        "regional-one-zone",
        "dev",
        lambda v: gke(v).update(location_type="regional"),
        "zones",
        "a regional cluster spreads its system pool over at least 2 zones, got ['us-central1-a']",
    ),
    (
        "accelerator-key",
        "dev",
        lambda v: (
            v[P + "accelerators"].update({"l4-accelerator-with-long-name": v[P + "accelerators"].pop("l4")}),
            [
                p.update(accelerator="l4-accelerator-with-long-name")
                for p in v[P + "serving"].values()
                if isinstance(p, dict)
            ],
        ),
        "accelerators.l4-accelerator-with-long-name",
        "accelerator keys name the node pool gpu-<key> and its service account gke-gpu-<key>: lowercase letters, "
        "digits and '-', at most 22 characters",
    ),
    (
        "weights-elsewhere",
        "dev",
        lambda v: v[P + "releases"][0].update(
            weight_manifest=v[P + "releases"][0]["weight_manifest"].replace("acme-llm-dev-weights", "other-weights")
        ),
        "releases[0].weight_manifest",
        "weights must live in the stack's weights bucket gs://acme-llm-dev-weights/, got gs://other-weights/",
    ),
    (
        "image-elsewhere",
        "dev",
        lambda v: v[P + "releases"][1].update(
            image=v[P + "releases"][1]["image"].replace("us-central1-docker.pkg.dev", "europe-west4-docker.pkg.dev"),
            image_digest=None,
        ),
        "releases[1].image",
        "serving images must come from the stack's Artifact Registry repository "
        "us-central1-docker.pkg.dev/acme-llm-dev/serving/..., got europe-west4-docker.pkg.dev/acme-llm-dev/serving/"
        "vllm-openai@sha256:c4d8973be4ad6da38435d29118d9f271bfa948cde0b48af2aba4acee34fc4c8b",
    ),
    (
        "cleanup-eats-releases",
        "dev",
        lambda v: gke(v)["registry"].update(keep_recent_versions=1),
        "gke.registry.keep_recent_versions",
        "1 is fewer than the 2 image versions the stack's releases pin: the cleanup "
        "policy must keep every deployed digest",
    ),
    (
        "hyperdisk-throughput",
        "staging",
        lambda v: v[P + "serving"]["stable"]["loading"].update(throughput_mib_s=1500),
        "serving.stable.loading.throughput_mib_s",
        "1500 MiB/s exceeds the Hyperdisk ML volume's provisioned throughput (1200 MiB/s)",
    ),
    (
        "hyperdisk-missing",
        "staging",
        lambda v: gke(v)["weights"].pop("hyperdisk_ml"),
        "serving.stable.loading.path",
        "hyperdisk_ml loading needs gke.weights.hyperdisk_ml",
    ),
    (
        "hyperdisk-too-small",
        "staging",
        lambda v: gke(v)["weights"]["hyperdisk_ml"].update(size_gib=16),
        "gke.weights.hyperdisk_ml.size_gib",
        # 32.8e9 + 2 x 151,936 x 5,120 embedding / lm_head bytes at bf16 = 34.36e9 B = 32.0 GiB
        "16 GiB cannot hold release 'qwen3-32b-fp8-2026-08-23.1' (32.0 GiB of weights)",
    ),
    (
        "hyperdisk-no-snapshot",
        "staging",
        lambda v: gke(v)["weights"]["hyperdisk_ml"].update(snapshots={}),
        "gke.weights.hyperdisk_ml.snapshots",
        "release 'qwen3-32b-fp8-2026-08-23.1' loads via hyperdisk_ml but names no hydrated source snapshot",
    ),
    (
        "hyperdisk-stray-snapshot",
        "staging",
        lambda v: gke(v)["weights"]["hyperdisk_ml"]["snapshots"].update(
            {"qwen3-32b-fp8-2026-11-20.1": "qwen3-32b-fp8-281de45e51aa"}
        ),
        "gke.weights.hyperdisk_ml.snapshots.qwen3-32b-fp8-2026-11-20.1",
        "no pool loads this release via hyperdisk_ml",
    ),
    (
        "hyperdisk-zone",
        "staging",
        _two_zone_hyperdisk_canary,
        "serving.canary.accelerator",
        "release 'qwen3-32b-fp8-2026-08-23.1' loads from one Hyperdisk ML volume in "
        "us-central1-a; accelerator 'h100-b' is in us-central1-b",
    ),
]


@pytest.mark.parametrize("case,stack,mutate,path,message", CASES, ids=[c[0] for c in CASES])
def test_rule_fails_with_key_path_and_message(case, stack, mutate, path, message, tmp_path: Path, capsys):
    v = values(stack)
    mutate(v)
    found = issues(v)
    full = path if path.startswith("gcp:") else P + path
    assert (full, message) in found, sorted(found)
    # The plan stops before the program runs: exit 2, nothing written.
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": v}))
    out = tmp_path / "plan"
    assert cli.main(["plan", "--stack", stack, "--stacks-dir", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{full}: {message}" in err and "nothing was registered." in err
    assert not out.exists()


def test_program_registers_nothing_on_a_bad_gke_section(tmp_path: Path):
    """As `pulumi up` runs it: the program validates the gke section before registering any resource."""
    import pulumi

    from infra.entry import main as program_main
    from infra.offline.runner import OfflineRun, run_offline

    v = values("prod")
    gke(v).update(protect=False)
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump({"config": v}))
    sf = read_stack_file("prod", tmp_path)
    sink = OfflineRun(project="llm-serving", stack="prod")
    with pytest.raises(pulumi.RunError, match=re.escape("llm-serving:gke.protect")):
        run_offline(
            program_main, project="llm-serving", stack="prod", config=sf.config, secret_keys=sf.secret_keys, sink=sink
        )
    assert sink.resources == []


def test_version_floor_is_the_inference_pool_crd_version():
    floor = parse_gke_version(INFERENCE_GATEWAY_MIN_GKE)
    assert floor == (1, 34, 0, 1626000)
    newer, older = parse_gke_version("1.34.1-gke.3899000"), parse_gke_version("1.4.0-gke.9")
    assert newer is not None and floor is not None and newer > floor
    assert older is not None and older < (1, 34, 0, 0)


def test_shipped_gke_sections_choose_the_documented_shapes():
    for stack, location in (("dev", "zonal"), ("staging", "regional"), ("prod", "regional")):
        gke = gke_section(load_config(read_stack_file(stack).values))
        assert gke is not None
        assert gke.location_type == location
        assert gke.protect is (stack == "prod")
        assert gke.minor_version == "1.34"
