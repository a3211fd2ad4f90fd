"""Co-hosting (Vertex AI model co-hosting): GPU sharing renders on the node pool, each server's memory share is checked in
config, and the policy pack agrees with the config rule."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.offline import cli
from infra.offline.planrun import run_plan
from infra.offline.stackfile import STACKS_DIR

from .conftest import one


def _shared_dev(tmp_path: Path, utilization: float) -> Path:
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    cfg = doc["config"]
    cfg["llm-serving:accelerators"]["l4"]["gpu_sharing"] = {"strategy": "MPS", "max_shared_clients_per_gpu": 2}
    for role in ("stable", "canary"):
        # L4: 22.5 GiB x 0.45 = 10.1 GiB per server - 8.8 GiB FP8 weights (embedding + lm_head at bf16) - 0.5 GiB
        # overhead = 0.83 GiB of KV
        cfg["llm-serving:serving"][role].update(gpu_memory_utilization=utilization, runtime_overhead_gib=0.5)
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_shared_gpu_pool_renders_sharing_and_passes_policy(tmp_path: Path, capsys):
    stacks = _shared_dev(tmp_path, 0.45)
    run = run_plan("dev", stacks)
    plan, inv = run.resolved.plan, run.inventory.to_dict()
    pool = one(inv, "gcp:container/nodePool:NodePool", "platform-gpu-l4-pool")
    acc = pool["inputs"]["nodeConfig"]["guestAccelerators"][0]
    assert acc["gpuSharingConfig"] == {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 2}
    # the planner sized the smaller share: 0.83 GiB of KV per server -> 1 sequence of 4096 tokens (0.56 GiB each)
    assert plan.pools["stable"].capacity.max_seqs_at_max_model_len == 1
    out = tmp_path / "out"
    assert cli.main(["policy", "--stack", "dev", "--stacks-dir", str(stacks), "--out", str(out)]) == 0
    assert "gpu-memory-shares-below-one" not in capsys.readouterr().out


def test_oversubscribed_share_is_a_config_error(tmp_path: Path, capsys):
    stacks = _shared_dev(tmp_path, 0.5)
    assert cli.main(["plan", "--stack", "dev", "--stacks-dir", str(stacks), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert (
        "llm-serving:serving.stable.gpu_memory_utilization: 0.5 x 2 servers sharing one GPU (l4.gpu_sharing) "
        "= 1 of its memory: keep the product below 1.0 (at most 0.49 per server)"
    ) in err
