"""The immutable model release (the design, "The Serving Architecture"): one identity that names the model
revision, tokenizer revision, serving-image digest, weights manifest, precision and serving limits.

The release is target-neutral: the same identity can be served by the GKE path, Cloud Run GPU or Vertex AI.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import MAX_CONTEXT_TOKENS, Strict, check
from .catalogue import CATALOGUE

#: vLLM minor series the serving image must run; every rendered flag is validated against it.
SUPPORTED_VLLM_SERIES = "0.32"

IMAGE_DIGEST_RE = re.compile(r"^(?P<repo>[a-z0-9][a-z0-9._/-]*[a-z0-9])@(?P<digest>sha256:[0-9a-f]{64})\Z")
RELEASE_ID_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"
REVISION_PATTERN = r"^[0-9a-f]{40}$"
MANIFEST_RE = re.compile(
    r"^gs://(?P<bucket>[a-z0-9][a-z0-9._-]{1,61}[a-z0-9])/(?P<prefix>[A-Za-z0-9._/-]+)/manifest\.json\Z"
)

Quantization = Literal["none", "fp8", "awq", "gptq", "compressed-tensors"]
#: Bytes per stored weight implied by each quantization when the release does not state it explicitly.
#: 'none' uses the dtype width; fp8 is one byte (scales are small); AWQ/GPTQ are 4-bit (0.5 byte).
QUANT_BYTES: dict[str, float] = {"fp8": 1.0, "awq": 0.5, "gptq": 0.5}
DTYPE_BYTES: dict[str, float] = {"bfloat16": 2.0, "float16": 2.0}


class ModelGeometry(Strict):
    """Model shape for the memory formulas: from the built-in catalogue (``catalogue``) or explicit.

    Exactly one source: either ``catalogue`` alone, or all of ``parameters``, ``layers``, ``kv_heads``,
    ``head_dim``. ``bytes_per_weight`` / ``bytes_per_kv_element`` override what the release's
    quantization / kv-cache dtype imply.
    """

    catalogue: str | None = Field(
        None,
        description=("Built-in catalogue name (qwen3-32b, qwen3-8b, llama-3.1-8b, llama-3.1-70b, mistral-7b-v0.3)."),
    )
    # Bounds: 10^13 parameters is five times the largest published model; no transformer has more than 1,000
    # layers or heads, or a head wider than 1,024.
    parameters: Annotated[int, Field(gt=0, le=10**13)] | None = Field(
        None, description="Total parameter count P (explicit geometry)."
    )
    layers: Annotated[int, Field(gt=0, le=1000)] | None = Field(
        None, description="num_hidden_layers L (explicit geometry)."
    )
    kv_heads: Annotated[int, Field(gt=0, le=1000)] | None = Field(
        None, description="num_key_value_heads H_KV (explicit geometry)."
    )
    head_dim: Annotated[int, Field(gt=0, le=1024)] | None = Field(
        None, description="head dimension d_h (explicit geometry)."
    )
    # 10^7 tokens: ten times the largest published vocabulary; 10^6: a hidden size no transformer has.
    vocab_size: Annotated[int, Field(gt=0, le=10**7)] | None = Field(
        None,
        description=(
            "vocab_size (explicit geometry): with hidden_size, the parameters of the embedding and output head, "
            "which a quantised release keeps at its dtype. Required for a quantised release with explicit geometry."
        ),
    )
    hidden_size: Annotated[int, Field(gt=0, le=10**6)] | None = Field(
        None, description="hidden_size (explicit geometry; see vocab_size)."
    )
    tie_word_embeddings: bool | None = Field(
        None,
        description="tie_word_embeddings (explicit geometry): the output head is the input embedding (one matrix).",
    )
    bytes_per_weight: Annotated[float, Field(gt=0, le=4)] | None = Field(
        None,
        description=(
            "Override of b_w, the quantised layers' bytes per weight (default from quantization/dtype: fp8 1, "
            "awq/gptq 0.5, bf16 2); the embedding and output head stay at the dtype's width."
        ),
    )
    bytes_per_kv_element: Annotated[float, Field(gt=0, le=4)] | None = Field(
        None, description=("Override of b_KV (default from kv_cache_dtype: fp8 1, auto = dtype width).")
    )

    @model_validator(mode="after")
    def _one_source(self) -> ModelGeometry:
        explicit = {
            "parameters": self.parameters,
            "layers": self.layers,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
        }
        given = [k for k, v in explicit.items() if v is not None]
        problems = []
        if self.catalogue is not None:
            if self.catalogue not in CATALOGUE:
                problems.append(
                    ("catalogue", f"unknown model {self.catalogue!r}; known: {', '.join(sorted(CATALOGUE))}")
                )
            for k in given + [
                k for k in ("vocab_size", "hidden_size", "tie_word_embeddings") if getattr(self, k) is not None
            ]:
                problems.append((k, "give either catalogue or explicit geometry, not both"))
        else:
            for k, v in explicit.items():
                if v is None:
                    problems.append((k, "required when catalogue is not set"))
        check(problems)
        return self

    def embedding_parameters(self) -> int | None:
        """Parameters of the input embedding and output head (one matrix when tied); None when explicit geometry
        does not give vocab_size and hidden_size."""
        if self.catalogue is not None:
            return CATALOGUE[self.catalogue].embedding_parameters
        if self.vocab_size is None or self.hidden_size is None:
            return None
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def resolved(self) -> tuple[int, int, int, int]:
        """(parameters, layers, kv_heads, head_dim)."""
        if self.catalogue is not None:
            e = CATALOGUE[self.catalogue]
            return e.parameters, e.layers, e.kv_heads, e.head_dim
        assert self.parameters and self.layers and self.kv_heads and self.head_dim
        return self.parameters, self.layers, self.kv_heads, self.head_dim


class ReleaseIdentity(Strict):
    """One immutable release, with the field names of the design's release JSON plus precision and engine."""

    release: Annotated[str, Field(pattern=RELEASE_ID_PATTERN)] = Field(
        description=("Release id; also the served model name and the release label.")
    )
    model_revision: Annotated[str, Field(pattern=REVISION_PATTERN)] = Field(
        description="Immutable model commit (40 hex)."
    )
    tokenizer_revision: Annotated[str, Field(pattern=REVISION_PATTERN)] = Field(
        description="Immutable tokenizer commit (40 hex)."
    )
    image: str = Field(
        description=("Full image reference pinned by digest: ``<registry>/<path>@sha256:<64 hex>``; tags are refused.")
    )
    image_digest: str | None = Field(
        None,
        description=(
            "Optional copy of the digest as in the design's JSON; when given it must equal the digest in ``image``."
        ),
    )
    weight_manifest: str = Field(
        description=(
            "gs://<bucket>/<model>/<revision>/manifest.json: checksummed weights; the folder is the weights location."
        )
    )
    max_model_len: Annotated[int, Field(gt=0, le=MAX_CONTEXT_TOKENS)] = Field(
        description=("Context length served (--max-model-len); within the contract.")
    )
    tensor_parallel_size: Annotated[int, Field(gt=0, le=16)] = Field(
        description="GPUs per replica (--tensor-parallel-size)."
    )
    sampling_defaults_version: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        description=("Version of the sampling defaults this release ships with.")
    )
    quantization: Quantization = Field(description=("Weight quantization (--quantization; none = dtype weights)."))
    dtype: Literal["bfloat16", "float16"] = Field(description="Activation dtype (--dtype).")
    kv_cache_dtype: Literal["auto", "fp8"] = Field(description="KV-cache dtype (--kv-cache-dtype).")
    vllm_version: Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")] = Field(
        description=("vLLM version the image runs; must be 0.32.x (flags are rendered and validated for it).")
    )
    model: ModelGeometry = Field(description="Model geometry for the memory formulas.")

    @model_validator(mode="after")
    def _checks(self) -> ReleaseIdentity:
        problems = []
        m = IMAGE_DIGEST_RE.match(self.image)
        if not m:
            problems.append(("image", f"must be pinned by digest as <repository>@sha256:<64 hex>, got {self.image!r}"))
        elif self.image_digest is not None and self.image_digest != m.group("digest"):
            problems.append(
                ("image_digest", f"{self.image_digest!r} differs from the digest in image ({m.group('digest')})")
            )
        if not MANIFEST_RE.match(self.weight_manifest):
            problems.append(
                (
                    "weight_manifest",
                    f"must be gs://<bucket>/<model>/<revision>/manifest.json, got {self.weight_manifest!r}",
                )
            )
        series = ".".join(self.vllm_version.split(".")[:2])
        if series != SUPPORTED_VLLM_SERIES:
            problems.append(
                (
                    "vllm_version",
                    f"this program renders flags for vLLM {SUPPORTED_VLLM_SERIES}.x, got {self.vllm_version}",
                )
            )
        if self.quantization == "none" and self.model.bytes_per_weight is None and self.dtype not in DTYPE_BYTES:
            problems.append(("model.bytes_per_weight", "required for this dtype"))
        geo = self.model
        if self.quantization != "none" and geo.catalogue is None:
            for k in ("vocab_size", "hidden_size"):
                if getattr(geo, k) is None:
                    problems.append(
                        (
                            f"model.{k}",
                            f"required for a {self.quantization} release with explicit geometry: its embedding and "
                            "output head stay at the dtype's width, the other layers are quantised",
                        )
                    )
        emb = geo.embedding_parameters()
        if emb is not None and geo.catalogue is None and geo.parameters is not None and emb >= geo.parameters:
            problems.append(
                ("model.vocab_size", f"vocab_size x hidden_size ({emb:,} parameters) is not below parameters")
            )
        check(problems)
        return self

    # ---- derived values -------------------------------------------------------------------------
    @property
    def digest(self) -> str:
        m = IMAGE_DIGEST_RE.match(self.image)
        assert m
        return m.group("digest")

    @property
    def weights_uri(self) -> str:
        """``gs://<bucket>/<model>/<revision>/``: the immutable folder the manifest sits in."""
        return self.weight_manifest.rsplit("/", 1)[0] + "/"

    @property
    def weights_bucket(self) -> str:
        m = MANIFEST_RE.match(self.weight_manifest)
        assert m
        return m.group("bucket")

    @property
    def weights_prefix(self) -> str:
        m = MANIFEST_RE.match(self.weight_manifest)
        assert m
        return m.group("prefix")

    @property
    def bytes_per_weight(self) -> float:
        if self.model.bytes_per_weight is not None:
            return self.model.bytes_per_weight
        return QUANT_BYTES.get(self.quantization, DTYPE_BYTES[self.dtype])

    @property
    def bytes_per_embedding_weight(self) -> float:
        """The embedding and output head's width: the activation dtype's (no quantisation touches them)."""
        return DTYPE_BYTES[self.dtype]

    @property
    def bytes_per_kv_element(self) -> float:
        if self.model.bytes_per_kv_element is not None:
            return self.model.bytes_per_kv_element
        return 1.0 if self.kv_cache_dtype == "fp8" else DTYPE_BYTES[self.dtype]
