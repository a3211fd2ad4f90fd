"""Property tier for the CLI: a shipped stack file with 1-3 random mutations inside ``config`` (a leaf replaced
by a hostile JSON-ish value, a key deleted, an unknown key added, a list item duplicated, a value's type
changed), planned through ``cli.main(["plan", ...])`` in-process. The only allowed outcomes:

* exit 0 and a complete plan directory: the owned-files list names exactly what is there, ``inventory.json``
  and ``capacity.json`` parse as strict JSON (no ``NaN`` / ``Infinity``) and every manifest parses;
* exit 2 with either the list of configuration errors (``N configuration error(s):``, one
  ``  - <key path>: <message>`` line each, the key path starting ``llm-serving:`` or ``gcp:``, then
  ``nothing was registered.``) and nothing registered, or exactly one ``error: ...`` line; in both cases no
  output directory.

Never a traceback or another exception, never a line longer than MAX_LINE_CHARS (values are cut in messages),
never a file outside the example's temporary directory touched (the repository's stacks/ and build/ are
compared before and after every example), never more than MAX_CPU_SECONDS of CPU (nor Hypothesis' wall-clock
deadline) per example, and never more than MAX_RSS_GROWTH_MB of peak memory growth over the whole test.

Reproducible in CI like tests/test_documents_hypothesis.py: a fixed seed (``@seed``), no example database,
a fixed ``max_examples``; the seed is printed at the start of the module (serial runs) and with every failing
example (``note``). Set ``CLI_HYPOTHESIS_SEED=<int>`` to explore other examples.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, note, seed, settings
from hypothesis import strategies as st

from infra.offline import cli, runner
from infra.offline.planrun import OWNED_FILES
from infra.offline.stackfile import STACKS_DIR

from .conftest import REPO, STACKS, plan_run

SEED = int(os.environ.get("CLI_HYPOTHESIS_SEED", "20260825"))

#: Fixed budget. Measured on 2 cores: a plan that runs to the end takes 0.4-1 s of CPU, a refused stack 10-100 ms;
#: the program's imports (~4-6 s) are paid once before the first example (``_warm``). Each example is bounded
#: twice: MAX_CPU_SECONDS of process CPU time (what a pathological input would burn, independent of other load on
#: the machine) and Hypothesis' wall-clock deadline, which also catches a hang but is set wide because a CPU-starved
#: CI machine has been seen to stretch a 0.5 s plan past 30 s of wall time.
MAX_CPU_SECONDS = 20
SETTINGS = settings(
    max_examples=40,
    deadline=timedelta(seconds=90),
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Longest stderr line allowed: messages cut user values to 60 characters (MAX_SHOWN_CHARS); paths and the
#: fixed text around them stay well under this.
MAX_LINE_CHARS = 600
MAX_RSS_GROWTH_MB = 500

SHIPPED: dict[str, dict[str, Any]] = {s: yaml.safe_load((STACKS_DIR / f"Pulumi.{s}.yaml").read_text()) for s in STACKS}


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """Import the program and its providers once before the first example, so its deadline measures a plan, not
    the imports (~6 s on an idle machine, far more on a loaded one)."""
    plan_run("dev")


@pytest.fixture(scope="module", autouse=True)
def _print_seed(request: pytest.FixtureRequest) -> None:
    """Print the seed to the terminal past pytest's output capture (what ``capsys.disabled()`` does)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:  # no terminal in pytest-xdist workers: note() still reports it
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"\n{Path(__file__).name}: hypothesis seed {SEED} (set CLI_HYPOTHESIS_SEED to change it)")


# ---- mutations ----------------------------------------------------------------------------------------------

HOSTILE_INTS = [0, -1, 1, 2**31 - 1, 2**53 - 1, 2**53 + 1, 10**20, -(10**20), 10**400]
HOSTILE_FLOATS = [0.0, -0.0, 5e-324, 1e-300, 0.5, 1.5, 1e308, -1e308, math.inf, -math.inf, math.nan]
HOSTILE_STRINGS = [
    "",
    " ",
    "x" * 10_000,
    "é漢字🙂",
    "a\n",
    "value\n",
    "\t",
    "null",
    "true",
    "yes",
    "1e3",
    "0x1F",
    "3:00",
    "~",
    "*a",
    "!!binary aGk=",
    "{",
    "stacks/releases/../../etc/passwd",
    "stacks/releases/dev/missing.json",
    "gke",
    "dev",
    "us-central1-a",
    "nvidia-l4",
    "stable",
]
NUDGES = [1, 1.1, 0.9, 2, 0.5, 10, 0, 1000, 10**6]  # the first is what Hypothesis draws most
UNKNOWN_KEYS = [
    "unknown",
    "Max_Replicas",
    "",
    "k" * 200,
    "é",
    "secure",
    "1",
    "llm-serving:bogus",
    "gcp:zone",
    "nocolon",
    "a:b:c",
]

leaves = st.one_of(
    st.sampled_from(HOSTILE_INTS),
    st.integers(),
    st.sampled_from(HOSTILE_FLOATS),
    st.floats(),
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=30),
    st.none(),
    st.booleans(),
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(UNKNOWN_KEYS) | st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)

Path_ = tuple[Any, ...]


def paths(node: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every path to a value below ``node`` (dict keys and list indices)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


def get(doc: Any, path: Path_) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def retyped(value: Any) -> Any:
    """The same content as another type (what a careless hand or a templating tool does)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    if isinstance(value, dict):
        return list(value.values())
    return 0


def apply(config: dict[str, Any], mutation: tuple[Any, ...]) -> None:
    op, path = mutation[0], mutation[1]
    parent = get(config, path[:-1])
    if op == "set":
        parent[path[-1]] = mutation[2]
    elif op == "delete":
        del parent[path[-1]]
    elif op == "add":  # an unknown key in the mapping at ``path``
        get(config, path)[mutation[2]] = mutation[3]
    elif op == "duplicate":  # a list item twice
        parent.insert(path[-1], copy.deepcopy(parent[path[-1]]))
    else:
        raise AssertionError(op)


@st.composite
def mutated_stacks(draw: st.DrawFn) -> tuple[str, list[tuple[Any, ...]]]:
    stack = draw(st.sampled_from(STACKS))
    config = copy.deepcopy(SHIPPED[stack]["config"])
    mutations: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 3))):
        every = list(paths(config))
        kind = draw(st.sampled_from(["nudge"] * 4 + ["set", "set", "delete", "add", "duplicate", "retype"]))
        if kind == "nudge":  # a plausible but odd number: most keep the stack valid, so plans run to the end
            numbers = [p for p in every if type(get(config, p)) in (int, float)]
            if not numbers:
                continue
            path = draw(st.sampled_from(numbers))
            old = get(config, path)
            new = old * draw(st.sampled_from(NUDGES)) + draw(st.sampled_from([0, 0, 1, -1]))
            mutation: tuple[Any, ...] = ("set", path, round(new) if isinstance(old, int) else float(new))
        elif kind == "add":
            dicts = [()] + [p for p in every if isinstance(get(config, p), dict)]
            mutation = (
                "add",
                draw(st.sampled_from(dicts)),
                draw(st.sampled_from(UNKNOWN_KEYS)),
                draw(values),
            )
        elif kind == "duplicate":
            items = [p for p in every if isinstance(get(config, p[:-1]), list)]
            if not items:
                continue
            mutation = ("duplicate", draw(st.sampled_from(items)))
        else:
            if not every:
                continue
            path = draw(st.sampled_from(every))
            if kind == "delete":
                mutation = ("delete", path)
            else:
                mutation = ("set", path, retyped(get(config, path)) if kind == "retype" else draw(values))
        apply(config, mutation)
        mutations.append(mutation)
    return stack, mutations


# ---- outcome checks -------------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise AssertionError(f"{name} in a plan file")


def strict_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)


def check_plan_dir(out: Path) -> None:
    owned = json.loads((out / OWNED_FILES).read_text())["files"]
    present = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != OWNED_FILES)
    assert present == owned
    assert {"inventory.json", "capacity.json"} <= set(owned)
    inventory = strict_json(out / "inventory.json")
    assert inventory["resources"], "a plan registers resources"
    capacity = strict_json(out / "capacity.json")
    assert isinstance(capacity, dict) and capacity
    manifests = [f for f in owned if f.startswith("manifests/")]
    assert manifests
    for rel in manifests:
        assert isinstance(yaml.safe_load((out / rel).read_text()), dict), rel


def check_error(err: str, registered: list[runner.OfflineRun]) -> None:
    lines = err.splitlines()
    assert lines and err.endswith("\n"), err
    if lines[0].startswith("error: "):
        assert len(lines) == 1, err
        return
    head, issues, tail = lines[0], lines[1:-1], lines[-1]
    assert head == f"{len(issues)} configuration error(s):" and issues, err
    assert tail == "nothing was registered.", err
    for line in issues:
        assert line.startswith(("  - llm-serving:", "  - gcp:")) and ": " in line[4:], line
    assert all(not sink.resources for sink in registered), "a config error registered resources"


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st_ = os.lstat(os.path.join(dirpath, name))
            found[os.path.relpath(os.path.join(dirpath, name), root)] = (st_.st_mtime_ns, st_.st_size)
    return found


def repository_state() -> dict[str, Any]:
    return {d: snapshot(REPO / d) for d in ("stacks", "build")}


@contextlib.contextmanager
def recorded_registrations() -> Iterator[list[runner.OfflineRun]]:
    sinks: list[runner.OfflineRun] = []
    real = runner.run_offline

    def recording(program, *, project, stack, config, secret_keys, sink=None):
        sinks.append(sink or runner.OfflineRun(project=project, stack=stack))
        return real(program, project=project, stack=stack, config=config, secret_keys=secret_keys, sink=sinks[-1])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "run_offline", recording)
        yield sinks


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


# ---- the property ---------------------------------------------------------------------------------------------

_BASELINE: list[float] = []


@SETTINGS
@seed(SEED)
@given(case=mutated_stacks())
# Tried on every run whatever the seed draws: each stack's plan runs to the end once, at the bounds of the
# arrival rate (the largest replica counts and costs the planner computes) and beyond them.
@example(case=("dev", [("set", ("llm-serving:serving", "stable", "max_replicas"), 3)]))
@example(case=("staging", [("set", ("llm-serving:contract", "peak_arrival_rate_rps"), 2.0)]))
@example(case=("prod", [("set", ("llm-serving:contract", "peak_arrival_rate_rps"), 1e6)]))
@example(case=("prod", [("set", ("llm-serving:contract", "peak_arrival_rate_rps"), 1e308)]))
@example(case=("dev", [("set", ("llm-serving:serving", "stable", "max_replicas"), 10**400)]))
@example(case=("staging", [("delete", ("llm-serving:contract",)), ("add", (), "llm-serving:bogus", None)]))
@example(case=("dev", [("set", ("gcp:project",), "x" * 10_000)]))
def test_a_mutated_stack_plans_or_fails_cleanly(case: tuple[str, list[tuple[Any, ...]]]):
    stack, mutations = case
    note(f"seed {SEED}; stack {stack}; mutations {mutations!r}"[:2000])
    if not _BASELINE:
        _BASELINE.append(peak_rss_mb())
    doc = copy.deepcopy(SHIPPED[stack])
    for mutation in mutations:
        apply(doc["config"], mutation)
    tmp = Path(tempfile.mkdtemp(prefix="cli-hypothesis-"))
    try:
        stacks = tmp / "stacks"
        stacks.mkdir()
        (stacks / f"Pulumi.{stack}.yaml").write_text(
            yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8"
        )
        out = tmp / "out"
        before = repository_state()
        cpu = time.process_time()
        stdout, stderr = io.StringIO(), io.StringIO()
        with (
            recorded_registrations() as registered,
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            code = cli.main(["plan", "--stack", stack, "--stacks-dir", str(stacks), "--out", str(out), "--skip-policy"])
        cpu = time.process_time() - cpu
        err = stderr.getvalue()
        note(f"exit {code} after {cpu:.2f} s of CPU; stderr {err[:3000]!r}")
        event(
            f"exit {code}"
            + ("" if code == 0 else " config errors" if "configuration error(s)" in err else " one error line")
        )
        assert cpu < MAX_CPU_SECONDS, f"{cpu:.1f} s of CPU for one plan"
        assert "Traceback" not in err
        assert all(len(line) <= MAX_LINE_CHARS for line in err.splitlines()), "a message line is not cut"
        if code == 0:
            assert err == ""
            check_plan_dir(out)
        else:
            assert code == 2
            check_error(err, registered)
            assert not out.exists(), "a failed plan left an output directory"
        assert sorted(p.name for p in tmp.iterdir()) == (["out", "stacks"] if code == 0 else ["stacks"])
        assert repository_state() == before
        assert peak_rss_mb() - _BASELINE[0] < MAX_RSS_GROWTH_MB
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
