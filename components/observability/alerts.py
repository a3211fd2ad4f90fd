"""Alerts: Cloud Monitoring alert policies with PromQL conditions (pure specs here, resources in the component).

Choice: Cloud Monitoring AlertPolicy + ``condition_prometheus_query_language`` rather than GMP ``Rules`` CRs,
because notification channels are Cloud Monitoring objects (config gives their resource names) and GMP's managed
rule evaluator would need a separately configured Alertmanager to reach anyone. The rendered alert
policies are turned back into a Prometheus rules file by the tests, so ``promtool check rules`` / ``promtool test
rules`` prove exactly what is deployed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import naming
from . import metrics as m
from .views import PoolView, Thresholds

#: Window of the latency / KV alerts: 5 min = 20 scrapes at 15 s, long enough to smooth one long-prompt burst,
#: short enough that a breached objective pages within ~10 min (window + ``for``).
ALERT_WINDOW = "5m"
#: The canary carries a small traffic share: compare it over a longer window so the ratio is not noise.
CANARY_WINDOW = "10m"
#: How often Cloud Monitoring evaluates each PromQL condition: 60 s, a quarter of the 5 min window.
EVALUATION_INTERVAL_SECONDS = 60


@dataclass(frozen=True)
class AlertSpec:
    name: str  # CamelCase alert name (Prometheus ``alert:``)
    role: str
    summary: str
    signal: str  # PromQL whose value is compared; the integration tier runs it alone
    op: str
    threshold: float
    for_seconds: int
    severity: str  # CRITICAL | ERROR | WARNING (Cloud Monitoring severities)
    #: Extra condition joined with ``and on()``: ``guard_signal >= guard_min`` (e.g. pods at maxReplicas).
    guard_signal: str | None = None
    guard_min: int | None = None

    @property
    def guard(self) -> str | None:
        return f"{self.guard_signal} >= {self.guard_min}" if self.guard_signal is not None else None

    @property
    def expr(self) -> str:
        core = f"({self.signal}) {self.op} {m._fmt(self.threshold)}"
        return f"{core} and on() ({self.guard})" if self.guard else core


# ---- the alerts every target raises on vLLM's own series (a target passes its selector and split) -----------------


def objective_specs(
    role: str,
    sel: str,
    group: tuple[str, ...],
    t: Thresholds,
    severity: str,
    hist: m.Histogram = m.TTFT,
    itl: m.Histogram = m.ITL,
    kv: m.Gauge = m.KV_CACHE_USAGE,
) -> list[AlertSpec]:
    """TTFT and ITL p95 over the contract's objectives, KV-cache saturation: of the pool whose series ``sel``
    selects, grouped by ``group`` (GKE: pool, release). ``hist`` / ``itl`` / ``kv``: the metric families under the
    target's names (Vertex's ``vertex_*``)."""
    return [
        AlertSpec(
            "TtftP95OverObjective",
            role,
            f"TTFT p95 of pool {role} above the contract objective {t.ttft_p95_seconds} s",
            m.quantile(hist, 0.95, ALERT_WINDOW, sel, group),
            ">",
            t.ttft_p95_seconds,
            300,
            severity,
        ),
        AlertSpec(
            "ItlP95OverObjective",
            role,
            f"Inter-token latency p95 of pool {role} above the contract objective {t.itl_p95_seconds} s",
            m.quantile(itl, 0.95, ALERT_WINDOW, sel, group),
            ">",
            t.itl_p95_seconds,
            300,
            severity,
        ),
        AlertSpec(
            "KvCacheSaturated",
            role,
            f"KV-cache usage of pool {role} above {t.kv_cache_usage} for {t.kv_cache_for_minutes} min",
            f"{m.agg('avg', group)} (avg_over_time({kv.series}{sel}[{ALERT_WINDOW}]))",
            ">",
            t.kv_cache_usage,
            t.kv_cache_for_minutes * 60,
            "WARNING",
        ),
    ]


def no_traffic_spec(
    role: str, weight: int, sel: str, t: Thresholds, finished: m.Counter = m.REQUEST_SUCCESS
) -> AlertSpec:
    """A pool that routes traffic but finished no request in ``no_traffic_minutes`` (0, not empty, when it has
    no series at all)."""
    window = f"{t.no_traffic_minutes}m"
    return AlertSpec(
        "NoTrafficOnServingPool",
        role,
        f"Pool {role} routes {weight}% of traffic but finished no request in {window}",
        f"sum(rate({finished.total}{sel}[{window}])) or on() vector(0)",
        "<=",
        0,
        0,
        "ERROR",
    )


def canary_spec(canary_sel: str, stable_sel: str, t: Thresholds, hist: m.Histogram = m.TTFT) -> AlertSpec:
    """The canary's TTFT p95 over stable's, each over all its series."""
    q = lambda sel: m.quantile(hist, 0.95, CANARY_WINDOW, sel, ())  # noqa: E731
    return AlertSpec(
        "CanaryTtftWorseThanStable",
        "canary",
        f"Canary TTFT p95 more than {t.canary_ttft_ratio}x stable's: hold or roll back the canary",
        f"{q(canary_sel)} / {q(stable_sel)}",
        ">",
        t.canary_ttft_ratio,
        600,
        "ERROR",
    )


def alert_specs(pools: list[PoolView], t: Thresholds) -> list[AlertSpec]:
    specs: list[AlertSpec] = []
    roles = {p.role: p for p in pools}
    for p in pools:
        sel = m.serving(p.role)
        serving_traffic = p.weight > 0
        # Users only wait on a pool that carries traffic; a dark pool's breach is a warning for the rollout.
        user_facing = "CRITICAL" if serving_traffic else "WARNING"
        specs += objective_specs(p.role, sel, m.SPLIT, t, user_facing)
        specs += [
            AlertSpec(
                "QueueBuildingAtMaxReplicas",
                p.role,
                f"Pool {p.role} queues more than {p.hpa.queue_target_per_pod} request(s) per pod while at "
                f"maxReplicas {p.hpa.max_replicas}: the HPA cannot add capacity",
                m.waiting_per_pod(p.role),
                ">",
                p.hpa.queue_target_per_pod,
                300,
                user_facing,
                guard_signal=m.pod_count(p.role),
                guard_min=p.hpa.max_replicas,
            ),
            # The EPP fails closed: without it the pool receives nothing. 60 s = four scrapes.
            AlertSpec(
                "EndpointPickerUnavailable",
                p.role,
                f"No endpoint picker of pool {p.role} ({naming.epp_name(p.role)}) answers its scrape",
                m.epp_up(p.role),
                "<",
                1,
                60,
                user_facing,
            ),
            AlertSpec(
                "ServingPodsRestarting",
                p.role,
                f"Model-server containers of pool {p.role} restarted in the last 15 min",
                m.restarts(p.role, "15m"),
                ">",
                0,
                0,
                "WARNING",
            ),
        ]
        if serving_traffic:
            specs.append(no_traffic_spec(p.role, p.weight, sel, t))
    canary, stable = roles.get("canary"), roles.get("stable")
    if canary is not None and stable is not None and canary.weight > 0:
        specs.append(canary_spec(m.serving("canary"), m.serving("stable"), t))
    return specs
