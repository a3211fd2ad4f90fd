"""Alerts of every serving target: Cloud Monitoring alert policies with PromQL conditions (pure specs here, the
policies in ``component.py``), and the alerts every target raises on vLLM's own series.

Choice: Cloud Monitoring AlertPolicy + ``condition_prometheus_query_language`` rather than GMP ``Rules`` CRs,
because notification channels are Cloud Monitoring objects (config gives their resource names) and GMP's managed
rule evaluator would need a separately configured Alertmanager to reach anyone. The rendered alert
policies are turned back into a Prometheus rules file by the tests, so ``promtool check rules`` / ``promtool test
rules`` prove exactly what is deployed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import metrics as m

#: Window of the latency / KV alerts: 5 min = 20 scrapes at 15 s (GKE's default), long enough to smooth one
#: long-prompt burst, short enough that a breached objective pages within ~10 min (window + ``for``).
ALERT_WINDOW = "5m"
#: The canary carries a small traffic share: compare it over a longer window so the ratio is not noise.
CANARY_WINDOW = "10m"
#: How often Cloud Monitoring evaluates each PromQL condition: 60 s, a quarter of the 5 min window.
EVALUATION_INTERVAL_SECONDS = 60
#: The pool a rollback returns traffic to (docs/rollout.md): its alerts stay CRITICAL at weight 0.
ROLLBACK_TARGET = "stable"


@dataclass(frozen=True)
class Thresholds:
    """Alert thresholds (also drawn on the dashboards); the latency ones are the contract's objectives, not
    separate config."""

    ttft_p95_seconds: float
    itl_p95_seconds: float
    kv_cache_usage: float
    kv_cache_for_minutes: int
    canary_ttft_ratio: float
    no_traffic_minutes: int


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
    #: Evaluated (Cloud Monitoring ``enabled``). An alert that only applies at some rollout stages exists at every
    #: stage and is switched off where it does not apply, so moving weights updates it in place: never a delete and
    #: re-create, which would drop its incident history.
    enabled: bool = True

    @property
    def guard(self) -> str | None:
        return f"{self.guard_signal} >= {self.guard_min}" if self.guard_signal is not None else None

    @property
    def expr(self) -> str:
        core = f"({self.signal}) {self.op} {m._fmt(self.threshold)}"
        return f"{core} and on() ({self.guard})" if self.guard else core


# ---- the alerts every target raises on vLLM's own series --------------------------------------------------------


def objective_specs(role: str, sel: str, series: m.VllmSeries, t: Thresholds, severity: str) -> list[AlertSpec]:
    """TTFT and ITL p95 over the contract's objectives, KV-cache saturation: of the pool whose series ``sel``
    selects, grouped by the label model's split, under the target's metric names."""
    g, f = series.split, series.family
    return [
        AlertSpec(
            "TtftP95OverObjective",
            role,
            f"TTFT p95 of pool {role} above the contract objective {t.ttft_p95_seconds} s",
            m.quantile(f(m.TTFT), 0.95, ALERT_WINDOW, sel, g),
            ">",
            t.ttft_p95_seconds,
            300,
            severity,
        ),
        AlertSpec(
            "ItlP95OverObjective",
            role,
            f"Inter-token latency p95 of pool {role} above the contract objective {t.itl_p95_seconds} s",
            m.quantile(f(m.ITL), 0.95, ALERT_WINDOW, sel, g),
            ">",
            t.itl_p95_seconds,
            300,
            severity,
        ),
        AlertSpec(
            "KvCacheSaturated",
            role,
            f"KV-cache usage of pool {role} above {t.kv_cache_usage} for {t.kv_cache_for_minutes} min",
            f"{m.agg('avg', g)} (avg_over_time({f(m.KV_CACHE_USAGE).series}{sel}[{ALERT_WINDOW}]))",
            ">",
            t.kv_cache_usage,
            t.kv_cache_for_minutes * 60,
            "WARNING",
        ),
    ]


def no_traffic_spec(role: str, weight: int, sel: str, series: m.VllmSeries, t: Thresholds) -> AlertSpec:
    """A pool that routes traffic but finished no request in ``no_traffic_minutes`` (0, not empty, when it has
    no series at all); enabled only while its weight is above 0 (a dark pool has no traffic by design). Its text
    names no weight, so a weight change touches only ``enabled``."""
    window = f"{t.no_traffic_minutes}m"
    return AlertSpec(
        "NoTrafficOnServingPool",
        role,
        f"Pool {role} carries traffic but finished no request in {window}",
        f"sum(rate({series.family(m.REQUEST_SUCCESS).total}{sel}[{window}])) or on() vector(0)",
        "<=",
        0,
        0,
        "ERROR",
        enabled=weight > 0,
    )


def canary_spec(canary_sel: str, stable_sel: str, series: m.VllmSeries, t: Thresholds, enabled: bool) -> AlertSpec:
    """The canary's TTFT p95 over stable's, each over all its series; enabled while the canary carries traffic."""
    ttft = series.family(m.TTFT)

    def q(sel: str) -> str:
        return m.quantile(ttft, 0.95, CANARY_WINDOW, sel, ())

    return AlertSpec(
        "CanaryTtftWorseThanStable",
        "canary",
        f"Canary TTFT p95 more than {t.canary_ttft_ratio}x stable's: hold or roll back the canary",
        f"{q(canary_sel)} / {q(stable_sel)}",
        ">",
        t.canary_ttft_ratio,
        600,
        "ERROR",
        enabled=enabled,
    )


@dataclass(frozen=True)
class AlertedPool:
    """What the shared alerts need about one pool."""

    role: str
    #: The pool's value of the label model's pool label (GKE: its role; Cloud Run: its revision; Vertex AI: its
    #: deployed model's displayName).
    series_pool: str
    #: Percent of traffic routed to the pool: 0 = dark (no users).
    weight: int
    #: The pool keeps a server running: a pool that scales to zero legitimately has no series while idle, so only a
    #: warm pool with traffic must always be finishing requests.
    warm: bool = True
    #: Its latency and KV-cache objectives are alerted on the pool as a whole; a co-hosted group's are alerted per
    #: model instead (``cohosted.py``), each model's breach paging once.
    objectives: bool = True


def pool_alert_specs(
    series: m.VllmSeries,
    pools: list[AlertedPool],
    t: Thresholds,
    target_specs: Callable[[str, str], list[AlertSpec]] = lambda role, severity: [],
) -> list[AlertSpec]:
    """Every pool's alerts, pool by pool: its objectives, the target's own alerts of the pool
    (``target_specs(role, severity)``) and, on a warm pool, no traffic (enabled while it carries traffic); then the
    canary's TTFT against stable's (enabled while the canary carries traffic). The set depends on the pools only,
    never on their weights: every rollout stage updates the same policies in place.

    Severity: CRITICAL where users wait (a pool with traffic) and on stable, which is the instant rollback target even
    at weight 0 (stage 100 of the runbook): a breach there means a rollback would land on a broken pool. A dark
    canary's breach is a WARNING for the rollout."""
    specs: list[AlertSpec] = []
    for p in pools:
        sel = series.selector(p.series_pool)
        severity = "CRITICAL" if p.weight > 0 or p.role == ROLLBACK_TARGET else "WARNING"
        if p.objectives:
            specs += objective_specs(p.role, sel, series, t, severity)
        specs += target_specs(p.role, severity)
        if p.warm:
            specs.append(no_traffic_spec(p.role, p.weight, sel, series, t))
    by_role = {p.role: p for p in pools}
    canary, stable = by_role.get("canary"), by_role.get("stable")
    if canary is not None and stable is not None:
        specs.append(
            canary_spec(
                series.selector(canary.series_pool), series.selector(stable.series_pool), series, t, canary.weight > 0
            )
        )
    return specs
