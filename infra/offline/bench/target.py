"""What one benchmark run measures: the served release, its engine arguments, its accelerator and its contract.

A :class:`BenchTarget` holds primitives only (str, int, float, tuples of them) so that the CLI can build it from
a stack's resolved plan without this package importing the Pulumi program, and so that a record can be compared
field by field with the pool that will later cite it (``record.identity_differences``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...config.measurement import args_sha256

#: ``sha256:`` followed by 64 lowercase hex digits: how the release files state an image digest.
IMAGE_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")  # \Z: "$" would accept a trailing newline
SHA256_HEX_RE = re.compile(r"^[0-9a-f]{64}$")


class TargetError(ValueError):
    """A BenchTarget whose facts contradict each other; the message names the field."""


@dataclass(frozen=True)
class BenchTarget:
    """One replica to measure, and the contract it is measured against.

    ``base_url`` must reach exactly one replica (for example a port-forward to one pod): θ_o and θ_i are per
    replica, and a gateway in front of several replicas would report their sum.
    """

    #: Server root URL, without ``/v1`` (``http://<host>:<port>``).
    base_url: str
    #: ``--served-model-name`` of the server: the model field every request carries.
    served_model_name: str
    #: Release id the pool serves.
    release: str
    #: Image digest of the serving image (``sha256:<64 hex>``).
    image_digest: str
    #: vLLM version of the serving image (``0.32.0``).
    vllm_version: str
    #: Machine type of the accelerator topology (``a3-highgpu-2g``).
    machine_type: str
    #: GKE accelerator type (``nvidia-h100-80gb``).
    gpu_type: str
    #: GPUs per node of that machine type (0 for a CPU build).
    gpus_per_node: int
    #: Tensor-parallel size of one replica.
    tensor_parallel_size: int
    #: The vLLM arguments the stack renders for this pool (after ``vllm serve``).
    vllm_args: tuple[str, ...]
    #: ``args_sha256(vllm_args)``; checked on construction so a record cannot carry a hash of other args.
    vllm_args_sha256: str
    #: Contract: TTFT objective at p95, ms.
    ttft_p95_ms: float
    #: Contract: inter-token latency objective at p95, ms.
    itl_p95_ms: float
    #: Contract: largest prompt admitted, tokens.
    max_input_tokens: int
    #: Contract: largest completion a request may ask for, tokens.
    max_output_tokens: int
    #: Contract: mean prompt length, tokens.
    prompt_mean_tokens: float
    #: Contract: 95th-percentile prompt length, tokens.
    prompt_p95_tokens: int
    #: Contract: mean output length, tokens.
    output_mean_tokens: float
    #: Contract: 95th-percentile output length, tokens.
    output_p95_tokens: int
    #: Contract priority classes as ``(name, priority)``, highest priority first or in contract order.
    priority_classes: tuple[tuple[str, int], ...]
    #: Local directory with the release's tokenizer (guidellm sizes synthetic prompts with it).
    tokenizer_path: str
    #: The arguments the measured server actually ran with, when they differ from ``vllm_args`` (for example a
    #: CPU build that cannot take GPU flags); ``None`` when it ran exactly ``vllm_args``.
    served_args: tuple[str, ...] | None = None
    #: Why ``served_args`` differ from ``vllm_args``; required exactly when ``served_args`` is set.
    served_args_reason: str | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not re.match(r"^https?://[^/\s]+", self.base_url):
            problems.append(f"base_url: must be an http(s) URL, got {self.base_url!r}")
        if not IMAGE_DIGEST_RE.match(self.image_digest):
            problems.append(f"image_digest: must be sha256:<64 hex>, got {self.image_digest!r}")
        if self.vllm_args_sha256 != args_sha256(self.vllm_args):
            problems.append(
                f"vllm_args_sha256: {self.vllm_args_sha256} is not the SHA-256 of vllm_args "
                f"({args_sha256(self.vllm_args)})"
            )
        if self.gpus_per_node < 0:
            problems.append(f"gpus_per_node: must be >= 0, got {self.gpus_per_node}")
        for name in (
            "tensor_parallel_size",
            "max_input_tokens",
            "max_output_tokens",
            "prompt_p95_tokens",
            "output_p95_tokens",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name}: must be >= 1, got {getattr(self, name)}")
        for name in ("ttft_p95_ms", "itl_p95_ms", "prompt_mean_tokens", "output_mean_tokens"):
            if not getattr(self, name) > 0:
                problems.append(f"{name}: must be > 0, got {getattr(self, name)}")
        if self.prompt_p95_tokens > self.max_input_tokens:
            problems.append(
                f"prompt_p95_tokens: {self.prompt_p95_tokens} exceeds max_input_tokens {self.max_input_tokens}"
            )
        if self.output_p95_tokens > self.max_output_tokens:
            problems.append(
                f"output_p95_tokens: {self.output_p95_tokens} exceeds max_output_tokens {self.max_output_tokens}"
            )
        if not self.priority_classes:
            problems.append("priority_classes: at least one class is required")
        names = [n for n, _ in self.priority_classes]
        if len(set(names)) != len(names):
            problems.append(f"priority_classes: names must be unique, got {names}")
        if (self.served_args is None) != (self.served_args_reason is None):
            problems.append("served_args_reason: must be given exactly when served_args is")
        if self.served_args is not None and tuple(self.served_args) == tuple(self.vllm_args):
            problems.append("served_args: equal to vllm_args; leave it unset")
        if problems:
            raise TargetError("; ".join(problems))

    @property
    def served_args_sha256(self) -> str | None:
        return None if self.served_args is None else args_sha256(self.served_args)

    @property
    def metrics_model_name(self) -> str:
        """The ``model_name`` label vLLM puts on every series of this server's ``/metrics``.

        vLLM 0.32 labels its metrics with ``ModelConfig.served_model_name``, which ``get_served_model_name`` sets to
        the *first* ``--served-model-name`` when several are given, else to ``--model`` (vllm/config/model.py,
        vllm/v1/metrics/loggers.py ``PrometheusStatLogger``). The rendered arguments list the release id first and
        the public name second, so requests carry the public name while the metrics carry the release id.
        """
        return metrics_model_name(self.served_args if self.served_args is not None else self.vllm_args)


def _flag_values(args: tuple[str, ...], flag: str) -> list[str] | None:
    """The values of the last ``flag`` in ``args`` (argparse keeps the last), as ``--flag a b`` or ``--flag=a``."""
    found: list[str] | None = None
    for i, arg in enumerate(args):
        if arg == flag:
            values = []
            for value in args[i + 1 :]:
                if value.startswith("-"):
                    break
                values.append(value)
            found = values
        elif arg.startswith(flag + "="):
            found = [arg[len(flag) + 1 :]]
    return found


def metrics_model_name(args: tuple[str, ...]) -> str:
    """vLLM's ``model_name`` metric label for a server started as ``vllm serve <args>`` (see
    :attr:`BenchTarget.metrics_model_name`); TargetError when the arguments name no model."""
    names = _flag_values(args, "--served-model-name")
    if names:
        return names[0]
    model = _flag_values(args, "--model")
    if model:
        return model[0]
    if args and not args[0].startswith("-"):
        return args[0]  # ``vllm serve <model> ...``
    raise TargetError("the server's arguments name no --served-model-name and no --model: no metrics label to scrape")
