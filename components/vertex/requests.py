"""Pure builders of the Vertex AI (``aiplatform.v1``) REST bodies the Vertex serving target sends.

No Pulumi here: small frozen dataclasses of primitives in, the exact JSON bodies of the discovery document
out (camelCase, int64 as strings, durations as ``"<n>s"``). ``tests/test_vertex_requests.py`` validates every
body against ``googleapiclient/discovery_cache/documents/aiplatform.v1.json``, the same document the provider's
client is built from (``static_discovery=True``), so what is validated is what goes on the wire.

Serving model, and why:

* **Custom vLLM container, raw requests.** Vertex's ``predict`` wraps bodies as ``{"instances": [...]}`` and
  expects ``{"predictions": [...]}`` back; vLLM speaks the OpenAI protocol. ``endpoints.rawPredict`` /
  ``streamRawPredict`` forward "an arbitrary HTTP payload" (aiplatform.v1 method descriptions) to the
  container's ``predictRoute``, so ``predictRoute`` is vLLM's ``/v1/chat/completions`` and clients send OpenAI
  chat requests unchanged. ``invokeRoutePrefix`` would expose every route but excludes ``predictRoute`` and, per
  its description, "the [PredictionService.Invoke] RPC is not supported yet"; it is not used. aiplatform.v1 also
  has ``endpoints.chat.completions`` ("an OpenAI-compatible endpoint"); the Vertex OpenAI-library page names
  Gemini and Model Garden containers for it, and whether it reaches a custom container cannot be checked here.
* **Weights from the immutable release.** ``artifactUri`` is the release's ``gs://<bucket>/<model>/<revision>/``.
  The container reads the weights itself (the caller's vLLM args, e.g. ``--model gs://...`` with the Run:ai
  streamer) as the deployed model's service account, which holds object read on the weights bucket only.
* **Autoscaling on the queue.** See :data:`AUTOSCALING_METRICS`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import naming
from ..traffic import split_problem

# ---- constants and their sources ------------------------------------------------------------------------------

#: GKE / Compute Engine accelerator type -> ``MachineSpec.acceleratorType`` enum of aiplatform.v1. Only names this
#: repository already uses (infra/config/accelerator.py ``MACHINE_FAMILY_GPU``) or that compute.v1's discovery
#: document itself cites (nvidia-tesla-t4, nvidia-tesla-p100) plus the long-standing V100/P4 names. Newer parts
#: the Vertex enum lists (NVIDIA_B200, NVIDIA_GB200, NVIDIA_RTX_PRO_6000) are left out: their Compute Engine
#: spelling cannot be checked here. Unknown names fail with the list below instead of being guessed.
GKE_TO_VERTEX_ACCELERATOR: Mapping[str, str] = {
    "nvidia-tesla-t4": "NVIDIA_TESLA_T4",
    "nvidia-tesla-p4": "NVIDIA_TESLA_P4",
    "nvidia-tesla-p100": "NVIDIA_TESLA_P100",
    "nvidia-tesla-v100": "NVIDIA_TESLA_V100",
    "nvidia-tesla-a100": "NVIDIA_TESLA_A100",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB",
    "nvidia-l4": "NVIDIA_L4",
    "nvidia-h100-80gb": "NVIDIA_H100_80GB",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_80GB",
    "nvidia-h200-141gb": "NVIDIA_H200_141GB",
}

#: Vertex AI's serving quota per accelerator type: the quota metric (``aiplatform.googleapis.com/<metric>``) every
#: deployed model's GPUs draw on, per project and region, as the Google Cloud SDK names them
#: (googlecloudsdk/command_lib/ai/model_garden_utils.py ``_ACCELERATOR_TYPE_TP_QUOTA_METRIC_MAP``, whose quota ids
#: read ``CustomModelServing<GPU>GPUsPerProjectPerRegion``). A deployment may scale to its maxReplicaCount, so the
#: quota must hold maxReplicaCount x acceleratorCount (and a create-first replacement's minReplicaCount beside it).
#: Spot deployments draw on the ``custom_model_serving_preemptible_*`` metrics instead (named for H100 in Vertex's
#: own samples; not listed for the other GPUs here). A GPU absent here has no serving quota gcloud knows of: Vertex
#: inference is not known to offer it.
SERVING_QUOTA_METRIC: Mapping[str, str] = {
    "NVIDIA_TESLA_P4": "custom_model_serving_nvidia_p4_gpus",
    "NVIDIA_TESLA_T4": "custom_model_serving_nvidia_t4_gpus",
    "NVIDIA_L4": "custom_model_serving_nvidia_l4_gpus",
    "NVIDIA_TESLA_V100": "custom_model_serving_nvidia_v100_gpus",
    "NVIDIA_TESLA_P100": "custom_model_serving_nvidia_p100_gpus",
    "NVIDIA_TESLA_A100": "custom_model_serving_nvidia_a100_gpus",
    "NVIDIA_A100_80GB": "custom_model_serving_nvidia_a100_80gb_gpus",
    "NVIDIA_H100_80GB": "custom_model_serving_nvidia_h100_gpus",
}


def serving_quota_metric(gke_accelerator: str) -> str | None:
    """``aiplatform.googleapis.com/custom_model_serving_<gpu>_gpus`` for a GKE accelerator name, or None."""
    vertex = GKE_TO_VERTEX_ACCELERATOR.get(gke_accelerator)
    metric = SERVING_QUOTA_METRIC.get(vertex) if vertex else None
    return f"aiplatform.googleapis.com/{metric}" if metric else None


#: The Model label carrying its pool's role. Vertex label keys allow no '.' or '/', so the Kubernetes pool label
#: (naming.POOL_LABEL) is spelled with dashes; a read by id finds a deployment's pool through it.
POOL_LABEL_KEY = naming.POOL_LABEL.replace(".", "-").replace("/", "-")

#: ``ReservationAffinity.key`` for a reservation targeted by name (aiplatform.v1 ReservationAffinity.key): the
#: same key as a GKE node pool's.
RESERVATION_NAME_KEY = naming.RESERVATION_NAME_KEY

#: Autoscaling metric names ``AutoscalingMetricSpec.metricName`` accepts for online prediction, as listed in the
#: aiplatform.v1 discovery document (revision 20261106). The ``prometheus.googleapis.com/vertex_*`` series are
#: Vertex "AI AutoMetrics": Vertex scrapes the container's ``/metrics`` and exports ``vllm:``-prefixed series
#: under a ``vertex_`` prefix (docs.cloud.google.com/vertex-ai/docs/predictions/view-autometrics).
AUTOSCALING_METRICS: Mapping[str, str] = {
    # vLLM's scheduler queue (``vllm:num_requests_waiting``): the chosen signal, the same the GKE HPA scales on.
    # Every queued request is pure time-to-first-token, and the queue grows before latency objectives break,
    # while GPU duty cycle sits near 100 % under continuous batching whether or not requests wait. Use it alone:
    # with duty cycle beside it, Vertex scales up when *either* exceeds its target (DedicatedResources
    # .autoscalingMetricSpecs), so a busy-but-keeping-up pool would run at max replicas. Older API revisions (and
    # pulumi-gcp 10.2.0's AiDeploymentResourcePool docstring) list only CPU and duty cycle; this revision lists
    # the vLLM series. That AutoMetrics scrapes every custom container's /metrics without opt-in is what the
    # AutoMetrics page says but cannot be checked here: if the series is absent Vertex has no signal, so check
    # it in Metrics Explorer (Prometheus Target > Vertex) after the first deployment.
    "vllm_queue": "prometheus.googleapis.com/vertex_" + naming.VLLM_NUM_REQUESTS_WAITING.replace(":", "_"),
    # Accelerator duty cycle: Vertex's own default signal (target 60); the fallback when a container exports no
    # vLLM metrics.
    "accelerator_duty_cycle": "aiplatform.googleapis.com/prediction/online/accelerator/duty_cycle",
    "cpu_utilization": "aiplatform.googleapis.com/prediction/online/cpu/utilization",
    "request_count": "aiplatform.googleapis.com/prediction/online/request_count",
}
#: Not offered: ``prometheus.googleapis.com/vertex_vllm_gpu_cache_usage_perc`` maps to ``vllm:gpu_cache_usage_perc``,
#: which vLLM removed in 0.12 (renamed ``vllm:kv_cache_usage_perc``; naming.VLLM_KV_CACHE_USAGE_LEGACY). With the
#: pinned vLLM 0.32 that series would never exist and the autoscaler would see no data.
UNAVAILABLE_AUTOSCALING_METRICS: Mapping[str, str] = {
    "prometheus.googleapis.com/vertex_"
    + naming.VLLM_KV_CACHE_USAGE_LEGACY.replace(
        ":", "_"
    ): f"maps to {naming.VLLM_KV_CACHE_USAGE_LEGACY}, removed in vLLM 0.12 (vLLM 0.32 exports "
    f"{naming.VLLM_KV_CACHE_USAGE})",
}

#: vLLM's HTTP port (``--port``): ``/health``, ``/metrics`` and the OpenAI routes; the same as on GKE.
VLLM_PORT = naming.VLLM_PORT
#: rawPredict / streamRawPredict bodies are forwarded to this route unchanged (OpenAI chat completions).
VLLM_CHAT_ROUTE = "/v1/chat/completions"
#: vLLM answers 200 on ``/health`` once the engine is up; Vertex sends its health checks here.
VLLM_HEALTH_ROUTE = naming.HEALTH_PATH
#: ``ModelContainerSpec.deploymentTimeout``: "Limit for deployment timeout is 2 hours" (aiplatform.v1).
MAX_DEPLOYMENT_TIMEOUT_S = 7200
#: Probe period: vLLM's /health is a cheap in-process check; 10 s keeps the startup window's granularity far
#: below a multi-minute weight load.
PROBE_PERIOD_S = 10
#: Readiness failures before a replica leaves rotation: 3 x 10 s rides out one slow GC or log flush, yet removes
#: a wedged engine within half a minute.
READINESS_FAILURE_THRESHOLD = 3

_IMAGE_DIGEST_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*(:[0-9]+)?/[^@\s]+@sha256:[0-9a-f]{64}\Z")
#: Cloud Storage bucket names: lowercase letters, digits, '-', '_', '.', starting and ending with a letter or digit
#: (Cloud Storage naming guidelines); the 3-63 characters per dot-separated component rule is not re-checked.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]\Z")
_PATH_SEGMENT_RE = re.compile(r"^[A-Za-z0-9._-]+\Z")
#: Vertex labels: keys and values up to 64 characters of lowercase letters, digits, underscores and dashes
#: (aiplatform.v1 Model.labels). International characters are also allowed there; this builder keeps to ASCII.
_LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}\Z")
_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,64}\Z")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
#: ``DeployedModel.id``: "This value should be 1-10 characters, and valid characters are `/[0-9]/`" (aiplatform.v1).
_DEPLOYED_MODEL_ID_RE = re.compile(r"^[0-9]{1,10}\Z")
#: ``UploadModelRequest.modelId``: "up to 63 characters, and valid characters are `[a-z0-9_-]`. The first character
#: cannot be a number or hyphen" (aiplatform.v1).
_MODEL_ID_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,62}\Z")
_SERVICE_ACCOUNT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\.iam\.gserviceaccount\.com\Z")

Body = dict[str, Any]


class VertexRequestError(ValueError):
    """A value that cannot become a valid Vertex request; the message names the field and the fix."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise VertexRequestError(message)


def vertex_accelerator_type(gke_accelerator: str) -> str:
    """``nvidia-h100-80gb`` -> ``NVIDIA_H100_80GB``; unknown names fail listing the known ones."""
    try:
        return GKE_TO_VERTEX_ACCELERATOR[gke_accelerator]
    except KeyError:
        raise VertexRequestError(
            f"accelerator {gke_accelerator!r} has no known Vertex AI MachineSpec.acceleratorType; known: "
            f"{', '.join(sorted(GKE_TO_VERTEX_ACCELERATOR))}"
        ) from None


def label_value(text: str) -> str:
    """A Vertex label value from free text: lowercase, every other character ``-``, at most 64 characters
    (release ids such as ``qwen3-32b-fp8-2026-08-23.1`` carry dots, which labels do not allow)."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:64]


def duration(seconds: int) -> str:
    """A ``google-duration``: whole seconds with the trailing ``s``."""
    return f"{int(seconds)}s"


def check_labels(labels: Mapping[str, str]) -> None:
    for k, v in labels.items():
        _require(bool(_LABEL_KEY_RE.match(k)), f"label key {k!r}: lowercase letter first, then [a-z0-9_-], <= 64")
        _require(
            bool(_LABEL_VALUE_RE.match(v)), f"label {k}={v!r}: value must be [a-z0-9_-]{{0,64}} (use label_value())"
        )


# ---- Model (projects.locations.models.upload) ---------------------------------------------------------------


@dataclass(frozen=True)
class ReleaseArtifact:
    """The release's immutable weights folder ``gs://<bucket>/<model>/<revision>/``."""

    bucket: str
    #: Model path inside the bucket; may have several segments (``qwen/qwen3-32b``).
    model: str
    revision: str

    def __post_init__(self) -> None:
        _require(bool(_BUCKET_RE.match(self.bucket)), f"bucket {self.bucket!r} is not a Cloud Storage bucket name")
        segments = self.model.split("/")
        _require(
            all(_PATH_SEGMENT_RE.match(s) for s in segments),
            f"model path {self.model!r}: non-empty segments of [A-Za-z0-9._-] separated by '/'",
        )
        _require(bool(_PATH_SEGMENT_RE.match(self.revision)), f"revision {self.revision!r}: one path segment")

    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.model}/{self.revision}/"

    @classmethod
    def from_uri(cls, uri: str) -> ReleaseArtifact:
        """Parse ``gs://b/m/r/`` (or the release's ``.../manifest.json``): the last folder is the revision."""
        m = re.match(r"^gs://([^/]+)/(.+)/([^/]+)/(manifest\.json)?\Z", uri)
        _require(m is not None, f"{uri!r} is not gs://<bucket>/<model>/<revision>/")
        assert m is not None
        return cls(bucket=m.group(1), model=m.group(2), revision=m.group(3))


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str

    def __post_init__(self) -> None:
        _require(
            bool(_ENV_NAME_RE.match(self.name)),
            f"env name {self.name!r} is not a C identifier (aiplatform.v1 EnvVar.name)",
        )


@dataclass(frozen=True)
class HttpProbe:
    """A Kubernetes-style HTTP GET probe (aiplatform.v1 ``Probe`` with ``httpGet``)."""

    path: str
    port: int = VLLM_PORT
    period_seconds: int = PROBE_PERIOD_S
    #: The Probe description says timeoutSeconds "must be greater or equal to period_seconds" (the reverse of
    #: the usual Kubernetes habit); enforced as written, since the live validation cannot be checked here.
    timeout_seconds: int = PROBE_PERIOD_S
    failure_threshold: int = READINESS_FAILURE_THRESHOLD
    initial_delay_seconds: int = 0
    success_threshold: int = 1

    def __post_init__(self) -> None:
        _require(self.path.startswith("/"), f"probe path {self.path!r} must start with '/'")
        _require(1 <= self.port <= 65535, f"probe port {self.port} outside 1-65535")
        _require(
            self.period_seconds >= 1 and self.failure_threshold >= 1 and self.success_threshold >= 1,
            "probe period, failure and success thresholds must be >= 1",
        )
        _require(
            self.timeout_seconds >= self.period_seconds,
            f"probe timeout {self.timeout_seconds}s < period {self.period_seconds}s "
            "(aiplatform.v1 Probe.timeoutSeconds must be >= periodSeconds)",
        )
        _require(self.initial_delay_seconds >= 0, "probe initial delay must be >= 0")

    def body(self) -> Body:
        return {
            "httpGet": {"path": self.path, "port": self.port},
            "periodSeconds": self.period_seconds,
            "timeoutSeconds": self.timeout_seconds,
            "failureThreshold": self.failure_threshold,
            "successThreshold": self.success_threshold,
            "initialDelaySeconds": self.initial_delay_seconds,
        }


def startup_probe(window_seconds: int, path: str = VLLM_HEALTH_ROUTE, port: int = VLLM_PORT) -> HttpProbe:
    """A startup probe that tolerates ``window_seconds`` of loading: ceil(window / period) failures. The caller
    passes the same window as the GKE side (cold-load estimate x 1.5)."""
    _require(window_seconds >= PROBE_PERIOD_S, f"startup window {window_seconds}s shorter than one probe period")
    return HttpProbe(path=path, port=port, failure_threshold=math.ceil(window_seconds / PROBE_PERIOD_S))


@dataclass(frozen=True)
class ContainerSpec:
    """The vLLM container: image by digest, its command line, and how Vertex reaches it."""

    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[EnvVar, ...] = ()
    port: int = VLLM_PORT
    predict_route: str = VLLM_CHAT_ROUTE
    health_route: str = VLLM_HEALTH_ROUTE
    #: ``sharedMemorySizeMb`` (int64): /dev/shm for NCCL and PyTorch IPC between tensor-parallel ranks. None
    #: sends nothing (Vertex's default, not documented in aiplatform.v1); set it for TP > 1.
    shared_memory_mb: int | None = None
    startup_probe: HttpProbe | None = None
    health_probe: HttpProbe | None = None
    #: ``deploymentTimeout``: how long Vertex waits for the container to become healthy (max 2 h). None: the
    #: service default, which aiplatform.v1 does not state.
    deployment_timeout_seconds: int | None = None

    def __post_init__(self) -> None:
        _require(
            bool(_IMAGE_DIGEST_RE.match(self.image)),
            f"image {self.image!r} must be <registry>/<path>@sha256:<64 hex> (an immutable digest)",
        )
        _require(1 <= self.port <= 65535, f"port {self.port} outside 1-65535")
        _require(
            self.predict_route.startswith("/") and self.health_route.startswith("/"),
            "predict and health routes must start with '/'",
        )
        _require(self.shared_memory_mb is None or self.shared_memory_mb > 0, "shared_memory_mb must be > 0")
        _require(
            self.deployment_timeout_seconds is None or 0 < self.deployment_timeout_seconds <= MAX_DEPLOYMENT_TIMEOUT_S,
            f"deployment_timeout_seconds must be in (0, {MAX_DEPLOYMENT_TIMEOUT_S}] (aiplatform.v1 limit)",
        )
        names = [e.name for e in self.env]
        _require(len(names) == len(set(names)), f"duplicate env names in {names}")

    def body(self) -> Body:
        spec: Body = {
            "imageUri": self.image,
            "command": list(self.command),
            "args": list(self.args),
            "env": [{"name": e.name, "value": e.value} for e in self.env],
            "ports": [{"containerPort": self.port}],
            "predictRoute": self.predict_route,
            "healthRoute": self.health_route,
        }
        if self.shared_memory_mb is not None:
            spec["sharedMemorySizeMb"] = str(self.shared_memory_mb)  # int64: a JSON string
        if self.startup_probe is not None:
            spec["startupProbe"] = self.startup_probe.body()
        if self.health_probe is not None:
            spec["healthProbe"] = self.health_probe.body()
        if self.deployment_timeout_seconds is not None:
            spec["deploymentTimeout"] = duration(self.deployment_timeout_seconds)
        return spec


@dataclass(frozen=True)
class ModelSpec:
    """One Vertex ``Model``: a release's weights folder served by one container spec."""

    display_name: str
    artifact: ReleaseArtifact
    container: ContainerSpec
    labels: Mapping[str, str] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        _require(0 < len(self.display_name) <= 128, "display_name: 1-128 characters (aiplatform.v1 Model)")
        check_labels(self.labels)


def upload_model_request(spec: ModelSpec, *, service_account: str | None = None, model_id: str | None = None) -> Body:
    """``UploadModelRequest`` for ``projects.locations.models.upload``.

    ``service_account``: the account Vertex uses "to do the model upload" (reads the artifact and the image);
    None lets the Vertex AI Service Agent do it (UploadModelRequest.serviceAccount). ``model_id``: the caller-chosen
    id, "the final component of the model resource name" (:func:`creation_ids`); the provider sets it, so the
    component's input stays the model's own content."""
    model: Body = {
        "displayName": spec.display_name,
        "labels": dict(sorted(spec.labels.items())),
        "artifactUri": spec.artifact.uri(),
        "containerSpec": spec.container.body(),
    }
    if spec.description:
        model["description"] = spec.description
    request: Body = {"model": model}
    if service_account is not None:
        _require(
            bool(_SERVICE_ACCOUNT_RE.match(service_account)), f"{service_account!r} is not a service account e-mail"
        )
        request["serviceAccount"] = service_account
    if model_id is not None:
        _require(bool(_MODEL_ID_RE.match(model_id)), f"model id {model_id!r}: {MODEL_ID_RULE}")
        request["modelId"] = model_id
    return request


def model_labels_patch(labels: Mapping[str, str]) -> tuple[Body, str]:
    """(``Model`` body, update mask) for ``projects.locations.models.patch``: labels are the only model field
    the provider updates in place (everything else about a Model is immutable)."""
    check_labels(labels)
    return {"labels": dict(sorted(labels.items()))}, "labels"


# ---- DeployedModel (projects.locations.endpoints.deployModel) -----------------------------------------------


@dataclass(frozen=True)
class Reservation:
    """A Compute Engine zonal reservation, consumed by name (SPECIFIC_RESERVATION)."""

    project: str
    zone: str
    name: str

    def resource_name(self) -> str:
        """ReservationAffinity.values "must be the resource name of the reservation" (aiplatform.v1)."""
        return f"projects/{self.project}/zones/{self.zone}/reservations/{self.name}"


@dataclass(frozen=True)
class MachineSpec:
    machine_type: str
    #: GKE accelerator name (``nvidia-h100-80gb``); mapped to the Vertex enum.
    gke_accelerator: str
    accelerator_count: int
    reservation: Reservation | None = None

    def __post_init__(self) -> None:
        vertex_accelerator_type(self.gke_accelerator)
        _require(self.accelerator_count >= 1, "accelerator_count must be >= 1")

    def body(self) -> Body:
        spec: Body = {
            "machineType": self.machine_type,
            "acceleratorType": vertex_accelerator_type(self.gke_accelerator),
            "acceleratorCount": self.accelerator_count,
        }
        if self.reservation is not None:
            spec["reservationAffinity"] = {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": RESERVATION_NAME_KEY,
                "values": [self.reservation.resource_name()],
            }
        return spec


@dataclass(frozen=True)
class AutoscalingTarget:
    """One ``AutoscalingMetricSpec``: a metric key of :data:`AUTOSCALING_METRICS` and its target.

    ``target`` is documented as "target resource utilization in percentage (1% - 100%)"; for the queue metric
    the same integer field carries the per-replica queue length Vertex aims for. How Vertex aggregates the
    Prometheus series across replicas is not stated in aiplatform.v1 and cannot be checked here: pass the GKE
    HPA's per-pod queue target and verify under load."""

    metric: str
    target: int

    def __post_init__(self) -> None:
        _require(
            self.metric in AUTOSCALING_METRICS,
            f"autoscaling metric {self.metric!r}; known: {', '.join(sorted(AUTOSCALING_METRICS))}",
        )
        _require(1 <= self.target <= 100, f"autoscaling target {self.target} outside 1-100 (aiplatform.v1)")

    def body(self) -> Body:
        return {"metricName": AUTOSCALING_METRICS[self.metric], "target": self.target}


@dataclass(frozen=True)
class Scaling:
    min_replicas: int
    max_replicas: int
    autoscaling: tuple[AutoscalingTarget, ...] = ()

    def __post_init__(self) -> None:
        _require(self.min_replicas >= 1, "min_replicas must be >= 1 (aiplatform.v1 DedicatedResources)")
        _require(
            self.max_replicas >= self.min_replicas,
            f"max_replicas {self.max_replicas} < min_replicas {self.min_replicas}",
        )
        metrics = [a.metric for a in self.autoscaling]
        _require(len(metrics) == len(set(metrics)), "at most one autoscaling entry per metric (aiplatform.v1)")


@dataclass(frozen=True)
class DedicatedResources:
    """Machines dedicated to one deployed model."""

    machine: MachineSpec
    scaling: Scaling
    spot: bool = False

    def __post_init__(self) -> None:
        _require(
            not (self.spot and self.machine.reservation is not None),
            "Spot VMs cannot consume a reservation: drop spot or the reservation",
        )

    def body(self) -> Body:
        resources: Body = {
            "machineSpec": self.machine.body(),
            "minReplicaCount": self.scaling.min_replicas,
            "maxReplicaCount": self.scaling.max_replicas,
            "autoscalingMetricSpecs": [a.body() for a in self.scaling.autoscaling],
        }
        if self.spot:
            resources["spot"] = True
        return resources


def deployed_model_display_name(role: str, model_display_name: str) -> str:
    """A pool's DeployedModel.displayName: its role, then its model's (the release id), within the 128-character
    limit. AutoMetrics labels every vLLM series of the deployed model with it (``model_display_name``), which is
    how the dashboard and alerts tell the pools apart (components/vertex/monitoring.py, AutoMetrics' label model)."""
    return f"{role}-{model_display_name}"[:128]


@dataclass(frozen=True)
class DeployedModelSpec:
    display_name: str
    #: Always dedicated: a deployment resource pool (``sharedResources``) takes no custom container (Vertex AI
    #: "Share resources across deployments", Limitations: "custom containers aren't supported"), and every model
    #: this program uploads is one (tests/test_vertex_requests.py reads the limitation's consequence).
    resources: DedicatedResources
    #: The container's identity (DeployedModel.serviceAccount).
    service_account: str | None = None
    #: Container stdout/stderr to Cloud Logging stays on (vLLM's request logging is off in its args).
    disable_container_logging: bool = False
    #: Per-request access logs cost money at LLM request rates and add nothing the metrics do not show.
    enable_access_logging: bool = False

    def __post_init__(self) -> None:
        _require(0 < len(self.display_name) <= 128, "display_name: 1-128 characters")
        if self.service_account is not None:
            _require(
                bool(_SERVICE_ACCOUNT_RE.match(self.service_account)),
                f"{self.service_account!r} is not a service account e-mail",
            )


def deployed_model(spec: DeployedModelSpec) -> Body:
    """The ``DeployedModel`` body without ``model`` (the provider adds the uploaded model's name)."""
    body: Body = {
        "displayName": spec.display_name,
        "enableAccessLogging": spec.enable_access_logging,
        "dedicatedResources": spec.resources.body(),
        "disableContainerLogging": spec.disable_container_logging,
    }
    if spec.service_account is not None:
        body["serviceAccount"] = spec.service_account
    return body


def deploy_model_request(model_name: str, deployed: Mapping[str, Any], deployed_model_id: str | None = None) -> Body:
    """``DeployModelRequest``: no ``trafficSplit``, so the endpoint's split is left alone ("If this field is
    empty, then the Endpoint's traffic_split is not updated"); traffic is set as a whole by the
    EndpointTraffic resource, never by one deployment overwriting the other's share. ``deployed_model_id``: the
    caller-chosen ``DeployedModel.id`` ("If not provided upon deployment, Vertex AI will generate a value"), so a
    retried or resumed deploy finds its own deployment (:func:`creation_ids`)."""
    _require(
        bool(re.match(r"^projects/[^/]+/locations/[^/]+/models/[^/]+\Z", model_name)),
        f"{model_name!r} is not a model resource name",
    )
    body: Body = {**deployed, "model": model_name}
    if deployed_model_id is not None:
        _require(bool(_DEPLOYED_MODEL_ID_RE.match(deployed_model_id)), f"deployed model id {deployed_model_id!r}")
        body["id"] = deployed_model_id
    return {"deployedModel": body}


#: DeployedModel fields ``mutateDeployedModel`` accepts in v1 ("Only the following fields can be mutated" in
#: MutateDeployedModelRequest.deployedModel), as update-mask paths.
MUTABLE_DEPLOYED_MODEL_PATHS: tuple[str, ...] = (
    "dedicatedResources.minReplicaCount",
    "dedicatedResources.maxReplicaCount",
    "dedicatedResources.autoscalingMetricSpecs",
    "disableContainerLogging",
)


def mutate_deployed_model_request(deployed_model_id: str, deployed: Mapping[str, Any], changed: Sequence[str]) -> Body:
    """``MutateDeployedModelRequest`` carrying only the mutable fields named in ``changed`` (mask paths)."""
    _require(bool(_DEPLOYED_MODEL_ID_RE.match(deployed_model_id)), f"deployed model id {deployed_model_id!r}")
    paths = [p for p in MUTABLE_DEPLOYED_MODEL_PATHS if p in changed]
    unknown = sorted(set(changed) - set(MUTABLE_DEPLOYED_MODEL_PATHS))
    _require(not unknown, f"not mutable by mutateDeployedModel: {unknown}")
    _require(bool(paths), "nothing to mutate")
    body: Body = {"id": deployed_model_id}
    for path in paths:
        head, _, leaf = path.partition(".")
        if leaf:
            body.setdefault(head, {})[leaf] = deployed[head][leaf]
        else:
            body[head] = deployed[head]
    if "dedicatedResources" in body:
        # machineSpec is required in DedicatedResources; sent unchanged so the message is complete.
        body["dedicatedResources"]["machineSpec"] = deployed["dedicatedResources"]["machineSpec"]
    return {"deployedModel": body, "updateMask": ",".join(paths)}


def undeploy_model_request(deployed_model_id: str, remaining_split: Mapping[str, int] | None) -> Body:
    """``UndeployModelRequest``. ``remaining_split`` (the split without this model) is sent only when this model
    still holds traffic: undeploy succeeds only "if it doesn't have any traffic assigned to it ... or if this
    field unassigns any traffic to it"."""
    _require(bool(_DEPLOYED_MODEL_ID_RE.match(deployed_model_id)), f"deployed model id {deployed_model_id!r}")
    body: Body = {"deployedModelId": deployed_model_id}
    if remaining_split is not None:
        body["trafficSplit"] = dict(sorted(remaining_split.items()))
    return body


# ---- caller-chosen ids (find-or-create) -------------------------------------------------------------------------

MODEL_ID_RULE = "up to 63 of [a-z0-9_-], not starting with a digit or '-' (aiplatform.v1 UploadModelRequest.modelId)"
#: Hex digits of the identity digest in a model id: 12 (48 bits) keep two identities of one pool apart with
#: certainty in practice and leave 50 of the 63 characters to the readable ``<endpoint>-<role>`` base.
ID_DIGEST_HEX = 12
#: ``DeployedModel.id`` is 1-10 digits. Ten digits with a non-zero first one: 9 x 10^9 values, so two identities
#: of one endpoint collide with probability ~1e-10 per pair; the first digit is never 0, so the id never reads
#: as a different number with its leading zeros stripped.
_DEPLOYED_ID_SPACE = 9_000_000_000
_DEPLOYED_ID_BASE = 1_000_000_000


@dataclass(frozen=True)
class CreationIds:
    """The caller-chosen ids of one pool's model and deployed model."""

    model_id: str
    deployed_model_id: str


def _without(body: Mapping[str, Any], paths: Sequence[str]) -> Body:
    """``body`` without the dotted ``paths`` (the fields an update changes in place)."""
    out: Body = json.loads(json.dumps(body))
    for path in paths:
        *heads, leaf = path.split(".")
        node: Any = out
        for head in heads:
            node = node.get(head) if isinstance(node, Mapping) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


#: Fields of an upload request that do not make a new model: labels are patched in place (models.patch), and the
#: uploading account only matters while Vertex copies the image and the artifact.
UPLOAD_IN_PLACE_PATHS: tuple[str, ...] = ("model.labels", "serviceAccount")


def identity_digest(
    stack: str, endpoint_id: str, role: str, upload: Mapping[str, Any], deployed: Mapping[str, Any]
) -> str:
    """sha256 over what makes a deployment *this* deployment: the stack, the endpoint, the pool's role and every
    field of its model and deployed model a replacement changes (labels, the uploading account and the fields
    ``mutateDeployedModel`` changes in place are left out, so an update keeps its ids)."""
    identity = {
        "stack": stack,
        "endpoint": endpoint_id,
        "role": role,
        "upload": _without(upload, UPLOAD_IN_PLACE_PATHS),
        "deployed": _without(deployed, MUTABLE_DEPLOYED_MODEL_PATHS),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def creation_ids(
    stack: str, endpoint_id: str, role: str, upload: Mapping[str, Any], deployed: Mapping[str, Any]
) -> CreationIds:
    """Deterministic ids for one pool's upload and deployment, within the API's rules:

    * ``modelId`` = ``<endpoint>-<role>`` (cut to 50 characters) + ``-`` + 12 hex digits of
      :func:`identity_digest`: readable, letter first (endpoint ids start with a letter), at most 63 characters;
    * ``DeployedModel.id`` = ten digits from the next 40 bits of the same digest.

    The same stack, pool and release content always give the same ids, so a retried or resumed create finds its own
    resources (models.get, the endpoint's deployedModels) instead of making a second copy; a replacement (new
    release, machine, arguments) gets new ids, so the new deployment never collides with the one it replaces."""
    digest = identity_digest(stack, endpoint_id, role, upload, deployed)
    base = f"{endpoint_id}-{role}"[: 63 - 1 - ID_DIGEST_HEX].rstrip("-_")
    model_id = f"{base}-{digest[:ID_DIGEST_HEX]}"
    deployed_id = str(_DEPLOYED_ID_BASE + int(digest[ID_DIGEST_HEX : ID_DIGEST_HEX + 10], 16) % _DEPLOYED_ID_SPACE)
    _require(bool(_MODEL_ID_RE.match(model_id)), f"model id {model_id!r}: {MODEL_ID_RULE}")
    _require(bool(_DEPLOYED_MODEL_ID_RE.match(deployed_id)), f"deployed model id {deployed_id!r}")
    return CreationIds(model_id, deployed_id)


def check_model_id(model_id: str) -> None:
    _require(bool(_MODEL_ID_RE.match(model_id)), f"model id {model_id!r}: {MODEL_ID_RULE}")


def check_deployed_model_id(deployed_model_id: str) -> None:
    _require(
        bool(_DEPLOYED_MODEL_ID_RE.match(deployed_model_id)),
        f"deployed model id {deployed_model_id!r}: 1-10 digits (aiplatform.v1 DeployedModel.id)",
    )


# ---- request-response logging (Endpoint.predictRequestResponseLoggingConfig) -----------------------------------

#: ``BigQueryDestination.outputUri``: "bq://projectId or bq://projectId.bqDatasetId or
#: bq://projectId.bqDatasetId.bqTableId", "up to 2000 characters long" (aiplatform.v1). Project ids are the
#: IAM-documented 6-30 characters; dataset ids letters, digits and underscores (BigQuery dataset naming).
_BQ_URI_RE = re.compile(r"^bq://[a-z][a-z0-9-]{4,28}[a-z0-9](\.[A-Za-z0-9_]{1,1024}(\.[A-Za-z0-9_-]{1,1024})?)?\Z")


@dataclass(frozen=True)
class RequestResponseLogging:
    """Prompts and completions of a sample of requests, written to BigQuery by Vertex ("Request-response logging
    is done at the endpoint level"; Vertex AI "Online inference logging" page). Off unless configured: the rows
    hold users' prompts and the model's answers."""

    bigquery_uri: str
    #: "a number that is greater than 0 and less than or equal to 1" (the same page; aiplatform.v1
    #: PredictRequestResponseLoggingConfig.samplingRate "in range(0,1]").
    sampling_rate: float

    def __post_init__(self) -> None:
        _require(
            len(self.bigquery_uri) <= 2000 and bool(_BQ_URI_RE.match(self.bigquery_uri)),
            f"{self.bigquery_uri!r} is not bq://<project>[.<dataset>[.<table>]]",
        )
        _require(0 < self.sampling_rate <= 1, f"sampling rate {self.sampling_rate} outside (0, 1]")

    def body(self) -> Body:
        """The ``PredictRequestResponseLoggingConfig`` body."""
        return {
            "enabled": True,
            "samplingRate": self.sampling_rate,
            "bigqueryDestination": {"outputUri": self.bigquery_uri},
        }


# ---- Endpoint traffic (projects.locations.endpoints.patch) ----------------------------------------------------


def traffic_split(weights: Mapping[str, int], deployed_model_ids: Mapping[str, str]) -> dict[str, int]:
    """``Endpoint.trafficSplit`` from pool weights: ``{deployedModelId: percent}``.

    Weights must sum to 100 ("The traffic percentage values must add up to 100"). Zero-weight pools stay
    deployed but are left out of the map: "If a DeployedModel's ID is not listed in this map, then it receives
    no traffic" (aiplatform.v1 Endpoint.trafficSplit); whether an explicit 0 is accepted is not stated."""
    _require(
        set(weights) == set(deployed_model_ids),
        f"weights for {sorted(weights)} but deployed models for {sorted(deployed_model_ids)}",
    )
    split = split_problem(weights)
    _require(split is None, str(split))
    for pool in weights:
        _require(
            bool(_DEPLOYED_MODEL_ID_RE.match(deployed_model_ids[pool])),
            f"deployed model id of {pool!r}: {deployed_model_ids[pool]!r}",
        )
    ids = [deployed_model_ids[p] for p in weights]
    _require(len(ids) == len(set(ids)), "two pools share one deployed model id")
    return {deployed_model_ids[p]: w for p, w in sorted(weights.items()) if w > 0}


def endpoint_patch(split: Mapping[str, int] | None, inference_timeout_seconds: int | None = None) -> tuple[Body, str]:
    """(``Endpoint`` body, update mask) for ``projects.locations.endpoints.patch``. Only the named fields change:
    the endpoint's other settings stay with the ``gcp.vertex.AiEndpoint`` resource that owns them.

    ``split`` None or empty clears the split ("map must be empty if the Endpoint is to not accept any
    traffic"); ``inference_timeout_seconds`` sets ``clientConnectionConfig.inferenceTimeout``, which
    pulumi-gcp 10.2.0's AiEndpoint does not expose, so long streams are not cut by the service default."""
    body: Body = {"trafficSplit": dict(sorted((split or {}).items()))}
    mask = ["trafficSplit"]
    if inference_timeout_seconds is not None:
        _require(inference_timeout_seconds > 0, "inference timeout must be > 0")
        body["clientConnectionConfig"] = {"inferenceTimeout": duration(inference_timeout_seconds)}
        mask.append("clientConnectionConfig.inferenceTimeout")
    return body, ",".join(mask)


# ---- resource names -------------------------------------------------------------------------------------------


def location_name(project: str, region: str) -> str:
    return f"projects/{project}/locations/{region}"


def endpoint_name(project: str, region: str, endpoint_id: str) -> str:
    return f"{location_name(project, region)}/endpoints/{endpoint_id}"


def model_name(project: str, region: str, model_id: str) -> str:
    return f"{location_name(project, region)}/models/{model_id}"


def deployed_model_resource_id(endpoint: str, deployed_model_id: str) -> str:
    """The Pulumi id of a DeployedModel resource: ``<endpoint name>/deployedModels/<id>`` (what ``read`` parses)."""
    return f"{endpoint}/deployedModels/{deployed_model_id}"
