"""Dashboards and alerts per co-hosted model, on every target that co-hosts: one model of a group is selected by its
group's series (the target's label model, :class:`~.metrics.VllmSeries`, with the group as the pool) and vLLM's own
``model_name`` label, the first served name, which the renderer makes the release id (``--served-model-name <release>
<public name>``): unique in a stack, so it tells one co-hosted model's series from the others' in the same pod,
container or replica. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from .. import naming
from . import metrics as m
from .alerts import ALERT_WINDOW, AlertSpec, Thresholds, objective_specs
from .dashboard import Panel

#: The co-host server's gauge of each of its instances (1 while healthy): what a replica runs of a model even when an
#: instance is down (a dead engine exports no series of its own). Exported by the server next to its instances'.
INSTANCE_UP = m.Gauge(naming.COHOST_INSTANCE_UP)


@dataclass(frozen=True)
class CoHostedModel:
    """One co-hosted model as its group's monitoring sees it."""

    #: The group's role (names the alerts: ``<group>-<model role>``).
    group: str
    #: The group's value of the label model's pool label (GKE: the group's role; Vertex AI: its deployed model).
    series_pool: str
    #: The public name clients send, and the release that answers (vLLM's ``model_name``).
    model_name: str
    release: str
    #: Instances of the model on each replica of the group (data parallel: several).
    instances: int

    @property
    def role(self) -> str:
        """What its alerts are named after: the group, then the model as a DNS label."""
        return f"{self.group}-{self.model_name.replace('.', '-').replace('_', '-')}"


def selector(series: m.VllmSeries, model: CoHostedModel) -> str:
    """The model's series: its group's, with its release as vLLM's ``model_name``."""
    return m.matchers(**series.labels(model.series_pool), **{m.VLLM_MODEL_NAME_LABEL: model.release})


def instances_up(series: m.VllmSeries, model: CoHostedModel) -> str:
    """The fewest healthy instances of the model on any replica of the group, from the co-host server's own
    ``cohost:instance_up`` (labelled with the model's public name): a dead instance is a 0, not a missing series."""
    up = series.family(INSTANCE_UP).series
    sel = m.matchers(**series.labels(model.series_pool), **{naming.COHOST_MODEL_LABEL: model.model_name})
    return f"min(sum by ({series.replica_label}) ({up}{sel}))"


def panels(
    series: m.VllmSeries, model: CoHostedModel, w: str, t: Thresholds, server_metrics: bool = True
) -> list[Panel]:
    """``server_metrics``: the co-host server's own series reach the target's store (GKE's collectors scrape all of
    ``/metrics``)."""
    f, sel = series.family, selector(series, model)
    tag = f"{model.model_name} ({model.release}) in {model.group}"
    return [
        Panel(
            f"Co-hosted {tag}: TTFT and inter-token latency (s)",
            (
                ("TTFT p50", m.quantile(f(m.TTFT), 0.5, w, sel, ())),
                ("TTFT p95", m.quantile(f(m.TTFT), 0.95, w, sel, ())),
                ("ITL p95", m.quantile(f(m.ITL), 0.95, w, sel, ())),
            ),
            "s",
            (("TTFT p95 objective", t.ttft_p95_seconds), ("ITL p95 objective", t.itl_p95_seconds)),
        ),
        Panel(
            f"Co-hosted {tag}: requests, tokens and KV cache",
            (
                ("waiting", m.gauge_agg(f(m.NUM_REQUESTS_WAITING), "sum", sel, ())),
                ("running", m.gauge_agg(f(m.NUM_REQUESTS_RUNNING), "sum", sel, ())),
                ("generation tokens/s", m.rate_sum(f(m.GENERATION_TOKENS), w, sel, ())),
                ("KV-cache usage (fullest instance)", m.gauge_agg(f(m.KV_CACHE_USAGE), "max", sel, ())),
                *((("healthy instances per replica (fewest)", instances_up(series, model)),) if server_metrics else ()),
            ),
            "",
            (("KV alert", t.kv_cache_usage), ("planned instances per replica", float(model.instances))),
        ),
    ]


def alert_specs(
    series: m.VllmSeries, model: CoHostedModel, t: Thresholds, server_metrics: bool = True
) -> list[AlertSpec]:
    """The model's own objectives (users reach it by name: CRITICAL), and, where the server's own series are stored,
    a replica with fewer healthy instances of it than planned for 5 min (the co-host server restarts a dead one
    within its backoff; longer means it keeps failing, or the model is down on that replica)."""
    sel = selector(series, model)
    specs = objective_specs(model.role, sel, series, t, "CRITICAL")
    if server_metrics:
        specs.append(
            AlertSpec(
                "CoHostedInstancesMissing",
                model.role,
                f"A replica of group {model.group} runs fewer than {model.instances} healthy instance(s) of "
                f"{model.model_name} for {ALERT_WINDOW}",
                instances_up(series, model),
                "<",
                model.instances,
                300,
                "ERROR",
            )
        )
    return specs
