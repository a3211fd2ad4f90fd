"""``llm-serving plan``: run the real program under the mock monitor, then write what it would create.

The program resolves the stack itself (``infra.entry.main``); this module receives that same resolution through
the entry's ``on_resolved`` hook, so the config is validated and the planner runs once per plan.

Output directory ownership: a plan directory holds ``inventory.json``, ``capacity.json``, ``manifests/*.yaml``
(and ``policy-report.json`` when the policy pack ran) plus ``.llm-serving-plan.json``, the list of files this
tool wrote there. A rerun removes exactly those files before writing; a non-empty directory without that list
is refused, so ``--out`` never deletes a file the tool did not write.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..resolve import ResolvedStack
from .capacity_table import render_table
from .inventory import Inventory
from .stackfile import STACKS_DIR, read_stack_file

PROJECT = "llm-serving"
#: The list of files a plan directory's previous run wrote (relative POSIX paths).
OWNED_FILES = ".llm-serving-plan.json"


class OutputDirError(Exception):
    """``--out`` cannot be used: not a directory, not writable, or holding files this tool did not write."""


@dataclass(frozen=True)
class PlanRun:
    resolved: ResolvedStack
    inventory: Inventory


def run_plan(stack: str, stacks_dir: Path | None = None) -> PlanRun:
    """Read the stack file, run the program offline; raise ConfigError when the stack's config is invalid."""
    from ..entry import StackConfigError
    from ..entry import main as program_main
    from .runner import run_offline

    sf = read_stack_file(stack, stacks_dir or STACKS_DIR)
    seen: list[ResolvedStack] = []
    try:
        run = run_offline(
            lambda: program_main(on_resolved=seen.append),
            project=PROJECT,
            stack=stack,
            config=sf.config,
            secret_keys=sf.secret_keys,
        )
    except StackConfigError as err:
        raise err.config_error from None
    if len(seen) != 1:  # the entry resolves exactly once before registering anything, or raises
        raise RuntimeError(f"the program resolved stack {stack!r} {len(seen)} times")
    return PlanRun(seen[0], run.inventory())


# ---- output directory ---------------------------------------------------------------------------------


def owned_files(out: Path) -> list[str]:
    marker = out / OWNED_FILES
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: UnicodeDecodeError, JSONDecodeError
        raise OutputDirError(
            f"{marker} is not a list of files this tool wrote ({exc}); remove the directory's "
            "contents yourself or choose another --out"
        ) from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(
        isinstance(f, str) and f and "\x00" not in f and ".." not in Path(f).parts and not Path(f).is_absolute()
        for f in files
    ):
        raise OutputDirError(f"{marker} is not a list of files this tool wrote; choose another --out")
    return files


#: Files a plan writes besides ``manifests/*.yaml``: a file of that name the tool did not write is never replaced.
PLAN_FILES = ("inventory.json", "capacity.json", "policy-report.json")


def prepare_output_dir(out: Path, targets: tuple[str, ...] | list[str] = ()) -> bool:
    """Create ``out`` or clear what an earlier plan wrote into it; refuse anything else. ``targets`` are the
    files (relative POSIX paths) about to be written: an existing one this tool did not write is refused before
    anything is removed. Returns True when ``out`` did not exist before."""
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"--out {out} exists and is not a directory")
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputDirError(f"--out {out}: {parent} is not a directory")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        entries = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise OutputDirError(f"--out {out}: cannot create or list it ({exc.strerror})") from None
    if not entries:
        return created
    if OWNED_FILES not in entries:
        raise OutputDirError(
            f"--out {out} is not empty and was not written by llm-serving plan "
            f"({len(entries)} entr{'y' if len(entries) == 1 else 'ies'}); choose an empty or new directory"
        )
    owned = owned_files(out)
    manifests = out / "manifests"
    if manifests.is_symlink() or (manifests.exists() and not manifests.is_dir()):
        raise OutputDirError(f"--out {out}: manifests is not a directory this tool made; choose another --out")
    foreign = sorted(rel for rel in targets if rel not in owned and ((out / rel).exists() or (out / rel).is_symlink()))
    if foreign:
        raise OutputDirError(
            f"--out {out}: {foreign[0]} was not written by llm-serving plan"
            f"{f' (and {len(foreign) - 1} more)' if len(foreign) > 1 else ''}; move it away or "
            "choose another --out"
        )
    root = Path(os.path.realpath(out))
    try:
        for rel in owned:
            path = out / rel
            # never through a symbolic link to a directory elsewhere: only files inside ``out`` are removed
            if (path.is_file() or path.is_symlink()) and Path(os.path.realpath(path.parent)).is_relative_to(root):
                path.unlink()
        (out / OWNED_FILES).unlink()
        if manifests.is_dir() and not any(manifests.iterdir()):
            manifests.rmdir()
    except OSError as exc:
        raise OutputDirError(
            f"--out {out}: cannot remove what an earlier plan wrote ({exc.strerror}: {exc.filename})"
        ) from None
    return False


def record_owned(out: Path, files: list[str]) -> None:
    (out / OWNED_FILES).write_text(json.dumps({"files": sorted(set(files))}, indent=2) + "\n", encoding="utf-8")


def write_plan(run: PlanRun, out: Path) -> dict[str, dict[str, Any]]:
    """Write inventory.json, capacity.json and manifests/ (replacing only what an earlier plan wrote).

    Everything is rendered before the directory is touched (a manifest name clash or an unserialisable value
    leaves it as it was); a write that fails part-way removes what this run wrote."""
    manifests = run.inventory.manifests()  # raises before anything is written when two objects collide
    files = {
        "inventory.json": run.inventory.to_json(),
        "capacity.json": json.dumps(run.resolved.plan.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n",
    }
    files.update(
        (f"manifests/{fname}", yaml.safe_dump(obj, sort_keys=True, default_flow_style=False))
        for fname, obj in manifests.items()
    )
    created = prepare_output_dir(out, [*files, *PLAN_FILES])
    written: list[str] = []
    try:
        for rel, text in files.items():
            if rel.startswith("manifests/") and not (out / "manifests").is_dir():
                (out / "manifests").mkdir()
            (out / rel).write_text(text, encoding="utf-8")
            written.append(rel)
        record_owned(out, written)
    except OSError as exc:
        _roll_back(out, written, created)
        raise OutputDirError(
            f"--out {out}: cannot write ({exc.strerror}: {exc.filename}); removed what this run wrote"
        ) from None
    return manifests


def _roll_back(out: Path, written: list[str], created: bool) -> None:
    """Best effort after a failed write: remove this run's files, and ``out`` itself when this run made it;
    otherwise keep ``out`` marked as this tool's (listing whatever could not be removed)."""
    left = []
    for rel in written:
        try:
            (out / rel).unlink()
        except OSError:
            left.append(rel)
    with contextlib.suppress(OSError):
        (out / "manifests").rmdir()  # only when empty
    with contextlib.suppress(OSError):
        if created and not left:
            (out / OWNED_FILES).unlink(missing_ok=True)
            out.rmdir()
        else:
            record_owned(out, left)


def add_owned_file(out: Path, name: str) -> None:
    """Record one more file this tool wrote into a plan directory (e.g. the policy report)."""
    files = owned_files(out) if (out / OWNED_FILES).exists() else []
    record_owned(out, [*files, name])


def summary(run: PlanRun, manifests: dict[str, dict[str, Any]]) -> str:
    cfg, plan, inv = run.resolved.config, run.resolved.plan, run.inventory
    lines = [f"stack {inv.stack} ({cfg.environment}) — project {cfg.project}, region {cfg.region}", ""]
    counts = Counter(r.type for r in inv.resources)
    lines.append(f"resources: {sum(counts.values())}")
    for typ, n in sorted(counts.items()):
        lines.append(f"  {n:4d}  {typ}")
    lines += ["", "releases:"]
    for role, pool in cfg.pools():
        r = cfg.release(pool.release)
        lines.append(
            f"  {role:7s} {r.release}  weight {pool.weight}%  image …@{r.digest[:19]}…  "
            f"model {r.model_revision[:12]}  tokenizer {r.tokenizer_revision[:12]}  "
            f"{r.quantization}/{r.dtype}  vLLM {r.vllm_version}  TP {r.tensor_parallel_size}  "
            f"max_model_len {r.max_model_len}  sampling v{r.sampling_defaults_version}"
        )
    lines += ["", "capacity:", *("  " + x for x in render_table(plan).splitlines())]
    lines += ["", f"kubernetes manifests: {len(manifests)}"]
    protected = sorted(r.name for r in inv.resources if r.options.get("protect"))
    if protected:
        lines.append(f"protected: {', '.join(protected)}")
    return "\n".join(lines)
