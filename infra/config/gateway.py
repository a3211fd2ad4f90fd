"""GKE Inference Gateway: the L7 Gateway, its certificate, the endpoint picker (EPP) chart and the identity /
content-safety layers in front of the serving pools (issue 5; seed 000 "Routing Must Understand Inference
State", "Admission Control", "Security Without Giving the Model a Cloud Account").

Choice of the endpoint-picker chart (FACTS §1, §3, §5, §10)
-----------------------------------------------------------
GKE (>= 1.34.0-gke.1626000, the floor in infra/config/gke.py) installs only the *GA* CRDs: Gateway API and
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

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from .base import Strict, check

if TYPE_CHECKING:
    from .stack import StackConfig

GatewayClass = Literal["gke-l7-regional-external-managed", "gke-l7-rilb"]
FailureMode = Literal["FailOpen", "FailClose"]

#: OCI location of the GAIE endpoint-picker chart (FACTS §10); the chart version equals the release tag.
INFERENCEPOOL_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"

#: vLLM's KV-cache usage gauge, old and current names (FACTS §5).
KV_METRIC_CURRENT = "vllm:kv_cache_usage_perc"
KV_METRIC_LEGACY = "vllm:gpu_cache_usage_perc"


@dataclass(frozen=True)
class EppChartProfile:
    """What the program knows about one pinned chart release (read from the chart sources in
    ``../shared/reference/charts`` and FACTS §1/§5/§10)."""

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
    #: Upstream commit the objective CRDs are installed from (GKE installs only the GA CRDs, FACTS §1).
    crd_commit: str
    crd_files: tuple[str, ...]


EPP_CHARTS: dict[str, EppChartProfile] = {
    "v1.1.0": EppChartProfile(
        version="v1.1.0", image_tag="v1.1.0", default_kv_metric=KV_METRIC_LEGACY, flags_layout="list",
        monitoring_switch="gke", objective_api_version="inference.networking.x-k8s.io/v1alpha2",
        crd_commit="f5bce5a2b2afa106fb70084186be051022704bec",
        crd_files=("config/crd/bases/inference.networking.x-k8s.io_inferenceobjectives.yaml",),
    ),
    "v1.5.0": EppChartProfile(
        version="v1.5.0", image_tag="v1.5.0", default_kv_metric=KV_METRIC_CURRENT, flags_layout="map",
        monitoring_switch="prometheus", objective_api_version="inference.networking.x-k8s.io/v1alpha2",
        crd_commit="df9f8909fe06fe2dfd4a6fc0bd0c01a0acabf849",
        # The v1.5.0 EPP also watches InferenceModelRewrite (chart templates/rbac.yaml), so its CRD is installed.
        crd_files=("config/crd/bases/inference.networking.x-k8s.io_inferenceobjectives.yaml",
                   "config/crd/bases/inference.networking.x-k8s.io_inferencemodelrewrites.yaml"),
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
    """KV-cache usage gauges a vLLM version exports by default (FACTS §5): <= 0.9.1 only the old name;
    0.9.2-0.10.x both; 0.11.x hides the old one (behind --show-hidden-metrics-for-version); >= 0.12 new only."""
    v = _version(vllm_version)
    if v <= (0, 9, 1):
        return (KV_METRIC_LEGACY,)
    if v < (0, 11, 0):
        return (KV_METRIC_CURRENT, KV_METRIC_LEGACY)
    return (KV_METRIC_CURRENT,)


def vllm_kv_cache_metric(vllm_version: str) -> str:
    """The KV-cache gauge the picker should scrape for this vLLM version (the current name when exported)."""
    return vllm_kv_cache_metrics(vllm_version)[0]


def backend_timeout_seconds(stream_bound_seconds: float) -> int:
    """Backend-service timeout: the longest allowed stream (TTFT objective + max output x ITL objective),
    rounded up to whole seconds. The load balancer cuts a response at this age, so anything shorter cuts the
    longest legitimate stream (seed 000, "Streaming Changes Retry Semantics")."""
    return math.ceil(stream_bound_seconds - 1e-9)


# ---- config models ------------------------------------------------------------------------------------

HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$"
RESOURCE_NAME = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
MODEL_ARMOR_TEMPLATE_RE = re.compile(
    r"^projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])/locations/(?P<location>[a-z]+-[a-z]+\d+)/templates/(?P<name>[-_A-Za-z0-9]{1,63})$")


class GatewayCertificate(Strict):
    """The HTTPS listener's certificate. Regional Gateways take regional certificates only:

    * ``certificate-manager``: regional Certificate Manager certificates (listener TLS option
      ``networking.gke.io/cert-manager-certs``);
    * ``pre-shared``: regional Compute Engine SSL certificates (``networking.gke.io/pre-shared-certs``).
    Both are created outside this program (issuance needs DNS / a CA), referenced here by name.
    """

    source: Literal["certificate-manager", "pre-shared"] = Field(description=(
        "Where the certificates live: regional Certificate Manager or regional Compute Engine SSL certificates."))
    names: Annotated[list[Annotated[str, Field(pattern=RESOURCE_NAME)]], Field(min_length=1, max_length=15)] = Field(description=(
        "Certificate names (same region as the gateway); the listener serves them by SNI."))


class EndpointPicker(Strict):
    """The per-pool endpoint picker, installed from the upstream chart (one Helm release per pool)."""

    chart: Literal["oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"] = Field(description=(
        "OCI location of the upstream chart (FACTS §10); only the GAIE ``inferencepool`` chart is supported."))
    version: Literal["v1.1.0", "v1.5.0"] = Field(description=(
        "Pinned chart release; see the module docstring for why v1.5.0 is the default choice."))
    replicas: Annotated[int, Field(ge=1, le=5)] = Field(description=(
        "Picker replicas per pool. > 1 turns on the chart's leader election (one active, the others warm standbys); "
        "staging and prod need >= 2 (seed 000: \"Run it redundantly\")."))
    failure_mode: FailureMode = Field(description=(
        "What the gateway does when the picker cannot answer: FailOpen = fall back to the load balancer's own "
        "endpoint choice inside the pool (traffic flows, no cache/queue awareness or priority); FailClose = reject "
        "the request (5xx)."))
    failure_mode_reason: Annotated[str, Field(min_length=20)] = Field(description=(
        "Why this failure mode was chosen: stated in config so the trade-off is reviewed with every change."))
    kv_cache_metric: str = Field(description=(
        "Prometheus gauge the picker reads as a pod's KV-cache usage; must be one the pool's vLLM exports."))
    install_objective_crds: bool = Field(True, description=(
        "Install the objective CRDs the picker reads (GKE does not ship non-GA CRDs). Turn off only when another "
        "owner already installs the same version."))

    @property
    def profile(self) -> EppChartProfile:
        return EPP_CHARTS[self.version]


class Iap(Strict):
    """Identity-Aware Proxy on the pools' backend services (GCPBackendPolicy ``iap``).

    Without ``oauth_client_id`` / ``oauth_client_secret_name`` IAP uses a Google-managed OAuth client; with
    them, a custom client whose secret lives in an existing Kubernetes Secret (key ``key``) in the serving
    namespace — created out of band (e.g. synced from Secret Manager) so no secret passes through config.
    """

    enabled: bool = Field(description=(
        "Require an IAP-authenticated identity for every request to the pools (prod: must be true)."))
    members: list[Annotated[str, Field(pattern=r"^(user|group|serviceAccount|domain|principal|principalSet):.+$")]] = Field([], description=(
        "Principals granted ``roles/iap.httpsResourceAccessor`` (``user:``, ``group:``, ``serviceAccount:``, "
        "``domain:``)."))
    oauth_client_id: Annotated[str, Field(pattern=r"^[-0-9a-z]+\.apps\.googleusercontent\.com$")] | None = Field(None, description=(
        "Custom OAuth client id; omit (with the secret name) for the Google-managed client."))
    oauth_client_secret_name: Annotated[str, Field(pattern=RESOURCE_NAME)] | None = Field(None, description=(
        "Existing Kubernetes Secret (key ``key``) in the serving namespace holding the custom client's secret."))

    @model_validator(mode="after")
    def _consistent(self) -> "Iap":
        problems = []
        if (self.oauth_client_id is None) != (self.oauth_client_secret_name is None):
            field = "oauth_client_secret_name" if self.oauth_client_secret_name is None else "oauth_client_id"
            problems.append((field, "a custom OAuth client needs both oauth_client_id and oauth_client_secret_name "
                                    "(omit both for the Google-managed client)"))
        if self.enabled and not self.members:
            problems.append(("members", "IAP without any httpsResourceAccessor member admits nobody"))
        check(problems)
        return self


class ModelArmor(Strict):
    """Prompt/response screening by Model Armor through a GCPTrafficExtension on the Gateway."""

    template: str = Field(description=(
        "``projects/<project>/locations/<region>/templates/<name>``; must be in the gateway's region."))
    fail_open: bool = Field(description=(
        "Model Armor unreachable or slower than ``timeout_ms``: true = serve unscreened, false = 500 / stream "
        "reset."))
    timeout_ms: Annotated[int, Field(ge=10, le=10000)] = Field(1000, description=(
        "Per-message callout timeout (GCPTrafficExtension allows 10-10000 ms). Model Armor sits on the request path "
        "before the first token, so this adds to TTFT: keep it well below contract.ttft_p95_ms."))

    @model_validator(mode="after")
    def _template(self) -> "ModelArmor":
        check([] if MODEL_ARMOR_TEMPLATE_RE.match(self.template) else
              [("template", f"must be projects/<project>/locations/<region>/templates/<name>, got {self.template!r}")])
        return self


class GatewayConfig(Strict):
    gateway_class: GatewayClass = Field(description=(
        "``gke-l7-regional-external-managed`` (internet-facing regional ALB) or ``gke-l7-rilb`` (internal, VPC "
        "only)."))
    hostnames: Annotated[list[Annotated[str, Field(pattern=HOSTNAME_PATTERN)]], Field(min_length=1, max_length=16)] = Field(description=(
        "Hostnames the API is served on (HTTPRoute hostnames; the certificate must cover them)."))
    certificate: GatewayCertificate
    epp: EndpointPicker
    iap: Iap = Iap(enabled=False)
    model_armor: ModelArmor | None = None
    request_log_sample_rate: Annotated[float, Field(ge=0, le=1)] = Field(0.1, description=(
        "Share of requests the load balancer logs (0-1). LB request logs carry method, path, status, latency and "
        "sizes, never bodies; 0.1 keeps per-pool error/latency evidence at 1/10 of the log volume."))
    allow_global_access: bool = Field(False, description=(
        "Internal gateway only: reachable from other regions of the VPC."))

    @model_validator(mode="after")
    def _class_options(self) -> "GatewayConfig":
        check([("allow_global_access", "only applies to the internal class gke-l7-rilb")]
              if self.allow_global_access and self.gateway_class != "gke-l7-rilb" else [])
        return self


# ---- cross-section rules (called from stack.semantic_issues) -----------------------------------------------

def gateway_issues(cfg: "StackConfig") -> list[tuple[tuple[str | int, ...], str]]:
    """Rules between the gateway section and the environment, releases, contract and region."""
    gw = cfg.gateway
    out: list[tuple[tuple[str | int, ...], str]] = []
    if cfg.environment in ("staging", "prod") and gw.epp.replicas < 2:
        out.append((("gateway", "epp", "replicas"),
                    f"{cfg.environment} runs the endpoint picker redundantly (>= 2 replicas), got {gw.epp.replicas}"))
    if gw.epp.failure_mode == "FailClose" and gw.epp.replicas < 2:
        out.append((("gateway", "epp", "failure_mode"),
                    "FailClose with a single picker replica turns every picker restart into an outage"))
    if cfg.environment == "prod" and not gw.iap.enabled:
        out.append((("gateway", "iap", "enabled"), "prod requires identity-aware access (IAP) on the backends"))
    ids = {r.release for r in cfg.releases}
    for role, pool in cfg.pools():
        if pool.release not in ids:
            continue  # reported by the serving rules
        rel = cfg.release(pool.release)
        exported = vllm_kv_cache_metrics(rel.vllm_version)
        if gw.epp.kv_cache_metric not in exported:
            out.append((("gateway", "epp", "kv_cache_metric"),
                        f"{gw.epp.kv_cache_metric!r} is not exported by vLLM {rel.vllm_version} ({role} pool, release "
                        f"{rel.release!r}), which exports {', '.join(exported)}"))
    if gw.model_armor is not None:
        m = MODEL_ARMOR_TEMPLATE_RE.match(gw.model_armor.template)
        if m and m.group("location") != cfg.region:
            out.append((("gateway", "model_armor", "template"),
                        f"template is in {m.group('location')!r}; the regional gateway calls "
                        f"modelarmor.{cfg.region}.rep.googleapis.com, so it must be in {cfg.region!r}"))
        if m and gw.model_armor.timeout_ms >= cfg.contract.ttft_p95_ms:
            out.append((("gateway", "model_armor", "timeout_ms"),
                        f"{gw.model_armor.timeout_ms} ms screening timeout leaves no TTFT budget "
                        f"(contract.ttft_p95_ms = {cfg.contract.ttft_p95_ms})"))
    return out
