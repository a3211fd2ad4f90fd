"""Property tests for infra/config/documents.py: whatever arrives — random YAML built from JSON-ish and
hostile pieces (aliases, tags, odd keys), random bytes, random release paths — the only outcomes are a
JSON-compatible value or one DocumentError. Never another exception, never past the per-example deadline.

Reproducible in CI: every test runs with the fixed seed ``SEED`` (``@seed``), the example database is off
(``database=None``) so earlier runs on a machine cannot change what runs, and ``max_examples`` is fixed, so a
run is the same examples every time. The seed is printed at the start of the module (serial runs) and with
every failing example (``note``). To explore other examples, set ``DOCUMENTS_HYPOTHESIS_SEED=<int>``; a failure
then prints the seed and a ``@reproduce_failure`` blob to replay it exactly.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, example, given, note, seed, settings
from hypothesis import strategies as st

from infra.config import documents
from infra.config.documents import DocumentError, load_json_document, load_json_file, load_yaml_document

SEED = int(os.environ.get("DOCUMENTS_HYPOTHESIS_SEED", "20260824"))

#: Fixed budget: ~3 s for the whole module on one CI core. The deadline bounds every single example: generated
#: inputs take milliseconds, the slowest input the loader accepts at all (128 KiB of worst-case YAML) ~0.4 s, and
#: 2 s leaves room for a loaded CI machine. ``too_slow`` is a data-generation health check, not a loader timing.
SETTINGS = settings(
    max_examples=150,
    deadline=timedelta(milliseconds=2000),
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def _print_seed(request: pytest.FixtureRequest) -> None:
    """Print the seed to the terminal past pytest's output capture (what ``capsys.disabled()`` does)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:  # no terminal in pytest-xdist workers: note() still reports it
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(
            f"\n{Path(__file__).name}: hypothesis seed {SEED} (set DOCUMENTS_HYPOTHESIS_SEED to change it)"
        )


def assert_json_value(value: Any) -> None:
    """A value that JSON can carry exactly: plain types only, string keys, finite floats, valid Unicode."""
    stack = [value]
    while stack:
        item = stack.pop()
        assert item is None or type(item) in (str, int, float, bool, list, dict), type(item)
        if isinstance(item, dict):
            assert all(type(k) is str for k in item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")  # lone surrogates would fail here
    assert json.loads(text) == value


def outcome_of(load: Any, *args: Any) -> Any:
    """Run a loader: a JSON value or a one-line DocumentError are the only allowed outcomes."""
    note(f"seed {SEED}")
    try:
        value = load(*args)
    except DocumentError as err:
        assert "\n" not in str(err)
        return err
    assert_json_value(value)
    return value


def example_each(name: str, values: list[Any], **fixed: Any) -> Any:
    """``@example(name=value, **fixed)`` for every value: each is tried on every run, whatever the seed draws."""

    def decorate(test: Any) -> Any:
        for value in values:
            test = example(**{name: value}, **fixed)(test)
        return test

    return decorate


# ---- YAML -----------------------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@SETTINGS
@seed(SEED)
@given(value=json_values, flow=st.booleans())
def test_json_values_dumped_as_yaml_round_trip(value: Any, flow: bool):
    """A JSON value written by a YAML emitter comes back equal — or is refused only because YAML 1.2 would read a
    plain scalar differently (PyYAML's emitter follows YAML 1.1 and writes ``1e3`` or ``09`` unquoted)."""
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    result = outcome_of(load_yaml_document, text.encode(), "gen.yaml")
    if isinstance(result, DocumentError):
        assert "YAML 1.2" in result.message, result
    else:
        assert json.dumps(result, sort_keys=True) == json.dumps(value, sort_keys=True)


#: Scalar spellings that exercise every rule: YAML 1.1 booleans and numbers, timestamps, non-finite floats,
#: tags (JSON ones, binary, sets, custom, python), merge keys, escapes, recursive anchors, undefined aliases ...
ODD_SCALARS = [
    "yes",
    "No",
    "on",
    "010",
    "0x1F",
    "0b11",
    "1_000",
    "3:00",
    "1:20.5",
    "1e3",
    "+.5",
    "09",
    ".inf",
    "-.Inf",
    ".nan",
    "1.0e+400",
    "9" * 30,
    "2026-01-01",
    "2026-01-01T10:00:00Z",
    "<<",
    '"\\ud800"',
    "!!binary aGk=",
    "!!float 1",
    "!!bool yes",
    "!!null x",
    "!foo x",
    "!!set {a}",
    "!!omap [a: 1]",
    "!!python/object:os.system ls",
    "!!timestamp 2026-01-01",
    "*zz",
    "&r [*r]",
    "&s {k: *s}",
    "-",
    "?",
    ":",
    "{",
    "]",
    "#c",
    "%",
    "@",
    "`",
    "\t",
    "|",
]
#: ... and ones JSON has a value for.
USUAL_SCALARS = [
    "a",
    "x y",
    "true",
    "False",
    "1",
    "-7",
    "1.5",
    "~",
    "null",
    "",
    "=",
    "'quoted'",
    '"\\x00"',
    '"a\\tb"',
    "!!str 1",
    "!!int '7'",
    "'yes'",
    '"3:00"',
]
ODD_KEYS = ["yes", "1", "null", "~", "2026-01-01", "<<", "? [x]", "!!binary aGk=", "*a0"]
USUAL_KEYS = ["a b", "secure", "'q'", "!!str 1", "llm-serving:gke", "'1'"] + [f"k{i}" for i in range(20)]


@st.composite
def yaml_documents(draw: st.DrawFn) -> str:
    """YAML text from a random tree of the pieces above: top-level keys with flow values or one level of block
    children, unique anchors on some nodes and aliases to them (some defined later or never), then a few edits."""
    anchors = [0]

    def scalar() -> str:
        roll = draw(st.integers(0, 7))  # Hypothesis favours 0: make it the plain case
        if roll == 7:  # an alias, usually to an anchor already defined (and sometimes to an enclosing one)
            return f"*a{draw(st.integers(0, anchors[0] - 1))}" if anchors[0] else "*undefined"
        return draw(st.sampled_from(ODD_SCALARS if roll == 6 else USUAL_SCALARS))

    def key() -> str:
        return draw(st.sampled_from(ODD_KEYS if draw(st.integers(0, 5)) == 5 else USUAL_KEYS))

    def node(depth: int) -> str:
        kind = draw(st.sampled_from(["scalar", "scalar", "seq", "map"] if depth < 4 else ["scalar"]))
        anchor = ""
        if draw(st.integers(0, 3)) == 3:
            anchor = f"&a{anchors[0]} "
            anchors[0] += 1
        if kind == "scalar":
            return anchor + (draw(st.sampled_from(USUAL_SCALARS[:6])) if anchor else scalar())
        items = draw(st.integers(0, 3))
        if kind == "seq":
            return anchor + "[" + ", ".join(node(depth + 1) for _ in range(items)) + "]"
        pairs = [f"{key()}: {node(depth + 1)}" for _ in range(items)]
        return anchor + "{" + ", ".join(pairs) + "}"

    lines = []
    for _ in range(draw(st.integers(1, 6))):
        block = draw(st.sampled_from(["flow", "flow", "seq", "map"]))
        if block == "flow":
            lines.append(f"{key()}: {node(0)}")
        else:
            lines.append(f"{key()}:")
            for _ in range(draw(st.integers(1, 3))):
                lines.append(f"  - {node(1)}" if block == "seq" else f"  {key()}: {node(1)}")
    text = "\n".join(lines)
    if draw(st.integers(0, 3)) == 3:  # a few random edits: what a careless hand does to a file
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(text)))
            text = (
                text[:at]
                + draw(
                    st.sampled_from(
                        [
                            "\n",
                            " ",
                            ":",
                            "- ",
                            "&a0 ",
                            "*a0",
                            "!",
                            "'",
                            '"',
                            "[",
                            "}",
                            "\t",
                            "\x00",
                            "\ufeff",
                            "\x85",
                            "---\n",
                        ]
                    )
                )
                + text[at:]
            )
    return text


@SETTINGS
@seed(SEED)
@given(text=yaml_documents())
def test_hostile_yaml_gives_a_value_or_a_document_error(text: str):
    outcome_of(load_yaml_document, text.encode(), "gen.yaml")


SLOT = "slot-7f3a"  # a plain string no generated value contains, replaced by one hostile piece after dumping

#: Whole values that each hit one bound: deep flow nesting (RecursionError in PyYAML's composer without the
#: bound) and a small "billion laughs" (a million nodes without the alias and node budgets).
BOUND_PIECES = [
    "[" * 3000 + "]" * 3000,
    "[&l0 [a, a, a, a, a, a, a, a, a, a], "
    + ", ".join(f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 7))
    + "]",
]


@st.composite
def valid_yaml_with_one_bad_piece(draw: st.DrawFn) -> str:
    """A dumped JSON value with one scalar or key swapped for an odd spelling: every example reaches the one rule
    it exercises (random documents mostly stop at their first, usually syntactic, problem)."""
    value = {"v": draw(json_values), "w": {"x": [SLOT]} if draw(st.booleans()) else SLOT}
    if draw(st.booleans()):
        value[SLOT + "-key"] = 1
    text = yaml.safe_dump(value, default_flow_style=draw(st.booleans()))
    text = text.replace(SLOT + "-key", draw(st.sampled_from(ODD_KEYS + USUAL_KEYS)))
    return text.replace(SLOT, draw(st.sampled_from(ODD_SCALARS + USUAL_SCALARS + BOUND_PIECES)))


@SETTINGS
@seed(SEED)
@given(text=valid_yaml_with_one_bad_piece())
@example_each("text", [f"v: {piece}" for piece in ODD_SCALARS + BOUND_PIECES] + [f"{key}: 1" for key in ODD_KEYS])
def test_valid_yaml_with_one_bad_piece_gives_a_value_or_a_document_error(text: str):
    outcome_of(load_yaml_document, text.encode(), "gen.yaml")


@SETTINGS
@seed(SEED)
@given(data=st.binary(max_size=2048))
def test_random_bytes_as_yaml(data: bytes):
    outcome_of(load_yaml_document, data, "gen.yaml")


@SETTINGS
@seed(SEED)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=400))
def test_random_text_as_yaml(text: str):
    outcome_of(load_yaml_document, text.encode(), "gen.yaml")


# ---- JSON -----------------------------------------------------------------------------------------------------


@SETTINGS
@seed(SEED)
@given(
    value=json_values,
    edits=st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.sampled_from(
                ["[", "]", "{", "}", '"', ",", ":", "NaN", "-Infinity", "1e999", "\\", "\\ud800", "\x00", " ", "9" * 40]
            ),
        ),
        max_size=3,
    ),
)
def test_json_text_with_edits_gives_a_value_or_a_document_error(value: Any, edits: list[tuple[int, str]]):
    text = json.dumps(value)
    for at, piece in edits:
        at %= len(text) + 1
        text = text[:at] + piece + text[at:]
    result = outcome_of(load_json_document, text.encode(), "gen.json")
    if not edits:
        assert result == value


#: JSON tokens Python's json module reads but JSON (or our bounds) refuse, each valid in a value position.
BAD_JSON_TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e400",
    '"\\ud800"',
    '{"k": 1, "k": 2}',
    "9" * 5000,
    "9007199254740993",
    "[" * 3000 + "]" * 3000,
    '"ok"',
    "[]",
    "0.5",
]


@SETTINGS
@seed(SEED)
@given(value=json_values, token=st.sampled_from(BAD_JSON_TOKENS), nested=st.booleans())
@example_each("token", BAD_JSON_TOKENS, value={"release": "r1"}, nested=True)
def test_valid_json_with_one_bad_token_gives_a_value_or_a_document_error(value: Any, token: str, nested: bool):
    text = json.dumps({"v": value, "w": [SLOT] if nested else SLOT}).replace(f'"{SLOT}"', token)
    outcome_of(load_json_document, text.encode(), "gen.json")


@SETTINGS
@seed(SEED)
@given(data=st.binary(max_size=2048))
def test_random_bytes_as_json(data: bytes):
    outcome_of(load_json_document, data, "gen.json")


# ---- release paths ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project root whose release directory holds every kind of trap, and a sentinel outside the root."""
    base = tmp_path_factory.mktemp("paths")
    root = base / "root"
    releases = root / "stacks" / "releases" / "dev"
    releases.mkdir(parents=True)
    (releases / "good.json").write_text('{"release": "r1"}')
    (releases / "empty.json").write_bytes(b"")
    (releases / "binary.json").write_bytes(b"\x89PNG\x00\x00")
    (releases / "dir.json").mkdir()
    os.mkfifo(releases / "pipe.json")
    (root / "stacks" / "Pulumi.prod.yaml").write_text("config:\n  a:b:\n    secure: v1:SECRET\n")
    (base / "outside").mkdir()
    (base / "outside" / "passwd.json").write_text('{"sentinel": true}')
    (releases / "escape.json").symlink_to(base / "outside" / "passwd.json")
    (releases / "up.json").symlink_to(root / "stacks" / "Pulumi.prod.yaml")
    (releases / "alias.json").symlink_to(releases / "good.json")
    (releases / "loop.json").symlink_to(releases / "loop.json")
    return root


class _RecordingOS:
    """``os`` for documents.py that records every path passed to ``os.open``."""

    def __init__(self, opened: list[str]) -> None:
        self.opened = opened

    def open(self, path: Any, *args: Any, **kwargs: Any) -> int:
        self.opened.append(os.path.realpath(path))
        return os.open(path, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


@contextlib.contextmanager
def recording_opens() -> Iterator[list[str]]:
    opened: list[str] = []
    with mock.patch.object(documents, "os", _RecordingOS(opened)):
        yield opened


SEGMENTS = [
    "stacks",
    "releases",
    "dev",
    "good.json",
    "empty.json",
    "binary.json",
    "dir.json",
    "pipe.json",
    "escape.json",
    "up.json",
    "alias.json",
    "loop.json",
    "missing.json",
    "..",
    ".",
    "",
    "Pulumi.prod.yaml",
    "outside",
    "passwd.json",
    "etc",
    "passwd",
    "a\x00b",
    "x" * 300,
    "C:",
    "~",
    "a b",
    "é.json",
    "\\",
]


TRAPS = [
    "good.json",
    "empty.json",
    "binary.json",
    "dir.json",
    "pipe.json",
    "escape.json",
    "up.json",
    "alias.json",
    "loop.json",
    "missing.json",
]
PREFIXES = ["stacks/releases/dev/", "./stacks/releases/dev/", "stacks/releases/./dev/", "stacks/releases/dev/../dev/"]


@SETTINGS
@seed(SEED)
@given(
    path=st.one_of(
        st.builds(str.__add__, st.sampled_from(PREFIXES), st.sampled_from(TRAPS)),  # every trap, reached directly
        st.lists(st.sampled_from(SEGMENTS), max_size=8).map("/".join),
        st.lists(st.sampled_from(SEGMENTS), max_size=8).map(lambda parts: "/" + "/".join(parts)),
        st.lists(st.sampled_from(SEGMENTS), max_size=5).map(lambda parts: "stacks/releases/" + "/".join(parts)),
        st.text(max_size=300),
    )
)
@example_each("path", ["stacks/releases/dev/" + name for name in TRAPS])
def test_random_release_paths_never_leave_the_release_directory(project: Path, path: str):
    release_dir = os.path.realpath(project / "stacks" / "releases")
    with recording_opens() as opened:
        result = outcome_of(load_json_file, path, project)
    assert all(p.startswith(release_dir + os.sep) for p in opened), opened
    if not isinstance(result, DocumentError):
        assert result == {"release": "r1"}, result
