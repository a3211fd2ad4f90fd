"""The dashboard and alert specs of the Cloud Run target, rebuilt from ``components/observability/metrics.py`` (pure).

The vLLM series are the same as on GKE; what differs is how they are labelled (``metrics.py``, "Label model on Cloud
Run"): a pool is its revision (``revision_name``), its release vLLM's ``model_name``, an instance the sidecar's
``instance``. What GKE shows and Cloud Run cannot: the HPA and DCGM panels, the endpoint picker, container restarts
(no kube-state metrics); Cloud Run's own request and instance metrics (``run.googleapis.com/...``) are on its
service page. What Cloud Run adds: the instance count against the pool's bounds and the per-instance concurrency cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..observability import metrics as m
from ..observability.alerts import AlertSpec, canary_spec, no_traffic_spec, objective_specs
from ..observability.dashboard import Panel, dashboard_window, split_vllm_panels
from ..observability.views import Thresholds


@dataclass(frozen=True)
class RevisionView:
    """What observability needs about one pool's revision."""

    role: str
    release: str
    revision: str
    #: Percent of the service's traffic: 0 = dark (reachable by tag only).
    weight: int
    min_instances: int
    max_instances: int
    #: ``maxInstanceRequestConcurrency``: Cloud Run never sends one instance more.
    concurrency: int
    instance_hourly_usd: float
    #: The capacity plan's cost per 1M output tokens at the measured throughput; None = unmeasured.
    planned_cost_per_million_usd: float | None


def panels(service: str, revisions: list[RevisionView], t: Thresholds) -> list[Panel]:
    w = dashboard_window(m.CLOUD_RUN_SCRAPE_INTERVAL_SECONDS)
    sel = m.cloud_run_serving(service)
    g = m.CLOUD_RUN_SPLIT
    out = split_vllm_panels(sel, m.cloud_run_labels(service), g, w, t, "revision / release", "instance")
    for r in revisions:
        tag = f"{r.role} ({r.release}, {r.revision})"
        out.append(
            Panel(
                f"Instances and concurrency — {tag}",
                (
                    ("instances reporting", m.cloud_run_instance_count(service, r.revision)),
                    ("running requests per instance", m.cloud_run_running_per_instance(service, r.revision)),
                ),
                "",
                (("max instances", float(r.max_instances)), ("concurrency per instance", float(r.concurrency))),
            )
        )
        if r.planned_cost_per_million_usd is None:
            text = (
                f"**{tag}: capacity plan cost per 1M output tokens: unmeasured.** No throughput measured at the "
                f"SLO for this release on this GPU (serving.{r.role}.measured); an instance costs "
                f"${r.instance_hourly_usd:.2f}/h while it runs. The chart beside shows the observed cost."
            )
        else:
            text = (
                f"**{tag}: capacity plan cost per 1M output tokens: ${r.planned_cost_per_million_usd:.2f}** at the "
                f"measured throughput; an instance ${r.instance_hourly_usd:.2f}/h."
            )
        out.append(Panel(f"Cost per 1M output tokens (plan) — {tag}", text=text))
        out.append(
            Panel(
                f"Cost per 1M output tokens at live throughput — {tag} (USD)",
                (
                    (
                        "observed $/1M output tokens",
                        m.cost_per_million_at(
                            m.cloud_run_instance_count(service, r.revision),
                            m.cloud_run_serving(service, r.revision),
                            r.instance_hourly_usd,
                            w,
                        ),
                    ),
                ),
                "",
                (
                    ()
                    if r.planned_cost_per_million_usd is None
                    else (("plan at measured throughput", r.planned_cost_per_million_usd),)
                ),
            )
        )
    return out


def alert_specs(service: str, revisions: list[RevisionView], t: Thresholds) -> list[AlertSpec]:
    specs: list[AlertSpec] = []
    by_role = {r.role: r for r in revisions}
    g = m.CLOUD_RUN_SPLIT
    for r in revisions:
        sel = m.cloud_run_serving(service, r.revision)
        # Users only wait on a revision that carries traffic; a dark revision's breach is a warning for the rollout.
        user_facing = "CRITICAL" if r.weight > 0 else "WARNING"
        specs += objective_specs(r.role, sel, g, t, user_facing)
        specs += [
            # Every instance runs at its concurrency cap and no instance can be added: Cloud Run holds further
            # requests in its pending queue and answers 429 when that overflows.
            AlertSpec(
                "ConcurrencyCapAtMaxInstances",
                r.role,
                f"Pool {r.role} runs {r.concurrency} request(s) per instance (its concurrency cap) on all "
                f"{r.max_instances} max instance(s): Cloud Run cannot add capacity",
                m.cloud_run_running_per_instance(service, r.revision),
                ">=",
                r.concurrency,
                300,
                user_facing,
                guard_signal=m.cloud_run_instance_count(service, r.revision),
                guard_min=r.max_instances,
            ),
        ]
        # A pool that scales to zero legitimately has no series while idle; only a warm pool with traffic must
        # always be finishing requests.
        if r.weight > 0 and r.min_instances > 0:
            specs.append(no_traffic_spec(r.role, r.weight, sel, t))
    canary, stable = by_role.get("canary"), by_role.get("stable")
    if canary is not None and stable is not None and canary.weight > 0:
        specs.append(
            canary_spec(m.cloud_run_serving(service, canary.revision), m.cloud_run_serving(service, stable.revision), t)
        )
    return specs
