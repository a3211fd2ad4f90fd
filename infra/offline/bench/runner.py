"""Run guidellm: open-loop Poisson arrivals, one guidellm process per priority class per offered rate.

Why one process per rate (and not guidellm's rate list or its ``sweep`` profile in one process): measured on
guidellm 0.8.1, a second poisson strategy in the same process started its arrival clock at -1 s instead of at
the benchmark start, so its requests were all overdue and went out as one burst. Why one worker process
(``GUIDELLM__MAX_WORKER_PROCESSES=1``): every worker seeds its own copy of the Poisson generator with the same
seed and advances one shared clock, so with N workers each exponential gap is repeated N times (measured: ten
consecutive arrivals 0.196 s apart at 2 req/s); one worker gives a true Poisson process. One asyncio worker
drives hundreds of concurrent streams; if it ever falls behind, the dispatch-delay check in ``analysis`` marks
that rate as not the offered open loop.

Each run gets a scenario file (guidellm's ``BenchmarkScenario`` JSON) kept beside its report, so every run can be
repeated exactly with ``guidellm run --scenario <file>``.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config.bench import RUN_DRAIN_ALLOWANCE_S, RUN_STARTUP_ALLOWANCE_S
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
#: Seed of the first class stream; class i uses BASE_SEED + i. Distinct seeds make the class streams independent
#: Poisson processes (identical seeds would send the classes in lockstep); the same seed at every rate reuses the
#: same unit-rate arrival sequence scaled by 1/rate (common random numbers), so rate-to-rate differences on the
#: curve come from the load, not from a different draw.
BASE_SEED = 20260823


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
    #: Seconds each guidellm run offers load (``max_duration``).
    duration_s: float
    #: Seconds excluded at the start of each window (an open loop starts from an empty system).
    warmup_s: float
    #: Automatic sweep stops growing below this goodput: the queue is collapsing, further rates add nothing.
    collapse_goodput: float = 0.5
    #: ... or above this error rate: the server is shedding load.
    max_error_rate: float = 0.05
    #: ... or after this many consecutive SLO failures: enough points past the knee to show its shape.
    failures_past_knee: int = 2


@dataclass(frozen=True)
class RunFiles:
    scenario: Path
    report: Path
    log: Path


def run_files(out_dir: Path, index: int, rate: float, share: ClassShare) -> RunFiles:
    stem = out_dir / "raw" / f"rate{index:02d}-{rate:g}rps-{share.name}"
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
    exe: Path, target: BenchTarget, plan: WorkloadPlan, rate_rps: float, index: int, duration_s: float, out_dir: Path
) -> list[RunReport]:
    """Start one guidellm run per class at once, wait for all, and read their reports."""
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    procs: list[tuple[ClassShare, RunFiles, subprocess.Popen[bytes]]] = []
    try:
        for i, share in enumerate(plan.mix):
            files = run_files(out_dir, index, rate_rps, share)
            files.scenario.write_text(
                json.dumps(scenario(target, plan, share, rate_rps, BASE_SEED + i, duration_s, files), indent=2) + "\n"
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
            procs.append((share, files, proc))
        deadline = time.monotonic() + STARTUP_ALLOWANCE_S + duration_s + DRAIN_ALLOWANCE_S
        for share, files, proc in procs:
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
        for _, _, proc in procs:
            if proc.poll() is None:
                _stop_group(proc)
    return [read_guidellm_report(files.report, share.name) for share, files, _ in procs]


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
) -> Callable[[float, int], tuple[RatePoint, tuple[RunReport, ...]]]:
    """The ``measure`` callback of ``sweep`` for real guidellm runs."""

    def measure(rate: float, index: int) -> tuple[RatePoint, tuple[RunReport, ...]]:
        reports = run_rate(exe, target, plan, rate, index, cfg.duration_s, out_dir)
        gauges = scraper.window(*measurement_window(reports, cfg.warmup_s)) if scraper else None
        return rate_point(rate, reports, slo, cfg.warmup_s, gauges), tuple(reports)

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
