"""The dashboard and alert specs of the Vertex AI target, rebuilt from ``components/observability/metrics.py`` (pure).

The vLLM series are the same as on GKE and Cloud Run, exported by Vertex AI's AI AutoMetrics under ``vertex_*``
names and labelled by the endpoint and the deployed model (``metrics.py``, "Vertex AI: AI AutoMetrics' label
model"): a pool is its deployed model (``model_display_name``, the displayName the program gives it), its release
vLLM's ``model_name``, a replica AutoMetrics' ``replica_id``. Beside them, the endpoint's own Cloud Monitoring
metrics (replicas, target replicas, predictions, responses, latency, accelerator duty cycle). What GKE shows and
Vertex cannot: the HPA and DCGM panels, the endpoint picker, container restarts.

Standard library and the observability builders only: nothing here imports Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..observability import metrics as m
from ..observability.alerts import AlertSpec, canary_spec, no_traffic_spec, objective_specs
from ..observability.dashboard import Panel, dashboard_window, split_vllm_panels
from ..observability.views import Thresholds

#: The autoscaling signal the per-pool panel's queue line is compared with (``requests.AUTOSCALING_METRICS``).
QUEUE_SIGNAL = "vllm_queue"


@dataclass(frozen=True)
class DeployedModelView:
    """What observability needs about one pool's deployed model."""

    role: str
    release: str
    #: DeployedModel.displayName (``requests.deployed_model_display_name``): the pool's ``model_display_name``.
    display_name: str
    #: Percent of the endpoint's traffic: 0 = dark (deployed, no entry in the traffic split).
    weight: int
    min_replicas: int
    max_replicas: int
    #: Vertex's autoscaling signal (a key of ``requests.AUTOSCALING_METRICS``) and its per-replica target.
    autoscaling_signal: str | None
    autoscaling_target: int | None


def _endpoint_panels(endpoint_id: str, w: str) -> list[Panel]:
    """The endpoint's own metrics, one line per deployed model (``deployed_model_id``, assigned by Vertex)."""
    g = m.VERTEX_ENDPOINT_SPLIT
    sel = m.vertex_endpoint_metric(endpoint_id)
    total = m.vertex_endpoint_metric(endpoint_id, latency_type="total")
    by_model = lambda panel: replace(panel, split=True, split_labels=g)  # noqa: E731
    return [
        by_model(
            Panel(
                "Replicas and target replicas by deployed model (Vertex)",
                (
                    ("replicas", m.gauge_agg(m.VERTEX_REPLICAS, "max", sel, g)),
                    ("target replicas", m.gauge_agg(m.VERTEX_TARGET_REPLICAS, "max", sel, g)),
                ),
            )
        ),
        by_model(
            Panel(
                "Predictions/s by deployed model (Vertex)",
                (("predictions/s", f"{m.agg('sum', g)} (rate({m.VERTEX_PREDICTION_COUNT.series}{sel}[{w}]))"),),
                "1/s",
            )
        ),
        Panel(
            "Responses/s by response code (Vertex)",
            (
                (
                    "responses/s",
                    f"sum by ({m.VERTEX_DEPLOYED_MODEL_ID_LABEL}, response_code) "
                    f"(rate({m.VERTEX_RESPONSE_COUNT.series}{sel}[{w}]))",
                ),
            ),
            "1/s",
            split=True,
            split_labels=(m.VERTEX_DEPLOYED_MODEL_ID_LABEL, "response_code"),
        ),
        by_model(
            Panel(
                "Prediction latency p95 by deployed model (Vertex, total, ms)",
                (("p95", m.quantile(m.VERTEX_PREDICTION_LATENCIES, 0.95, w, total, g)),),
                "ms",
            )
        ),
        # Unit 10^2.% in the metrics list: shown as stored.
        Panel(
            "Accelerator duty cycle by deployed model (Vertex)",
            (
                (
                    "mean over replicas",
                    f"avg by ({m.VERTEX_DEPLOYED_MODEL_ID_LABEL}) ({m.VERTEX_DUTY_CYCLE.series}{sel})",
                ),
            ),
            split=True,
            split_labels=(m.VERTEX_DEPLOYED_MODEL_ID_LABEL,),
        ),
    ]


def panels(endpoint_id: str, models: list[DeployedModelView], t: Thresholds) -> list[Panel]:
    w = dashboard_window(m.VERTEX_SCRAPE_INTERVAL_SECONDS)
    out = split_vllm_panels(
        m.vertex_serving(endpoint_id),
        m.vertex_labels(endpoint_id),
        m.VERTEX_SPLIT,
        w,
        t,
        "deployed model / release",
        "replica",
        m.on_vertex,
    )
    out += _endpoint_panels(endpoint_id, w)
    for d in models:
        tag = f"{d.role} ({d.release}, {d.display_name})"
        out.append(
            Panel(
                f"Replicas and queue — {tag}",
                (
                    ("replicas reporting vLLM metrics", m.vertex_replica_count(endpoint_id, d.display_name)),
                    ("waiting requests per replica", m.vertex_waiting_per_replica(endpoint_id, d.display_name)),
                ),
                "",
                (
                    ("max replicas", float(d.max_replicas)),
                    ("min replicas", float(d.min_replicas)),
                    *(
                        (("autoscaling target per replica", float(d.autoscaling_target)),)
                        if d.autoscaling_signal == QUEUE_SIGNAL and d.autoscaling_target is not None
                        else ()
                    ),
                ),
            )
        )
    return out


def alert_specs(endpoint_id: str, models: list[DeployedModelView], t: Thresholds) -> list[AlertSpec]:
    specs: list[AlertSpec] = []
    by_role = {d.role: d for d in models}
    ttft, itl, kv = m.on_vertex(m.TTFT), m.on_vertex(m.ITL), m.on_vertex(m.KV_CACHE_USAGE)
    for d in models:
        sel = m.vertex_serving(endpoint_id, d.display_name)
        # Users only wait on a deployed model that carries traffic; a dark one's breach is a warning for the rollout.
        user_facing = "CRITICAL" if d.weight > 0 else "WARNING"
        specs += objective_specs(d.role, sel, m.VERTEX_SPLIT, t, user_facing, ttft, itl, kv)
        # Vertex keeps min_replicas >= 1 warm: a deployed model with traffic must always be finishing requests.
        if d.weight > 0 and d.min_replicas > 0:
            specs.append(no_traffic_spec(d.role, d.weight, sel, t, m.on_vertex(m.REQUEST_SUCCESS)))
    canary, stable = by_role.get("canary"), by_role.get("stable")
    if canary is not None and stable is not None and canary.weight > 0:
        specs.append(
            canary_spec(
                m.vertex_serving(endpoint_id, canary.display_name),
                m.vertex_serving(endpoint_id, stable.display_name),
                t,
                ttft,
            )
        )
    return specs
