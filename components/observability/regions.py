"""Per-region observability of a fleet stack (docs/multiregion.md): the alerts and panels that tell one region's
cluster from another's when several GKE clusters serve the same pools behind one multi-cluster load balancer. Pure
builders, like ``alerts.py`` and ``dashboard.py`` beside them; :class:`~.component.Observability` adds them to a
fleet stack's dashboard and alerts (``ObservabilityArgs.regions``).

Which cluster a series came from: Managed Service for Prometheus attaches the protected target labels
``project_id``, ``location``, ``cluster``, ``namespace``, ``job`` and ``instance`` to every scraped series, and a
PodMonitoring may not relabel them (GMP operator API reference, ``ScrapeEndpoint.metricRelabeling``: "Relabeling rules
that override protected target labels (project_id, location, cluster, namespace, job, instance, or __address__) are
not permitted"; ``ClusterRules``: "all rule results have their project_id and cluster label preserved" and "If the
location label is not preserved by the rule, it defaults to the cluster's location"),
https://github.com/GoogleCloudPlatform/prometheus-engine/blob/main/doc/api.md . Every query here therefore selects
a region by ``cluster`` (the cluster's name). Not by ``location``: a zonal cluster's location is its zone, not its
region, and cluster names are unique in a fleet (rule ``infra/targets/gke/rules/fleet.py``), so ``cluster`` alone
names one region's series. The pool part of every selector is the GKE label model's (:data:`gke.GKE`), unchanged.

Two failures only a fleet has, each one alert:

* ``RegionServingNothing`` — one region's cluster completes no request while the fleet as a whole completes some:
  the load balancer routes around it, so users see nothing yet, but the fleet has lost the region its N+1 was
  planned for (docs/multiregion.md, "Region loss"): one more region down and the contract's peak is not held.
* ``RegionSaturatedWhileAnotherIdles`` — a pool's KV cache is full in one region while the same pool idles in
  another: the multi-cluster load balancer balances each imported pool across clusters on the exported KV-cache
  metric (``components/gateway/multicluster.py``), so this is that balancing not spilling over, and the saturated
  region's users wait for cache while capacity sits unused.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..gateway.multicluster import KV_CACHE_MAX_UTILIZATION_PERCENT
from ..monitoring import metrics as m
from ..monitoring.alerts import ALERT_WINDOW, AlertSpec, Thresholds
from ..monitoring.dashboard import Panel
from . import metrics as gke

#: The label Managed Service for Prometheus sets to the name of the cluster a series was scraped in (module
#: docstring); the one label that tells the regions of a fleet apart.
CLUSTER_LABEL = "cluster"
#: What the per-region panels group by: the cluster, then the GKE label model's pool and release, so a line names
#: its region's cluster, pool and release.
REGION_SPLIT = (CLUSTER_LABEL, *gke.SPLIT)

#: Window of ``RegionServingNothing``: 10 min = 40 scrapes at GKE's default 15 s, long enough that a region at its
#: share of a quiet hour's traffic still finishes a request in it; lengthen it if a region's off-peak share can go
#: ten minutes without one request.
REGION_SERVING_WINDOW = "10m"
#: ``for`` of ``RegionServingNothing``: none, as on ``NoTrafficOnServingPool``: the window already demands ten whole
#: minutes without one completion, and a ``for`` would only delay the page; changes only with that window.
REGION_SERVING_FOR_SECONDS = 0
#: Low-water mark of ``RegionSaturatedWhileAnotherIdles``: a region whose pool averages under 30 % KV-cache usage has
#: room the balancer should have used; half the balancer's 60 % spill target (``KV_CACHE_MAX_UTILIZATION_PERCENT``),
#: so it moves with that target and stays well under the saturation threshold.
IDLE_KV_CACHE_USAGE = KV_CACHE_MAX_UTILIZATION_PERCENT / 100 / 2

#: A GCP region name (``us-central1``, ``europe-west4``), as ``components/gateway/multicluster.py`` checks it.
_REGION = re.compile(r"^[a-z]+(?:-[a-z]+)*[0-9]+$")
#: A GKE cluster name: lower-case letters, digits and hyphens, starting with a letter, at most 40 characters
#: (GKE's limit); the value lands unescaped inside a PromQL matcher, so nothing else may pass.
_CLUSTER = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")


@dataclass(frozen=True)
class RegionView:
    """One region of a fleet as its alerts and panels see it: the region, the name of its serving cluster (the
    value of the ``cluster`` label on its series) and its planned share of the contract's peak.

    A share of 0 is accepted here although the fleet schema asks more than 0 (``infra/targets/gke/config/fleet.py``):
    a region drained for maintenance keeps its cluster and its panels but has no traffic by design, so it is given no
    traffic alert and takes no part in the saturation comparison."""

    region: str
    cluster: str
    share: float

    def __post_init__(self) -> None:
        if not isinstance(self.region, str) or not _REGION.fullmatch(self.region):
            raise ValueError(f"RegionView.region: {self.region!r} is not a GCP region name such as us-central1")
        if not isinstance(self.cluster, str) or not _CLUSTER.fullmatch(self.cluster):
            raise ValueError(
                f"RegionView.cluster: {self.cluster!r} is not a GKE cluster name (lower-case letters, digits and "
                "hyphens, starting with a letter, at most 40 characters)"
            )
        if isinstance(self.share, bool) or not isinstance(self.share, (int, float)) or not math.isfinite(self.share):
            raise ValueError(f"RegionView.share: {self.share!r} is not a finite number")
        if not 0 <= self.share <= 1:
            raise ValueError(f"RegionView.share: {self.share!r} is outside [0, 1] (a share of the peak)")

    @property
    def serving(self) -> bool:
        """The region is planned to carry traffic."""
        return self.share > 0


def cluster_selector(cluster: str, role: str | None = None, **extra: str) -> str:
    """Matchers of one cluster's model-server series: the GKE label model's (every pool's, or one pool's by role)
    plus ``cluster``; ``extra`` adds matchers as :func:`m.matchers` spells them."""
    return m.matchers(**gke.GKE.labels(role), cluster=cluster, **extra)


def clusters_selector(clusters: list[str], role: str | None = None) -> str:
    """Matchers of several clusters' model-server series (one pool's by role), by a ``cluster`` regex; cluster
    names hold no regex metacharacter (:class:`RegionView` checks them)."""
    return m.matchers(**gke.GKE.labels(role), cluster_re="|".join(clusters))


def fleet_selector(**extra: str) -> str:
    """Matchers of every cluster's model-server series (every pool's)."""
    return m.matchers(**gke.GKE.labels(None), **extra)


def _good_finishes() -> dict[str, str]:
    """Finished requests that delivered an answer: a region whose every request aborts or errors completes none."""
    return {"finished_reason_re": "|".join(m.GOOD_FINISH_REASONS)}


def completed_rate(sel: str, window: str) -> str:
    """Completed requests/s of the series ``sel`` selects, summed into one series."""
    return m.rate_sum(gke.GKE.family(m.REQUEST_SUCCESS), window, sel, ())


def mean_kv_cache_usage(sel: str, by: tuple[str, ...] = ()) -> str:
    """KV-cache usage averaged over ``ALERT_WINDOW`` and over the servers ``sel`` selects (grouped by ``by``): the
    statistic ``KvCacheSaturated`` compares, so both alerts read one number."""
    kv = gke.GKE.family(m.KV_CACHE_USAGE).series
    return f"{m.agg('avg', by)} (avg_over_time({kv}{sel}[{ALERT_WINDOW}]))"


def _validate(regions: list[RegionView], roles: list[str], t: Thresholds) -> None:
    for field, values in (("region", [r.region for r in regions]), ("cluster", [r.cluster for r in regions])):
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            raise ValueError(f"regions: {field} {', '.join(dupes)} appears more than once")
    if len(set(roles)) != len(roles):
        raise ValueError(f"roles: {roles} names a role more than once")
    if not roles:
        raise ValueError("roles: no pool role given (the saturation alert compares one pool across regions)")
    if t.kv_cache_usage <= IDLE_KV_CACHE_USAGE:
        raise ValueError(
            f"t.kv_cache_usage: {t.kv_cache_usage} is not above the idle mark {IDLE_KV_CACHE_USAGE:g}: a region "
            "could be saturated and idle at once"
        )


def serving_nothing_spec(region: RegionView) -> AlertSpec:
    """``RegionServingNothing`` of one region.

    Signal: the region's completions/s, 0 (not empty) when its cluster reports no series at all, at ``<= 0``.
    Guard: AlertSpec's guard is ``guard_signal >= guard_min`` with an integer minimum, so the fleet's rate itself
    cannot be it (a quiet fleet at 0.2 requests/s is below any integer but 0, and ``>= 0`` holds at zero traffic).
    The guard signal is therefore the boolean ``fleet rate > bool 0``: 1 while any cluster completes requests, 0
    when none does, empty when no cluster reports; at ``>= 1`` only the first passes. No traffic anywhere (a quiet
    night, a client outage) is not a region's fault and stays quiet."""
    fleet_rate = completed_rate(fleet_selector(**_good_finishes()), REGION_SERVING_WINDOW)
    region_rate = completed_rate(cluster_selector(region.cluster, **_good_finishes()), REGION_SERVING_WINDOW)
    return AlertSpec(
        "RegionServingNothing",
        region.region,
        f"Region {region.region} (cluster {region.cluster}, share {region.share:g} of the peak) completed no request "
        f"in {REGION_SERVING_WINDOW} while the fleet completed some: one more region lost and the peak is not held",
        f"{region_rate} or on() vector(0)",
        "<=",
        0,
        REGION_SERVING_FOR_SECONDS,
        "ERROR",
        guard_signal=f"({fleet_rate} > bool 0)",
        guard_min=1,
    )


def saturated_while_idle_spec(region: RegionView, others: list[RegionView], role: str, t: Thresholds) -> AlertSpec:
    """``RegionSaturatedWhileAnotherIdles`` of one pool in one region.

    Signal: the pool's mean KV-cache usage in the region above ``t.kv_cache_usage`` (the threshold and ``for`` of
    ``KvCacheSaturated``). Guard: the number of other regions whose same pool averages under
    :data:`IDLE_KV_CACHE_USAGE`, at ``>= 1``: a count is an integer, and empty (no guard) when no other region idles.
    A region without series is absent, not idle: ``RegionServingNothing`` covers it."""
    idle = mean_kv_cache_usage(clusters_selector([o.cluster for o in others], role), (CLUSTER_LABEL,))
    return AlertSpec(
        "RegionSaturatedWhileAnotherIdles",
        f"{region.region}-{role}",
        f"KV-cache usage of pool {role} in region {region.region} (cluster {region.cluster}) above "
        f"{t.kv_cache_usage} for {t.kv_cache_for_minutes} min while another region's is under "
        f"{IDLE_KV_CACHE_USAGE:g}: the multi-cluster load balancer is not spilling over",
        mean_kv_cache_usage(cluster_selector(region.cluster, role)),
        ">",
        t.kv_cache_usage,
        t.kv_cache_for_minutes * 60,
        "WARNING",
        guard_signal=f"count({idle} < {m._fmt(IDLE_KV_CACHE_USAGE)})",
        guard_min=1,
    )


def region_alert_specs(regions: list[RegionView], roles: list[str], t: Thresholds) -> list[AlertSpec]:
    """Every region's alerts, region by region: ``RegionServingNothing`` for a region with a share above 0, then per
    pool ``RegionSaturatedWhileAnotherIdles`` when at least one other region also serves (a lone serving region has
    nobody to spill to; a drained region idles by design and is no spill target the balancer neglected)."""
    _validate(regions, roles, t)
    serving = [r for r in regions if r.serving]
    specs: list[AlertSpec] = []
    for region in serving:
        specs.append(serving_nothing_spec(region))
        others = [o for o in serving if o != region]
        if others:
            specs += [saturated_while_idle_spec(region, others, role, t) for role in roles]
    return specs


def region_panels(regions: list[RegionView], window: str) -> list[Panel]:
    """Per region, the three charts that show where the fleet's load went: completed requests/s, KV-cache usage and
    waiting requests of its cluster, one line per pool and release, each legend naming the cluster
    (:data:`REGION_SPLIT`). ``window`` is the dashboard's rate window (``dashboard_window``)."""
    f = gke.GKE.family
    out: list[Panel] = []
    for r in regions:
        tag = f"{r.region} ({r.cluster}, share {r.share:g})"
        sel = cluster_selector(r.cluster)
        good = cluster_selector(r.cluster, **_good_finishes())
        out += [
            Panel(
                f"Completed requests/s — {tag}",
                (("completed (stop|length)/s", m.rate_sum(f(m.REQUEST_SUCCESS), window, good, REGION_SPLIT)),),
                "1/s",
                split=REGION_SPLIT,
            ),
            Panel(
                f"KV-cache usage (0-1) — {tag}",
                (
                    ("mean over pods", m.gauge_agg(f(m.KV_CACHE_USAGE), "avg", sel, REGION_SPLIT)),
                    ("fullest pod", m.gauge_agg(f(m.KV_CACHE_USAGE), "max", sel, REGION_SPLIT)),
                ),
                "1",
                (("idle below (region alert)", IDLE_KV_CACHE_USAGE),),
                split=REGION_SPLIT,
            ),
            Panel(
                f"Waiting requests — {tag}",
                (("waiting", m.gauge_agg(f(m.NUM_REQUESTS_WAITING), "sum", sel, REGION_SPLIT)),),
                split=REGION_SPLIT,
            ),
        ]
    return out
