"""The endpoint-picker chart this program installs, and what it knows about the pinned release.

Choice of the endpoint-picker chart (GAIE v1.6.0 README and commit 88fd4792; llm-d-router v0.10.0 config/charts)
----------------------------------------------------------------------------------------------------------------
GAIE v1.6.0 removed the endpoint picker, InferenceObjective, InferenceModelRewrite, EndpointPickerConfig and the
body-based router from ``kubernetes-sigs/gateway-api-inference-extension``; they live on in ``llm-d/llm-d-router``.
Its v0.10.0 chart ``llm-d-router-gateway`` (values under ``router.*``, shared library chart ``routerlib``) is the
one installed here:

* the EPP reads the GA InferencePool ``inference.networking.k8s.io/v1`` (the only pool GKE installs) and
  InferenceObjective ``llm-d.ai/v1alpha2``, whose CRD this program installs from the same release's commit;
* the chart's vendored values default the EPP image tag to the moving ``main`` (routerlib/values.yaml); the
  release pipeline rewrites it to the release tag when it publishes the chart (hack/push-chart.sh:
  ``.router.epp.image.tag=strenv(EXTRA_TAG)``), and this program states it anyway so no tag is left to a default;
* the KV-cache, queue and LoRA gauges are read by the data-layer ``core-metrics-extractor`` plugin, whose
  ``engineConfigs`` this program states with vLLM's names (objects.picker_config).

``llm-d/llm-d-router`` had no release newer than v0.10.0 when this was pinned (``git tag``: v0.10.0 is the newest).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import naming

KV_METRIC_CURRENT = naming.VLLM_KV_CACHE_USAGE
KV_METRIC_LEGACY = naming.VLLM_KV_CACHE_USAGE_LEGACY


@dataclass(frozen=True)
class RouterRelease:
    """What the program knows about the pinned llm-d Router release (read at llm-d-router@v0.10.0)."""

    #: OCI location of the chart (hack/push-chart.sh: ``oci://${IMAGE_REGISTRY}/charts``, registry ghcr.io/llm-d).
    chart: str
    #: Chart version = release tag (hack/push-chart.sh packages ``--version "${EXTRA_TAG}"``).
    version: str
    #: EPP image (routerlib/values.yaml ``router.epp.image.registry`` / ``repository``), tag = the release tag.
    image_registry: str
    image_repository: str
    image_tag: str
    #: InferenceObjective API the EPP prefers when its CRD is installed (pkg/epp/server/controller_config.go
    #: ``inferenceAPIGV`` before ``legacyInferenceAPIGV``, decided once at start-up by API discovery).
    objective_api_version: str
    #: Commit of the release tag: the CRDs are installed from it (a tag can move, a commit cannot).
    crd_commit: str
    #: The EPP discovers both kinds (controller_config.go ``populateWithDiscovery``) and the chart's Role grants
    #: both (llm-d-router-gateway/templates/rbac.yaml), so both CRDs of the release are installed.
    crd_files: tuple[str, ...]

    @property
    def image(self) -> str:
        return f"{self.image_registry}/{self.image_repository}:{self.image_tag}"


ROUTER = RouterRelease(
    chart="oci://ghcr.io/llm-d/charts/llm-d-router-gateway",
    version="v0.10.0",
    image_registry="ghcr.io/llm-d",
    image_repository="llm-d-router-endpoint-picker",
    image_tag="v0.10.0",
    objective_api_version="llm-d.ai/v1alpha2",
    crd_commit="71f4f0999f95b96c49a9d0c4afbd18dfdb943c26",
    crd_files=(
        "config/crd/bases/llm-d.ai_inferenceobjectives.yaml",
        "config/crd/bases/llm-d.ai_inferencemodelrewrites.yaml",
    ),
)
ROUTER_CHART = ROUTER.chart


def crd_urls(release: RouterRelease = ROUTER) -> tuple[str, ...]:
    """Raw-file URLs of the objective CRDs, pinned to the release's commit (not a movable tag)."""
    base = f"https://raw.githubusercontent.com/llm-d/llm-d-router/{release.crd_commit}"
    return tuple(f"{base}/{f}" for f in release.crd_files)


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
