"""Every way to misuse the CLI ends in exit code 2 and the exact message line(s) on stderr — one ``error: ...``
line, or for configuration errors the list of key-path errors and ``nothing was registered.`` — and never in a
traceback. ``--out`` writes only files the tool owns: it refuses a non-empty directory it did not create, never
replaces or removes a file it did not write, removes what it wrote before, and leaves nothing half-written;
nothing outside ``--out`` is touched.

Most cases run ``cli.main([...])`` in-process; ``test_no_traceback_reaches_a_real_terminal`` runs a selection
through ``python -m infra.offline.cli`` in a fresh interpreter. The ``--out`` cases answer ``cli.run_plan`` with
the session's plan of the shipped stack (``cached_plan``): the plan itself is tests/test_plan.py's subject, these
tests are about what the CLI does with its result. The document loader's own rules are tests/test_documents.py's;
here each loader error class is shown once through the CLI.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.offline import cli, runner
from infra.offline.inventory import Inventory, Resource
from infra.offline.planrun import OWNED_FILES, PlanRun, write_plan
from infra.offline.stackfile import STACKS_DIR

from .conftest import REPO, plan_run

STACK_NAME_RULE = (
    "is not a stack name: 1-100 letters, digits, '_', '.' or '-', starting with a letter or '_' "
    "(Pulumi's stack-name rule); a stack name is never a path"
)


# ---- helpers -------------------------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def error_line(message: str) -> str:
    """What stderr holds for a non-config error: exactly one line."""
    return f"error: {message}\n"


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry below ``root`` (not following symbolic links): file bytes and mtime, link targets, dirs."""
    found: dict[str, Any] = {}
    if not root.exists():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", path.read_bytes(), path.stat().st_mtime_ns)
    return found


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(autouse=True)
def repo_untouched():
    """No misuse writes into the repository: stacks/ and build/ are as they were (bytes and mtimes)."""
    before = {d: snapshot(REPO / d) for d in ("stacks", "build")}
    yield
    assert {d: snapshot(REPO / d) for d in ("stacks", "build")} == before


@pytest.fixture
def cached_plan(monkeypatch: pytest.MonkeyPatch) -> PlanRun:
    """``cli.run_plan`` answered from the session's plan of a shipped stack (see the module docstring)."""
    monkeypatch.setattr(cli, "run_plan", lambda stack, stacks_dir=None: plan_run(stack))
    return plan_run("dev")


@pytest.fixture
def reference_plan(cached_plan: PlanRun, tmp_path: Path) -> dict[str, bytes]:
    """The files a fresh plan of dev writes (with --skip-policy)."""
    ref = tmp_path / "reference"
    write_plan(cached_plan, ref)
    return tree(ref)


def plan_args(out: Path, *extra: str) -> list[str]:
    return ["plan", "--stack", "dev", "--out", str(out), "--skip-policy", *extra]


def registrations(monkeypatch: pytest.MonkeyPatch) -> list[runner.OfflineRun]:
    """Every OfflineRun the program registers into, kept even when the program raises."""
    sinks: list[runner.OfflineRun] = []
    real = runner.run_offline

    def recording(program, *, project, stack, config, secret_keys, sink=None):
        sinks.append(sink or runner.OfflineRun(project=project, stack=stack))
        return real(program, project=project, stack=stack, config=config, secret_keys=secret_keys, sink=sinks[-1])

    monkeypatch.setattr(runner, "run_offline", recording)
    return sinks


# ---- --stack ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, shown",
    [
        ("../prod", "'../prod'"),
        ("a/b", "'a/b'"),
        ("", "''"),
        ("a" * 101, f"'{'a' * 60}... (101 characters)'"),
        (".hidden", "'.hidden'"),
    ],
)
def test_a_stack_name_that_is_not_one_is_refused(capsys, name: str, shown: str):
    code, out, err = run_cli(capsys, "plan", "--stack", name, "--skip-policy")
    assert (code, out, err) == (2, "", error_line(f"stack {shown}: {STACK_NAME_RULE}"))


def test_an_unknown_stack_lists_the_available_ones(capsys, tmp_path: Path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for s in ("dev", "prod"):
        shutil.copy(STACKS_DIR / f"Pulumi.{s}.yaml", stacks)
    (stacks / "Pulumi..hidden.yaml").write_text("config: {}\n")  # not a stack name: never listed
    code, out, err = run_cli(
        capsys, "plan", "--stack", "qa", "--stacks-dir", str(stacks), "--out", str(tmp_path / "out")
    )
    assert (code, out) == (2, "")
    assert err == error_line(f"{stacks}/Pulumi.qa.yaml: no stack file for stack 'qa' (available: dev, prod)")
    assert not (tmp_path / "out").exists()


# ---- plan --out ------------------------------------------------------------------------------------------------


def test_out_that_is_a_regular_file_is_refused(capsys, cached_plan, tmp_path: Path):
    target = tmp_path / "plan.txt"
    target.write_text("my notes")
    before = snapshot(tmp_path)
    code, out, err = run_cli(capsys, *plan_args(target))
    assert (code, out, err) == (2, "", error_line(f"--out {target} exists and is not a directory"))
    assert snapshot(tmp_path) == before


def test_out_below_a_regular_file_is_refused(capsys, cached_plan, tmp_path: Path):
    target = tmp_path / "plan.txt"
    target.write_text("my notes")
    before = snapshot(tmp_path)
    code, out, err = run_cli(capsys, *plan_args(target / "sub"))
    assert (code, out, err) == (2, "", error_line(f"--out {target}/sub: {target} is not a directory"))
    assert snapshot(tmp_path) == before


def test_out_in_an_unwritable_directory_is_refused(capsys, cached_plan, tmp_path: Path):
    """0o500 directories: root writes into them anyway (CAP_DAC_OVERRIDE), so this case needs a non-root run;
    test_out_on_a_file_system_nobody_may_write covers an unwritable --out as root."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: permission bits do not stop root from writing (CAP_DAC_OVERRIDE)")
        before = snapshot(tmp_path)
        code, out, err = run_cli(capsys, *plan_args(locked / "plan"))
        assert (code, out, err) == (
            2,
            "",
            error_line(f"--out {locked}/plan: cannot create or list it (Permission denied)"),
        )
        code, out, err = run_cli(capsys, *plan_args(locked))
        assert (code, out, err) == (
            2,
            "",
            error_line(
                f"--out {locked}: cannot write (Permission denied: "
                f"{locked}/inventory.json); removed what this run wrote"
            ),
        )
        assert snapshot(tmp_path) == before
    finally:
        locked.chmod(0o700)


def test_out_on_a_file_system_nobody_may_write(capsys, cached_plan):
    """sysfs refuses mkdir even to root: an unwritable --out that holds when the tests run as root."""
    target = Path("/sys/llm-serving-cli-test")
    try:
        os.mkdir(target)
    except OSError as exc:
        strerror = exc.strerror
    else:
        os.rmdir(target)
        pytest.skip("/sys is writable here")
    code, out, err = run_cli(capsys, *plan_args(target))
    assert (code, out, err) == (2, "", error_line(f"--out {target}: cannot create or list it ({strerror})"))
    assert not target.exists()


def test_a_non_empty_directory_the_tool_did_not_create_is_refused(capsys, cached_plan, tmp_path: Path):
    mine = tmp_path / "mine"
    (mine / "manifests").mkdir(parents=True)
    (mine / "inventory.json").write_text('{"mine": true}')
    (mine / "manifests" / "deployment--llm-serving-stable--vllm-stable.yaml").write_text("mine: true\n")
    before = snapshot(tmp_path)
    code, out, err = run_cli(capsys, *plan_args(mine))
    assert (code, out) == (2, "")
    assert err == error_line(
        f"--out {mine} is not empty and was not written by llm-serving plan (2 entries); "
        "choose an empty or new directory"
    )
    assert snapshot(tmp_path) == before


def test_a_user_file_in_the_tools_own_manifests_dir_survives_a_replan(
    capsys, cached_plan, reference_plan, tmp_path: Path
):
    out_dir = tmp_path / "plan"
    assert run_cli(capsys, *plan_args(out_dir))[0] == 0
    note = out_dir / "manifests" / "my-notes.yaml"
    note.write_text("kept: true\n")
    stamp = note.stat().st_mtime_ns
    assert run_cli(capsys, *plan_args(out_dir))[0] == 0
    assert (note.read_text(), note.stat().st_mtime_ns) == ("kept: true\n", stamp)
    assert tree(out_dir) == {**reference_plan, "manifests/my-notes.yaml": b"kept: true\n"}


@pytest.mark.parametrize("kind", ["policy-report", "a-manifest-name"])
def test_a_user_file_where_the_plan_would_write_is_never_replaced(capsys, cached_plan, tmp_path: Path, kind: str):
    """A file of a name the plan writes, in the tool's own directory but not written by it, is refused before
    anything is removed (policy-report.json is refused even with --skip-policy: a later run may write it)."""
    out_dir = tmp_path / "plan"
    assert run_cli(capsys, *plan_args(out_dir))[0] == 0
    name = "policy-report.json"
    if kind == "a-manifest-name":  # the user's own file under the exact name of an object the plan writes
        owned = json.loads((out_dir / OWNED_FILES).read_text())["files"]
        name = next(f for f in owned if f.startswith("manifests/"))
        (out_dir / OWNED_FILES).write_text(json.dumps({"files": [f for f in owned if f != name]}))
    (out_dir / name).write_text("mine")
    before = snapshot(tmp_path)
    code, out, err = run_cli(capsys, *plan_args(out_dir))
    assert (code, out) == (2, "")
    assert err == error_line(
        f"--out {out_dir}: {name} was not written by llm-serving plan; move it away or choose another --out"
    )
    assert snapshot(tmp_path) == before


def test_a_replan_removes_the_stale_files_it_wrote(capsys, cached_plan, reference_plan, tmp_path: Path):
    out_dir = tmp_path / "plan"
    assert run_cli(capsys, *plan_args(out_dir))[0] == 0
    owned = json.loads((out_dir / OWNED_FILES).read_text())["files"]
    for stale in ("manifests/configmap--gone--old.yaml", "policy-report.json"):  # objects an earlier plan had
        (out_dir / stale).write_text("stale")
    (out_dir / OWNED_FILES).write_text(
        json.dumps({"files": [*owned, "manifests/configmap--gone--old.yaml", "policy-report.json"]})
    )
    code, _out, err = run_cli(capsys, *plan_args(out_dir))
    assert (code, err) == (0, "")
    assert tree(out_dir) == reference_plan


def test_a_replan_never_removes_through_a_symbolic_link(capsys, cached_plan, tmp_path: Path):
    """An owned-files list naming a file behind a symlinked directory must not reach outside --out."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.yaml").write_text("outside --out")
    out_dir = tmp_path / "plan"
    assert run_cli(capsys, *plan_args(out_dir))[0] == 0
    (out_dir / "elsewhere").symlink_to(outside, target_is_directory=True)
    owned = json.loads((out_dir / OWNED_FILES).read_text())["files"]
    (out_dir / OWNED_FILES).write_text(json.dumps({"files": [*owned, "elsewhere/keep.yaml"]}))
    assert run_cli(capsys, *plan_args(out_dir))[0] == 0
    assert (outside / "keep.yaml").read_text() == "outside --out"
    # and a manifests/ that is itself a link elsewhere is refused before anything is written through it
    shutil.rmtree(out_dir / "manifests")
    (out_dir / "manifests").symlink_to(outside, target_is_directory=True)
    before = snapshot(tmp_path)
    code, out, err = run_cli(capsys, *plan_args(out_dir))
    assert (code, out, err) == (
        2,
        "",
        error_line(f"--out {out_dir}: manifests is not a directory this tool made; choose another --out"),
    )
    assert snapshot(tmp_path) == before


def test_a_write_that_fails_part_way_leaves_nothing_behind(
    capsys, cached_plan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """ENOSPC on the fifth file: the files this run wrote and the directory it created are removed again."""
    calls = []
    real = Path.write_text

    def full_disk(self: Path, *args: Any, **kwargs: Any) -> int:
        calls.append(self)
        if len(calls) == 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    out_dir = tmp_path / "new" / "plan"
    code, out, err = run_cli(capsys, *plan_args(out_dir))
    assert (code, out) == (2, "")
    assert err == error_line(
        f"--out {out_dir}: cannot write (No space left on device: {calls[4]}); removed what this run wrote"
    )
    assert snapshot(tmp_path) == {"new": ("dir",)}


# ---- two Kubernetes objects, one manifest file name ------------------------------------------------------------


def _config_map(urn_suffix: str, name: str) -> Resource:
    return Resource(
        urn=f"urn:pulumi:dev::llm-serving::kubernetes:core/v1:ConfigMap::{urn_suffix}",
        type="kubernetes:core/v1:ConfigMap",
        name=urn_suffix,
        custom=True,
        parent=None,
        provider="",
        inputs={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"},
            "data": {"k": urn_suffix},
        },
        dependencies=(),
        property_dependencies={},
        options={},
    )


CLASH = "two Kubernetes objects map to configmap--ns--probe-script.yaml: names must be unique per kind/namespace"


def test_two_objects_with_one_manifest_name_write_nothing(
    capsys, cached_plan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Detected before the directory is created or an earlier plan in it is cleared (``Probe_Script`` and
    ``probe-script`` slug to the same file name)."""
    clash = PlanRun(
        cached_plan.resolved,
        Inventory(
            project="llm-serving",
            stack="dev",
            resources=(_config_map("a", "probe-script"), _config_map("b", "Probe_Script")),
        ),
    )
    fresh = tmp_path / "fresh"
    with pytest.raises(Exception) as info:
        write_plan(clash, fresh)
    assert str(info.value) == CLASH and not fresh.exists()

    earlier = tmp_path / "earlier"  # a directory an earlier plan wrote: left exactly as it was
    write_plan(cached_plan, earlier)
    before = snapshot(tmp_path)
    monkeypatch.setattr(cli, "run_plan", lambda stack, stacks_dir=None: clash)
    for out_dir in (fresh, earlier):
        code, out, err = run_cli(capsys, *plan_args(out_dir))
        assert (code, out, err) == (2, "", error_line(CLASH))
    assert snapshot(tmp_path) == before


# ---- configuration errors --------------------------------------------------------------------------------------


def test_environment_that_does_not_match_the_stack_registers_nothing(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(STACKS_DIR / "Pulumi.dev.yaml", stacks / "Pulumi.qa.yaml")
    sinks = registrations(monkeypatch)
    code, out, err = run_cli(
        capsys, "plan", "--stack", "qa", "--stacks-dir", str(stacks), "--out", str(tmp_path / "out")
    )
    assert (code, out) == (2, "")
    assert err == (
        "1 configuration error(s):\n"
        "  - llm-serving:environment: 'dev' does not match stack 'qa' (expected the stack name or its "
        "prefix)\n"
        "nothing was registered.\n"
    )
    assert len(sinks) == 1 and sinks[0].resources == []
    assert not (tmp_path / "out").exists()


def _alias_bomb() -> str:
    lines = ["config:", "  llm-serving:l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  llm-serving:l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "config:\n  gcp:project: acme-llm-qa\n  gcp:project: acme-llm-qb\n",
            "{path}:3:3: config.gcp:project: duplicate key 'gcp:project': first at line 2, column 3, again at line 3, "
            "column 3; YAML loaders keep only the last one, silently",
        ),
        (
            _alias_bomb(),
            "{path}:8:49: more than 50 aliases (MAX_ALIASES): a few aliases share a block, many make a small file expand "
            "into a huge one ('billion laughs')",
        ),
        (
            b"config:\n  gcp:project: caf\xe9\n",
            "{path}:2: is not UTF-8 text: byte 0xe9 at byte offset 26 (invalid continuation byte)",
        ),
        ("config:\n  - gcp:project\n", "{path}: config: must be a mapping of '<namespace>:<name>' keys, not a list"),
    ],
    ids=["duplicate-key", "alias-bomb", "not-utf-8", "config-is-a-list"],
)
def test_a_broken_stack_file_is_one_line_through_the_cli(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | bytes, message: str
):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    path = stacks / "Pulumi.qa.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    sinks = registrations(monkeypatch)
    code, out, err = run_cli(
        capsys, "plan", "--stack", "qa", "--stacks-dir", str(stacks), "--out", str(tmp_path / "out")
    )
    assert (code, out, err) == (2, "", error_line(message.format(path=path)))
    assert sinks == [] and not (tmp_path / "out").exists()


# ---- diff --------------------------------------------------------------------------------------------------------


def _inventory_dir(base: Path, name: str, content: str | None) -> Path:
    d = base / name
    d.mkdir()
    if content is not None:
        (d / "inventory.json").write_text(content)
    return d


ONE_RESOURCE: dict[str, Any] = {
    "project": "llm-serving",
    "stack": "dev",
    "resources": [{"urn": "urn:pulumi:dev::llm-serving::t::r", "type": "t", "inputs": {"a": 1}}],
}


def _with(**changes: Any) -> str:
    return json.dumps({**ONE_RESOURCE, **changes})


def _resource_with(**changes: Any) -> str:
    return json.dumps({**ONE_RESOURCE, "resources": [{**ONE_RESOURCE["resources"][0], **changes}]})


BAD_INVENTORIES = [
    ("not-json", "not json", "{p} is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    ("a-list", "[1, 2]", "{p} must be a JSON object, got list"),
    ("missing-keys", '{"project": "p"}', "{p} is missing key(s): stack, resources"),
    ("resources-not-a-list", _with(resources="x"), "{p}: 'resources' must be a list"),
    ("outputs-not-an-object", _with(outputs=[["a", 1]]), "{p}: 'outputs' must be an object"),
    (
        "inputs-not-an-object",
        _resource_with(inputs=[1]),
        "{p} resources[0] ('urn:pulumi:dev::llm-serving::t::r'): 'inputs' must be an object",
    ),
    (
        "ignore-changes-not-strings",
        _resource_with(options={"ignore_changes": [1]}),
        "{p} resources[0] ('urn:pulumi:dev::llm-serving::t::r') option 'ignore_changes' must be a list of strings",
    ),
    (
        "long-urn",
        json.dumps({**ONE_RESOURCE, "resources": [{"urn": "u" * 5000, "type": "t", "inputs": 1}]}),
        f"{{p}} resources[0] ('{'u' * 60}... (5000 characters)'): 'inputs' must be an object",
    ),
    (
        "nan",
        _resource_with(inputs={"a": float("nan")}),
        "{p} is not valid JSON: NaN is not a JSON number (RFC 8259 §6)",
    ),
    (
        "overflowing-number",
        _with().replace('"a": 1', '"a": 1e400'),
        "{p} is not valid JSON: number '1e400' is out of range",
    ),
    (
        "lone-surrogate",
        _with().replace('"a": 1', '"a": "\\ud800"'),
        "{p} holds a lone surrogate escape (\\ud800-\\udfff), which is not text",
    ),
    ("deep", _with().replace('"a": 1', '"a": ' + "[" * 100 + "]" * 100), "{p} is nested deeper than 64 levels"),
    (
        "huge-nesting",
        "[" * 100_000 + "]" * 100_000,
        "{p} is not valid JSON: maximum recursion depth exceeded while decoding a JSON array from a unicode string",
    ),
]


@pytest.mark.parametrize("content, message", [c[1:] for c in BAD_INVENTORIES], ids=[c[0] for c in BAD_INVENTORIES])
def test_diff_of_a_malformed_inventory(capsys, tmp_path: Path, content: str, message: str):
    good = _inventory_dir(tmp_path, "good", json.dumps(ONE_RESOURCE))
    bad = _inventory_dir(tmp_path, "bad", content)
    for dirs in ((good, bad), (bad, good)):
        code, out, err = run_cli(capsys, "diff", *map(str, dirs))
        assert (code, out, err) == (2, "", error_line(message.format(p=bad / "inventory.json")))


def test_diff_of_a_missing_dir_or_one_without_an_inventory(capsys, tmp_path: Path):
    good = _inventory_dir(tmp_path, "good", json.dumps(ONE_RESOURCE))
    for bad in (tmp_path / "missing", _inventory_dir(tmp_path, "empty", None)):
        code, out, err = run_cli(capsys, "diff", str(good), str(bad))
        assert (code, out, err) == (2, "", error_line(f"no inventory.json in {bad} (run `plan --out {bad}` first)"))
    assert not (tmp_path / "missing").exists()


def test_diff_rev_needs_a_stack(capsys):
    assert run_cli(capsys, "diff", "--rev", "HEAD") == (2, "", error_line("--rev needs --stack"))


def test_diff_rev_with_a_bad_stack_fails_before_git_is_touched(capsys):
    worktrees = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=REPO, capture_output=True, text=True)
    code, out, err = run_cli(capsys, "diff", "--rev", "HEAD", "--stack", "../prod")
    assert (code, out, err) == (2, "", error_line(f"stack '../prod': {STACK_NAME_RULE}"))
    assert (
        subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
        == worktrees.stdout
    )


# ---- policy ------------------------------------------------------------------------------------------------------


def test_policy_with_a_missing_inventory(capsys, tmp_path: Path):
    missing = tmp_path / "inventory.json"
    code, out, err = run_cli(capsys, "policy", "--stack", "dev", "--inventory", str(missing))
    assert (code, out, err) == (
        2,
        "",
        error_line(f"no inventory file {missing} (run `llm-serving plan --out DIR` first)"),
    )


@pytest.mark.parametrize(
    "content, message",
    [BAD_INVENTORIES[i][1:] for i in (0, 1, 3, 8, 9, 10, 11)],
    ids=[BAD_INVENTORIES[i][0] for i in (0, 1, 3, 8, 9, 10, 11)],
)
def test_policy_with_a_malformed_inventory(capsys, tmp_path: Path, content: str, message: str):
    """The last four reached the policy pack before and died there (protobuf cannot carry NaN, 1e400, a lone
    surrogate): the inventory's reader refuses them."""
    path = tmp_path / "inventory.json"
    path.write_text(content)
    code, out, err = run_cli(
        capsys, "policy", "--stack", "dev", "--inventory", str(path), "--out", str(tmp_path / "out")
    )
    assert (code, out, err) == (2, "", error_line(message.format(p=path)))
    assert not (tmp_path / "out").exists()


@pytest.fixture
def small_inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(ONE_RESOURCE))
    return path


LEVELS = "advisory, mandatory, remediate, disabled"
BAD_POLICY_CONFIGS = [
    ("not-json", "nope", "policy config {p}:1:1: not valid JSON: Expecting value"),
    ("a-list", "[1]", "policy config {p} must be a JSON object, got list"),
    (
        "duplicate-key",
        '{"all": "advisory", "all": "mandatory"}',
        "policy config {p}: all: duplicate key 'all': JSON parsers keep only the last one, silently",
    ),
    (
        "nan",
        '{"vllm-output-capped": {"maxOutputTokens": NaN}}',
        "policy config {p}: NaN is not a JSON number (RFC 8259 §6); Python's json module accepts it, other parsers "
        "do not",
    ),
    (
        "bad-level",
        '{"vllm-output-capped": "sometimes"}',
        f"policy config {{p}}: 'vllm-output-capped': 'sometimes' is not an enforcement level (one of {LEVELS})",
    ),
    (
        "long-level",
        json.dumps({"vllm-output-capped": {"enforcementLevel": "m" * 1000}}),
        f"policy config {{p}}: 'vllm-output-capped': '{'m' * 60}... (1000 characters)' is not an enforcement level "
        f"(one of {LEVELS})",
    ),
    (
        "level-not-a-string",
        '{"vllm-output-capped": {"enforcementLevel": 2}}',
        f"policy config {{p}}: 'vllm-output-capped': must be an enforcement level ({LEVELS}) or an object with a "
        "string 'enforcementLevel', not int",
    ),
    (
        "entry-a-list",
        '{"vllm-output-capped": ["mandatory"]}',
        f"policy config {{p}}: 'vllm-output-capped': must be an enforcement level ({LEVELS}) or an object with a "
        "string 'enforcementLevel', not list",
    ),
]


@pytest.mark.parametrize(
    "content, message", [c[1:] for c in BAD_POLICY_CONFIGS], ids=[c[0] for c in BAD_POLICY_CONFIGS]
)
def test_policy_with_a_malformed_policy_config(
    capsys, tmp_path: Path, small_inventory: Path, content: str, message: str
):
    path = tmp_path / "policy.json"
    path.write_text(content)
    code, out, err = run_cli(
        capsys,
        "policy",
        "--stack",
        "dev",
        "--inventory",
        str(small_inventory),
        "--policy-config",
        str(path),
        "--out",
        str(tmp_path / "out"),
    )
    assert (code, out, err) == (2, "", error_line(message.format(p=path)))
    assert not (tmp_path / "out").exists()


def test_policy_with_a_missing_policy_config(capsys, tmp_path: Path, small_inventory: Path):
    missing = tmp_path / "policy.json"
    code, out, err = run_cli(
        capsys, "policy", "--stack", "dev", "--inventory", str(small_inventory), "--policy-config", str(missing)
    )
    assert (code, out, err) == (2, "", error_line(f"policy config {missing}: file not found"))


def test_policy_config_naming_an_unknown_policy(capsys, tmp_path: Path, small_inventory: Path):
    """Only the pack knows its policies, so this is the one check the pack's Configure step makes."""
    path = tmp_path / "policy.json"
    path.write_text('{"all": "mandatory", "no-such-policy": "mandatory"}')
    code, out, err = run_cli(
        capsys, "policy", "--stack", "dev", "--inventory", str(small_inventory), "--policy-config", str(path)
    )
    assert (code, out) == (2, "")
    head = "error: policy config names policies not in pack 'llm-serving-policies': 'no-such-policy' (known: "
    assert err.startswith(head) and err.endswith(")\n") and err.count("\n") == 1
    known = err[len(head) : -2].split(", ")
    assert known == sorted(known) and {"vllm-output-capped", "gke-no-spot-nodes"} <= set(known)


# ---- a real terminal -------------------------------------------------------------------------------------------

SUBPROCESS_CASES = [
    "stack-name",
    "duplicate-key",
    "config-error",
    "out-below-a-file",
    "diff-inventory",
    "policy-inventory",
    "policy-config",
]


def _subprocess_case(case: str, tmp: Path) -> tuple[list[str], str]:
    stacks = tmp / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.qa.yaml").write_text("config:\n  gcp:project: a\n  gcp:project: b\n")
    (stacks / "Pulumi.dev.yaml").write_text(
        (STACKS_DIR / "Pulumi.dev.yaml")
        .read_text()
        .replace("llm-serving:environment: dev", "llm-serving:environment: qa")
    )
    (tmp / "afile").write_text("x")
    inv = _inventory_dir(tmp, "bad", _resource_with(options={"ignore_changes": [1]})) / "inventory.json"
    good = _inventory_dir(tmp, "good", json.dumps(ONE_RESOURCE)) / "inventory.json"
    (tmp / "policy.json").write_text('{"vllm-output-capped": "sometimes"}')
    bad_inventory = error_line(
        f"{inv} resources[0] ('urn:pulumi:dev::llm-serving::t::r') option 'ignore_changes' must be a list of strings"
    )
    return {
        "stack-name": (["plan", "--stack", "../prod"], error_line(f"stack '../prod': {STACK_NAME_RULE}")),
        "duplicate-key": (
            ["plan", "--stack", "qa", "--stacks-dir", str(stacks)],
            error_line(
                f"{stacks}/Pulumi.qa.yaml:3:3: config.gcp:project: duplicate key 'gcp:project': first at line "
                "2, column 3, again at line 3, column 3; YAML loaders keep only the last one, silently"
            ),
        ),
        "config-error": (
            ["plan", "--stack", "dev", "--stacks-dir", str(stacks), "--out", str(tmp / "o")],
            "1 configuration error(s):\n  - llm-serving:environment: Input should be 'dev', 'staging' or 'prod' (got "
            "'qa')\nnothing was registered.\n",
        ),
        "out-below-a-file": (  # a whole plan in a cold interpreter first: ~8 s
            ["plan", "--stack", "dev", "--skip-policy", "--out", str(tmp / "afile" / "sub")],
            error_line(f"--out {tmp}/afile/sub: {tmp}/afile is not a directory"),
        ),
        "diff-inventory": (["diff", str(inv.parent), str(good.parent)], bad_inventory),
        "policy-inventory": (["policy", "--stack", "dev", "--inventory", str(inv)], bad_inventory),
        "policy-config": (
            ["policy", "--stack", "dev", "--inventory", str(good), "--policy-config", str(tmp / "policy.json")],
            error_line(
                f"policy config {tmp}/policy.json: 'vllm-output-capped': 'sometimes' is not an enforcement "
                f"level (one of {LEVELS})"
            ),
        ),
    }[case]


@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_no_traceback_reaches_a_real_terminal(tmp_path: Path, case: str):
    """The same messages from a fresh interpreter, as a user's shell sees them (~2 s each)."""
    argv, expected = _subprocess_case(case, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "infra.offline.cli", *argv], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", expected)
    assert not (tmp_path / "o").exists()


def test_policy_out_never_replaces_a_file_it_did_not_write(tmp_path: Path, capsys):
    """``policy --out`` follows the plan's ownership rule: a foreign directory or report is left alone."""
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "policy-report.json").write_text("my notes")
    code = cli.main(["policy", "--stack", "dev", "--out", str(foreign)])
    assert code == cli.EXIT_CONFIG
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --out {foreign}: not empty and not written by this tool (1 entries); give a new or empty directory"
    )
    assert (foreign / "policy-report.json").read_text() == "my notes"
    fresh = tmp_path / "fresh"
    assert cli.main(["policy", "--stack", "dev", "--out", str(fresh)]) == 0
    assert json.loads((fresh / ".llm-serving-plan.json").read_text()) == {"files": ["policy-report.json"]}
    assert cli.main(["policy", "--stack", "dev", "--out", str(fresh)]) == 0  # its own directory: replaced


def test_an_oversized_inventory_is_refused_before_it_is_parsed(tmp_path: Path, capsys, monkeypatch):
    from infra.offline import inventory

    monkeypatch.setattr(inventory, "MAX_INVENTORY_BYTES", 1000)
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps({"project": "llm-serving", "stack": "prod", "resources": [], "pad": "x" * 2000}))
    assert cli.main(["policy", "--stack", "prod", "--inventory", str(path)]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: is 2") and "over the limit of 1000 bytes (MAX_INVENTORY_BYTES)" in err
