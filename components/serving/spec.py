"""Typed inputs of a model server, independent of where it runs (GKE Deployment, Cloud Run service, Vertex AI
deployed model): the immutable release it serves and the probe / shutdown timing the planner derived.

Standard library only (no Pulumi): the planner builds these values, the components render them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .. import naming

#: The vLLM image's command (``vllm serve``), set explicitly rather than relying on the image's entrypoint.
VLLM_COMMAND = ("vllm", "serve")


def verify_gcs_command(
    script: tuple[str, ...], bucket: str, prefix: str, revision: str, then: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The release verifier's ``gcs`` mode (``verify_release.py``: the release folder's object metadata against its
    manifest, the manifest's revision against ``revision``), started as ``script`` (``python3 <path>`` or
    ``python3 -c <source>``); with ``then`` the verifier ``exec``s that command once the check passes."""
    out = (*script, "gcs", "--bucket", bucket, "--prefix", prefix, "--expect-revision", revision)
    return (*out, "--exec", "--", *then) if then else out


@dataclass(frozen=True)
class ReleaseInfo:
    """One immutable release: model revision, tokenizer revision, serving-image digest, weights manifest,
    precision and serving limits (the identity an incident report names)."""

    release: str
    model_revision: str
    tokenizer_revision: str
    image: str
    digest: str
    weight_manifest: str
    #: ``gs://<bucket>/<model>/<revision>/``: the immutable folder the manifest sits in.
    weights_uri: str
    weights_bucket: str
    #: ``<model>/<revision>`` inside the bucket.
    weights_prefix: str
    sampling_defaults_version: int
    quantization: str
    dtype: str
    kv_cache_dtype: str
    max_model_len: int
    tensor_parallel_size: int
    vllm_version: str

    def annotations(self) -> dict[str, str]:
        """The full identity as ``llm-serving.io/*`` annotations (what ``kubectl describe`` shows)."""
        p = naming.ANNOTATION_PREFIX
        return {
            naming.RELEASE_LABEL: self.release,
            f"{p}model-revision": self.model_revision,
            f"{p}tokenizer-revision": self.tokenizer_revision,
            f"{p}image-digest": self.digest,
            f"{p}weight-manifest": self.weight_manifest,
            f"{p}sampling-defaults-version": str(self.sampling_defaults_version),
            f"{p}quantization": self.quantization,
            f"{p}dtype": self.dtype,
            f"{p}kv-cache-dtype": self.kv_cache_dtype,
            f"{p}max-model-len": str(self.max_model_len),
            f"{p}tensor-parallel-size": str(self.tensor_parallel_size),
            f"{p}vllm-version": self.vllm_version,
        }

    def export(self) -> dict[str, Any]:
        """The identity as the stack exports it (seed field names)."""
        return {
            "model_revision": self.model_revision,
            "tokenizer_revision": self.tokenizer_revision,
            "image": self.image,
            "weight_manifest": self.weight_manifest,
            "max_model_len": self.max_model_len,
            "tensor_parallel_size": self.tensor_parallel_size,
            "sampling_defaults_version": self.sampling_defaults_version,
            "quantization": self.quantization,
            "dtype": self.dtype,
            "vllm_version": self.vllm_version,
        }


@dataclass(frozen=True)
class ProbeTimings:
    """Every number of a model server's probes and shutdown, with the inputs that produced them."""

    cold_load_seconds: float
    startup_margin: float
    startup_required_seconds: float  # cold_load x (1 + margin)
    startup_period_seconds: int
    startup_failure_threshold: int
    #: Budget of the startup probe's checks, its one generated token included.
    startup_deadline_seconds: int
    startup_timeout_seconds: int
    readiness_deadline_seconds: int
    readiness_timeout_seconds: int
    readiness_period_seconds: int
    readiness_failure_threshold: int
    liveness_deadline_seconds: int
    liveness_timeout_seconds: int
    liveness_period_seconds: int
    liveness_failure_threshold: int
    #: Requests in flight and no token progress for this long = a hung engine (liveness fails).
    liveness_stall_seconds: int
    stream_bound_seconds: float
    pre_stop_seconds: int
    shutdown_timeout_seconds: int  # vLLM --shutdown-timeout: drain in-flight streams after SIGTERM
    termination_grace_seconds: int

    @property
    def startup_window_seconds(self) -> int:
        return self.startup_period_seconds * self.startup_failure_threshold

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["startup_window_seconds"] = self.startup_window_seconds
        return d
