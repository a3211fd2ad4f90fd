"""Bad-config tests: each rule fails with its key path, all problems are listed together, and nothing is
registered with Pulumi."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import ConfigError
from infra.offline import cli
from infra.offline.stackfile import ROOT, read_stack_file

from .conftest import load_config

GOOD_DIGEST = "sha256:" + "a" * 64


def values(stack: str = "dev") -> dict[str, Any]:
    """The stack's decoded config with release files inlined (so tests can mutate releases)."""
    v = copy.deepcopy(read_stack_file(stack).values)
    v["llm-serving:releases"] = [json.loads((ROOT / p).read_text()) for p in v["llm-serving:releases"]]
    return v


def errors(v: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        load_config(v)
    return {i.path: i.message for i in exc.value.issues}


def test_shipped_stacks_are_valid():
    for stack in ("dev", "staging", "prod"):
        cfg = load_config(read_stack_file(stack).values)
        assert cfg.environment == stack


def test_unknown_key():
    v = values()
    v["llm-serving:contract"]["max_output_token"] = 5
    v["llm-serving:colour"] = "blue"
    e = errors(v)
    assert e["llm-serving:contract.max_output_token"] == "unknown key (not part of the schema)"
    assert e["llm-serving:colour"] == "unknown key (not part of the schema)"


def test_missing_required_key():
    v = values()
    del v["llm-serving:contract"]["max_output_tokens"]
    del v["gcp:project"]
    e = errors(v)
    assert e["llm-serving:contract.max_output_tokens"] == "required key is missing"
    assert e["gcp:project"] == "required key is missing"


def test_wrong_type():
    v = values()
    v["llm-serving:contract"]["ttft_p95_ms"] = "fast"
    v["llm-serving:serving"]["stable"]["min_replicas"] = 1.5
    e = errors(v)
    assert e["llm-serving:contract.ttft_p95_ms"] == "Input should be a valid integer (got 'fast')"
    assert e["llm-serving:serving.stable.min_replicas"] == "Input should be a valid integer (got 1.5)"


def test_image_without_digest():
    v = values()
    v["llm-serving:releases"][0]["image"] = "us-central1-docker.pkg.dev/acme-llm-dev/serving/vllm-openai:v0.32.0"
    e = errors(v)
    assert e["llm-serving:releases[0].image"].startswith("must be pinned by digest as <repository>@sha256:<64 hex>")


def test_image_digest_field_must_match_image():
    v = values()
    v["llm-serving:releases"][0]["image_digest"] = GOOD_DIGEST
    assert "differs from the digest in image" in errors(v)["llm-serving:releases[0].image_digest"]


def test_contract_max_model_len_too_small():
    v = values()
    v["llm-serving:contract"]["max_model_len"] = 4000  # < 3072 + 1024
    e = errors(v)
    assert e["llm-serving:contract.max_model_len"] == (
        "must be >= max_input_tokens + max_output_tokens (3072 + 1024 = 4096), got 4000"
    )


def test_release_max_model_len_outside_contract():
    v = values()
    v["llm-serving:releases"][0]["max_model_len"] = 2048
    v["llm-serving:releases"][1]["max_model_len"] = 8192
    e = errors(v)
    assert e["llm-serving:releases[0].max_model_len"] == (
        "2048 cannot hold the contract's max_input_tokens + max_output_tokens = 4096"
    )
    assert e["llm-serving:releases[1].max_model_len"].startswith("8192 exceeds the contract's max_model_len 4096")


def test_weights_that_do_not_fit():
    v = values()
    for r in v["llm-serving:releases"]:
        r["model"] = {"catalogue": "llama-3.1-70b"}
        r["quantization"] = "none"  # BF16: 141.2e9 B = 131.5 GiB on one 22.5 GiB L4
    e = errors(v)
    msg = e["llm-serving:serving.stable"]
    assert msg.startswith("weights do not fit: 131.5 GiB / TP 1 = 131.5 GiB per GPU + 2.0 GiB overhead > 22 GiB")
    assert "release 'qwen3-8b-fp8-2026-11-02.1' on accelerator 'l4'" in msg


def test_zero_concurrency_at_max_model_len():
    v = values("prod")
    for r in v["llm-serving:releases"]:
        r["model"] = {"catalogue": "llama-3.1-70b"}
        r["quantization"] = "none"
    # 70B BF16 on TP 2: 141.2e9 B / 2 = 65.75 GiB per GPU. At utilisation 0.87: 79.6 * 0.87 - 65.75 - 2
    # = 1.50 GiB of KV per GPU, while one 16384-token sequence needs 2*80*4*128*2 * 16384 B = 2.50 GiB.
    v["llm-serving:serving"]["stable"]["gpu_memory_utilization"] = 0.87
    e = errors(v)
    assert e["llm-serving:releases[0].max_model_len"].startswith("max_model_len 16384 leaves zero concurrency")


def test_weights_not_summing_to_100():
    v = values()
    v["llm-serving:serving"]["stable"]["weight"] = 90
    v["llm-serving:serving"]["canary"]["weight"] = 5
    assert errors(v)["llm-serving:serving.canary.weight"] == "weights must sum to 100, got 95 (stable 90, canary 5)"


def test_all_errors_are_reported_together():
    v = values()
    v["llm-serving:contract"]["max_output_tokens"] = "many"
    v["llm-serving:releases"][0]["image"] = "vllm:v1"
    v["llm-serving:serving"]["canary"]["weight"] = 7
    v["llm-serving:zones"] = "us-central1-a"
    e = errors(v)
    assert {
        "llm-serving:contract.max_output_tokens",
        "llm-serving:releases[0].image",
        "llm-serving:serving.canary.weight",
        "llm-serving:zones",
    } <= set(e)


@pytest.mark.parametrize(
    "mutate,path,message",
    [
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(gpu_type="nvidia-h100-80gb"),
            "llm-serving:accelerators.l4.gpu_type",
            "g2-standard-12 carries nvidia-l4, not nvidia-h100-80gb",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(gpus_per_node=2),
            "llm-serving:accelerators.l4.gpus_per_node",
            "g2-standard-12 has 1 GPU(s), got 2",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(machine_type="z9-turbogpu-2g"),
            "llm-serving:accelerators.l4.machine_type",
            "unknown GPU machine family 'z9-turbogpu'",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(zone="europe-west4-a"),
            "llm-serving:accelerators.l4.zone",
            "zone 'europe-west4-a' is not in region 'us-central1'",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(
                reservation={"mode": "create", "name": "r", "count": 9}
            ),
            "llm-serving:accelerators.l4.reservation",
            "Spot VMs cannot consume a reservation",
        ),
        (
            lambda v: v["llm-serving:serving"]["stable"].update(release="nope"),
            "llm-serving:serving.stable.release",
            "unknown release 'nope'",
        ),
        (
            lambda v: v["llm-serving:serving"]["stable"].update(accelerator="tpu"),
            "llm-serving:serving.stable.accelerator",
            "unknown accelerator 'tpu'",
        ),
        (
            lambda v: v["llm-serving:serving"]["stable"].update(max_replicas=0),
            "llm-serving:serving.stable.max_replicas",
            "Input should be greater than or equal to 1",
        ),
        (
            lambda v: v["llm-serving:serving"]["canary"].update(min_replicas=3, max_replicas=2),
            "llm-serving:serving.canary.max_replicas",
            "must be >= min_replicas (3), got 2",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(vllm_version="0.33.0"),
            "llm-serving:releases[0].vllm_version",
            "this program renders flags for vLLM 0.32.x, got 0.33.0",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(model_revision="main"),
            "llm-serving:releases[0].model_revision",
            "String should match pattern",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(weight_manifest="gs://b/m.json"),
            "llm-serving:releases[0].weight_manifest",
            "must be gs://<bucket>/<model>/<revision>/manifest.json",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(model={"catalogue": "gpt-5"}),
            "llm-serving:releases[0].model.catalogue",
            "unknown model 'gpt-5'",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(model={"catalogue": "qwen3-8b", "layers": 3}),
            "llm-serving:releases[0].model.layers",
            "give either catalogue or explicit geometry, not both",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(model={"parameters": 10, "layers": 2, "kv_heads": 1}),
            "llm-serving:releases[0].model.head_dim",
            "required when catalogue is not set",
        ),
        (
            lambda v: v["llm-serving:releases"][1].update(release=v["llm-serving:releases"][0]["release"]),
            "llm-serving:releases[1].release",
            "duplicate release id",
        ),
        (
            lambda v: v["llm-serving:releases"][1].update(tensor_parallel_size=1, kv_cache_dtype="fp8"),
            "llm-serving:serving.canary.release",
            "stable and canary differ in kv_cache_dtype",
        ),
        (
            lambda v: v["llm-serving:contract"]["prompt_tokens"].update(p95=5000),
            "llm-serving:contract.prompt_tokens.p95",
            "5000 exceeds max_input_tokens (3072)",
        ),
        (
            lambda v: v["llm-serving:contract"]["output_tokens"].update(p95=100),
            "llm-serving:contract.output_tokens.p95",
            "must be >= mean (200.0), got 100",
        ),
        (
            lambda v: v["llm-serving:contract"].update(target_utilization=1.0),
            "llm-serving:contract.target_utilization",
            "Input should be less than 1",
        ),
        (
            lambda v: v["llm-serving:contract"]["priority_classes"].append(
                dict(v["llm-serving:contract"]["priority_classes"][0])
            ),
            "llm-serving:contract.priority_classes",
            "names must be unique",
        ),
        (
            lambda v: v.update({"llm-serving:zones": ["us-east1-b"]}),
            "llm-serving:zones[0]",
            "zone 'us-east1-b' is not in region 'us-central1'",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(
                gpu_sharing={"strategy": "MPS", "max_shared_clients_per_gpu": 2}
            ),
            "llm-serving:serving.stable.gpu_memory_utilization",
            "0.9 x 2 servers sharing one GPU (l4.gpu_sharing) = 1.8 of its memory: keep the product below 1.0 "
            "(at most 0.49 per server)",
        ),
        (
            lambda v: v.update({"llm-serving:environment": "qa"}),
            "llm-serving:environment",
            "Input should be 'dev', 'staging' or 'prod'",
        ),
        (
            lambda v: v["llm-serving:contract"]["priority_classes"][1].update(priority=0),
            "llm-serving:contract.priority_classes[1].priority",
            "a sheddable class needs a negative priority (the picker sheds only priority < 0), got 0",
        ),
        (
            lambda v: v["llm-serving:contract"]["priority_classes"][0].update(priority=-3),
            "llm-serving:contract.priority_classes[0].sheddable",
            "priority -3 < 0 is shed under saturation: set sheddable: true, or use a priority >= 0",
        ),
        (
            lambda v: v["llm-serving:contract"]["priority_classes"][0].pop("sheddable"),
            "llm-serving:contract.priority_classes[0].sheddable",
            "required key is missing",
        ),
        (
            lambda v: v["llm-serving:serving"].update(model_name=v["llm-serving:releases"][0]["release"]),
            "llm-serving:serving.model_name",
            "is also a release id: the public name must differ from every release id",
        ),
        (
            lambda v: v["llm-serving:serving"].update(model_name="Qwen3 8B"),
            "llm-serving:serving.model_name",
            "String should match pattern",
        ),
        (
            lambda v: v["llm-serving:serving"].pop("model_name"),
            "llm-serving:serving.model_name",
            "required key is missing",
        ),
        (
            lambda v: v["llm-serving:accelerators"].update(
                l4b={
                    **v["llm-serving:accelerators"]["l4"],
                    "spot": False,
                    "reservation": {"mode": "create", "name": "dev-l4", "count": 2},
                },
                l4={
                    **v["llm-serving:accelerators"]["l4"],
                    "spot": False,
                    "reservation": {"mode": "create", "name": "dev-l4", "count": 2},
                },
            ),
            "llm-serving:accelerators.l4b.reservation.name",
            "reservation 'dev-l4' in us-central1-a is already used by accelerators.l4: each topology needs its own "
            "reservation",
        ),
        (
            lambda v: v["llm-serving:serving"]["stable"].update(max_replicas=10**23),
            "llm-serving:serving.stable.max_replicas",
            "Input should be less than or equal to 1000",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(node_hourly_usd=float("inf")),
            "llm-serving:accelerators.l4.node_hourly_usd",
            "Input should be a finite number",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(
                spot=False,
                reservation={"mode": "existing", "name": "r", "count": 10**30, "owner_project": "Bad Project"},
            ),
            "llm-serving:accelerators.l4.reservation.count",
            "Input should be less than or equal to 1000",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["l4"].update(
                spot=False,
                reservation={"mode": "existing", "name": "r", "count": 2, "owner_project": "acme-capacity\n"},
            ),
            "llm-serving:accelerators.l4.reservation.owner_project",
            "String should match pattern",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(vllm_version="0.32.0\n"),
            "llm-serving:releases[0].vllm_version",
            "String should match pattern",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(vllm_version="0.\u0663\u0662.0"),  # Arabic-Indic digits
            "llm-serving:releases[0].vllm_version",
            "String should match pattern",
        ),
        (
            lambda v: v["llm-serving:releases"][0].update(image=v["llm-serving:releases"][0]["image"] + "\n"),
            "llm-serving:releases[0].image",
            "must be pinned by digest",
        ),
        (
            lambda v: v["llm-serving:gke"]["weights"].update(writers=["user:alice@acme.example"]),
            "llm-serving:gke.weights.writers[0]",
            "String should match pattern",
        ),
        (
            lambda v: v["llm-serving:gke"]["weights"].update(writers=[]),
            "llm-serving:gke.weights.writers",
            "List should have at least 1 item",
        ),
        (
            lambda v: v["llm-serving:contract"].update(max_input_tokens=3000),
            "llm-serving:releases[0].max_model_len",
            "4096 admits prompts of up to 4095 tokens, above the contract's max_input_tokens 3000: vLLM's only prompt limit "
            "is --max-model-len, so it must equal max_input_tokens + max_output_tokens = 4024",
        ),
    ],
)
def test_rule(mutate, path, message):
    v = values()
    mutate(v)
    e = errors(v)
    assert path in e, e
    assert message in e[path]


def test_mixed_split_allowed_explicitly():
    v = values()
    v["llm-serving:releases"][1]["kv_cache_dtype"] = "fp8"
    v["llm-serving:serving"]["allow_mixed_split"] = True
    load_config(v)


@pytest.mark.parametrize(
    "mutate,path,message",
    [
        (
            lambda v: v["llm-serving:accelerators"]["h100-tp2"].update(spot=True, reservation=None),
            "llm-serving:accelerators.h100-tp2.spot",
            "Spot VMs are not allowed in prod",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["h100-tp2"].update(reservation=None),
            "llm-serving:accelerators.h100-tp2.reservation",
            "prod GPU pools must consume a specific zonal reservation",
        ),
        (
            lambda v: v["llm-serving:accelerators"]["h100-tp2"]["reservation"].update(count=7),
            "llm-serving:accelerators.h100-tp2.reservation.count",
            "7 reserved node(s) cannot hold max replicas 6 + rollout surge 2 at 1 replica(s)/node = 8 node(s)",
        ),
        (
            lambda v: v["llm-serving:serving"]["canary"].update(min_replicas=1),
            "llm-serving:serving.canary.min_replicas",
            "prod keeps at least 2 warm replicas per pool, got 1",
        ),
    ],
)
def test_prod_rules(mutate, path, message):
    v = values("prod")
    mutate(v)
    e = errors(v)
    assert path in e, e
    assert message in e[path]


def test_release_file_errors(tmp_path: Path):
    from infra.resolve import resolve_stack

    v = values()
    (tmp_path / "stacks" / "releases").mkdir(parents=True)
    (tmp_path / "stacks" / "releases" / "bad.json").write_text("{not json")
    v["llm-serving:releases"] = [
        "stacks/releases/dev/missing.json",
        "stacks/releases/bad.json",
        "/etc/llm/bad.json",
        "stacks/releases/../../etc/passwd",
    ]
    with pytest.raises(ConfigError) as exc:
        resolve_stack(v, "dev", tmp_path)
    e = {i.path: i.message for i in exc.value.issues}
    assert e["llm-serving:releases[0]"] == "stacks/releases/dev/missing.json: file not found"
    assert e["llm-serving:releases[1]"] == (
        "stacks/releases/bad.json:1:2: not valid JSON: Expecting property name enclosed in double quotes"
    )
    assert e["llm-serving:releases[2]"] == (
        "release path '/etc/llm/bad.json': is absolute: write it relative to the project root, under stacks/releases/"
    )
    assert e["llm-serving:releases[3]"] == (
        "release path 'stacks/releases/../../etc/passwd': contains a '..' segment: release files must stay inside "
        "stacks/releases/ of the project"
    )


def test_release_given_inline_equals_release_file():
    inline = load_config(values())
    by_file = load_config(read_stack_file("dev").values)
    assert inline == by_file


def _bad_stack_dir(tmp_path: Path) -> Path:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    doc["config"]["llm-serving:contract"]["max_model_len"] = 100
    doc["config"]["llm-serving:serving"]["stable"]["weight"] = 60
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_cli_plan_fails_with_all_errors_and_writes_nothing(tmp_path: Path, capsys):
    out = tmp_path / "plan"
    code = cli.main(["plan", "--stack", "dev", "--stacks-dir", str(_bad_stack_dir(tmp_path)), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "llm-serving:contract.max_model_len" in err
    assert "llm-serving:serving.canary.weight" in err
    assert "nothing was registered." in err
    assert not out.exists()


def test_program_registers_nothing_on_bad_config(tmp_path: Path):
    """The program itself (as `pulumi up` runs it) validates before registering any resource."""
    import pulumi

    from infra.entry import main as program_main
    from infra.offline.runner import OfflineRun, run_offline

    sf = read_stack_file("dev", _bad_stack_dir(tmp_path))
    sink = OfflineRun(project="llm-serving", stack="dev")
    with pytest.raises(pulumi.RunError, match=re.escape("llm-serving:contract.max_model_len")):
        run_offline(
            program_main, project="llm-serving", stack="dev", config=sf.config, secret_keys=sf.secret_keys, sink=sink
        )
    assert sink.resources == []


def test_stack_name_must_match_environment(tmp_path: Path):
    import pulumi

    from infra.entry import main as program_main
    from infra.offline.runner import OfflineRun, run_offline

    sf = read_stack_file("dev")
    sink = OfflineRun(project="llm-serving", stack="prod")
    with pytest.raises(pulumi.RunError, match="llm-serving:environment: 'dev' does not match stack 'prod'"):
        run_offline(
            program_main, project="llm-serving", stack="prod", config=sf.config, secret_keys=sf.secret_keys, sink=sink
        )
    assert sink.resources == []


def test_secure_values_are_opaque(tmp_path: Path):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    doc["config"]["llm-serving:contract"]["max_model_len"] = {"secure": "v1:AAAA"}
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    sf = read_stack_file("dev", tmp_path)
    assert sf.secret_keys == ["llm-serving:contract"]
    assert "v1:AAAA" not in json.dumps(sf.config)
    with pytest.raises(ConfigError) as exc:
        load_config(sf.values)
    msgs = [i.message for i in exc.value.issues if i.path == "llm-serving:contract.max_model_len"]
    assert any(m.startswith("Input should be a valid integer") for m in msgs)
    assert any(m.startswith("holds a secure value") for m in msgs)
    assert not any("v1:AAAA" in m or "<secret:" in m for m in msgs)
