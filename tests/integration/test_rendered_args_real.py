"""Every vLLM argument list the stacks render parses with vLLM 0.32's own ``vllm serve`` parser.

The lists are read from the plan's Kubernetes manifests (what would be applied), not re-rendered, so the test
covers the exact container ``args`` of every Deployment. The parser is vLLM's, built with
``allow_abbrev=False`` (scripts/vllm_argcheck.py); a misspelt or abbreviated flag must be rejected, so the
check itself is shown to bite. The optional feature no shipped stack enables (n-gram speculative decoding) is
rendered from a modified dev pool and checked too.

Run with ``make integration`` or ``.venv/bin/python -m pytest -m integration tests/integration``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.offline.planrun import write_plan
from infra.planning.vllm_args import render_vllm_args
from infra.targets.gke.config import GkePool
from infra.targets.gke.planning import GkePoolPlan, gke_vllm_inputs
from tests.conftest import STACKS, plan_run

from .vllm_harness import check_vllm_args

pytestmark = pytest.mark.integration


def rendered_args(out: Path) -> dict[str, list[str]]:
    """``{"<stack>/<deployment>": args}`` for every vLLM Deployment in the stacks' plan manifests."""
    sets: dict[str, list[str]] = {}
    for stack in STACKS:
        run = plan_run(stack)
        cfg = run.resolved.config
        write_plan(run, out / stack)
        for path in sorted((out / stack / "manifests").glob("deployment--*--vllm-*.yaml")):
            doc = yaml.safe_load(path.read_text())
            (c,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
            assert c["command"] == ["vllm", "serve"], path.name
            sets[f"{stack}/{doc['metadata']['name']}"] = c["args"]
        assert len([k for k in sets if k.startswith(f"{stack}/")]) == len(cfg.pools()), stack
    return sets


def optional_features_args() -> list[str]:
    """The dev stable pool with n-gram speculation switched on."""
    run = plan_run("dev")
    cfg, plan = run.resolved.config, run.resolved.plan
    doc = cfg.serving.stable.model_dump()
    doc["model_server"].update(
        speculative={"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    )
    pool = type(cfg.serving.stable).model_validate(doc, strict=False)
    p = plan.pools["stable"]
    assert isinstance(pool, GkePool) and isinstance(p, GkePoolPlan)  # dev's stable pool runs on GKE
    return render_vllm_args(
        gke_vllm_inputs(
            cfg.release(pool.release),
            pool,
            p.capacity,
            p.probes.shutdown_timeout_seconds,
            cfg.serving.model_name,
            cfg.contract.max_output_tokens,
        )
    )


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], dict[str, dict]]:
    sets = rendered_args(tmp_path_factory.mktemp("plans"))
    base = sets["dev/vllm-stable"]
    i = base.index("--max-num-seqs")
    fixtures = {
        "fixture/misspelt": [*base[:i], "--max-num-sequences", *base[i + 1 :]],
        "fixture/abbreviated": [*base[:i], "--max-num-seq", *base[i + 1 :]],
        "fixture/optional-features": optional_features_args(),
    }
    return sets, check_vllm_args({**sets, **fixtures})  # one vLLM import for every list


def test_every_rendered_argument_list_parses_with_vllm_0_32(checked):
    sets, results = checked
    assert len(sets) == 6  # stable + canary in each of the three stacks
    bad = {label: results[label]["error"] for label in sets if not results[label]["ok"]}
    assert bad == {}
    # The model location is passed as --model (never a placeholder), as the container command does.
    assert {results[label]["model_source"] for label in sets} == {"--model"}


def test_optional_features_parse(checked):
    _, results = checked
    assert results["fixture/optional-features"] == {"ok": True, "error": "", "model_source": "--model"}


@pytest.mark.parametrize(
    "label,flag", [("fixture/misspelt", "--max-num-sequences"), ("fixture/abbreviated", "--max-num-seq")]
)
def test_a_wrong_flag_is_rejected(checked, label, flag):
    _, results = checked
    assert results[label]["ok"] is False
    assert flag in results[label]["error"]
