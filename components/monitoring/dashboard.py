"""Cloud Monitoring dashboards (PromQL panels) of every serving target: the panel model, vLLM's own panels and the
cost panels every target shows, and the JSON rendering. Pure JSON construction."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from . import metrics as m
from .alerts import Thresholds

#: Mosaic grid width (Cloud Monitoring's 48-column layout); two charts per row.
GRID_COLUMNS = 48
TILE_WIDTH = 24
TILE_HEIGHT = 16


@dataclass(frozen=True)
class Panel:
    title: str
    #: (legend, PromQL) pairs; empty for text panels.
    queries: tuple[tuple[str, str], ...] = ()
    unit: str = ""
    thresholds: tuple[tuple[str, float], ...] = ()
    text: str | None = None
    #: The labels the queries group by, named in every line's legend (one line per pool and release: a label
    #: model's ``split``); empty for a panel of one pool.
    split: tuple[str, ...] = ()


def dashboard_window(scrape_interval_seconds: int) -> str:
    """Rate window of the charts: at least four scrapes (Prometheus needs two samples; four tolerate a missed
    scrape), in whole minutes."""
    return f"{max(1, -(-4 * scrape_interval_seconds // 60))}m"


def vllm_panels(
    series: m.VllmSeries,
    w: str,
    t: Thresholds,
    by: str,
    unit: str,
    queue_title: str = "Queue time inside vLLM",
) -> list[Panel]:
    """vLLM's own panels over every pool of a target, one line per pool and release (``series.split``). ``by``
    names the split in titles ("revision / release"), ``unit`` one server ("instance"); ``queue_title`` says where
    the queue time is spent (GKE: vLLM's WAITING phase; Cloud Run and Vertex: inside vLLM, beside the platform's own
    queue)."""
    f, g, sel = series.family, series.split, series.selector()
    out = [
        Panel(
            f"TTFT by {by} (s)",
            (
                ("p50", m.quantile(f(m.TTFT), 0.5, w, sel, g)),
                ("p95", m.quantile(f(m.TTFT), 0.95, w, sel, g)),
                ("p99", m.quantile(f(m.TTFT), 0.99, w, sel, g)),
            ),
            "s",
            (("TTFT p95 objective", t.ttft_p95_seconds),),
        ),
        Panel(
            f"Inter-token latency p95 by {by} (s)",
            (("p95", m.quantile(f(m.ITL), 0.95, w, sel, g)),),
            "s",
            (("ITL p95 objective", t.itl_p95_seconds),),
        ),
        Panel(
            f"End-to-end request latency by {by} (s)",
            (
                ("p50", m.quantile(f(m.E2E_LATENCY), 0.5, w, sel, g)),
                ("p95", m.quantile(f(m.E2E_LATENCY), 0.95, w, sel, g)),
            ),
            "s",
        ),
        Panel(
            f"{queue_title} by {by} (s)",
            (
                ("p95", m.quantile(f(m.QUEUE_TIME), 0.95, w, sel, g)),
                ("mean", m.mean_of(f(m.QUEUE_TIME), w, sel, g)),
            ),
            "s",
        ),
        Panel(
            f"Waiting and running requests by {by}",
            (
                ("waiting", m.gauge_agg(f(m.NUM_REQUESTS_WAITING), "sum", sel, g)),
                ("running", m.gauge_agg(f(m.NUM_REQUESTS_RUNNING), "sum", sel, g)),
            ),
        ),
        Panel(
            f"KV-cache usage by {by} (0-1)",
            (
                (f"mean over {unit}s", m.gauge_agg(f(m.KV_CACHE_USAGE), "avg", sel, g)),
                (f"fullest {unit}", m.gauge_agg(f(m.KV_CACHE_USAGE), "max", sel, g)),
            ),
            "1",
            (("KV alert", t.kv_cache_usage),),
        ),
        Panel(
            f"Prompt and generation tokens/s by {by}",
            (
                ("prompt tokens/s", m.rate_sum(f(m.PROMPT_TOKENS), w, sel, g)),
                ("generation tokens/s", m.rate_sum(f(m.GENERATION_TOKENS), w, sel, g)),
            ),
            "1/s",
        ),
        Panel(
            f"Prefix-cache hit rate by {by} (cached / queried tokens)",
            (("hit rate", series.prefix_hit_rate(w, sel)),),
            "1",
        ),
        Panel(f"Preemptions/s by {by}", (("preemptions/s", m.rate_sum(f(m.PREEMPTIONS), w, sel, g)),), "1/s"),
        Panel(
            f"Request success rate by {by} (stop|length of all finished)",
            (("success ratio", series.success_ratio(w)),),
            "1",
        ),
    ]
    return [replace(panel, split=g) for panel in out]


def cost_panels(
    tag: str,
    plan_text: str,
    series: m.VllmSeries,
    pool: str,
    replica_hourly_usd: float,
    planned_cost_per_million_usd: float | None,
    w: str,
) -> list[Panel]:
    """The capacity plan's cost per 1M output tokens of one pool (``plan_text``, the target's wording) beside the
    cost observed at live throughput, with the plan's figure as the chart's threshold when it was measured."""
    return [
        Panel(f"Cost per 1M output tokens (plan) — {tag}", text=plan_text),
        Panel(
            f"Cost per 1M output tokens at live throughput — {tag} (USD)",
            (("observed $/1M output tokens", series.cost_per_million(pool, replica_hourly_usd, w)),),
            "",
            (
                ()
                if planned_cost_per_million_usd is None
                else (("plan at measured throughput", planned_cost_per_million_usd),)
            ),
        ),
    ]


def legend_template(legend: str, split: tuple[str, ...]) -> str:
    """Series name in a chart legend: the panel's line name, then (for panels whose queries group by pool and
    release) the pool and release of the series, by ``${label}`` interpolation (monitoring.v1
    ``DataSet.legendTemplate``). Without it the p50 / p95 / p99 lines of one chart are indistinguishable."""
    return f"{legend} " + " ".join(f"${{{label}}}" for label in split) if split else legend


def _widget(p: Panel) -> dict[str, Any]:
    if p.text is not None:
        return {"title": p.title, "text": {"content": p.text, "format": "MARKDOWN"}}
    chart: dict[str, Any] = {
        "dataSets": [
            {
                "plotType": "LINE",
                "targetAxis": "Y1",
                "legendTemplate": legend_template(legend, p.split),
                "timeSeriesQuery": {"prometheusQuery": q, **({"unitOverride": p.unit} if p.unit else {})},
            }
            for legend, q in p.queries
        ],
        "yAxis": {"scale": "LINEAR"},
    }
    if p.thresholds:
        chart["thresholds"] = [{"label": label, "value": value, "targetAxis": "Y1"} for label, value in p.thresholds]
    return {"title": p.title, "xyChart": chart}


def dashboard_json(display_name: str, panel_list: list[Panel]) -> str:
    """The dashboard as the API stores it. The Dashboards API keeps proto3 JSON, which drops fields holding their
    default: a rendered ``xPos: 0`` would never come back, and every ``pulumi up`` would show a diff. Zero
    positions are therefore omitted (0 is what the API means by an absent position)."""
    tiles = []
    for i, p in enumerate(panel_list):
        x, y = (i % 2) * TILE_WIDTH, (i // 2) * TILE_HEIGHT
        tiles.append(
            {
                **({"xPos": x} if x else {}),
                **({"yPos": y} if y else {}),
                "width": TILE_WIDTH,
                "height": TILE_HEIGHT,
                "widget": _widget(p),
            }
        )
    return json.dumps(
        {"displayName": display_name, "mosaicLayout": {"columns": GRID_COLUMNS, "tiles": tiles}},
        sort_keys=True,
        indent=None,
        separators=(",", ":"),
    )


def dashboard_queries(dashboard: str) -> list[str]:
    """Every PromQL query of a rendered dashboard JSON (tests and the integration tier read them back)."""
    doc = json.loads(dashboard)
    return [
        ds["timeSeriesQuery"]["prometheusQuery"]
        for tile in doc["mosaicLayout"]["tiles"]
        for ds in tile["widget"].get("xyChart", {}).get("dataSets", [])
    ]
