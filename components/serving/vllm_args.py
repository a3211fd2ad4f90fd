"""The ``vllm serve`` argument list of one pool, rendered from the release, the pool and the planner (pure).

Pinned to vLLM 0.32 (``infra.config.release.SUPPORTED_VLLM_SERIES``): the flag spellings below are the 0.32
parser's (0.33 renamed ~50 negative flags), and the integration tier parses every rendered list with the real
0.32 parser built with ``allow_abbrev=False`` (tests/integration/test_rendered_args_real.py).

Everything the engine would otherwise choose by itself from the GPU it finds is stated explicitly, so a vLLM
upgrade or a different GPU cannot silently change the operating point the planner sized:

* ``--max-num-seqs`` / ``--max-num-batched-tokens`` are the planner's concurrency and chunked-prefill budget;
* ``--enable-chunked-prefill`` and ``--enable-prefix-caching`` are on (both default on in the V1 engine,
  written anyway);
* request and output logging are off (seed 000: prompts and completions are not logged by default), and the
  access log skips the endpoints the probes and collectors hit every few seconds;
* ``--shutdown-timeout`` makes SIGTERM drain in-flight streams for the longest allowed stream instead of
  aborting them (vLLM's default 0 = abort).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .probes import VLLM_PORT

if TYPE_CHECKING:
    from infra.planning.capacity import PoolPlan
    from infra.config.release import ReleaseIdentity
    from infra.config.serving import ServingPool

#: Where a mounted weights volume (Hyperdisk ML PVC or GCS FUSE) appears in the container, read-only. The
#: volume's root is the release's immutable ``gs://<bucket>/<model>/<revision>/`` folder (Hyperdisk ML is
#: hydrated from it; GCS FUSE mounts it with ``only-dir``), so the model path carries no revision of its own.
WEIGHTS_MOUNT_PATH = "/weights"
#: Endpoints whose access-log lines are dropped: kubelet probes, the readiness script and metric scrapes
#: would otherwise write several lines per second per replica.
QUIET_ENDPOINTS = ("/health", "/metrics", "/v1/models")
#: The vLLM image's command (``vllm serve``), set explicitly rather than relying on the image's entrypoint.
VLLM_COMMAND = ("vllm", "serve")


def model_location(release: "ReleaseIdentity", loading_path: str) -> str:
    """``gs://…/<revision>/`` streamed by the Run:ai streamer, or the mount path of a staged volume."""
    if loading_path == "gcs_streaming":
        return release.weights_uri
    if loading_path in ("hyperdisk_ml", "gcs_fuse"):
        return WEIGHTS_MOUNT_PATH
    raise ValueError(f"unknown loading path {loading_path!r}")


def streamer_extra_config(concurrency: int, tensor_parallel_size: int) -> str:
    """``--model-loader-extra-config`` JSON: reader concurrency, and distributed streaming when TP > 1 (each rank
    reads its own share from object storage; Google's guidance for TP > 1, FACTS §7)."""
    cfg: dict[str, object] = {"concurrency": concurrency}
    if tensor_parallel_size > 1:
        cfg["distributed"] = True
    return json.dumps(cfg, sort_keys=True, separators=(",", ":"))


def _fmt(x: float) -> str:
    return f"{x:g}"


def render_vllm_args(release: "ReleaseIdentity", pool: "ServingPool", plan: "PoolPlan",
                     shutdown_timeout_seconds: int) -> list[str]:
    """What follows ``vllm serve`` in the container: every value derived from typed config and the plan."""
    path = pool.loading.path
    args = ["--model", model_location(release, path)]
    if path == "gcs_streaming":
        args += ["--load-format", "runai_streamer",
                 "--model-loader-extra-config", streamer_extra_config(pool.loading.streamer_concurrency,
                                                                      release.tensor_parallel_size)]
    args += [
        "--served-model-name", release.release,
        "--port", str(VLLM_PORT),
        "--tensor-parallel-size", str(release.tensor_parallel_size),
        "--max-model-len", str(release.max_model_len),
        "--gpu-memory-utilization", _fmt(pool.gpu_memory_utilization),
        "--max-num-seqs", str(plan.max_num_seqs),
        "--max-num-batched-tokens", str(plan.max_num_batched_tokens),
        "--enable-chunked-prefill",
        "--enable-prefix-caching",
        "--dtype", release.dtype,
        "--kv-cache-dtype", release.kv_cache_dtype,
    ]
    if release.quantization != "none":
        args += ["--quantization", release.quantization]
    args += [
        "--no-enable-log-requests",
        "--no-enable-log-outputs",
        "--disable-access-log-for-endpoints", ",".join(QUIET_ENDPOINTS),
        "--shutdown-timeout", str(shutdown_timeout_seconds),
    ]
    opts = pool.model_server
    if opts.lora is not None:
        args += ["--enable-lora", "--max-loras", str(opts.lora.max_loras), "--max-lora-rank", str(opts.lora.max_lora_rank)]
        if opts.lora.max_cpu_loras is not None:
            args += ["--max-cpu-loras", str(opts.lora.max_cpu_loras)]
    if opts.speculative is not None:
        spec = opts.speculative.model_dump(exclude_none=True)
        args += ["--speculative-config", json.dumps(spec, sort_keys=True, separators=(",", ":"))]
    return args
