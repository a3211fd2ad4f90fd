"""The ``vllm serve`` argument list of one pool, rendered from the release, the pool and the planner (pure).

Pinned to vLLM 0.32 (``infra.config.release.SUPPORTED_VLLM_SERIES``): the flag spellings below are the 0.32
parser's (0.33 renamed ~50 negative flags), and the integration tier parses every rendered list with the real
0.32 parser built with ``allow_abbrev=False`` (tests/integration/test_rendered_args_real.py).

Everything the engine would otherwise choose by itself from the GPU it finds is stated explicitly, so a vLLM
upgrade or a different GPU cannot silently change the operating point the planner sized:

* ``--max-num-seqs`` / ``--max-num-batched-tokens`` are the planner's concurrency and chunked-prefill budget;
* ``--enable-chunked-prefill`` and ``--enable-prefix-caching`` are on (both default on in the V1 engine,
  written anyway);
* request and output logging are off (the design: prompts and completions are not logged by default), and the
  access log skips the endpoints the probes and collectors hit every few seconds;
* ``--shutdown-timeout`` makes SIGTERM drain in-flight streams for the longest allowed stream instead of
  aborting them (vLLM's default 0 = abort);
* ``--served-model-name <release id> <public name>``: clients send the public name to every pool, responses and
  metrics carry the release id (vLLM names the first served name in responses and metric labels);
* ``--override-generation-config {"max_new_tokens": N}`` caps every request's output at the contract's
  ``max_output_tokens``: vLLM 0.32's ``get_max_tokens`` takes the minimum of the request's ``max_tokens``, this
  override and the context left after the prompt, so a request asking for more stops at N with
  ``finish_reason: length`` instead of running past the stream bound the timeouts and the drain are sized for
  (on chat completions it is also the default when a request sets no ``max_tokens``; plain completions keep
  vLLM's request-model default of 16 — measured in tests/integration/test_traffic_real.py);
* ``--enable-server-load-tracking`` exposes ``/load`` (requests in flight, counted by the API server itself),
  which the liveness probe uses to tell an idle engine from a hung one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from components import naming

from ..config.pool import PoolCommon
from ..config.release import ReleaseIdentity
from .capacity import PoolCapacity

#: Endpoints whose access-log lines are dropped: kubelet probes, the probe script and metric scrapes would
#: otherwise write several lines per second per replica.
QUIET_ENDPOINTS = (naming.HEALTH_PATH, naming.METRICS_PATH, naming.MODELS_PATH, naming.LOAD_PATH)


def output_cap_config(max_output_tokens: int) -> str:
    """``--override-generation-config`` JSON: HF's ``max_new_tokens`` is what vLLM maps to its ``max_tokens``."""
    return json.dumps({"max_new_tokens": max_output_tokens}, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class VllmInputs:
    """Everything ``vllm serve`` is told, whatever the target: the target decides where the weights are and which
    port the server listens on; the release and the planner decide the rest."""

    #: ``gs://…/<revision>/`` (streamed) or the mount path of a staged volume.
    model: str
    #: Run:ai streamer reader threads when ``model`` is a gs:// URI; None for a mounted path.
    streamer_concurrency: int | None
    #: ``(release id, public model name)``: the first is what responses and metrics name, both are accepted.
    served_model_names: tuple[str, ...]
    port: int
    tensor_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    dtype: str
    kv_cache_dtype: str
    quantization: str
    shutdown_timeout_seconds: int
    #: The contract's ``max_output_tokens``: the server-side cap on every request's output.
    max_output_tokens: int
    #: ``--speculative-config`` as a mapping (rendered as canonical JSON); None = off.
    speculative: tuple[tuple[str, object], ...] | None = None


def release_vllm_inputs(
    rel: ReleaseIdentity,
    pool: PoolCommon,
    cap: PoolCapacity,
    *,
    model: str,
    port: int,
    public_model_name: str,
    shutdown_timeout_seconds: int,
    max_output_tokens: int,
    streamer_concurrency: int | None = None,
    speculative: tuple[tuple[str, object], ...] | None = None,
) -> VllmInputs:
    """The renderer's inputs every target fills the same way: served names = release id + public name, the
    release's parallelism, context and precision, the pool's memory share, the planner's concurrency and batch
    size. The target passes where the weights are (``model``), its port, the drain timeout and its extras."""
    return VllmInputs(
        model=model,
        streamer_concurrency=streamer_concurrency,
        served_model_names=(rel.release, public_model_name),
        port=port,
        tensor_parallel_size=rel.tensor_parallel_size,
        max_model_len=rel.max_model_len,
        gpu_memory_utilization=pool.gpu_memory_utilization,
        max_num_seqs=cap.max_num_seqs,
        max_num_batched_tokens=cap.max_num_batched_tokens,
        dtype=rel.dtype,
        kv_cache_dtype=rel.kv_cache_dtype,
        quantization=rel.quantization,
        shutdown_timeout_seconds=shutdown_timeout_seconds,
        max_output_tokens=max_output_tokens,
        speculative=speculative,
    )


def streamer_extra_config(concurrency: int, tensor_parallel_size: int) -> str:
    """``--model-loader-extra-config`` JSON: reader concurrency, and distributed streaming when TP > 1 (each rank
    reads its own share from object storage; Google's guidance for TP > 1, vLLM engine arguments)."""
    cfg: dict[str, object] = {"concurrency": concurrency}
    if tensor_parallel_size > 1:
        cfg["distributed"] = True
    return json.dumps(cfg, sort_keys=True, separators=(",", ":"))


def _fmt(x: float) -> str:
    return f"{x:g}"


def render_vllm_args(v: VllmInputs) -> list[str]:
    """What follows ``vllm serve`` in the container: every value derived from typed config and the plan."""
    args = ["--model", v.model]
    if v.streamer_concurrency is not None:
        args += [
            "--load-format",
            "runai_streamer",
            "--model-loader-extra-config",
            streamer_extra_config(v.streamer_concurrency, v.tensor_parallel_size),
        ]
    args += [
        "--served-model-name",
        *v.served_model_names,
        "--port",
        str(v.port),
        "--tensor-parallel-size",
        str(v.tensor_parallel_size),
        "--max-model-len",
        str(v.max_model_len),
        "--gpu-memory-utilization",
        _fmt(v.gpu_memory_utilization),
        "--max-num-seqs",
        str(v.max_num_seqs),
        "--max-num-batched-tokens",
        str(v.max_num_batched_tokens),
        "--enable-chunked-prefill",
        "--enable-prefix-caching",
        "--dtype",
        v.dtype,
        "--kv-cache-dtype",
        v.kv_cache_dtype,
    ]
    if v.quantization != "none":
        args += ["--quantization", v.quantization]
    args += [
        "--no-enable-log-requests",
        "--no-enable-log-outputs",
        "--disable-access-log-for-endpoints",
        ",".join(QUIET_ENDPOINTS),
        "--shutdown-timeout",
        str(v.shutdown_timeout_seconds),
        "--override-generation-config",
        output_cap_config(v.max_output_tokens),
        "--enable-server-load-tracking",
    ]
    if v.speculative is not None:
        args += ["--speculative-config", json.dumps(dict(v.speculative), sort_keys=True, separators=(",", ":"))]
    return args
