"""``llm-serving`` command line (the offline toolchain).

    llm-serving plan --stack dev [--out DIR]     run the real program under mocks; write inventory,
                                                 manifests and capacity; print a summary
    llm-serving capacity --stack prod            the planner's table alone
    llm-serving capacity --stack prod --recipes  the (instances x TP) layouts that fit each pool's machine
    llm-serving policy --stack prod [--out DIR]  the policy pack via the Analyzer gRPC protocol;
                                                 exit 1 on a mandatory violation
    llm-serving diff OLD_DIR NEW_DIR [--format json] [--exit-code]
                                                 what `pulumi up` would create / update / replace / delete
    llm-serving diff --rev REV --stack prod      the stack's plan at a git revision vs the working tree
    llm-serving bench --stack prod --pool stable --url URL --tokenizer DIR
                                                 open-loop benchmark of one replica -> measurement record
    llm-serving release stage DIR --bucket B --model M --revision R
                                                 stage weights create-only + checksum manifest
    llm-serving release hydrate-runbook ...      gcloud steps: Hyperdisk ML snapshot of a staged release

Exit codes: 0 ok, 1 a mandatory policy violation, 2 bad input (every problem listed, nothing written) or a change
that cannot apply (diff); diff --exit-code: 0 no changes, 1 changes, 3 a replacement or deletion.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import ConfigError
from ..resolve import ResolvedStack, resolve_stack
from .analyzer import PolicyConfigError, StartedPack
from .capacity_table import render_recipes, render_table
from .inputs import BoundedArgumentParser, InputError, printable
from .inventory import Inventory, InventoryError
from .planrun import OWNED_FILES, OutputDirError, PlanRun, add_owned_file, owned_files, run_plan, summary, write_plan
from .review.gitrev import PlanDiffError
from .stackfile import ROOT, STACKS_DIR, StackFileError, read_stack_file

if TYPE_CHECKING:
    from ..config.contract import WorkloadContract
    from .bench.target import BenchTarget

EXIT_CONFIG = 2
EXIT_POLICY = 1
STACKS_DIR_HELP = (
    "folder of stack files (default stacks/); release and measured: paths in them stay relative to the project root"
)


#: Config keys whose values are paths of files the stack reads (release files, measurement records).
_FILE_KEY = re.compile(r"^llm-serving:(releases\[\d+\]|serving\.[^.]+\.measured)$")


def paths_note(stacks_dir: Path | None, err: ConfigError) -> str | None:
    """With a ``--stacks-dir`` other than ``stacks/``, the rule for the file paths in a stack file, when the error
    names one: they are relative to the project root (the folder of Pulumi.yaml) however the stack file is found,
    because that is how the Pulumi program reads them (infra/entry.py resolves from the project root)."""
    if stacks_dir is None or stacks_dir.resolve() == STACKS_DIR.resolve():
        return None
    if not any(_FILE_KEY.match(path) for path in err.paths):
        return None
    return (
        f"note: --stacks-dir {stacks_dir} moves only the stack files; release and `measured:` paths "
        f"(stacks/releases/..., stacks/measurements/...) are read from the project root {ROOT}, as the Pulumi "
        "program reads them, not from beside the stack file"
    )


def resolve(stack: str, stacks_dir: Path | None = None) -> ResolvedStack:
    """The stack resolved without running the program (for commands that need no resources). Release and measured
    paths resolve from the project root whatever ``stacks_dir`` is (``paths_note``)."""
    sf = read_stack_file(stack, stacks_dir or STACKS_DIR)
    return resolve_stack(sf.values, stack, ROOT, frozenset(sf.secret_keys))


def bench_target(args: argparse.Namespace) -> BenchTarget:
    """The pool of ``--stack`` / ``--pool`` as the benchmark measures it: release identity, the exact vLLM
    arguments the plan renders, accelerator and contract. The replica's URL and a local copy of the release's
    tokenizer come from the command line: the plan cannot know them."""
    from .bench.runner import BenchError

    if not args.stack:
        raise BenchError("--stack is required: the release, arguments and contract come from its plan")
    if not args.url:
        raise BenchError("--url is required: the root URL of ONE replica of the pool (e.g. a kubectl port-forward)")
    if not args.tokenizer:
        raise BenchError("--tokenizer DIR is required: a local copy of the release's tokenizer files")
    resolved = resolve(args.stack, args.stacks_dir)
    cfg, plan = resolved.config, resolved.plan
    if getattr(args, "group", None):
        return _group_bench_target(args, resolved)
    if args.pool not in plan.pools:
        raise BenchError(f"--pool {args.pool!r}: stack {args.stack} has pools {', '.join(sorted(plan.pools))}")
    p = plan.pools[args.pool]
    return _target(
        args,
        cfg.contract,
        # Requests carry the public model name, as clients send it (the server answers as its release id).
        served_model_name=plan.public_model_name,
        release=p.release.release,
        image_digest=p.release.digest,
        vllm_version=p.release.vllm_version,
        machine_type=p.machine.machine_type,
        gpu_type=p.machine.gpu_type,
        gpus_per_node=p.machine.gpus_per_node,
        tensor_parallel_size=p.release.tensor_parallel_size,
        vllm_args=p.vllm_args,
    )


def _group_bench_target(args: argparse.Namespace, resolved: ResolvedStack) -> BenchTarget:
    """One model of a co-hosted group (``--group G --model NAME``) as the benchmark measures it: requests name the
    model, the engine arguments are its first instance's (the server runs each instance with them), the machine is
    the group's. A group's plan states its instances as the co-host server's configuration (``server``)."""
    from .bench.runner import BenchError

    cfg, plan = resolved.config, resolved.plan
    group = plan.cohosting.get(args.group)
    server = getattr(group, "server", None)
    if group is None or server is None:
        have = sorted(k for k, g in plan.cohosting.items() if getattr(g, "server", None) is not None)
        raise BenchError(
            f"--group {args.group!r}: stack {args.stack} has co-host server groups {', '.join(have) or 'none'}"
        )
    instances = [i for i in server.instances if i.public_name == args.model]
    if not instances:
        names = sorted({i.public_name for i in server.instances})
        raise BenchError(f"--model {args.model!r}: group {args.group} serves {', '.join(names)}")
    inst = instances[0]
    rel = cfg.release(inst.release)
    acc = cfg.accelerators[cfg.cohosting[args.group].accelerator]
    return _target(
        args,
        cfg.contract,
        served_model_name=args.model,
        release=rel.release,
        image_digest=rel.digest,
        vllm_version=rel.vllm_version,
        machine_type=acc.machine_type,
        gpu_type=acc.gpu_type,
        gpus_per_node=acc.gpus_per_node,
        tensor_parallel_size=rel.tensor_parallel_size,
        vllm_args=inst.args,
    )


def _target(
    args: argparse.Namespace,
    c: WorkloadContract,
    *,
    served_model_name: str,
    release: str,
    image_digest: str,
    vllm_version: str,
    machine_type: str,
    gpu_type: str,
    gpus_per_node: int,
    tensor_parallel_size: int,
    vllm_args: tuple[str, ...],
) -> BenchTarget:
    """What the bench measures: the server and its machine, the contract it is judged under, the command line's
    URL, tokenizer and adapted arguments."""
    from ..config.measurement import args_sha256
    from .bench.target import BenchTarget

    return BenchTarget(
        base_url=args.url.rstrip("/"),
        served_model_name=served_model_name,
        release=release,
        image_digest=image_digest,
        vllm_version=vllm_version,
        machine_type=machine_type,
        gpu_type=gpu_type,
        gpus_per_node=gpus_per_node,
        tensor_parallel_size=tensor_parallel_size,
        vllm_args=vllm_args,
        vllm_args_sha256=args_sha256(vllm_args),
        ttft_p95_ms=c.ttft_p95_ms,
        itl_p95_ms=c.itl_p95_ms,
        max_input_tokens=c.max_input_tokens,
        max_output_tokens=c.max_output_tokens,
        prompt_mean_tokens=c.prompt_tokens.mean,
        prompt_p95_tokens=c.prompt_tokens.p95,
        output_mean_tokens=c.output_tokens.mean,
        output_p95_tokens=c.output_tokens.p95,
        priority_classes=tuple((k.name, k.priority) for k in c.priority_classes),
        tokenizer_path=args.tokenizer,
        served_args=getattr(args, "served_args", None),
        served_args_reason=getattr(args, "served_args_reason", None),
    )


def default_out(stack: str) -> Path:
    return ROOT / "build" / "plan" / stack


# ---- commands -------------------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace) -> int:
    if args.skip_policy:
        return _plan(args, None)
    from .planrun import PROJECT
    from .policy import start_pack

    # The pack's interpreter starts while the program runs (the machine's other core), not after it.
    with start_pack(PROJECT, args.stack) as started:
        return _plan(args, started)


def _plan(args: argparse.Namespace, started: StartedPack | None) -> int:
    run = run_plan(args.stack, args.stacks_dir)
    out = Path(args.out) if args.out else default_out(args.stack)
    manifests = write_plan(run, out)
    print(summary(run, manifests))
    print(f"\nwrote {out}/inventory.json, {out}/capacity.json, {out}/manifests/ ({len(manifests)} objects)")
    if started is not None:
        # The policy summary is informative here: plan exits 0 whatever it finds (`policy` is the gate).
        from .policy import check_policies, policy_summary

        report, config_path = check_policies(run.resolved, run.inventory, started=started)
        try:
            (out / "policy-report.json").write_text(report.to_json(), encoding="utf-8")
            add_owned_file(out, "policy-report.json")
        except OSError as exc:
            raise OutputDirError(f"--out {out}: cannot write the policy report ({exc.strerror})") from None
        print(
            f"\npolicy: {policy_summary(report)} ({config_path.relative_to(ROOT)}); "
            f"`llm-serving policy --stack {args.stack}` prints the table; wrote {out}/policy-report.json"
        )
    return 0


def cmd_capacity(args: argparse.Namespace) -> int:
    resolved = resolve(args.stack, args.stacks_dir)
    print(render_recipes(resolved.config) if args.recipes else render_table(resolved.plan))
    return 0


def cmd_policy(args: argparse.Namespace) -> int:
    """Plan under mocks (or read --inventory), analyse with the pack as the engine would; 1 on mandatory findings."""
    from .policy import check_policies

    if args.inventory:
        run = PlanRun(resolve(args.stack, args.stacks_dir), Inventory.load(Path(args.inventory)))
    else:
        run = run_plan(args.stack, args.stacks_dir)
    config_path = Path(args.policy_config) if args.policy_config else None
    report, path = check_policies(run.resolved, run.inventory, config_path)
    out = Path(args.out) if args.out else None
    print(f"stack {args.stack} ({run.resolved.config.environment}), policy config {path}")
    print(report.render_table(), end="")
    if out is not None:
        write_policy_report(out, report.to_json())
        print(f"wrote {out}/policy-report.json")
    return EXIT_POLICY if report.mandatory_count else 0


def write_policy_report(out: Path, text: str) -> None:
    """``--out`` ownership as for plans: into a new or empty directory, or one this tool wrote; never over a file
    the tool did not write."""
    name = "policy-report.json"
    try:
        if out.exists() and not out.is_dir():
            raise OutputDirError(f"--out {out}: is not a directory")
        entries = sorted(p.name for p in out.iterdir()) if out.exists() else []
        if entries and (out / OWNED_FILES).exists():
            if (out / name).exists() and name not in owned_files(out):
                raise OutputDirError(f"--out {out}: {name} was not written by this tool; refusing to replace it")
        elif entries:
            raise OutputDirError(
                f"--out {out}: not empty and not written by this tool ({len(entries)} entries); "
                "give a new or empty directory"
            )
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")
        add_owned_file(out, name)
    except OSError as exc:
        raise OutputDirError(f"--out {out}: cannot write the report ({exc.strerror})") from None


def cmd_diff(args: argparse.Namespace) -> int:
    """Review two plan directories, or the stack's plan at a git revision against the working tree: what `pulumi up`
    would create, update, replace and delete (docs/reviewing-changes.md)."""
    import tempfile

    from .review import exit_code, plan_dir_at_git_revision, render_json, render_text, review_plan_dirs

    if args.rev:
        if not args.stack:
            print("error: --rev needs --stack", file=sys.stderr)
            return EXIT_CONFIG
        new_run = run_plan(args.stack)  # the working tree first: a bad stack fails before git is touched
        with tempfile.TemporaryDirectory(prefix="llm-serving-diff-") as tmp:
            old_dir = plan_dir_at_git_revision(args.rev, args.stack, ROOT, out_dir=Path(tmp) / "old")
            new_dir = Path(tmp) / "new"
            write_plan(new_run, new_dir)
            result = review_plan_dirs(old_dir, new_dir)
    elif len(args.dirs) == 2:
        result = review_plan_dirs(Path(args.dirs[0]), Path(args.dirs[1]))
    else:
        print("error: give <old-plan-dir> <new-plan-dir>, or --rev REV --stack STACK", file=sys.stderr)
        return EXIT_CONFIG
    write_stdout(render_json(result) if args.format == "json" else render_text(result))
    if result.errors:
        for e in result.errors:
            print(f"error: {e}", file=sys.stderr)
        print("the change cannot apply as planned.", file=sys.stderr)
        return EXIT_CONFIG
    return exit_code(result) if args.exit_code else 0


def write_stdout(text: str) -> None:
    """Print; a reader that closed the pipe early (``| head``) is not an error: the rest is dropped quietly."""
    import os

    try:
        # In blocks, so a reader that has gone is noticed at the next block, not after everything was buffered.
        for start in range(0, len(text), 1 << 16):
            sys.stdout.write(text[start : start + (1 << 16)])
            sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that flush cannot raise either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def parser() -> argparse.ArgumentParser:
    p = BoundedArgumentParser(
        prog="llm-serving", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common = BoundedArgumentParser(add_help=False)
    common.add_argument("--stack", required=True, help="stack name: reads <stacks-dir>/Pulumi.<stack>.yaml")
    common.add_argument("--stacks-dir", type=Path, default=None, help=STACKS_DIR_HELP)
    sub = p.add_subparsers(dest="command", required=True)
    sp = sub.add_parser(
        "plan", parents=[common], help="run the program offline under mocks and write what it would create"
    )
    sp.add_argument(
        "--out", help="output directory (default build/plan/<stack>); only files this tool wrote are replaced"
    )
    sp.add_argument("--skip-policy", action="store_true", help="do not run the policy pack for the summary")
    sp.set_defaults(fn=cmd_plan)
    sq = sub.add_parser(
        "policy",
        parents=[common],
        help="check the plan against the policy pack via the Analyzer gRPC protocol; exit 1 on mandatory violations",
    )
    sq.add_argument("--out", help="directory to write policy-report.json into")
    sq.add_argument("--inventory", help="analyse this inventory.json instead of planning the stack")
    sq.add_argument("--policy-config", help="policy config file (default policies/config/<environment>.json)")
    sq.set_defaults(fn=cmd_policy)
    sc = sub.add_parser("capacity", parents=[common], help="print the capacity planner's table for a stack")
    sc.add_argument(
        "--recipes",
        action="store_true",
        help=(
            "list, per served release and machine shape, the (instances x TP) layouts that fit memory with their "
            "per-instance concurrency (offline; the benchmark measures each on a GPU)"
        ),
    )
    sc.set_defaults(fn=cmd_capacity)
    sd = sub.add_parser("diff", help="what `pulumi up` would create, update, replace and delete between two plans")
    sd.add_argument("dirs", nargs="*", metavar="PLAN_DIR", help="<old-plan-dir> <new-plan-dir>")
    sd.add_argument("--rev", help="git revision to plan as the old side (the working tree is the new side)")
    sd.add_argument("--stack", help="stack to plan with --rev")
    sd.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json for CI")
    sd.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 0 without changes, 1 with changes but no replacement or deletion, 3 with any replacement or deletion",
    )
    sd.set_defaults(fn=cmd_diff)
    from .bench.cli import register as register_bench

    sb = register_bench(sub, bench_target)
    sb.add_argument("--stacks-dir", type=Path, default=None, help=STACKS_DIR_HELP)
    from .bench.layout import register as register_layout

    register_layout(sub)
    from .release import register as register_release

    register_release(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    # google-api-core warns on import that it will drop Python 3.11 in 2027: not actionable for a user here.
    warnings.filterwarnings("ignore", category=FutureWarning, module="google.api_core")
    args = parser().parse_args(argv)
    try:
        code: int = args.fn(args)
        return code
    except ConfigError as err:
        print(err.render(), file=sys.stderr)
        note = paths_note(getattr(args, "stacks_dir", None), err)
        if note:
            print(note, file=sys.stderr)
        print("nothing was registered.", file=sys.stderr)
        return EXIT_CONFIG
    except (StackFileError, PolicyConfigError, InventoryError, OutputDirError, PlanDiffError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    except InputError as err:
        print(f"error: {printable(str(err), 1000)}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
