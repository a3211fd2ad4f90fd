"""The endpoint-picker charts this program can install, and what it knows about each pinned release.

Choice of the endpoint-picker chart (GAIE releases and the llm-d GKE guide; GAIE InferenceObjective CRD; vLLM vllm/v1/metrics/loggers.py; GAIE inferencepool chart)
-----------------------------------------------------------
GKE (>= 1.34.0-gke.1626000, the floor the GKE config enforces) installs only the *GA* CRDs: Gateway API and
InferencePool ``inference.networking.k8s.io/v1``. The picker must therefore read the v1 pool, and whatever
objective API it reads has to be installed by us. The candidates in ``../shared/reference/charts``:

* ``inferencepool`` **v1.5.0** (chosen): its EPP reads the GA pool and InferenceObjective
  ``inference.networking.x-k8s.io/v1alpha2`` — whose last upstream CRD is the same GAIE v1.5.0 release, so the
  CRD we install and the reader are one version. Its default KV metric is already vLLM's current name
  (``vllm:kv_cache_usage_perc``, GAIE >= 1.3); ``failureMode`` is a value; the image tag is pinned to the
  release (``v1.5.0``); monitoring on GKE is a GMP PodMonitoring with ``monitoring.prometheus.enabled``.
* ``inferencepool`` v1.1.0 (supported, GKE's documented example): same APIs, but its EPP defaults to
  ``vllm:gpu_cache_usage_perc`` — absent from vLLM >= 0.12 — so the flag must be set; monitoring uses the
  deprecated ``monitoring.gke`` switch.
* ``llm-d-router-gateway`` v0.10.0 (not supported): reads InferenceObjective ``llm-d.ai/v1alpha2``; the chart's
  image tag defaults to the moving ``main``; the KV metric is read by a data-layer plugin with no documented
  flag, so the "picker scrapes what vLLM exports" rule below could not be enforced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .. import naming

#: OCI location of the GAIE endpoint-picker chart (GAIE inferencepool chart); the chart version equals the release tag.
INFERENCEPOOL_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"

KV_METRIC_CURRENT = naming.VLLM_KV_CACHE_USAGE
KV_METRIC_LEGACY = naming.VLLM_KV_CACHE_USAGE_LEGACY


@dataclass(frozen=True)
class EppChartProfile:
    """What the program knows about one pinned chart release (read from the chart sources in
    ``../shared/reference/charts`` and GAIE releases and the llm-d GKE guide; vLLM vllm/v1/metrics/loggers.py; GAIE inferencepool chart)."""

    version: str
    #: Image tag the chart's values pin for the EPP container (``inferenceExtension.image.tag``).
    image_tag: str
    #: ``--kv-cache-usage-percentage-metric`` default of that EPP release.
    default_kv_metric: str
    #: ``inferenceExtension.flags``: a list of {name, value} (v1.1.0) or a map (v1.5.0).
    flags_layout: Literal["list", "map"]
    #: How the chart turns on the GMP PodMonitoring for the picker with ``provider.name: gke``.
    monitoring_switch: Literal["gke", "prometheus"]
    #: InferenceObjective API the EPP reads (chart templates/rbac.yaml).
    objective_api_version: str
    #: Upstream commit the objective CRDs are installed from (GKE installs only the GA CRDs, GAIE releases and the llm-d GKE guide).
    crd_commit: str
    crd_files: tuple[str, ...]
    #: Whether this program states the picker's EndpointPickerConfig (``pluginsCustomConfig``), saturation
    #: thresholds included. Only for releases whose config format and saturation detector were read at source.
    states_picker_config: bool


EPP_CHARTS: dict[str, EppChartProfile] = {
    "v1.1.0": EppChartProfile(
        version="v1.1.0",
        image_tag="v1.1.0",
        default_kv_metric=KV_METRIC_LEGACY,
        flags_layout="list",
        monitoring_switch="gke",
        objective_api_version="inference.networking.x-k8s.io/v1alpha2",
        crd_commit="f5bce5a2b2afa106fb70084186be051022704bec",
        crd_files=("config/crd/bases/inference.networking.x-k8s.io_inferenceobjectives.yaml",),
        # Not read at source for this release: its EPP's built-in saturation defaults apply (docs/rollout.md).
        states_picker_config=False,
    ),
    "v1.5.0": EppChartProfile(
        version="v1.5.0",
        image_tag="v1.5.0",
        default_kv_metric=KV_METRIC_CURRENT,
        flags_layout="map",
        monitoring_switch="prometheus",
        objective_api_version="inference.networking.x-k8s.io/v1alpha2",
        crd_commit="df9f8909fe06fe2dfd4a6fc0bd0c01a0acabf849",
        # The v1.5.0 EPP also watches InferenceModelRewrite (chart templates/rbac.yaml), so its CRD is installed.
        crd_files=(
            "config/crd/bases/inference.networking.x-k8s.io_inferenceobjectives.yaml",
            "config/crd/bases/inference.networking.x-k8s.io_inferencemodelrewrites.yaml",
        ),
        states_picker_config=True,
    ),
}


def crd_urls(profile: EppChartProfile) -> tuple[str, ...]:
    """Raw-file URLs of the objective CRDs, pinned to the release's commit (not a movable tag)."""
    base = f"https://raw.githubusercontent.com/kubernetes-sigs/gateway-api-inference-extension/{profile.crd_commit}"
    return tuple(f"{base}/{f}" for f in profile.crd_files)


def _version(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in text.split(".")[:3])
    return major, minor, patch


def vllm_kv_cache_metrics(vllm_version: str) -> tuple[str, ...]:
    """KV-cache usage gauges a vLLM version exports by default (vLLM vllm/v1/metrics/loggers.py): <= 0.9.1 only the old name;
    0.9.2-0.10.x both; 0.11.x hides the old one (behind --show-hidden-metrics-for-version); >= 0.12 new only."""
    v = _version(vllm_version)
    if v <= (0, 9, 1):
        return (KV_METRIC_LEGACY,)
    if v < (0, 11, 0):
        return (KV_METRIC_CURRENT, KV_METRIC_LEGACY)
    return (KV_METRIC_CURRENT,)
