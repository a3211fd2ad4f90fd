"""How much of ``llm-serving plan --stack <s>`` is the plan's own work: its wall time beside the wall time of a fresh
interpreter importing exactly the modules the plan imports, run alternately in one sitting.

    .venv/bin/python scripts/plan_overhead.py --stack prod --runs 5

Step 1 runs the plan once in-process and records ``sys.modules``; step 2 times, alternately and ``--runs`` times
each, ``python -m infra.offline.cli plan --stack S --out <tmp>`` and ``python -c 'import m1, m2, ...'`` (modules that
fail to import on their own are skipped in both). It prints the medians and their ratio. The policy pack's own
process (started by ``plan``) is part of the plan's work, not of its imports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def plan_modules(stack: str, out: str) -> list[str]:
    code = (
        "import runpy, sys, json\n"
        f"sys.argv = ['llm-serving', 'plan', '--stack', {stack!r}, '--out', {out!r}]\n"
        "try:\n    runpy.run_module('infra.offline.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m != '__main__')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    mods: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return mods


def importable(mods: list[str]) -> str:
    """A program importing ``mods`` in order, skipping any that cannot be imported on their own."""
    return (
        "import importlib\n"
        f"for m in {mods!r}:\n"
        "    try:\n        importlib.import_module(m)\n    except Exception:\n        pass\n"
    )


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "plan")
        mods = plan_modules(args.stack, out)
        imports = [sys.executable, "-c", importable(mods)]
        plan = [sys.executable, "-m", "infra.offline.cli", "plan", "--stack", args.stack, "--out", out]
        t_plan, t_imp = [], []
        for _ in range(args.runs):
            t_plan.append(timed(plan))
            t_imp.append(timed(imports))
    p, i = statistics.median(t_plan), statistics.median(t_imp)
    print(
        f"{len(mods)} modules; plan --stack {args.stack}: median {p:.2f} s over {args.runs} runs "
        f"({', '.join(f'{x:.2f}' for x in t_plan)}); importing its modules: median {i:.2f} s "
        f"({', '.join(f'{x:.2f}' for x in t_imp)}); ratio {p / i:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
