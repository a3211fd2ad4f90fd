"""The offline plan of a stack at a git revision, made without touching the working tree (``diff --rev``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path


class PlanDiffError(ValueError):
    """Malformed inventory, unreadable plan directory, or a failed plan at a git revision."""


def _run(
    cmd: list[str], cwd: Path, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            cmd,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise PlanDiffError(f"`{' '.join(cmd)}` timed out after {timeout:.0f}s") from e


def plan_dir_at_git_revision(
    rev: str, stack: str, workdir: Path, out_dir: Path | None = None, timeout: float = 900.0
) -> Path:
    """Produce the offline plan of ``rev`` without touching ``workdir``'s checkout.

    Runs ``git worktree add --detach <tmp>/src <rev>`` in ``workdir``, then
    ``<sys.executable> -m infra.offline.cli plan --stack <stack> --out <plan dir>`` inside that worktree (the
    worktree's own ``infra`` package is first on ``sys.path``), and always removes the worktree again.
    The plan is written to ``out_dir`` if given, else to ``<tmp>/plan`` - a fresh temporary directory
    the caller owns (delete ``result.parent`` when done).
    """
    workdir = Path(workdir).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="plan-at-rev-"))
    worktree = tmp / "src"
    plan_dir = Path(out_dir).resolve() if out_dir is not None else tmp / "plan"
    keep_tmp = False
    try:
        add = _run(["git", "worktree", "add", "--detach", str(worktree), rev], workdir, timeout=120)
        if add.returncode != 0:
            raise PlanDiffError(f"git worktree add for {rev!r} failed in {workdir}:\n{add.stderr.strip()}")
        try:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(worktree), env.get("PYTHONPATH", "")]))
            # Revisions before the offline toolchain moved into infra/offline/ have the CLI at infra/cli.py.
            module = "infra.offline.cli" if (worktree / "infra" / "offline" / "cli.py").is_file() else "infra.cli"
            proc = _run(
                [sys.executable, "-m", module, "plan", "--stack", stack, "--out", str(plan_dir)],
                worktree,
                timeout=timeout,
                env=env,
            )
            if proc.returncode != 0:
                tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-30:])
                raise PlanDiffError(f"plan at {rev!r} (stack {stack}) failed with exit code {proc.returncode}:\n{tail}")
            if not (plan_dir / "inventory.json").is_file():
                raise PlanDiffError(f"plan at {rev!r} succeeded but wrote no {plan_dir / 'inventory.json'}")
            keep_tmp = out_dir is None
        finally:
            removed = _run(["git", "worktree", "remove", "--force", str(worktree)], workdir, timeout=120)
            if removed.returncode != 0:
                shutil.rmtree(worktree, ignore_errors=True)
                _run(["git", "worktree", "prune"], workdir, timeout=120)
    finally:
        if not keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return plan_dir
