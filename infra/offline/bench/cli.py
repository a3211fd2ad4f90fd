"""``llm-serving bench``: measure one replica's curve and operating point, write the record and its pictures.

    llm-serving bench --stack prod --pool stable --url http://<one replica>:<port> [--rates auto|R1,R2,...]
                      [--duration-seconds S] [--quick] [--out DIR] [--priority-mix interactive=0.8,batch=0.2]
                      [--prefix-ratio 0.3] [--guidellm PATH] [--record stacks/measurements/<file>.json]
                      [--record-uri gs://<bucket>/measurements/<file>.json]
    llm-serving bench fetch gs://<bucket>/measurements/<file>.json --to stacks/measurements/<file>.json

The caller supplies ``resolve_target(args) -> BenchTarget`` (the stack's resolved plan for ``--stack``/``--pool``);
``register`` adds the subcommand to an existing ``argparse`` subparsers object. Any failure prints one line
``error: ...`` and exits 2, without a traceback.

Before any load the server's ``/metrics`` must answer with vLLM's queue, KV and ITL series under the server's
first ``--served-model-name`` (vLLM's ``model_name`` label); otherwise, and whenever a rate's window holds no such
sample, the bench stops with an error instead of writing a record with blanks.

Writes into ``--out`` (default ``build/bench/<release>-<UTC time>``): ``measurement.json`` (the record),
``latency.png``, ``goodput.png``, ``server.png``, ``guidellm-report.html`` (guidellm's own report of all runs)
and ``raw/`` (every run's guidellm scenario, report and log, repeatable with ``guidellm run --scenario``).
``--record-uri`` also uploads the record create-only to Cloud Storage (what the in-cluster Job does,
components/bench_job.py); ``bench fetch`` reads such a record back into ``stacks/measurements/`` after validating
it (infra/offline/bench/store.py). ``fetch`` is an optional sub-command of ``bench``: ``bench`` without it runs a
benchmark, exactly as before.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from components import naming

from ...config.bench import (
    AUTO_GROWTH,
    AUTO_MAX_RATES,
    AUTO_REFINE_STEPS,
    AUTO_START_RPS,
    DEFAULT_DURATION_S,
    MAX_DURATION_S,
    MAX_RATE_RPS,
    MAX_RATES,
    MIN_WINDOW_ARRIVALS,
    QUICK_DURATION_S,
    QUICK_MAX_RATES,
    QUICK_REFINE_STEPS,
    WARMUP_FRACTION,
    parse_rates,
)
from ...config.measurement import MeasurementError
from ..inputs import InputError, OneLineParser, bounded_float, check_new_file, check_output_dir, http_url, printable
from . import store
from .analysis import AnalysisError, RatePoint, RunReport, Slo, operating_point
from .plots import goodput_plot, latency_plot, server_plot
from .record import build_measurement, write_measurement
from .runner import (
    REPO,
    BenchError,
    SweepConfig,
    check_versions,
    export_html,
    guidellm_version,
    measure_rate_fn,
    resolve_guidellm,
    sweep,
)
from .scrape import MetricsScraper, ScrapeError
from .store import RecordStoreError, fetch_record, parse_gs_uri, storage_client, upload_record
from .target import BenchTarget, TargetError
from .workload import WorkloadError, WorkloadPlan, parse_priority_mix, plan_workload

EXIT_ERROR = 2

#: Durations per rate (floors: full 120 s, --quick 10 s; longer until a window expects MIN_WINDOW_ARRIVALS), the
#: warm-up share, the arrival tolerance and the sweep's rates (start 1 req/s, doubling, 10 + 2 bisection steps;
#: --quick 3 + 0) are in infra/config/bench.py with their reasons: the in-cluster Job's deadline uses them too.
#: The health check before any load: a server that does not answer in 10 s is not ready to be measured.
HEALTH_TIMEOUT_S = 10.0


def _rates(text: str) -> tuple[float, ...] | None:
    try:
        rates = parse_rates(text)  # the syntax gke.bench.rates shares
    except ValueError as err:
        raise argparse.ArgumentTypeError(printable(str(err), 200)) from None
    # The bounds gke.bench.rates has (infra/config/bench.py, with their reasons).
    if rates is not None and len(rates) > MAX_RATES:
        raise argparse.ArgumentTypeError(f"at most {MAX_RATES} rates (twice the automatic sweep), got {len(rates)}")
    if rates is not None and max(rates) > MAX_RATE_RPS:
        raise argparse.ArgumentTypeError(
            f"each rate must be at most {MAX_RATE_RPS:g} req/s (far above what one replica serves), got {max(rates):g}"
        )
    return rates


def _json_args(text: str) -> tuple[str, ...]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not a JSON list of strings: {err.msg}") from None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise argparse.ArgumentTypeError("not a JSON list of strings")
    return tuple(value)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", help="stack whose resolved plan names the release, args, accelerator and contract")
    p.add_argument("--pool", default="stable", help="pool of that stack (default stable)")
    p.add_argument("--group", help="a co-hosted group of that stack instead of a pool (with --model)")
    p.add_argument("--model", help="the group's model to measure (its public name; with --group)")
    p.add_argument("--url", help="server root URL of ONE replica (e.g. a port-forward); overrides the plan's")
    p.add_argument(
        "--rates",
        type=_rates,
        default=None,
        metavar="auto|R1,R2,...",
        help="offered rates in req/s, or auto (default): double from 1 req/s until goodput collapses, "
        "then bisect the knee",
    )
    p.add_argument(
        "--duration-seconds",
        # Above 0 (0 once meant "the default" silently) and at most MAX_DURATION_S, gke.bench.duration_seconds' bound.
        type=bounded_float("--duration-seconds", 0.0, MAX_DURATION_S, "15x the default run per rate", lo_open=True),
        default=None,
        help=f"seconds of load per rate at least (default {DEFAULT_DURATION_S:g}; --quick {QUICK_DURATION_S:g}); "
        f"a rate runs longer until its window expects {MIN_WINDOW_ARRIVALS} arrivals",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"CI-sized run: at most {QUICK_MAX_RATES} rates, a {QUICK_DURATION_S:g} s floor per rate, no refinement",
    )
    p.add_argument("--out", type=Path, help="output directory (default build/bench/<release>-<UTC time>)")
    p.add_argument("--priority-mix", help="NAME=SHARE,... of the contract's classes (default: equal shares)")
    p.add_argument(
        "--no-priority-header",
        action="store_true",
        help=f"run the mix without the {naming.OBJECTIVE_HEADER} header (recorded as such)",
    )
    p.add_argument(
        "--prefix-ratio",
        type=bounded_float("--prefix-ratio", 0.0, 0.99, "a prompt keeps at least 1% of its own tokens"),
        default=0.0,
        help="shared prefix tokens / mean prompt tokens, in [0, 1) (default 0)",
    )
    p.add_argument("--guidellm", help="guidellm executable (default .venv-vllm/bin/guidellm, then PATH)")
    p.add_argument("--record", type=Path, help="also write the record here (e.g. stacks/measurements/<name>.json)")
    p.add_argument(
        "--record-uri",
        metavar="gs://BUCKET/PATH.json",
        help="also upload the record there, create-only (an existing object is an error, never replaced)",
    )
    p.add_argument(
        "--metrics-url",
        help="Prometheus endpoint of the replica (default <url>/metrics); required reading: the record's queue, KV "
        "and ITL come from it",
    )
    p.add_argument("--tokenizer", help="local tokenizer directory (overrides the plan's)")
    p.add_argument(
        "--served-args",
        type=_json_args,
        metavar="JSON_LIST",
        help="the arguments the measured server really ran, when not the rendered ones (recorded; a pool "
        "accepts such a record only in dev, with serving.<role>.measured_with_adapted_args)",
    )
    p.add_argument(
        "--served-args-reason", help="why --served-args differ from the rendered arguments (required with it)"
    )


#: The parser class of the caller's parser (``register`` returns a parser of that class).
_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)


def register(
    subparsers: argparse._SubParsersAction[_Parser],
    resolve_target: Callable[[argparse.Namespace], BenchTarget],
) -> _Parser:
    """Add ``bench`` to ``subparsers``; the parsed namespace's ``fn(args)`` runs it and returns the exit code."""
    p = subparsers.add_parser(
        "bench",
        help="measure one replica's latency/throughput curve and operating point",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(fn=lambda args: run_bench(args, resolve_target))
    sub = p.add_subparsers(
        dest="bench_command",
        metavar="{fetch}",
        parser_class=_OneLineParser,
        help="optional: `fetch` reads a record back from Cloud Storage instead of benchmarking",
    )
    f = sub.add_parser(
        "fetch",
        help="download a record from Cloud Storage, validate it, write it create-only",
        description=store.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("uri", metavar="gs://BUCKET/PATH.json", help="the record, e.g. gs://<bucket>/measurements/<n>.json")
    f.add_argument(
        "--to", type=Path, required=True, help="where to write it (must not exist), e.g. stacks/measurements/<n>.json"
    )
    f.add_argument("--project", default=None, help="Google Cloud project for the client (default: from ADC)")
    f.set_defaults(fn=run_fetch)
    return p


_OneLineParser = OneLineParser  # errors: one bounded, printable line, exit code 2


def run_fetch(args: argparse.Namespace) -> int:
    """``bench fetch``: the record at ``args.uri`` into ``args.to``, validated; one ``error:`` line and exit 2 on any
    problem, and then nothing is written."""
    try:
        parse_gs_uri(args.uri, "bench fetch")  # before any credential look-up
        record = fetch_record(storage_client(args.project), args.uri, args.to)
    except RecordStoreError as err:
        print(f"error: {printable(str(err).splitlines()[0], 1000)}", file=sys.stderr)
        return EXIT_ERROR
    op = record.operating_point
    # Every field echoed from the fetched record is rendered printable: it is someone else's file.
    summary = (
        f"operating point {op.achieved_rps:.3g} req/s achieved ({op.offered_rps:g} offered): θ_o "
        f"{op.output_tokens_per_s:.1f}, θ_i "
        f"{op.input_tokens_per_s:.1f} tokens/s per replica"
        if op is not None
        else f"no operating point ({printable(record.no_operating_point_reason)})"
    )
    print(
        f"wrote {printable(args.to)}: release {printable(record.release)} on "
        f"{printable(record.accelerator.machine_type)} (TP {record.accelerator.tensor_parallel_size}), measured "
        f"{printable(record.measured_at)}; {summary}. A pool cites it as "
        f"`measured: stacks/measurements/{printable(args.to.name)}` once the file is there.",
        file=sys.stderr,
    )
    return 0


def _sweep_config(args: argparse.Namespace) -> SweepConfig:
    given = args.duration_seconds
    duration = given if given is not None else (QUICK_DURATION_S if args.quick else DEFAULT_DURATION_S)
    if not (math.isfinite(duration) and duration > 0):
        raise BenchError(f"--duration-seconds must be > 0, got {duration}")
    return SweepConfig(
        rates=args.rates,
        start_rps=AUTO_START_RPS,
        growth=AUTO_GROWTH,
        max_rates=QUICK_MAX_RATES if args.quick else AUTO_MAX_RATES,
        refine_steps=QUICK_REFINE_STEPS if args.quick else AUTO_REFINE_STEPS,
        duration_s=duration,
        warmup_fraction=WARMUP_FRACTION,
    )


def _check_health(base_url: str) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{base_url}/health", timeout=HEALTH_TIMEOUT_S) as resp:
            if resp.status == 200:
                return
            status = resp.status
    except urllib.error.HTTPError as err:
        status = err.code
    except OSError as err:
        raise BenchError(f"{base_url}/health: not reachable ({err})") from None
    raise BenchError(f"{base_url}/health answered {status}; the server is not ready to be measured")


def _describe(p: RatePoint) -> str:
    ttft = f"{p.ttft_ms.p95:.0f}" if p.ttft_ms else "-"
    itl = f"{p.token_itl_ms.p95:.1f}" if p.token_itl_ms else "-"
    request_itl = f"{p.request_itl_ms.p95:.1f}" if p.request_itl_ms else "-"
    good = f"{p.goodput_share:.0%}" if p.goodput_share is not None else "-"
    verdict = "meets SLO" if p.meets_slo else "; ".join(p.failures)
    again = f" (measured again {len(p.rejected)}x: achieved off the label)" if p.rejected else ""
    return (
        f"{p.offered_rps:g} req/s offered, {p.achieved_rps:.3g} achieved ({p.arrivals} arrivals in "
        f"{p.window_seconds:.0f} s){again}: TTFT p95 {ttft} ms, ITL p95 {itl} ms (vLLM per token; per-request mean "
        f"{request_itl} ms), goodput {good}, {p.output_tokens_per_s:.1f} out tok/s — {verdict}"
    )


def run_bench(args: argparse.Namespace, resolve_target: Callable[[argparse.Namespace], BenchTarget]) -> int:
    try:
        # URLs first, before the stack is resolved or anything else looked at: parsed with their own errors,
        # credentials refused and never echoed.
        if args.url:
            args.url = http_url("--url", args.url)
        if args.metrics_url:
            args.metrics_url = http_url("--metrics-url", args.metrics_url)
        return _run(args, resolve_target)
    except (BenchError, WorkloadError, TargetError, AnalysisError, MeasurementError, ScrapeError, InputError) as err:
        print(f"error: {printable(str(err).splitlines()[0], 1000)}", file=sys.stderr)
    except ValidationError as err:  # a record that fails its own schema: a bug, reported without a traceback
        print(
            f"error: the measurement record does not validate: {printable(str(err).splitlines()[0], 1000)}",
            file=sys.stderr,
        )
    except KeyboardInterrupt:
        print("error: interrupted; no record written", file=sys.stderr)
    return EXIT_ERROR


def _run(args: argparse.Namespace, resolve_target: Callable[[argparse.Namespace], BenchTarget]) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    target = resolve_target(args)
    if args.url:
        target = dataclasses.replace(target, base_url=args.url.rstrip("/"))
    if args.tokenizer:
        target = dataclasses.replace(target, tokenizer_path=args.tokenizer)
    if not Path(target.tokenizer_path).is_dir():
        raise BenchError(f"tokenizer directory {target.tokenizer_path} does not exist (pass --tokenizer DIR)")
    if args.record is not None:
        check_new_file("--record", args.record)  # before any load: the sweep takes up to hours
    # The upload target and the credentials are checked before any load: a run that cannot store its record would
    # only find out after the whole sweep.
    remote = parse_gs_uri(args.record_uri, "--record-uri") if args.record_uri else None
    client = storage_client() if remote is not None else None
    mix = parse_priority_mix(args.priority_mix, target.priority_classes)
    plan = plan_workload(
        prompt_mean=target.prompt_mean_tokens,
        prompt_p95=target.prompt_p95_tokens,
        max_input=target.max_input_tokens,
        output_mean=target.output_mean_tokens,
        output_p95=target.output_p95_tokens,
        max_output=target.max_output_tokens,
        prefix_ratio=args.prefix_ratio,
        mix=mix,
        send_priority_header=not args.no_priority_header,
    )
    slo = Slo(ttft_ms=target.ttft_p95_ms, itl_ms=target.itl_p95_ms)
    cfg = _sweep_config(args)
    exe = resolve_guidellm(args.guidellm)
    version = guidellm_version(exe)
    started = datetime.now(UTC)
    out = args.out or REPO / "build" / "bench" / f"{target.release}-{started.strftime('%Y%m%dT%H%M%SZ')}"
    check_output_dir("--out", out)
    _check_health(target.base_url)  # before --out is created: a refused run leaves no empty folder behind
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _measure(args, console, target, plan, slo, cfg, exe, version, out, remote, client)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise


def _measure(
    args: argparse.Namespace,
    console: Any,
    target: BenchTarget,
    plan: WorkloadPlan,
    slo: Slo,
    cfg: SweepConfig,
    exe: Path,
    version: str,
    out: Path,
    remote: tuple[str, str] | None,
    client: Any,
) -> int:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    for fit, what in ((plan.prompt, "prompt"), (plan.output, "output")):
        if not fit.exact:
            console.print(
                f"[yellow]note:[/] a censored normal cannot carry the contract's {what} tail with mean "
                f"{fit.contract_mean:g}: sending mean {fit.fitted_mean:.0f} with p95 {fit.fitted_p95:.0f} "
                f"({fit.lower_clip_share:.0%} at {fit.lower} token) — see the record's workload"
            )

    scraper = MetricsScraper(args.metrics_url or f"{target.base_url}/metrics", target.metrics_model_name)
    scraper.check()  # before any load: a label that matches nothing is an error, not a record of blanks
    scraper.start()
    measure = measure_rate_fn(exe, target, plan, slo, cfg, out, scraper)
    wall = time.monotonic()
    try:
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
        ) as progress:
            task = progress.add_task("starting", total=None)

            def timed(rate: float, index: int) -> tuple[RatePoint, tuple[RunReport, ...]]:
                progress.update(
                    task,
                    description=f"rate {index + 1}: {rate:g} req/s, {len(plan.mix)} "
                    f"guidellm run(s) of {cfg.duration_s:g} s",
                )
                return measure(rate, index)

            result = sweep(timed, cfg, on_point=lambda p: progress.console.print(_describe(p)))
    finally:
        scraper.stop()
    check_versions(result.runs, version)
    found, reason = operating_point(result.points)
    record = build_measurement(
        target=target,
        plan=plan,
        slo=slo,
        sweep_cfg=cfg,
        points=result.points,
        found=found,
        no_point_reason=reason,
        guidellm_version=version,
        measured_at=datetime.now(UTC),
        metrics_period_s=scraper.period_s,
    )
    record_path = out / "measurement.json"
    write_measurement(record, record_path)
    if args.record is not None:
        write_measurement(record, args.record)
    pictures = [
        latency_plot(record, out / "latency.png"),
        goodput_plot(record, out / "goodput.png"),
        server_plot(record, out / "server.png"),
    ]
    reports = [Path(r.path) for group in result.runs for r in group]
    html, html_problem = export_html(exe, reports, out)
    uploaded = ""
    if remote is not None:
        assert client is not None
        data = record_path.read_bytes()
        try:
            state = upload_record(client, *remote, data)
        except RecordStoreError as err:
            # In the cluster the pod's disk goes with the pod: the log keeps the record recoverable.
            sys.stdout.write(data.decode("utf-8"))
            raise RecordStoreError(f"{err}; the record is on stdout and in {record_path}") from None
        uploaded = f", {args.record_uri} ({state})"
    if found is None:
        console.print(f"[yellow]no operating point:[/] {reason}")
    else:
        op = record.operating_point
        assert op is not None
        console.print(
            f"operating point {op.achieved_rps:.3g} req/s achieved ({op.offered_rps:g} offered; {op.limit}): θ_o "
            f"{op.output_tokens_per_s:.1f} output tokens/s, θ_i {op.input_tokens_per_s:.1f} prompt tokens/s per replica"
        )
    console.print(
        f"wrote {record_path}"
        + (f" and {args.record}" if args.record else "")
        + uploaded
        + "; "
        + ", ".join(str(p) for p in pictures)
        + (f", {html}" if html else f" (no HTML: {html_problem})")
        + f" in {time.monotonic() - wall:.0f} s"
    )
    return 0
