"""The GKE target's dashboard panels: vLLM's own panels split by pool and release (shared with every target,
``components/monitoring/dashboard.py``), then per pool the HPA, the GPUs (DCGM), the endpoint picker and the cost.
Pure."""

from __future__ import annotations

from ..monitoring import cohosted
from ..monitoring import metrics as m
from ..monitoring.alerts import Thresholds
from ..monitoring.dashboard import Panel, cost_panels, dashboard_window, vllm_panels
from . import metrics as gke
from .views import PoolView


def panels(pools: list[PoolView], t: Thresholds, queue_target: int, scrape_interval_seconds: int) -> list[Panel]:
    w = dashboard_window(scrape_interval_seconds)
    out = vllm_panels(gke.GKE, w, t, "pool / release", "pod", queue_title="Queue time (WAITING phase)")
    for p in pools:
        tag = f"{p.role} ({p.release})"
        out.append(
            Panel(
                f"Replicas vs HPA target — {tag}",
                (
                    ("waiting per pod (HPA signal)", gke.waiting_per_pod(p.role)),
                    ("scraped serving pods", gke.pod_count(p.role)),
                    ("HPA current replicas", gke.hpa_state(gke.KSM_HPA_CURRENT, p.role)),
                    ("HPA desired replicas", gke.hpa_state(gke.KSM_HPA_DESIRED, p.role)),
                ),
                "",
                (("HPA target per pod", float(queue_target)), ("maxReplicas", float(p.hpa.max_replicas))),
            )
        )
        out.append(
            Panel(
                f"GPU duty cycle and memory (DCGM) — {tag}",
                (
                    ("GPU duty cycle % (mean)", gke.dcgm(gke.DCGM_GPU_UTIL, p.role)),
                    ("GPU memory used MiB (max)", gke.dcgm(gke.DCGM_FB_USED, p.role, "max")),
                    ("GPU memory free MiB (min)", gke.dcgm(gke.DCGM_FB_FREE, p.role, "min")),
                ),
            )
        )
        epp = gke.epp_job(p.role)
        out.append(
            Panel(
                f"Endpoint picker queue and decisions — {tag}",
                (
                    ("EPP replicas up", gke.epp_up(p.role)),
                    ("pool average queue", f"max({gke.EPP_POOL_AVG_QUEUE.series}{gke.epp_pool(p.role)})"),
                    ("pool ready endpoints", f"max({gke.EPP_POOL_READY_ENDPOINTS.series}{gke.epp_pool(p.role)})"),
                    ("scheduling decision p99 (s)", m.quantile(gke.EPP_SCHEDULER_LATENCY, 0.99, w, epp, ())),
                    ("plugin p99 by plugin (s)", m.quantile(gke.EPP_PLUGIN_LATENCY, 0.99, w, epp, ("plugin_type",))),
                    ("routed requests/s", m.rate_sum(gke.EPP_REQUESTS, w, epp, ())),
                    (
                        "request error ratio",
                        f"{m.rate_sum(gke.EPP_REQUEST_ERRORS, w, epp, ())} / {m.rate_sum(gke.EPP_REQUESTS, w, epp, ())}",
                    ),
                ),
            )
        )
        flow = gke.epp_flow(p.role)
        out.append(
            Panel(
                f"Endpoint picker flow control — {tag}",
                (
                    ("pool saturation (>= 1 holds the queues)", f"max({gke.EPP_POOL_SATURATION.series}{flow})"),
                    ("queued requests by priority", f"sum by (priority) ({gke.EPP_FLOW_QUEUE_SIZE.series}{flow})"),
                    (
                        "queue outcomes/s by outcome",
                        f"{m.agg('sum', ('outcome',))} (rate({gke.EPP_FLOW_QUEUE_DURATION.count}{flow}[{w}]))",
                    ),
                    ("queue wait p95 (s)", m.quantile(gke.EPP_FLOW_QUEUE_DURATION, 0.95, w, flow, ("priority",))),
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
        out += cost_panels(tag, text, gke.GKE, p.role, p.replica_hourly_usd, p.planned_cost_per_million_usd, w)
        for v in p.models:
            model = cohosted.CoHostedModel(p.role, p.role, v.model_name, v.release, v.instances)
            out += cohosted.panels(gke.GKE, model, w, t)
    return out
