"""``llm-serving plan``: run the real program under the mock monitor, then write what it would create.

The program resolves the stack itself (``infra.entry.main``); this module receives that same resolution through
the entry's ``on_resolved`` hook, so the config is validated and the planner runs once per plan.

Output directory ownership: a plan directory holds ``inventory.json``, ``capacity.json``, ``manifests/*.yaml``
(and ``policy-report.json`` when the policy pack ran) plus ``.llm-serving-plan.json``, the list of files this
tool wrote there. A rerun removes exactly those files before writing; a non-empty directory without that list
is refused, so ``--out`` never deletes a file the tool did not write.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..config import ConfigError
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
        run = run_offline(lambda: program_main(on_resolved=seen.append), project=PROJECT, stack=stack,
                          config=sf.config, secret_keys=sf.secret_keys)
    except StackConfigError as err:
        raise err.config_error from None
    if len(seen) != 1:  # the entry resolves exactly once before registering anything, or raises
        raise RuntimeError(f"the program resolved stack {stack!r} {len(seen)} times")
    return PlanRun(seen[0], run.inventory())


# ---- output directory ---------------------------------------------------------------------------------

def _owned(out: Path) -> list[str]:
    marker = out / OWNED_FILES
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OutputDirError(f"{marker} is not a list of files this tool wrote ({exc}); remove the directory's "
                             "contents yourself or choose another --out") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) and f and ".." not in Path(f).parts and
                                              not Path(f).is_absolute() for f in files):
        raise OutputDirError(f"{marker} is not a list of files this tool wrote; choose another --out")
    return files


def prepare_output_dir(out: Path) -> None:
    """Create ``out`` or clear what an earlier plan wrote into it; refuse anything else."""
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"--out {out} exists and is not a directory")
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputDirError(f"--out {out}: {parent} is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"--out {out}: cannot create it ({exc.strerror})") from None
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    if OWNED_FILES not in entries:
        raise OutputDirError(f"--out {out} is not empty and was not written by llm-serving plan "
                             f"({len(entries)} entr{'y' if len(entries) == 1 else 'ies'}); choose an empty or new directory")
    for rel in _owned(out):
        path = out / rel
        if path.is_file() or path.is_symlink():
            path.unlink()
    (out / OWNED_FILES).unlink()
    manifests = out / "manifests"
    if manifests.is_dir() and not any(manifests.iterdir()):
        manifests.rmdir()


def record_owned(out: Path, files: list[str]) -> None:
    (out / OWNED_FILES).write_text(json.dumps({"files": sorted(set(files))}, indent=2) + "\n", encoding="utf-8")


def write_plan(run: PlanRun, out: Path) -> dict[str, dict]:
    """Write inventory.json, capacity.json and manifests/ (replacing only what an earlier plan wrote)."""
    manifests = run.inventory.manifests()  # raises before anything is written when two objects collide
    prepare_output_dir(out)
    written: list[str] = []
    try:
        (out / "inventory.json").write_text(run.inventory.to_json(), encoding="utf-8")
        written.append("inventory.json")
        (out / "capacity.json").write_text(
            json.dumps(run.resolved.plan.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
        written.append("capacity.json")
        mdir = out / "manifests"
        mdir.mkdir(exist_ok=True)
        for fname, obj in manifests.items():
            (mdir / fname).write_text(yaml.safe_dump(obj, sort_keys=True, default_flow_style=False), encoding="utf-8")
            written.append(f"manifests/{fname}")
    except OSError as exc:
        raise OutputDirError(f"--out {out}: cannot write ({exc.strerror}: {exc.filename})") from None
    finally:
        record_owned(out, written)
    return manifests


def add_owned_file(out: Path, name: str) -> None:
    """Record one more file this tool wrote into a plan directory (e.g. the policy report)."""
    files = _owned(out) if (out / OWNED_FILES).exists() else []
    record_owned(out, [*files, name])


def summary(run: PlanRun, manifests: dict[str, dict]) -> str:
    cfg, plan, inv = run.resolved.config, run.resolved.plan, run.inventory
    lines = [f"stack {inv.stack} ({cfg.environment}) — project {cfg.project}, region {cfg.region}", ""]
    counts = Counter(r.type for r in inv.resources)
    lines.append(f"resources: {sum(counts.values())}")
    for typ, n in sorted(counts.items()):
        lines.append(f"  {n:4d}  {typ}")
    lines += ["", "releases:"]
    for role, pool in cfg.pools():
        r = cfg.release(pool.release)
        lines.append(f"  {role:7s} {r.release}  weight {pool.weight}%  image …@{r.digest[:19]}…  "
                     f"model {r.model_revision[:12]}  tokenizer {r.tokenizer_revision[:12]}  "
                     f"{r.quantization}/{r.dtype}  vLLM {r.vllm_version}  TP {r.tensor_parallel_size}  "
                     f"max_model_len {r.max_model_len}  sampling v{r.sampling_defaults_version}")
    lines += ["", "capacity:", *("  " + x for x in render_table(plan).splitlines())]
    lines += ["", f"kubernetes manifests: {len(manifests)}"]
    protected = sorted(r.name for r in inv.resources if r.options.get("protect"))
    if protected:
        lines.append(f"protected: {', '.join(protected)}")
    return "\n".join(lines)
