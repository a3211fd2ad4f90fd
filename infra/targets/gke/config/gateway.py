"""GKE Inference Gateway: the L7 Gateway, its certificate, the endpoint picker (EPP) chart and the identity /
content-safety layers in front of the serving pools (the design's "Routing Must Understand Inference
State", "Admission Control", "Security Without Giving the Model a Cloud Account").


The chart release this program installs (the llm-d Router v0.10.0), and why, is described in
``components/gateway/charts.py``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from infra.config.base import Strict, check

GatewayClass = Literal["gke-l7-regional-external-managed", "gke-l7-rilb", "gke-l7-cross-regional-internal-managed-mc"]
FailureMode = Literal["FailOpen", "FailClose"]


# ---- config models ------------------------------------------------------------------------------------

HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$"
RESOURCE_NAME = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
MODEL_ARMOR_TEMPLATE_RE = re.compile(
    r"^projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])/locations/(?P<location>[a-z]+-[a-z]+[0-9]+)/templates/(?P<name>[-_A-Za-z0-9]{1,63})\Z"
)


class GatewayCertificate(Strict):
    """The HTTPS listener's certificate. Regional Gateways take regional certificates only:

    * ``certificate-manager``: regional Certificate Manager certificates (listener TLS option
      ``networking.gke.io/cert-manager-certs``);
    * ``pre-shared``: regional Compute Engine SSL certificates (``networking.gke.io/pre-shared-certs``).
    Both are created outside this program (issuance needs DNS / a CA), referenced here by name.
    """

    source: Literal["certificate-manager", "pre-shared"] = Field(
        description=(
            "Where the certificates live: regional Certificate Manager or regional Compute Engine SSL certificates."
        )
    )
    names: Annotated[list[Annotated[str, Field(pattern=RESOURCE_NAME)]], Field(min_length=1, max_length=15)] = Field(
        description=("Certificate names (same region as the gateway); the listener serves them by SNI.")
    )


class EndpointPicker(Strict):
    """The per-pool endpoint picker, installed from the upstream chart (one Helm release per pool)."""

    chart: Literal["oci://ghcr.io/llm-d/charts/llm-d-router-gateway"] = Field(
        description=(
            "OCI location of the upstream chart: the llm-d Router's ``llm-d-router-gateway`` (GAIE v1.6.0 moved the "
            "endpoint picker to llm-d/llm-d-router)."
        )
    )
    version: Literal["v0.10.0"] = Field(
        description=("Pinned chart release; the picker image is pinned to the same release tag.")
    )
    replicas: Annotated[int, Field(ge=1, le=5)] = Field(
        description=(
            "Picker replicas per pool. > 1 turns on the chart's leader election (one active, the others warm standbys); "
            'staging and prod need >= 2 (the design: "Run it redundantly").'
        )
    )
    failure_mode: FailureMode = Field(
        description=(
            "What the gateway does when the picker cannot answer: FailOpen = fall back to the load balancer's own "
            "endpoint choice inside the pool (traffic flows, no cache/queue awareness or priority); FailClose = reject "
            "the request (5xx)."
        )
    )
    failure_mode_reason: Annotated[str, Field(min_length=20)] = Field(
        description=(
            "Why this failure mode was chosen: stated in config so the trade-off is reviewed with every change."
        )
    )
    kv_cache_metric: str = Field(
        description=(
            "Prometheus gauge the picker reads as a pod's KV-cache usage; must be one the pool's vLLM exports."
        )
    )
    flow_control: bool = Field(
        True,
        description=(
            "Run the picker's flow control: bounded per-priority queues while a pool is saturated (queue-wait TTL and "
            "per-band capacity derived from the contract), answered 429 beyond them; staging and prod must keep it on."
        ),
    )
    install_objective_crds: bool = Field(
        True,
        description=(
            "Install the objective CRDs the picker reads (GKE does not ship non-GA CRDs). Turn off only when another "
            "owner already installs the same version."
        ),
    )


class Iap(Strict):
    """Identity-Aware Proxy on the pools' backend services (GCPBackendPolicy ``iap``).

    Without ``oauth_client_id`` / ``oauth_client_secret_name`` IAP uses a Google-managed OAuth client; with
    them, a custom client whose secret lives in an existing Kubernetes Secret (key ``key``) in every pool's
    namespace (``llm-serving-<role>``: the GCPBackendPolicy that names it sits beside its InferencePool) — created
    out of band (e.g. synced from Secret Manager) so no secret passes through config.
    """

    enabled: bool = Field(
        description=("Require an IAP-authenticated identity for every request to the pools (prod: must be true).")
    )
    members: list[
        Annotated[str, Field(pattern=r"^(user|group|serviceAccount|domain|principal|principalSet):[!-~]+$")]
    ] = Field(
        [],
        description=(
            "Principals granted ``roles/iap.httpsResourceAccessor`` (``user:``, ``group:``, ``serviceAccount:``, "
            "``domain:``)."
        ),
    )
    oauth_client_id: Annotated[str, Field(pattern=r"^[-0-9a-z]+\.apps\.googleusercontent\.com$")] | None = Field(
        None, description=("Custom OAuth client id; omit (with the secret name) for the Google-managed client.")
    )
    programmatic_clients: list[Annotated[str, Field(pattern=r"^[-0-9a-z]+\.apps\.googleusercontent\.com$")]] = Field(
        [],
        description=(
            "OAuth client ids whose ID tokens IAP accepts from programmatic (non-browser) API clients. With IAP's "
            "Google-managed OAuth client no API client is admitted otherwise; service accounts may instead send a "
            "self-signed JWT (docs/deploying.md)."
        ),
    )
    oauth_client_secret_name: Annotated[str, Field(pattern=RESOURCE_NAME)] | None = Field(
        None,
        description=(
            "Existing Kubernetes Secret (key ``key``) in every pool's namespace (``llm-serving-<role>``) holding the custom "
            "client's secret."
        ),
    )

    @model_validator(mode="after")
    def _consistent(self) -> Iap:
        problems = []
        if (self.oauth_client_id is None) != (self.oauth_client_secret_name is None):
            field = "oauth_client_secret_name" if self.oauth_client_secret_name is None else "oauth_client_id"
            problems.append(
                (
                    field,
                    "a custom OAuth client needs both oauth_client_id and oauth_client_secret_name "
                    "(omit both for the Google-managed client)",
                )
            )
        if self.enabled and not self.members:
            problems.append(("members", "IAP without any httpsResourceAccessor member admits nobody"))
        check(problems)
        return self


class ModelArmor(Strict):
    """Prompt/response screening by Model Armor through a GCPTrafficExtension on the Gateway."""

    template: str = Field(
        description=("``projects/<project>/locations/<region>/templates/<name>``; must be in the gateway's region.")
    )
    fail_open: bool = Field(
        description=(
            "Model Armor unreachable or slower than ``timeout_ms``: true = serve unscreened, false = 500 / stream "
            "reset."
        )
    )
    timeout_ms: Annotated[int, Field(ge=10, le=10000)] = Field(
        1000,
        description=(
            "Per-message callout timeout (GCPTrafficExtension allows 10-10000 ms). Model Armor sits on the request path "
            "before the first token, so this adds to TTFT: keep it well below contract.ttft_p95_ms."
        ),
    )

    @model_validator(mode="after")
    def _template(self) -> ModelArmor:
        check(
            []
            if MODEL_ARMOR_TEMPLATE_RE.match(self.template)
            else [
                ("template", f"must be projects/<project>/locations/<region>/templates/<name>, got {self.template!r}")
            ]
        )
        return self


class GatewayConfig(Strict):
    gateway_class: GatewayClass = Field(
        description=(
            "``gke-l7-regional-external-managed`` (internet-facing regional ALB) or ``gke-l7-rilb`` (internal, VPC "
            "only); a ``fleet`` stack's is ``gke-l7-cross-regional-internal-managed-mc`` (internal, every fleet "
            "region; docs/multiregion.md)."
        )
    )
    hostnames: Annotated[list[Annotated[str, Field(pattern=HOSTNAME_PATTERN)]], Field(min_length=1, max_length=16)] = (
        Field(description=("Hostnames the API is served on (HTTPRoute hostnames; the certificate must cover them)."))
    )
    certificate: GatewayCertificate
    epp: EndpointPicker
    iap: Iap = Iap(enabled=False)
    model_armor: ModelArmor | None = None
    request_log_sample_rate: Annotated[float, Field(ge=0, le=1)] = Field(
        0.1,
        description=(
            "Share of requests the load balancer logs (0-1). LB request logs carry method, path, status, latency and "
            "sizes, never bodies; 0.1 keeps per-pool error/latency evidence at 1/10 of the log volume."
        ),
    )
    allow_global_access: bool = Field(
        False, description=("Internal gateway only: reachable from other regions of the VPC.")
    )

    @model_validator(mode="after")
    def _class_options(self) -> GatewayConfig:
        check(
            [("allow_global_access", "only applies to the internal class gke-l7-rilb")]
            if self.allow_global_access and self.gateway_class != "gke-l7-rilb"
            else []
        )
        return self
