"""Cloud Monitoring dashboard (PromQL panels) split by pool and release: pure JSON construction."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .. import naming
from . import metrics as m
from .views import PoolView, Thresholds

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
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: The queries group by pool and release (one line per pool/release); per-pool panels are not split.
    split: bool = False
    #: The labels a split panel's lines are named by (GKE: pool, release; Cloud Run: revision_name, model_name).
    split_labels: tuple[str, ...] = m.SPLIT


def dashboard_window(scrape_interval_seconds: int) -> str:
    """Rate window of the charts: at least four scrapes (Prometheus needs two samples; four tolerate a missed
    scrape), in whole minutes."""
    return f"{max(1, -(-4 * scrape_interval_seconds // 60))}m"


def panels(pools: list[PoolView], t: Thresholds, queue_target: int, scrape_interval_seconds: int) -> list[Panel]:
    w = dashboard_window(scrape_interval_seconds)
    sel = m.serving()
    out = [
        Panel(
            "TTFT by pool / release (s)",
            (
                ("p50", m.quantile(m.TTFT, 0.5, w, sel)),
                ("p95", m.quantile(m.TTFT, 0.95, w, sel)),
                ("p99", m.quantile(m.TTFT, 0.99, w, sel)),
            ),
            "s",
            (("TTFT p95 objective", t.ttft_p95_seconds),),
        ),
        Panel(
            "Inter-token latency p95 by pool / release (s)",
            (("p95", m.quantile(m.ITL, 0.95, w, sel)),),
            "s",
            (("ITL p95 objective", t.itl_p95_seconds),),
        ),
        Panel(
            "End-to-end request latency by pool / release (s)",
            (
                ("p50", m.quantile(m.E2E_LATENCY, 0.5, w, sel)),
                ("p95", m.quantile(m.E2E_LATENCY, 0.95, w, sel)),
            ),
            "s",
        ),
        Panel(
            "Queue time (WAITING phase) by pool / release (s)",
            (
                ("p95", m.quantile(m.QUEUE_TIME, 0.95, w, sel)),
                ("mean", m.mean_of(m.QUEUE_TIME, w, sel)),
            ),
            "s",
        ),
        Panel(
            "Waiting and running requests by pool / release",
            (
                ("waiting", m.gauge_agg(m.NUM_REQUESTS_WAITING, "sum", sel)),
                ("running", m.gauge_agg(m.NUM_REQUESTS_RUNNING, "sum", sel)),
            ),
        ),
        Panel(
            "KV-cache usage by pool / release (0-1)",
            (
                ("mean over pods", m.gauge_agg(m.KV_CACHE_USAGE, "avg", sel)),
                ("fullest pod", m.gauge_agg(m.KV_CACHE_USAGE, "max", sel)),
            ),
            "1",
            (("KV alert", t.kv_cache_usage),),
        ),
        Panel(
            "Prompt and generation tokens/s by pool / release",
            (
                ("prompt tokens/s", m.rate_sum(m.PROMPT_TOKENS, w, sel)),
                ("generation tokens/s", m.rate_sum(m.GENERATION_TOKENS, w, sel)),
            ),
            "1/s",
        ),
        Panel(
            "Prefix-cache hit rate by pool / release (cached / queried tokens)",
            (("hit rate", m.prefix_hit_rate(w, sel)),),
            "1",
        ),
        Panel("Preemptions/s by pool / release", (("preemptions/s", m.rate_sum(m.PREEMPTIONS, w, sel)),), "1/s"),
        Panel(
            "Request success rate by pool / release (stop|length of all finished)",
            (("success ratio", m.finish_success_ratio(w)),),
            "1",
        ),
    ]
    # The panels above group every query by pool and release; the per-pool panels below select one pool.
    out = [replace(panel, split=True) for panel in out]
    for p in pools:
        tag = f"{p.role} ({p.release})"
        out.append(
            Panel(
                f"Replicas vs HPA target — {tag}",
                (
                    ("waiting per pod (HPA signal)", m.waiting_per_pod(p.role)),
                    ("scraped serving pods", m.pod_count(p.role)),
                    ("HPA current replicas", m.hpa_state(m.KSM_HPA_CURRENT, p.role)),
                    ("HPA desired replicas", m.hpa_state(m.KSM_HPA_DESIRED, p.role)),
                ),
                "",
                (("HPA target per pod", float(queue_target)), ("maxReplicas", float(p.hpa.max_replicas))),
            )
        )
        out.append(
            Panel(
                f"GPU duty cycle and memory (DCGM) — {tag}",
                (
                    ("GPU duty cycle % (mean)", m.dcgm(m.DCGM_GPU_UTIL, p.role)),
                    ("GPU memory used MiB (max)", m.dcgm(m.DCGM_FB_USED, p.role, "max")),
                    ("GPU memory free MiB (min)", m.dcgm(m.DCGM_FB_FREE, p.role, "min")),
                ),
            )
        )
        epp = m.epp_job(p.role)
        out.append(
            Panel(
                f"Endpoint picker queue and decisions — {tag}",
                (
                    ("EPP replicas up", m.epp_up(p.role)),
                    (
                        "pool average queue",
                        f"max({m.EPP_POOL_AVG_QUEUE.series}{m.matchers(**m.namespace_of(p.role), name=naming.deployment_name(p.role))})",
                    ),
                    (
                        "pool ready pods",
                        f"max({m.EPP_POOL_READY_PODS.series}{m.matchers(**m.namespace_of(p.role), name=naming.deployment_name(p.role))})",
                    ),
                    ("scheduling decision p99 (s)", m.quantile(m.EPP_SCHEDULER_LATENCY, 0.99, w, epp, ())),
                    ("plugin p99 by plugin (s)", m.quantile(m.EPP_PLUGIN_LATENCY, 0.99, w, epp, ("plugin_type",))),
                    ("routed requests/s", m.rate_sum(m.EPP_REQUESTS, w, epp, ())),
                    (
                        "request error ratio",
                        f"{m.rate_sum(m.EPP_REQUEST_ERRORS, w, epp, ())} / {m.rate_sum(m.EPP_REQUESTS, w, epp, ())}",
                    ),
                ),
            )
        )
        if p.planned_cost_per_million_usd is None:
            text = (
                f"**{tag}: capacity plan cost per 1M output tokens: unmeasured.** No throughput measured at the "
                f"SLO for this release and topology (serving.{p.role}.measured); the replica costs "
                f"${p.replica_hourly_usd:.2f}/h. The chart beside shows the observed cost at live throughput."
            )
        else:
            text = (
                f"**{tag}: capacity plan cost per 1M output tokens: ${p.planned_cost_per_million_usd:.2f}** at the "
                f"measured throughput ({p.measurement_source}); replica ${p.replica_hourly_usd:.2f}/h."
            )
        out.append(Panel(f"Cost per 1M output tokens (plan) — {tag}", text=text))
        out.append(
            Panel(
                f"Cost per 1M output tokens at live throughput — {tag} (USD)",
                (("observed $/1M output tokens", m.cost_per_million_output_tokens(p.role, p.replica_hourly_usd, w)),),
                "",
                (
                    ()
                    if p.planned_cost_per_million_usd is None
                    else (("plan at measured throughput", p.planned_cost_per_million_usd),)
                ),
            )
        )
    return out


def split_vllm_panels(
    sel: str,
    labels: dict[str, str],
    group: tuple[str, ...],
    w: str,
    t: Thresholds,
    by: str,
    unit: str,
    family: Callable = lambda metric: metric,
) -> list[Panel]:
    """vLLM's own panels over every pool of a target whose series ``sel`` (= ``labels``) selects, one line per
    ``group`` (the Cloud Run and Vertex targets: their pool and release labels). ``by`` names the split in titles
    ("revision / release"), ``unit`` one server ("instance"); ``family`` renames a metric family to the target's
    stored name (Vertex: ``m.on_vertex``)."""
    f, g = family, group
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
            f"Queue time inside vLLM by {by} (s)",
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
            (("hit rate", m.prefix_hit_rate(w, sel, g, f(m.PREFIX_CACHE_HITS), f(m.PREFIX_CACHE_QUERIES))),),
            "1",
        ),
        Panel(f"Preemptions/s by {by}", (("preemptions/s", m.rate_sum(f(m.PREEMPTIONS), w, sel, g)),), "1/s"),
        Panel(
            f"Request success rate by {by} (stop|length of all finished)",
            (("success ratio", m.success_ratio(w, labels, g, f(m.REQUEST_SUCCESS))),),
            "1",
        ),
    ]
    return [replace(panel, split=True, split_labels=g) for panel in out]


def legend_template(legend: str, split: bool, labels: tuple[str, ...] = m.SPLIT) -> str:
    """Series name in a chart legend: the panel's line name, then (for panels whose queries group by pool and
    release) the pool and release of the series, by ``${label}`` interpolation (monitoring.v1
    ``DataSet.legendTemplate``). Without it the p50 / p95 / p99 lines of one chart are indistinguishable."""
    return f"{legend} " + " ".join(f"${{{label}}}" for label in labels) if split else legend


def _widget(p: Panel) -> dict:
    if p.text is not None:
        return {"title": p.title, "text": {"content": p.text, "format": "MARKDOWN"}}
    chart: dict = {
        "dataSets": [
            {
                "plotType": "LINE",
                "targetAxis": "Y1",
                "legendTemplate": legend_template(legend, p.split, p.split_labels),
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
