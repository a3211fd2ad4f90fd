"""Every rollout stage the docs list, as successive stack files, and what ``llm-serving diff`` shows between them.

The stages are the runbooks': docs/rollout.md for the GKE stacks (prod, staging), docs/cloud-run.md for
``dev-cloudrun``, docs/vertex.md for ``staging-vertex``. Each stage is the config change the runbook states,
applied to the stage before it; :func:`measure` plans every stage with the real program (offline, as ``make plan``
does) and reviews each step as ``llm-serving diff OLD NEW --format json --exit-code`` would. The docs' "what the
diff shows" tables are rendered from these results (``python -m infra.offline.docs --write``) and
tests/test_rollout_stages.py asserts the exact actions of every step.
"""

from __future__ import annotations

import copy
import functools
import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from .stackfile import STACKS_DIR

#: Remove the key (an edit's value).
DELETE: Final = object()

Edit = tuple[tuple[str, ...], Any]


@dataclass(frozen=True)
class Stage:
    name: str
    #: The config change as the runbook states it.
    change: str
    edits: tuple[Edit, ...]


def serving(*path: str) -> tuple[str, ...]:
    return ("llm-serving:serving", *path)


def weights(stable: int, canary: int) -> tuple[Edit, ...]:
    return ((serving("stable", "weight"), stable), (serving("canary", "weight"), canary))


OLD_32B, NEW_32B = "qwen3-32b-fp8-2026-08-23.1", "qwen3-32b-fp8-2026-11-20.1"
OLD_8B, NEW_8B = "qwen3-8b-fp8-2026-11-02.1", "qwen3-8b-fp8-2026-11-20.1"


def gke_stages(env: str, stable_max: int, canary_max: int, hyperdisk: bool) -> list[Stage]:
    """docs/rollout.md's runbook: the stage before 0 is the settled previous rollout (both pools on the old
    release, the new one not yet in ``releases``). At stage 100 the canary carries everything: the HPA bounds swap
    (rules/rollout.py), and settle swaps them back."""
    releases = [f"stacks/releases/{env}/{OLD_32B}.json", f"stacks/releases/{env}/{NEW_32B}.json"]
    pre = Stage(
        "before 0",
        "the settled previous rollout: both pools on the old release, weights 100 / 0",
        (
            (("llm-serving:releases",), releases[:1]),
            (serving("canary", "release"), OLD_32B),
            *weights(100, 0),
        ),
    )
    stages = [
        pre,
        Stage(
            "0 (dark)",
            f"add {NEW_32B} to `releases`; `canary.release: {NEW_32B}`, weights 100 / 0",
            ((("llm-serving:releases",), releases), (serving("canary", "release"), NEW_32B)),
        ),
    ]
    for s, c in ((95, 5), (75, 25), (50, 50)):
        stages.append(Stage(str(c), f"weights {s} / {c}", weights(s, c)))
    stages.append(
        Stage(
            "100",
            f"weights 0 / 100; swap the HPA bounds: `canary.max_replicas: {stable_max}`, `stable.max_replicas: "
            f"{canary_max}`",
            (
                *weights(0, 100),
                (serving("canary", "max_replicas"), stable_max),
                (serving("stable", "max_replicas"), canary_max),
            ),
        )
    )
    promote: list[Edit] = [(serving("stable", "release"), NEW_32B)]
    change = f"`stable.release: {NEW_32B}`"
    if hyperdisk:
        snaps = ("llm-serving:gke", "weights", "hyperdisk_ml", "snapshots")
        promote.append((snaps, {NEW_32B: "qwen3-32b-fp8-281de45e51aa"}))
        change += f", and its snapshot in `gke.weights.hyperdisk_ml.snapshots` ({NEW_32B}: qwen3-32b-fp8-281de45e51aa)"
    stages.append(Stage("promote", change, tuple(promote)))
    stages.append(
        Stage(
            "settle",
            f"weights 100 / 0; HPA bounds back: `stable.max_replicas: {stable_max}`, `canary.max_replicas: {canary_max}`",
            (
                *weights(100, 0),
                (serving("stable", "max_replicas"), stable_max),
                (serving("canary", "max_replicas"), canary_max),
            ),
        )
    )
    return stages


def rollback_from_100(stable_max: int, canary_max: int, bounds: str = "HPA bounds") -> Stage:
    return Stage(
        "rollback",
        f"from stage 100: weights 100 / 0 and the {bounds} back (`stable.max_replicas: {stable_max}`, "
        f"`canary.max_replicas: {canary_max}`)",
        (
            *weights(100, 0),
            (serving("stable", "max_replicas"), stable_max),
            (serving("canary", "max_replicas"), canary_max),
        ),
    )


def cloud_run_stages() -> list[Stage]:
    """docs/cloud-run.md, "Rollout on Cloud Run": stable alone (the shipped stack) -> a canary pool at weight 0 ->
    weights -> promote (stable takes the canary's release, the canary pool goes)."""
    canary = {
        "target": "cloud_run",
        "release": NEW_8B,
        "weight": 0,
        "gpu": "nvidia-l4",
        "gpu_count": 1,
        "cpu": 6,
        "memory_gib": 24,
        "gpu_zonal_redundancy_disabled": True,
        "min_instances": 0,
        "max_instances": 1,
        "ingress": "INGRESS_TRAFFIC_ALL",
        "invoker_members": ["group:llm-developers@acme.example"],
        "loading": {
            "path": "cloud_storage_volume",
            "throughput_mib_s": 400,
            "engine_init_seconds": 90,
            "buffered_read": True,
        },
        "pricing": {"gpu_second_usd": 0.0001867, "vcpu_second_usd": 0.000018, "gib_second_usd": 0.000002},
    }
    releases = [f"stacks/releases/dev/{OLD_8B}.json", f"stacks/releases/dev/{NEW_8B}.json"]
    stages = [
        Stage("1 (stable alone)", "the shipped stack: stable only", ()),
        Stage(
            "2 (canary at 0)",
            f"add {NEW_8B} to `releases` and a `canary` pool with it at weight 0",
            ((("llm-serving:releases",), releases), (serving("canary"), canary)),
        ),
    ]
    for s, c in ((95, 5), (75, 25), (50, 50), (0, 100)):
        stages.append(Stage(f"3 ({c})", f"weights {s} / {c}", weights(s, c)))
    stages.append(
        Stage(
            "4 (promote)",
            f"`stable.release: {NEW_8B}`, weight 100, and remove the canary pool",
            ((serving("stable", "release"), NEW_8B), (serving("stable", "weight"), 100), (serving("canary"), DELETE)),
        )
    )
    return stages


def vertex_stages() -> list[Stage]:
    """docs/vertex.md, "Rollout on Vertex AI": the shipped 90 / 10 split -> 50 -> 100 (bounds swapped) -> promote
    -> settle."""
    return [
        Stage("10 (shipped)", "the shipped stack: weights 90 / 10", ()),
        Stage("50", "weights 50 / 50", weights(50, 50)),
        Stage(
            "100",
            "weights 0 / 100; swap the replica bounds: `canary.max_replicas: 2`, `stable.max_replicas: 1`",
            (*weights(0, 100), (serving("canary", "max_replicas"), 2), (serving("stable", "max_replicas"), 1)),
        ),
        Stage("promote", f"`stable.release: {NEW_32B}`", ((serving("stable", "release"), NEW_32B),)),
        Stage(
            "settle",
            "weights 100 / 0; bounds back: `stable.max_replicas: 2`, `canary.max_replicas: 1`",
            (*weights(100, 0), (serving("stable", "max_replicas"), 2), (serving("canary", "max_replicas"), 1)),
        ),
    ]


#: stack -> its runbook's stages, in order (each applied to the one before).
RUNBOOKS: Final[dict[str, list[Stage]]] = {
    "prod": gke_stages("prod", 4, 2, hyperdisk=False),
    "staging": gke_stages("staging", 2, 1, hyperdisk=True),
    "dev-cloudrun": cloud_run_stages(),
    "staging-vertex": vertex_stages(),
}
#: stack -> (the stage a rollback starts from, the rollback): measured beside the runbook.
ROLLBACKS: Final[dict[str, tuple[str, Stage]]] = {
    "prod": ("100", rollback_from_100(4, 2)),
    "staging": ("100", rollback_from_100(2, 1)),
    "staging-vertex": ("100", rollback_from_100(2, 1, "replica bounds")),
}
#: Where a stack's runbook (and its generated table) lives.
PAGES: Final = {
    "prod": "rollout.md",
    "staging": "rollout.md",
    "dev-cloudrun": "cloud-run.md",
    "staging-vertex": "vertex.md",
}


def apply(config: Mapping[str, Any], edits: Iterable[Edit]) -> dict[str, Any]:
    out = copy.deepcopy(dict(config))
    for path, value in edits:
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        if value is DELETE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = copy.deepcopy(value)
    return out


@dataclass(frozen=True)
class Step:
    stage: Stage
    #: ``llm-serving diff PREV THIS --format json --exit-code``: its exit status and document.
    exit_code: int
    doc: dict[str, Any]

    def actions(self) -> list[tuple[str, str, str, bool, bool, int]]:
        return [
            (c["type"], c["name"], c["action"], c["delete_before_replace"], c["protected"], c["restarts_pods"])
            for c in self.doc["changes"]
        ]


def stage_files(stack: str, out: Path, stacks_dir: Path = STACKS_DIR) -> list[tuple[Stage, Path, Path]]:
    """One stacks directory per stage under ``out`` (the shipped file with every edit up to that stage), then the
    rollback's: (stage, stacks dir, the stacks dir of the stage it is diffed against)."""
    doc = yaml.safe_load((stacks_dir / f"Pulumi.{stack}.yaml").read_text(encoding="utf-8"))
    config = doc["config"]
    files: list[tuple[Stage, Path, Path]] = []
    configs: dict[str, tuple[dict[str, Any], Path]] = {}

    def write(name: str, cfg: dict[str, Any]) -> Path:
        d = out / name
        d.mkdir(parents=True)
        (d / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({**doc, "config": cfg}, sort_keys=False))
        return d

    prev: Path | None = None
    for i, stage in enumerate(RUNBOOKS[stack]):
        config = apply(config, stage.edits)
        d = write(f"{i:02d}", config)
        configs[stage.name] = (config, d)
        files.append((stage, d, prev or d))
        prev = d
    if stack in ROLLBACKS:
        start, stage = ROLLBACKS[stack]
        cfg, base = configs[start]
        files.append((stage, write("rollback", apply(cfg, stage.edits)), base))
    return files[1:]


def measure(stack: str) -> list[Step]:
    """Plan every stage, then diff each against the one before (the rollback against the stage it starts from)
    through the CLI: ``llm-serving diff BEFORE AFTER --format json --exit-code``."""
    import contextlib
    import io

    from .cli import main
    from .planrun import run_plan, write_plan

    steps: list[Step] = []
    with tempfile.TemporaryDirectory(prefix=f"rollout-{stack}-") as tmp:
        planned: dict[Path, Path] = {}

        def plan(d: Path) -> Path:
            if d not in planned:
                planned[d] = Path(tmp) / "plans" / d.name
                write_plan(run_plan(stack, d), planned[d])
            return planned[d]

        for stage, after, before in stage_files(stack, Path(tmp) / "stacks"):
            old, new = plan(before), plan(after)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main(["diff", str(old), str(new), "--format", "json", "--exit-code"])
            steps.append(Step(stage, code, json.loads(out.getvalue())))
    return steps


@functools.cache
def cached_measure(stack: str) -> tuple[Step, ...]:
    """:func:`measure`, once per process (the docs and the stage test read the same measurement)."""
    return tuple(measure(stack))


def _kind(type_: str) -> str:
    return type_.rsplit(":", 1)[-1]


def describe(step: Step) -> str:
    """One cell: every change, grouped by action and kind (``update AlertPolicy x7``), with what it does."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in step.doc["changes"]:
        groups.setdefault((c["action"], _kind(c["type"])), []).append(c)
    parts = []
    for (action, kind), items in sorted(
        groups.items(), key=lambda kv: ("replace", "delete", "update", "create").index(kv[0][0])
    ):
        text = f"{action} {kind}" + (f" ×{len(items)}" if len(items) > 1 else f" `{items[0]['name']}`")
        flags = []
        if any(c["delete_before_replace"] for c in items):
            flags.append("delete-before-replace")
        if any(c["protected"] for c in items):
            flags.append("**protected: `pulumi up` refuses**")
        pods = sum(c["restarts_pods"] for c in items)
        if pods:
            flags.append(f"restarts {pods}")
        parts.append(text + (f" ({', '.join(flags)})" if flags else ""))
    return "; ".join(parts) or "no change"


def table(steps: Sequence[Step]) -> list[str]:
    lines = [
        "| stage | config change | `diff --exit-code` | what `llm-serving diff` shows |",
        "| --- | --- | ---: | --- |",
    ]
    for s in steps:
        warn = s.doc["summary"]["warnings"]
        note = f" — {warn} warning{'s' if warn != 1 else ''} (unmeasured pools)" if warn else ""
        lines.append(f"| {s.stage.name} | {s.stage.change} | {s.exit_code} | {describe(s)}{note} |")
    return lines
