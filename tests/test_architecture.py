"""The architecture holds: dependencies run one way (import-linter contracts in pyproject.toml), the types check
(mypy, configured in pyproject.toml), the planner runs once per plan, and the naming contract has one definition plus
the policy pack's generated copy."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import resolve
from infra.config.environment import Environment

from .conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    # A fresh process whose import path starts at ``root``: the copy is analysed, not the installed tree.
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("arch")
    for pkg in ("infra", "components", "policies"):
        shutil.copytree(REPO / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_contracts_are_kept():
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the test extra (pip install -e '.[test]')")
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 8 kept, 0 broken." in result.stdout


LAYERS = "the program is layered: entry > program > resolve > registry > targets > rules > planning > config"
TARGET_LAYERS = "each target is layered: target > compose | report > rules > planning > config"
CONFIG = "config schemas import neither planning, rules nor components, nor any Pulumi package"
PURE = "the planning maths is pure (no Pulumi, no rules, no composition)"
INDEPENDENT = "serving targets are independent of each other"


@pytest.mark.parametrize(
    "module,line,contract",
    [
        ("infra/config/contract.py", "import infra.targets.gke.config", LAYERS),
        ("infra/targets/cloud_run/compose.py", "import infra.targets.gke.compose", INDEPENDENT),
        ("infra/targets/vertex/config/endpoint.py", "import infra.targets.vertex.planning", TARGET_LAYERS),
        ("components/naming.py", "import infra.resolve", "components never import infra"),
        ("infra/targets/gke/config/pool.py", "import components.naming", CONFIG),
        ("infra/targets/cloud_run/planning.py", "import pulumi", PURE),
        ("infra/program.py", "import infra.offline.cli", "the deployable program never imports the offline toolchain"),
        (
            "policies/rules/_common.py",
            "import infra.config.base",
            "the policy pack is self-contained: it never imports the program or its components",
        ),
    ],
)
def test_a_violating_import_breaks_its_contract(tree_copy: Path, module: str, line: str, contract: str):
    path = tree_copy / module
    original = path.read_text()
    try:
        path.write_text(original + f"\n{line}  # deliberate violation\n")
        result = _lint(tree_copy)
    finally:
        path.write_text(original)
    assert result.returncode == 1, result.stdout + result.stderr
    broken = {ln.removesuffix(" BROKEN") for ln in result.stdout.splitlines() if ln.endswith(" BROKEN")}
    # The one contract, and at most the contracts an upward import also crosses: a module low in the graph that
    # imports one high in it makes everything below depend on everything above (layers, target independence,
    # purity); the policy pack's contract and the offline toolchain's are never collateral.
    assert contract in broken, result.stdout
    assert broken <= {contract, LAYERS, TARGET_LAYERS, PURE, CONFIG, INDEPENDENT, "components never import infra"}, (
        result.stdout
    )


# ---- static types: mypy with the project's configuration ([tool.mypy] in pyproject.toml) ---------------------------
#: What [tool.mypy] ``files`` checks, copied with the configuration.
TYPED_TREE = ("infra", "components", "policies", "scripts", "tests")

#: (file, text appended to it, the one error code mypy must then report). Appended at the end, so no line of the file
#: moves; most add no name either, so mypy rechecks only the planted module.
PLANTED_TYPE_ERRORS = [
    # The strict floor (config schemas, planning maths): every function is annotated.
    ("infra/config/base.py", "\n\ndef _planted(x):\n    return x\n", "no-untyped-def"),
    ("infra/planning/capacity.py", '\ndefault_max_num_batched_tokens("80")\n', "arg-type"),
    # An Optional where the component needs the value (the co-hosted pool name, the Hyperdisk claim).
    ("components/weights.py", '\nvolume_handle("p", "z", None)\n', "arg-type"),
    ("policies/rules/_common.py", "\nof_type([], 1)\n", "arg-type"),
    ("scripts/vllm_argcheck.py", '\nmodel_source("--model")\n', "arg-type"),
    # The tests need no annotations, but every body is checked.
    ("tests/test_readme.py", "\n\ndef _planted(x):\n    return len(x) + len(1)\n", "arg-type"),
]


def _mypy(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "MYPY_CACHE_DIR")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(root / "pyproject.toml"),
            "--cache-dir",
            str(root / ".mypy_cache"),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_types_check_and_a_planted_type_error_fails(tmp_path: Path):
    """mypy passes on a copy of the tree, then fails on each planted error with exactly that error.

    One test, not one per plant: the first run is cold (about a minute on 2 cores) and pytest-xdist would give each
    worker its own copy; the plants then reuse the copy's cache (a few seconds each). A ``.mypy_cache`` left in the
    repository by running mypy there seeds the copy's (mypy revalidates every entry against the file's hash)."""
    for pkg in TYPED_TREE:
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    if (REPO / ".mypy_cache").is_dir():
        shutil.copytree(REPO / ".mypy_cache", tmp_path / ".mypy_cache")

    clean = _mypy(tmp_path)
    if "No module named mypy" in clean.stderr:
        pytest.fail("mypy is missing: install the test extra (pip install -e '.[test]')")
    assert clean.returncode == 0, (
        clean.stdout + clean.stderr + "\n(library stubs missing? install the test extra: pip install -e '.[test]')"
    )
    assert clean.stdout.startswith("Success: no issues found"), clean.stdout

    for module, text, code in PLANTED_TYPE_ERRORS:
        path = tmp_path / module
        original = path.read_text()
        try:
            path.write_text(original + text)
            result = _mypy(tmp_path)
        finally:
            path.write_text(original)
        errors = [ln for ln in result.stdout.splitlines() if ": error: " in ln]
        assert result.returncode == 1, (module, result.stdout + result.stderr)
        assert len(errors) == 1 and errors[0].startswith(f"{module}:") and errors[0].endswith(f"[{code}]"), (
            module,
            result.stdout,
        )


def test_the_planner_runs_once_per_plan():
    from infra.offline.planrun import run_plan

    before = resolve.PLANNER_CALLS[0]
    run_plan("prod")
    assert resolve.PLANNER_CALLS[0] - before == 1


#: Scripts shipped on their own into pods or into Helm (standard library only, no project imports): they receive
#: every contract value on their command line, and their docstrings and vLLM's own API paths may spell them.
STANDALONE = {
    # Shipped alone into the serving image; its constants are checked against the naming contract by
    # tests/test_cohost_gke.py.
    "components/cohost/server.py",
    "components/serving/probe.py",
    "components/serving/verify_release.py",
    "components/gateway/chart_filter.py",
}


def _sources() -> list[Path]:
    return [
        p
        for base in ("infra", "components")
        for p in sorted((REPO / base).rglob("*.py"))
        if str(p.relative_to(REPO)) not in STANDALONE
    ]


#: Values of the naming contract that must be spelled exactly once in infra/ and components/.
CONTRACT_LITERALS = [
    '"llm-serving.io/pool"',
    '"llm-serving.io/release"',
    '"llm-serving.io/accelerator"',
    '"nvidia.com/gpu"',
    '"vllm:num_requests_waiting"',
    '"vllm:kv_cache_usage_perc"',
    '"vllm:gpu_cache_usage_perc"',
    '"compute.googleapis.com/reservation-name"',
    '"x-llm-d-inference-objective"',
    '"model-server"',
    'f"vllm-{role}"',
    '"/health"',
    '"/metrics"',
]


@pytest.mark.parametrize("literal", CONTRACT_LITERALS)
def test_naming_contract_values_are_defined_once(literal: str):
    hits = [
        (p.relative_to(REPO), i)
        for p in _sources()
        for i, text in enumerate(p.read_text().splitlines(), 1)
        if literal in text
    ]
    assert {str(h[0]) for h in hits} == {"components/naming.py"}, hits


def _port_uses(path: Path, number: str) -> list[int]:
    """Lines where ``number`` is used as a port: a numeric literal, or ``:<number>`` inside a string (a URL or
    host:port). Prose that happens to contain the number (a token count in a docstring) does not count."""
    import io
    import tokenize

    hits = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if (tok.type == tokenize.NUMBER and tok.string == number) or (
            tok.type == tokenize.STRING and re.search(rf":{number}(?!\d)", tok.string)
        ):
            hits.append(tok.start[0])
    return hits


@pytest.mark.parametrize("number", ["8000", "9002"])
def test_contract_ports_are_defined_once(number: str):
    hits = {str(p.relative_to(REPO)) for p in _sources() if _port_uses(p, number)}
    assert hits == {"components/naming.py"}, hits


# ---- the warm minimum: defined once in the program, repeated by the policy pack (which cannot import it) -------


def _warm_policy():
    pack = str(REPO / "policies")
    if pack not in sys.path:
        sys.path.insert(0, pack)  # the pack imports its rules as the top-level package ``rules``
    from rules import serving_keeps_warm_minimum as warm

    return warm


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_the_packs_warm_minimum_per_environment_is_the_programs(env: Environment):
    import json

    from infra.config.environment import WARM_MINIMUM

    warm = _warm_policy()
    entry = json.loads((REPO / "policies" / "config" / f"{env}.json").read_text())[warm.NAME]
    assert {k: entry[k] for k in ("minReplicas", "minInstances")} == {
        "minReplicas": WARM_MINIMUM[env].replicas,
        "minInstances": WARM_MINIMUM[env].instances,
    }


def test_the_packs_fail_closed_warm_minimum_is_prods():
    """Without a config file (or a property) the policy demands prod's floor: its schema defaults say so, and so
    does what it reports for one unit below that floor and nothing at it."""
    from infra.config.environment import WARM_MINIMUM

    warm = _warm_policy()
    from rules._common import Res

    prod = WARM_MINIMUM["prod"]
    schema = warm.POLICY.config_schema.properties
    assert (schema["minReplicas"]["default"], schema["minInstances"]["default"]) == (prod.replicas, prod.instances)

    def hpa(n: int) -> Res:
        return Res(
            "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "h", "urn:h", {"spec": {"minReplicas": n}}, False
        )

    def service(n: int) -> Res:
        gpu = {"resources": {"limits": {"nvidia.com/gpu": "1"}}}
        props = {"template": {"containers": [gpu], "scaling": {"minInstanceCount": n}}}
        return Res("pulumi-python:dynamic/cloudrun:Revision", "s", "urn:s", props, False)

    assert list(warm.check(hpa(prod.replicas), {})) == [] and list(warm.check(service(prod.instances), {})) == []
    assert len(list(warm.check(hpa(prod.replicas - 1), {}))) == 1
    assert len(list(warm.check(service(prod.instances - 1), {}))) == 1


def test_the_target_contracts_name_every_registered_target():
    """The independence and per-target layer contracts list the target packages by name: a registered target left
    out of them would be unchecked, and a listed package that is no target is stale."""
    import tomllib

    from infra.registry import REGISTRY

    contracts = {
        c["name"]: c for c in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    }
    packages = sorted(f"infra.targets.{t.name}" for t in REGISTRY.targets)
    assert sorted(contracts[INDEPENDENT]["modules"]) == packages
    assert sorted(contracts[TARGET_LAYERS]["containers"]) == packages
