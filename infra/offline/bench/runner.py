"""Run guidellm: open-loop Poisson arrivals, one guidellm process per priority class per offered rate.

Why one process per rate (and not guidellm's rate list or its ``sweep`` profile in one process): measured on
guidellm 0.8.1, a second poisson strategy in the same process started its arrival clock at -1 s instead of at
the benchmark start, so its requests were all overdue and went out as one burst. Why one worker process
(``GUIDELLM__MAX_WORKER_PROCESSES=1``): every worker seeds its own copy of the Poisson generator with the same
seed and advances one shared clock, so with N workers each exponential gap is repeated N times (measured: ten
consecutive arrivals 0.196 s apart at 2 req/s); one worker gives a true Poisson process. One asyncio worker
drives hundreds of concurrent streams; if it ever falls behind, the dispatch-delay check in ``analysis`` marks
that rate as not the offered open loop.

Arrivals (guidellm 0.8.1 guidellm/scheduler/strategies.py ``AsyncPoissonStrategy``): the n-th request's scheduled
start (``targeted_start``) is the benchmark's start time plus the sum of n draws of ``random.Random(seed)
.expovariate(rate)``, the seed being the scenario's ``seed`` (guidellm/benchmark/entrypoints.py passes
``benchmark_args.seed.value`` to the profile and to the synthetic data). So the schedule is a Poisson process
exactly when the seed is an independent draw: every run gets a fresh seed (``fresh_seed``), recorded in its scenario
and in the record. The bench used to pin the same two seeds for every rate and run (common random numbers); those
seeds' first 10-30 gaps averaged 0.58-0.77 of the mean, so every short run of the sweep delivered 1.2-1.5x its label.

Length of a run: ``run_seconds`` (infra/config/bench.py), long enough that the window expects MIN_WINDOW_ARRIVALS
arrivals. A rate whose achieved arrival rate still misses ARRIVAL_TOLERANCE is measured again with fresh seeds, at
most MAX_REMEASUREMENTS times per sweep; a rate that still misses it ends the bench with an error (a record refuses
such a point). The loop stays open: requests are sent at their scheduled times whatever the server does, as
production traffic arrives (docs/capacity.md says why that, and not a concurrency sweep).

Each run gets a scenario file (guidellm's ``BenchmarkScenario`` JSON) kept beside its report, so every run can be
repeated exactly with ``guidellm run --scenario <file>``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config.bench import (
    ARRIVAL_TOLERANCE,
    MAX_REMEASUREMENTS,
    RUN_DRAIN_ALLOWANCE_S,
    RUN_STARTUP_ALLOWANCE_S,
    run_seconds,
)
from ..inputs import printable
from .analysis import RatePoint, RunReport, Slo, measurement_window, rate_point, read_guidellm_report
from .scrape import MetricsScraper
from .target import BenchTarget
from .workload import ClassShare, WorkloadPlan

REPO = Path(__file__).resolve().parents[3]
#: Where scripts/install-guidellm.sh puts guidellm (beside the CPU vLLM; guidellm needs torch).
DEFAULT_GUIDELLM = REPO / ".venv-vllm" / "bin" / "guidellm"
#: The OpenAI route every request uses: the completions route sends the synthetic prompt as is (no chat
#: template tokens added, so prompt lengths are the fitted ones), and guidellm then pins each completion's
#: length with ``max_tokens`` + ``ignore_eos`` so output lengths are the fitted ones too.
REQUEST_FORMAT = "/v1/completions"
#: guidellm's start-up before its first request, and its drain after the duration: why each number, in
#: infra/config/bench.py (the in-cluster Job's deadline is derived from the same values).
STARTUP_ALLOWANCE_S = RUN_STARTUP_ALLOWANCE_S
DRAIN_ALLOWANCE_S = RUN_DRAIN_ALLOWANCE_S
#: ``guidellm --version`` starts the package (imports torch): 120 s only catches a hung process.
VERSION_TIMEOUT_S = 120.0
#: Seeds are drawn from [0, 2^32): guidellm takes any int (random.Random accepts it), the record's schema bounds it.
SEED_BITS = 32


def fresh_seed(taken: Sequence[int] = ()) -> int:
    """A seed from the operating system's entropy, distinct from ``taken`` (the other classes of the same rate:
    identical seeds would send two class streams in lockstep)."""
    while True:
        seed = secrets.randbits(SEED_BITS)
        if seed not in taken:
            return seed


class BenchError(RuntimeError):
    """A benchmark that cannot run or finish; the message is one line for the CLI."""


def resolve_guidellm(explicit: str | None) -> Path:
    """``--guidellm PATH`` if given, else ``.venv-vllm/bin/guidellm``, else ``guidellm`` on PATH."""
    if explicit:
        # Absolute: Path("./x") prints as "x", which subprocess would look up on PATH, running another file than
        # the one checked here.
        path = Path(os.path.abspath(Path(explicit).expanduser()))
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BenchError(f"--guidellm {printable(Path(explicit))}: not an executable file")
        return path
    if DEFAULT_GUIDELLM.is_file() and os.access(DEFAULT_GUIDELLM, os.X_OK):
        return DEFAULT_GUIDELLM
    found = shutil.which("guidellm")
    if found:
        return Path(found)
    raise BenchError(
        f"guidellm not found at {DEFAULT_GUIDELLM} or on PATH: run scripts/install-guidellm.sh "
        "(or `make integration-deps`), or pass --guidellm PATH"
    )


def guidellm_version(exe: Path) -> str:
    """The installed package's version, as ``guidellm --version`` reports it (click reads the package metadata)."""
    try:
        proc = subprocess.run(
            [str(exe), "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, env=_guidellm_env()
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BenchError(f"{exe} --version failed: {err}") from None
    m = re.search(r"version:?\s*(\S+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise BenchError(f"{exe} --version exited {proc.returncode} without a version: {proc.stderr.strip()[-200:]}")
    return m.group(1)


def _guidellm_env() -> dict[str, str]:
    # GUIDELLM__* variables from the caller's shell would silently override scenario fields (guidellm reads its
    # settings and the scenario from the environment), so none are inherited.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELLM__")}
    env.update(
        {
            "GUIDELLM__MAX_WORKER_PROCESSES": "1",  # see the module docstring (Poisson seeding)
            "HF_HUB_OFFLINE": "1",  # the tokenizer is a local directory; nothing is fetched from a model hub
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",  # no tokenizer thread pool next to guidellm's worker process
        }
    )
    return env


@dataclass(frozen=True)
class SweepConfig:
    """Which rates to offer and for how long."""

    #: Explicit offered rates (req/s), measured in ascending order; ``None`` = automatic sweep.
    rates: tuple[float, ...] | None
    #: Automatic sweep: first rate, req/s.
    start_rps: float
    #: Automatic sweep: each rate is the previous one times this.
    growth: float
    #: Automatic sweep: at most this many rates while growing.
    max_rates: int
    #: Automatic sweep: bisection steps between the last passing and the first failing rate.
    refine_steps: int
    #: The floor of each guidellm run (``max_duration``), s; low rates run longer (``run_seconds``).
    duration_s: float
    #: Share of each run excluded at the start of its window (an open loop starts from an empty system).
    warmup_fraction: float
    #: Automatic sweep stops growing below this goodput: the queue is collapsing, further rates add nothing.
    collapse_goodput: float = 0.5
    #: ... or above this error rate: the server is shedding load.
    max_error_rate: float = 0.05
    #: ... or after this many consecutive SLO failures: enough points past the knee to show its shape.
    failures_past_knee: int = 2
    #: Re-measurements the sweep may spend on rates whose achieved rate missed the tolerance.
    max_remeasurements: int = MAX_REMEASUREMENTS

    def run_seconds(self, rate_rps: float) -> float:
        """guidellm's ``max_duration`` at ``rate_rps``: long enough for the arrival minimum."""
        return run_seconds(rate_rps, self.duration_s)

    def warmup_seconds(self, rate_rps: float) -> float:
        return self.run_seconds(rate_rps) * self.warmup_fraction


@dataclass(frozen=True)
class RunFiles:
    scenario: Path
    report: Path
    log: Path


def run_files(out_dir: Path, index: int, rate: float, share: ClassShare, attempt: int = 0) -> RunFiles:
    again = f"-again{attempt}" if attempt else ""
    stem = out_dir / "raw" / f"rate{index:02d}-{rate:g}rps{again}-{share.name}"
    return RunFiles(Path(f"{stem}.scenario.json"), Path(f"{stem}.json"), Path(f"{stem}.log"))


#: Bounds of guidellm's data-loader look-ahead (synthetic requests generated before they are due). guidellm's
#: default, 4096, is generated as fast as one core allows while the other runs start and while load is measured:
#: measured, it delayed a concurrent run's start by seconds on 2 cores. Twice the requests a run can need is
#: enough look-ahead; 64 keeps a short buffer at low rates, 4096 (the default) caps it.
PREFETCH_MIN, PREFETCH_MAX = 64, 4096


def prefetch_items(rate_rps: float, duration_s: float) -> int:
    return int(min(PREFETCH_MAX, max(PREFETCH_MIN, math.ceil(2 * rate_rps * duration_s))))


def scenario(
    target: BenchTarget,
    plan: WorkloadPlan,
    share: ClassShare,
    rate_rps: float,
    seed: int,
    duration_s: float,
    files: RunFiles,
) -> dict[str, Any]:
    """guidellm ``BenchmarkScenario`` for one class stream at ``rate_rps * share``."""
    backend: dict[str, Any] = {
        "kind": "openai_http",
        "target": target.base_url,
        "model": target.served_model_name,
        "request_format": REQUEST_FORMAT,
    }
    headers = plan.headers(share)
    if headers:
        backend["extras"] = {"headers": headers}
    return {
        "metadata": {
            "labels": {"release": target.release, "priority_class": share.name, "offered_rps_total": f"{rate_rps:g}"}
        },
        "spec": {
            "backend": backend,
            "profile": {"kind": "poisson", "rate": [rate_rps * share.share]},
            "constraints": [{"kind": "max_duration", "seconds": duration_s}],
            "tokenizer": {"kind": "huggingface_auto", "model": target.tokenizer_path},
            "data": [plan.synthetic_data()],
            "data_loader": {"kind": "pytorch", "prefetch_factor": prefetch_items(rate_rps * share.share, duration_s)},
            # JSON only: the HTML report is exported once for all runs together (``export_html``).
            "outputs": [{"kind": "json", "path": str(files.report)}],
            "seed": {"kind": "static", "value": seed},
            # sample_size 0 drops prompt and output text but keeps every request's timings and token counts.
            "metrics": {"kind": "generative", "sample_size": 0},
        },
    }


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)  # guidellm exits within a second of SIGTERM when idle; 10 s is a safety bound
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_rate(
    exe: Path,
    target: BenchTarget,
    plan: WorkloadPlan,
    rate_rps: float,
    index: int,
    duration_s: float,
    out_dir: Path,
    attempt: int = 0,
    seed: Callable[[Sequence[int]], int] = fresh_seed,
) -> list[RunReport]:
    """Start one guidellm run per class at once, each with a fresh seed, wait for all, and read their reports."""
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    procs: list[tuple[ClassShare, RunFiles, subprocess.Popen[bytes], int]] = []
    seeds: list[int] = []
    try:
        for share in plan.mix:
            files = run_files(out_dir, index, rate_rps, share, attempt)
            seeds.append(seed(seeds))
            files.scenario.write_text(
                json.dumps(scenario(target, plan, share, rate_rps, seeds[-1], duration_s, files), indent=2) + "\n"
            )
            with open(files.log, "wb") as log:
                proc = subprocess.Popen(
                    [str(exe), "run", "--scenario", str(files.scenario), "--disable-console-interactive"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_guidellm_env(),
                    cwd=files.scenario.parent,
                    start_new_session=True,
                )
            procs.append((share, files, proc, seeds[-1]))
        deadline = time.monotonic() + STARTUP_ALLOWANCE_S + duration_s + DRAIN_ALLOWANCE_S
        for share, files, proc, _ in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise BenchError(
                    f"guidellm ({share.name} at {rate_rps:g} req/s) did not finish within "
                    f"{STARTUP_ALLOWANCE_S + duration_s + DRAIN_ALLOWANCE_S:.0f} s; log {files.log}"
                ) from None
            if proc.returncode != 0:
                tail = files.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
                raise BenchError(
                    f"guidellm ({share.name} at {rate_rps:g} req/s) exited {proc.returncode}: "
                    f"{tail[0][:200]} (log {files.log})"
                )
    finally:
        for _, _, proc, _ in procs:
            if proc.poll() is None:
                _stop_group(proc)
    return [
        dataclasses.replace(read_guidellm_report(files.report, share.name), seed=s, duration_s=duration_s)
        for share, files, _, s in procs
    ]


@dataclass(frozen=True)
class SweepResult:
    points: tuple[RatePoint, ...]
    runs: tuple[tuple[RunReport, ...], ...]  # per point, the class runs


def _stop_growing(p: RatePoint, cfg: SweepConfig, consecutive_failures: int) -> bool:
    if p.goodput_share is None or p.goodput_share < cfg.collapse_goodput:
        return True
    if p.error_rate is not None and p.error_rate > cfg.max_error_rate:
        return True
    if any(f.startswith("load generator fell behind") for f in p.failures):
        return True  # higher rates would only lag more: the points would not be the offered load
    return consecutive_failures >= cfg.failures_past_knee


def sweep(
    measure: Callable[[float, int], tuple[RatePoint, tuple[RunReport, ...]]],
    cfg: SweepConfig,
    on_point: Callable[[RatePoint], None] | None = None,
) -> SweepResult:
    """Measure the configured rates, or grow geometrically until collapse and then bisect the knee.

    ``measure(rate, index)`` runs one rate; kept separate so the sweep logic is testable without guidellm.
    """
    points: list[RatePoint] = []
    runs: list[tuple[RunReport, ...]] = []

    def do(rate: float) -> RatePoint:
        point, reports = measure(rate, len(points))
        points.append(point)
        runs.append(reports)
        if on_point:
            on_point(point)
        return point

    if cfg.rates is not None:
        for rate in sorted(cfg.rates):
            do(rate)
        return SweepResult(tuple(points), tuple(runs))
    rate = cfg.start_rps
    failures = 0
    for _ in range(cfg.max_rates):
        p = do(rate)
        failures = 0 if p.meets_slo else failures + 1
        if _stop_growing(p, cfg, failures):
            break
        rate *= cfg.growth
    ordered = sorted(points, key=lambda q: q.offered_rps)
    passing = None
    failing = None
    for q in ordered:
        if q.meets_slo and failing is None:
            passing = q.offered_rps
        elif not q.meets_slo and failing is None:
            failing = q.offered_rps
    if passing is not None and failing is not None:
        low, high = passing, failing
        for _ in range(cfg.refine_steps):
            mid = math.sqrt(low * high)  # the geometric midpoint: the sweep's own scale
            if do(mid).meets_slo:
                low = mid
            else:
                high = mid
    return SweepResult(tuple(points), tuple(runs))


def measure_rate_fn(
    exe: Path,
    target: BenchTarget,
    plan: WorkloadPlan,
    slo: Slo,
    cfg: SweepConfig,
    out_dir: Path,
    scraper: MetricsScraper | None,
    seed: Callable[[Sequence[int]], int] = fresh_seed,
) -> Callable[[float, int], tuple[RatePoint, tuple[RunReport, ...]]]:
    """The ``measure`` callback of ``sweep`` for real guidellm runs: each rate with fresh seeds, measured again
    while its achieved rate misses the tolerance and the sweep's re-measurement budget lasts."""
    budget = [cfg.max_remeasurements]

    def attempt(rate: float, index: int, n: int) -> tuple[RatePoint, tuple[RunReport, ...]]:
        duration, warmup = cfg.run_seconds(rate), cfg.warmup_seconds(rate)
        reports = run_rate(exe, target, plan, rate, index, duration, out_dir, n, seed)
        server = scraper.window(*measurement_window(reports, warmup)) if scraper else None
        return rate_point(rate, reports, slo, warmup, server), tuple(reports)

    return remeasuring(attempt, budget)


def remeasuring(
    attempt: Callable[[float, int, int], tuple[RatePoint, tuple[RunReport, ...]]], budget: list[int]
) -> Callable[[float, int], tuple[RatePoint, tuple[RunReport, ...]]]:
    """``attempt(rate, index, n)`` until its point's achieved rate is within the tolerance of its label, spending
    ``budget[0]`` (shared by the whole sweep) on the repeats; BenchError when the budget runs out."""

    def measure(rate: float, index: int) -> tuple[RatePoint, tuple[RunReport, ...]]:
        rejected: list[tuple[float, float, tuple[int | None, ...]]] = []
        n = 0
        while True:
            point, reports = attempt(rate, index, n)
            if point.arrivals_on_label:
                return dataclasses.replace(point, rejected=tuple(rejected)), reports
            rejected.append((point.achieved_rps, point.window_seconds, tuple(seed for _, seed, _, _ in point.runs)))
            if budget[0] <= 0:
                tried = ", ".join(f"{a:.3g}" for a, _, _ in rejected)
                raise BenchError(
                    f"{rate:g} req/s offered: achieved {tried} req/s, outside +-{ARRIVAL_TOLERANCE:.0%} of the label, "
                    "and the sweep's re-measurements are spent; a record refuses such a point "
                    "(use a longer --duration-seconds, or fewer rates)"
                )
            budget[0] -= 1
            n += 1

    return measure


#: ``guidellm export`` of every run measured ~8 s on 2 cores; 300 s only catches a hung process.
EXPORT_TIMEOUT_S = 300.0


def export_html(exe: Path, reports: Sequence[Path], out_dir: Path) -> tuple[Path | None, str | None]:
    """guidellm's own HTML report for all runs: their benchmarks merged into one report file, then exported.

    Returns (html path, None), or (None, why not): the HTML is a convenience, the record does not depend on it.
    """
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in reports]
    if not docs:
        return None, "no guidellm reports"
    merged = dict(docs[0])  # metadata and config of the first run; each benchmark keeps its own config
    merged["benchmarks"] = [b for d in docs for b in d["benchmarks"]]
    merged_path = out_dir / "raw" / "all-runs.json"
    merged_path.write_text(json.dumps(merged), encoding="utf-8")
    html = out_dir / "guidellm-report.html"
    try:
        proc = subprocess.run(
            [str(exe), "export", str(merged_path), "--output", f"kind=html,path={html}"],
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT_S,
            env=_guidellm_env(),
            cwd=merged_path.parent,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"guidellm export failed: {err}"
    if proc.returncode != 0 or not html.is_file():
        return None, f"guidellm export exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-200:]}"
    return html, None


def check_versions(runs: Sequence[Sequence[RunReport]], expected: str) -> None:
    """Every report must come from the guidellm version the record will name."""
    seen = {r.guidellm_version for group in runs for r in group}
    if seen - {expected}:
        raise BenchError(f"guidellm reports name version(s) {sorted(seen)}, but {expected} was started")
