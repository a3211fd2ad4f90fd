"""``llm-serving`` command line: offline plan, capacity table (and, as they land, policy and diff).

    llm-serving plan --stack dev [--out DIR]     run the real program under mocks; write inventory,
                                                 manifests and capacity; print a summary
    llm-serving capacity --stack prod            the planner's table alone
    llm-serving policy --stack prod [--out DIR]  the policy pack via the Analyzer gRPC protocol;
                                                 exit 1 on a mandatory violation
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import yaml

from ..config import ConfigError, StackConfig, load_stack_config
from .analyzer import InventoryError, PolicyConfigError
from ..planning.sizing import CapacityPlan, plan_stack, render_table
from .stackfile import ROOT, STACKS_DIR, StackFile, StackFileError, read_stack_file

EXIT_CONFIG = 2
PROJECT = "llm-serving"


def load(stack: str, stacks_dir: Path | None = None) -> tuple[StackFile, StackConfig]:
    sf = read_stack_file(stack, stacks_dir or STACKS_DIR)
    cfg = load_stack_config(sf.values, ROOT)
    return sf, cfg


# ---- manifests ----------------------------------------------------------------------------------------

def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-")


def manifest_objects(inventory: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Kubernetes objects the program registers, keyed by a stable file name."""
    out: dict[str, dict[str, Any]] = {}
    for r in inventory["resources"]:
        inputs = r["inputs"]
        if not (r["custom"] and r["type"].startswith("kubernetes:") and "kind" in inputs and "apiVersion" in inputs):
            continue
        meta = inputs.get("metadata") or {}
        ns = meta.get("namespace") or "_cluster"
        fname = f"{_slug(inputs['kind'])}--{_slug(ns)}--{_slug(meta.get('name') or r['name'])}.yaml"
        if fname in out:
            raise RuntimeError(f"two Kubernetes objects map to {fname}: names must be unique per kind/namespace")
        out[fname] = inputs
    return dict(sorted(out.items()))


def write_plan(run_inventory: dict[str, Any], plan: CapacityPlan, out: Path) -> dict[str, dict[str, Any]]:
    """Write inventory.json, capacity.json and manifests/ — replacing earlier output so reruns are identical."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("inventory.json", "capacity.json"):
        (out / stale).unlink(missing_ok=True)
    shutil.rmtree(out / "manifests", ignore_errors=True)
    (out / "inventory.json").write_text(json.dumps(run_inventory, indent=2, sort_keys=True) + "\n")
    (out / "capacity.json").write_text(json.dumps(plan.to_dict(), indent=2, sort_keys=True) + "\n")
    manifests = manifest_objects(run_inventory)
    mdir = out / "manifests"
    mdir.mkdir()
    for fname, obj in manifests.items():
        (mdir / fname).write_text(yaml.safe_dump(obj, sort_keys=True, default_flow_style=False))
    return manifests


def run_plan(stack: str, stacks_dir: Path | None = None) -> tuple[StackConfig, CapacityPlan, dict[str, Any]]:
    """Validate config, then run the real program offline; returns (config, capacity plan, inventory)."""
    from ..entry import main as program_main
    from .runner import run_offline

    sf, cfg = load(stack, stacks_dir)
    run = run_offline(program_main, project=PROJECT, stack=stack, config=sf.config, secret_keys=sf.secret_keys)
    return cfg, plan_stack(cfg), run.inventory()


def summary(cfg: StackConfig, plan: CapacityPlan, inventory: dict[str, Any], manifests: dict[str, Any]) -> str:
    lines = [f"stack {inventory['stack']} ({cfg.environment}) — project {cfg.project}, region {cfg.region}", ""]
    counts = Counter(r["type"] for r in inventory["resources"])
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
    protected = sorted(r["name"] for r in inventory["resources"] if r["options"].get("protect"))
    if protected:
        lines.append(f"protected: {', '.join(protected)}")
    return "\n".join(lines)


# ---- commands -------------------------------------------------------------------------------------

def cmd_plan(args: argparse.Namespace) -> int:
    cfg, plan, inventory = run_plan(args.stack, args.stacks_dir)
    out = Path(args.out) if args.out else ROOT / "build" / "plan" / args.stack
    manifests = write_plan(inventory, plan, out)
    print(summary(cfg, plan, inventory, manifests))
    print(f"\nwrote {out}/inventory.json, {out}/capacity.json, {out}/manifests/ ({len(manifests)} objects)")
    if not getattr(args, "skip_policy", False):
        # The policy summary is informative here: plan exits 0 whatever it finds (`policy` is the gate).
        report, config_path = check_policies(cfg, inventory, out)
        print(f"\npolicy: {policy_summary(report)} ({config_path.relative_to(ROOT)}); "
              f"`llm-serving policy --stack {args.stack}` prints the table; wrote {out}/policy-report.json")
    return 0


def cmd_capacity(args: argparse.Namespace) -> int:
    _, cfg = load(args.stack, args.stacks_dir)
    print(render_table(plan_stack(cfg)))
    return 0


# ---- policy (issue 7): the CrossGuard pack through the Analyzer gRPC protocol -----------------------------

POLICY_PACK = ROOT / "policies"
EXIT_POLICY = 1


def policy_config_path(cfg: StackConfig) -> Path:
    """The stack environment's enforcement file, the same one `pulumi preview --policy-pack-config` takes."""
    return POLICY_PACK / "config" / f"{cfg.environment}.json"


def policy_facts(cfg: StackConfig) -> dict[str, dict[str, Any]]:
    """Facts the policies read from Deployment annotations when present, given here as config properties for
    the offline check: cold-load estimates per Deployment, the contract's stream bound and max_model_len."""
    plan = plan_stack(cfg)
    return {
        "startup-window-covers-cold-load": {
            "coldLoadSeconds": {f"vllm-{role}": round(p.cold_load_seconds, 3) for role, p in sorted(plan.pools.items())}},
        "grace-period-covers-stream-bound": {"streamBoundSeconds": cfg.contract.stream_bound_seconds},
        "max-model-len-within-contract": {"maxModelLen": cfg.contract.max_model_len},
    }


def merged_policy_config(cfg: StackConfig, path: Path) -> dict[str, Any]:
    """The environment file with the stack's facts added; a property the file sets itself wins."""
    file_cfg = json.loads(path.read_text())
    merged: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in file_cfg.items()}
    for name, facts in policy_facts(cfg).items():
        entry = merged.get(name)
        if isinstance(entry, str):
            entry = {"enforcementLevel": entry}
        merged[name] = {**facts, **(entry or {})}
    return merged


def check_policies(cfg: StackConfig, inventory: dict[str, Any], out: Path | None,
                   config_path: Path | None = None) -> tuple[Any, Path]:
    """Run the pack against an inventory with the environment's config; write policy-report.json to ``out``."""
    from .analyzer import run_policy_pack

    path = config_path or policy_config_path(cfg)
    report = run_policy_pack(POLICY_PACK, inventory, merged_policy_config(cfg, path))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "policy-report.json").write_text(report.to_json())
    return report, path


def policy_summary(report: Any) -> str:
    return (f"{len(report.violations)} violation(s): {report.mandatory_count} mandatory, "
            f"{report.advisory_count} advisory, {len(report.policies)} policies")


def cmd_policy(args: argparse.Namespace) -> int:
    """Plan under mocks (or read --inventory), analyse with the pack as the engine would; 1 on mandatory findings."""
    if args.inventory:
        _, cfg = load(args.stack, args.stacks_dir)
        inventory = json.loads(Path(args.inventory).read_text())
    else:
        cfg, _, inventory = run_plan(args.stack, args.stacks_dir)
    out = Path(args.out) if args.out else ROOT / "build" / "plan" / args.stack
    config_path = Path(args.policy_config) if args.policy_config else None
    report, path = check_policies(cfg, inventory, out, config_path)
    print(f"stack {args.stack} ({cfg.environment}), policy config {path}")
    print(report.render_table(), end="")
    print(f"wrote {out}/policy-report.json")
    return EXIT_POLICY if report.mandatory_count else 0


def cmd_diff(args: argparse.Namespace) -> int:
    """Diff two plan directories, or the stack's plan at a git revision against the working tree."""
    import tempfile

    from .plan_diff import diff_plan_dirs, plan_dir_at_git_revision, render

    if args.rev:
        if not args.stack:
            print("error: --rev needs --stack", file=sys.stderr)
            return EXIT_CONFIG
        with tempfile.TemporaryDirectory(prefix="llm-serving-diff-") as tmp:
            old_dir = plan_dir_at_git_revision(args.rev, args.stack, ROOT, out_dir=Path(tmp) / "old")
            new_dir = Path(tmp) / "new"
            cfg, plan, inventory = run_plan(args.stack)
            write_plan(inventory, plan, new_dir)
            print(render(diff_plan_dirs(old_dir, new_dir)))
        return 0
    if len(args.dirs) != 2:
        print("error: give <old-plan-dir> <new-plan-dir>, or --rev REV --stack STACK", file=sys.stderr)
        return EXIT_CONFIG
    print(render(diff_plan_dirs(Path(args.dirs[0]), Path(args.dirs[1]))))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llm-serving", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--stack", required=True, help="stack name: reads <stacks-dir>/Pulumi.<stack>.yaml")
    common.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default stacks/)")
    sub = p.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("plan", parents=[common], help="run the program offline under mocks and write what it would create")
    sp.add_argument("--out", help="output directory (default build/plan/<stack>)")
    sp.add_argument("--skip-policy", action="store_true", help="do not run the policy pack for the summary")
    sp.set_defaults(fn=cmd_plan)
    sq = sub.add_parser("policy", parents=[common],
                        help="check the plan against the policy pack via the Analyzer gRPC protocol; exit 1 on mandatory violations")
    sq.add_argument("--out", help="directory for policy-report.json (default build/plan/<stack>)")
    sq.add_argument("--inventory", help="analyse this inventory.json instead of planning the stack")
    sq.add_argument("--policy-config", help="policy config file (default policies/config/<environment>.json)")
    sq.set_defaults(fn=cmd_policy)
    sc = sub.add_parser("capacity", parents=[common], help="print the capacity planner's table for a stack")
    sc.set_defaults(fn=cmd_capacity)
    sd = sub.add_parser("diff", help="added / removed / changed resources between two plans, replacements flagged")
    sd.add_argument("dirs", nargs="*", metavar="PLAN_DIR", help="<old-plan-dir> <new-plan-dir>")
    sd.add_argument("--rev", help="git revision to plan as the old side (the working tree is the new side)")
    sd.add_argument("--stack", help="stack to plan with --rev")
    sd.set_defaults(fn=cmd_diff)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except StackFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    except ConfigError as err:
        print(err.render(), file=sys.stderr)
        print("nothing was registered.", file=sys.stderr)
        return EXIT_CONFIG
    except (PolicyConfigError, InventoryError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
