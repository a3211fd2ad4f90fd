"""Pictures of a measurement record: latency, goodput and server state versus offered load.

Drawn from the record alone (not from the run's raw files), so any stored record can be re-plotted. The x axis
is the *achieved* arrival rate (the load each point was measured at, within 10 % of its offered label) on a log-2
scale, the sweep's own geometric spacing. The contract's objectives are
horizontal lines and the operating point a vertical line, so the knee reads at a glance. Output is
deterministic for a given record and matplotlib version: Agg backend, fixed size and DPI, and no
software/date metadata in the PNG.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless and reproducible: no display, no GUI backend differences

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from components import naming

from ...config.measurement import Measurement

#: 8 x 7 in at 100 dpi: 800 x 700 px, legible in a review tool without zooming.
FIGSIZE = (8.0, 7.0)
DPI = 100
#: PNG text chunks matplotlib would add (its version, a creation time); removed so equal records give equal bytes.
PNG_METADATA: dict[str, str | None] = {"Software": None}


def _mark_operating_point(ax: Axes, record: Measurement) -> None:
    op = record.operating_point
    if op is not None:
        ax.axvline(
            op.achieved_rps,
            color="tab:green",
            linestyle="--",
            linewidth=1.2,
            label=f"operating point {op.achieved_rps:.3g} req/s ({op.offered_rps:g} offered)",
        )


def _x(record: Measurement) -> list[float]:
    """The x of every curve point: its achieved arrival rate."""
    return [p.achieved_rps for p in record.curve]


def _finish(fig: Figure, axes: list[Axes], path: Path, title: str, record: Measurement) -> Path:
    rates = sorted(_x(record))
    for ax in axes:
        ax.set_xscale("log", base=2)
        # Ticks at the measured rates, labelled as plain numbers (not powers of two).
        ax.xaxis.set_major_locator(FixedLocator(rates))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    axes[-1].set_xlabel("achieved load (requests/s, open-loop Poisson arrivals)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png", metadata=PNG_METADATA)
    plt.close(fig)
    return path


def _title(record: Measurement, what: str) -> str:
    """Two lines: what and on which release and machine, then the engine, the tool and when (one line is wider
    than the figure for long release ids)."""
    return (
        f"{what} — {record.release} on {record.accelerator.machine_type} (TP {record.accelerator.tensor_parallel_size})\n"
        f"vLLM {record.vllm_version}, guidellm {record.tool.version}, {record.measured_at}"
    )


def latency_plot(record: Measurement, path: Path) -> Path:
    """TTFT p50/p95/p99 (top) and ITL (bottom: vLLM's per-token p50/p95, which the SLO and the alerts judge, and the
    per-request-mean p95 guidellm measures) with the objectives and the operating point."""
    x = _x(record)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=FIGSIZE, sharex=True)
    for q, style in (("p50", ":"), ("p95", "-"), ("p99", "--")):
        top.plot(
            x,
            [getattr(p.ttft_ms, q) if p.ttft_ms else float("nan") for p in record.curve],
            style,
            marker="o",
            color="tab:blue",
            label=f"TTFT {q}",
        )
    top.axhline(
        record.slo.ttft_p95_ms,
        color="tab:red",
        linewidth=1,
        label=f"TTFT objective (p95) {record.slo.ttft_p95_ms:g} ms",
    )
    top.set_ylabel("time to first token (ms)")
    for q, style in (("p50", ":"), ("p95", "-")):
        bottom.plot(
            x,
            [getattr(p.token_itl_ms, q) if p.token_itl_ms else float("nan") for p in record.curve],
            style,
            marker="o",
            color="tab:purple",
            label=f"ITL {q} (vLLM per-token histogram)",
        )
    bottom.plot(
        x,
        [p.request_itl_ms.p95 if p.request_itl_ms else float("nan") for p in record.curve],
        "--",
        marker="x",
        color="tab:gray",
        label="ITL p95 of per-request means (guidellm)",
    )
    bottom.axhline(
        record.slo.itl_p95_ms, color="tab:red", linewidth=1, label=f"ITL objective (p95) {record.slo.itl_p95_ms:g} ms"
    )
    bottom.set_ylabel("inter-token latency (ms)")
    for ax in (top, bottom):
        _mark_operating_point(ax, record)
    return _finish(fig, [top, bottom], path, _title(record, "latency"), record)


def goodput_plot(record: Measurement, path: Path) -> Path:
    """Goodput share and error rate (top); output and goodput tokens/s (bottom)."""
    x = _x(record)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=FIGSIZE, sharex=True)
    top.plot(
        x,
        [p.goodput_share if p.goodput_share is not None else float("nan") for p in record.curve],
        "-",
        marker="o",
        color="tab:green",
        label="goodput (share meeting TTFT and ITL objectives)",
    )
    top.plot(
        x,
        [p.error_rate if p.error_rate is not None else float("nan") for p in record.curve],
        "-",
        marker="x",
        color="tab:red",
        label="error rate",
    )
    top.axhline(
        record.slo.min_goodput_share,
        color="tab:green",
        linewidth=1,
        linestyle=":",
        label=f"goodput objective {record.slo.min_goodput_share:.0%}",
    )
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel("share of requests")
    bottom.plot(
        x, [p.output_tokens_per_s for p in record.curve], "-", marker="o", color="tab:blue", label="output tokens/s"
    )
    bottom.plot(
        x,
        [p.goodput_output_tokens_per_s for p in record.curve],
        "--",
        marker="o",
        color="tab:green",
        label="goodput output tokens/s",
    )
    bottom.set_ylabel("tokens/s (one replica)")
    for ax in (top, bottom):
        _mark_operating_point(ax, record)
    return _finish(fig, [top, bottom], path, _title(record, "goodput"), record)


def server_plot(record: Measurement, path: Path) -> Path:
    """Queue depth and KV-cache usage from the server's /metrics (top, bottom)."""
    x = _x(record)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=FIGSIZE, sharex=True)
    top.plot(
        x,
        [p.queue_waiting.mean for p in record.curve],
        "-",
        marker="o",
        color="tab:orange",
        label=f"{naming.VLLM_NUM_REQUESTS_WAITING} mean",
    )
    top.plot(
        x,
        [p.queue_waiting.max for p in record.curve],
        "--",
        marker="^",
        color="tab:orange",
        label="... max",
    )
    top.set_ylabel("requests waiting")
    bottom.plot(
        x,
        [p.kv_cache_usage.mean for p in record.curve],
        "-",
        marker="o",
        color="tab:brown",
        label=f"{naming.VLLM_KV_CACHE_USAGE} mean",
    )
    bottom.plot(
        x,
        [p.kv_cache_usage.max for p in record.curve],
        "--",
        marker="^",
        color="tab:brown",
        label="... max",
    )
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_ylabel("KV-cache usage (fraction)")
    for ax in (top, bottom):
        _mark_operating_point(ax, record)
    return _finish(fig, [top, bottom], path, _title(record, "server state"), record)
