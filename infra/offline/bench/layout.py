"""``llm-serving bench-layout``: measure a co-hosted layout against its parts, seed 003's two tests.

    llm-serving bench-layout interference --stack dev-cohost-gke --group pair --url http://<one co-host pod>:<port> \\
        --alone llama-3.1-8b=http://<that model alone>:<port> --alone mistral-7b=http://<...>:<port> \\
        --tokenizer llama-3.1-8b=DIR --tokenizer mistral-7b=DIR [--rates R1,R2,...] [--quick] [--out DIR]
    llm-serving bench-layout scaling --stack S --group G --model NAME --url http://<N instances>:<port> \\
        --one http://<one instance>:<port> --tokenizer NAME=DIR [--rates ...] [--quick] [--out DIR]

**interference** (seed 003: "co-hosted Gemma-3n-E2B-it and Llama-3.1-8B-Instruct ... Gemma-3n reached 30.21 reqs in a
co-hosted environment compared to 30.96 reqs in isolation"): every model of the group is swept *at the same time*
through the co-host server (one ``llm-serving bench --group G --model M`` each, run concurrently, so the models load
the pod together as they do in production), then each model alone on a server of its own (``--alone``: a pod of a
group of that model only, or a pool). **scaling** ("launching eight independent vLLM server instances on an 8xH100
node yielded an approximate 7.8 times throughput improvement"): one model through a server with N data-parallel
instances, then through a server with one (``--one``), swept alike.

Each sweep is the ordinary benchmark (its own directory under ``--out``, its own measurement record); this command
reads the records' operating points (the highest offered rate meeting the contract's SLO, req/s, and the output
tokens/s there) and writes ``<out>/layout.json``: per model, the two sides and their ratio (interference: co-hosted
/ alone, 1 = no interference; scaling: N instances / one, against the ideal N). A sweep without an operating point
makes its ratio null, with the record's reason. The runs need the GPUs; nothing here can measure them offline.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...config.measurement import Measurement
from .runner import REPO, BenchError

EXIT_ERROR = 2
LAYOUT_FILE = "layout.json"
LAYOUT_FORMAT = "llm-serving.io/layout-comparison"


@dataclass(frozen=True)
class Side:
    """One sweep's result: where it ran, its operating point (req/s, output tokens/s) or why there is none."""

    label: str
    url: str
    record: str
    offered_rps: float | None
    output_tokens_per_s: float | None
    no_operating_point_reason: str | None

    @staticmethod
    def of(label: str, url: str, record_path: Path, m: Measurement) -> Side:
        op = m.operating_point
        return Side(
            label,
            url,
            str(record_path),
            op.offered_rps if op is not None else None,
            op.output_tokens_per_s if op is not None else None,
            m.no_operating_point_reason,
        )


@dataclass(frozen=True)
class Comparison:
    """One model's two sides and the ratio of their operating points (``numerator`` over ``denominator``)."""

    model: str
    numerator: Side
    denominator: Side
    #: ``numerator`` / ``denominator`` of the operating-point rates and of the output tokens/s; None when a side has
    #: no operating point.
    rps_ratio: float | None
    output_tokens_ratio: float | None
    #: What the ratio would be with no loss: 1 (interference), N instances (scaling).
    ideal: float


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 4)


def compare(model: str, numerator: Side, denominator: Side, ideal: float) -> Comparison:
    return Comparison(
        model,
        numerator,
        denominator,
        ratio(numerator.offered_rps, denominator.offered_rps),
        ratio(numerator.output_tokens_per_s, denominator.output_tokens_per_s),
        ideal,
    )


def document(test: str, stack: str, group: str, comparisons: Sequence[Comparison]) -> dict[str, Any]:
    return {
        "format": LAYOUT_FORMAT,
        "format_version": 1,
        "test": test,
        "stack": stack,
        "group": group,
        "comparisons": [asdict(c) for c in comparisons],
    }


def describe(c: Comparison, test: str) -> str:
    def side(s: Side) -> str:
        if s.offered_rps is None:
            return f"{s.label}: no operating point ({s.no_operating_point_reason})"
        return f"{s.label} {s.offered_rps:g} req/s ({s.output_tokens_per_s:.1f} output tokens/s)"

    what = f"{c.rps_ratio:g}x" if c.rps_ratio is not None else "no ratio"
    return f"{c.model} ({test}): {side(c.numerator)} vs {side(c.denominator)}: {what} (ideal {c.ideal:g}x)"


# ---- running the sweeps ------------------------------------------------------------------------------------------

#: Runs the sweeps: a list of (argv, out dir); returns each exit status. Replaced in tests.
Launcher = Callable[[Sequence[tuple[list[str], Path]]], list[int]]


def launch_concurrently(runs: Sequence[tuple[list[str], Path]]) -> list[int]:
    """Start every sweep at once (each ``llm-serving bench``, its output in ``<out>/bench.log``); wait for all."""
    procs = []
    for argv, out in runs:
        out.mkdir(parents=True, exist_ok=True)
        log = (out / "bench.log").open("wb")
        procs.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO), log))
    codes = []
    for proc, log in procs:
        codes.append(proc.wait())
        log.close()
    return codes


def bench_argv(args: argparse.Namespace, model: str, url: str, out: Path, tokenizer: str) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "infra.offline.cli",
        "bench",
        "--stack",
        args.stack,
        "--group",
        args.group,
        "--model",
        model,
        "--url",
        url,
        "--tokenizer",
        tokenizer,
        "--out",
        str(out / "sweep"),
    ]
    if args.rates:
        argv += ["--rates", args.rates]
    if args.quick:
        argv.append("--quick")
    if args.stacks_dir:
        argv += ["--stacks-dir", str(args.stacks_dir)]
    return argv


def _pairs(values: Sequence[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or ():
        name, sep, value = v.partition("=")
        if not sep or not name or not value:
            raise BenchError(f"{flag} {v!r}: expected MODEL=VALUE")
        if name in out:
            raise BenchError(f"{flag}: {name} is given twice")
        out[name] = value
    return out


def _record(out: Path, label: str) -> Measurement:
    path = out / "sweep" / "measurement.json"
    if not path.is_file():
        raise BenchError(f"the {label} sweep wrote no record ({path}); its log: {out / 'bench.log'}")
    return Measurement.model_validate_json(path.read_text(encoding="utf-8"))


def run_layout(args: argparse.Namespace, models: Sequence[str], launcher: Launcher = launch_concurrently) -> int:
    """Run the sweeps of ``args.test`` and write the comparison; ``models``: the group's models (public names)."""
    out: Path = args.out or REPO / "build" / "bench" / f"layout-{args.stack}-{args.group}-{args.test}"
    if out.exists() and any(out.iterdir()):
        raise BenchError(f"--out {out}: not empty; each run writes its own directory")
    tokenizers = _pairs(args.tokenizer, "--tokenizer")
    comparisons: list[Comparison] = []
    if args.test == "interference":
        alone = _pairs(args.alone, "--alone")
        missing = sorted(set(models) - set(alone)) + sorted(set(models) - set(tokenizers))
        if missing:
            raise BenchError(f"interference: every model needs --alone MODEL=URL and --tokenizer MODEL=DIR: {missing}")
        together = [
            (bench_argv(args, m, args.url, out / f"cohosted-{m}", tokenizers[m]), out / f"cohosted-{m}") for m in models
        ]
        separate = [
            (bench_argv(args, m, alone[m], out / f"alone-{m}", tokenizers[m]), out / f"alone-{m}") for m in models
        ]
        codes = launcher(together)  # all at once: the co-hosted models load the pod together
        for m in models:  # one at a time: each alone on its own server
            codes += launcher([next(r for r in separate if r[1] == out / f"alone-{m}")])
        if any(codes):
            raise BenchError(f"a sweep failed (exit codes {codes}); see the bench.log files under {out}")
        for m in models:
            co = Side.of("co-hosted", args.url, out / f"cohosted-{m}", _record(out / f"cohosted-{m}", f"co-hosted {m}"))
            al = Side.of("alone", alone[m], out / f"alone-{m}", _record(out / f"alone-{m}", f"alone {m}"))
            comparisons.append(compare(m, co, al, 1.0))
    else:
        if args.model not in models:
            raise BenchError(f"--model {args.model!r}: group {args.group} serves {', '.join(models)}")
        if not args.one or args.model not in tokenizers:
            raise BenchError("scaling: needs --one URL (a server with one instance) and --tokenizer MODEL=DIR")
        n = args.instances
        many = out / "instances-many"
        one = out / "instances-one"
        codes = launcher([(bench_argv(args, args.model, args.url, many, tokenizers[args.model]), many)])
        codes += launcher([(bench_argv(args, args.model, args.one, one, tokenizers[args.model]), one)])
        if any(codes):
            raise BenchError(f"a sweep failed (exit codes {codes}); see the bench.log files under {out}")
        comparisons.append(
            compare(
                args.model,
                Side.of(f"{n} instances", args.url, many, _record(many, "many-instance")),
                Side.of("1 instance", args.one, one, _record(one, "one-instance")),
                float(n),
            )
        )
    out.mkdir(parents=True, exist_ok=True)
    doc = document(args.test, args.stack, args.group, comparisons)
    (out / LAYOUT_FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for c in comparisons:
        print(describe(c, args.test), file=sys.stderr)
    print(f"wrote {out / LAYOUT_FILE}", file=sys.stderr)
    return 0


def group_models(args: argparse.Namespace) -> tuple[list[str], int]:
    """The group's models (public names, configuration order) and, for ``--model``, its instances per machine."""
    from ..cli import resolve

    plan = resolve(args.stack, args.stacks_dir).plan
    group = plan.cohosting.get(args.group)
    server = getattr(group, "server", None)
    if server is None:
        raise BenchError(f"--group {args.group!r}: not a co-host server group of stack {args.stack}")
    names: list[str] = []
    for i in server.instances:
        if i.public_name not in names:
            names.append(i.public_name)
    return names, sum(1 for i in server.instances if i.public_name == getattr(args, "model", None))


def cmd_layout(args: argparse.Namespace, launcher: Launcher = launch_concurrently) -> int:
    try:
        models, instances = group_models(args)
        args.instances = instances
        return run_layout(args, models, launcher)
    except BenchError as err:
        print(f"error: {str(err).splitlines()[0]}", file=sys.stderr)
        return EXIT_ERROR


_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)


def register(subparsers: argparse._SubParsersAction[_Parser]) -> _Parser:
    p = subparsers.add_parser(
        "bench-layout",
        help="measure a co-hosted group against its models alone, or N instances against one (seed 003's tests)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("test", choices=("interference", "scaling"), help="which comparison to run")
    p.add_argument("--stack", required=True, help="stack whose co-hosted group is measured")
    p.add_argument("--group", required=True, help="the co-hosted group (its key)")
    p.add_argument("--url", required=True, help="root URL of ONE pod of the group (e.g. a port-forward)")
    p.add_argument("--alone", action="append", help="interference: MODEL=URL of a server of that model alone")
    p.add_argument("--model", help="scaling: the model whose instances are compared")
    p.add_argument("--one", help="scaling: root URL of a server with one instance of the model")
    p.add_argument("--tokenizer", action="append", help="MODEL=DIR: a local copy of the model's tokenizer")
    p.add_argument("--rates", help="offered rates R1,R2,... (req/s) for every sweep (default: automatic)")
    p.add_argument("--quick", action="store_true", help="short sweeps (the bench's --quick)")
    p.add_argument("--out", type=Path, help="output directory (default build/bench/layout-<stack>-<group>-<test>)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default stacks/)")
    p.set_defaults(fn=cmd_layout)
    return p
