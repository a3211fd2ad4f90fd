"""Built-in catalogue of model geometries for well-known open models.

Values come from each model's published ``config.json`` on its Hugging Face model page
(``num_hidden_layers``, ``num_key_value_heads``, ``head_dim`` or ``hidden_size / num_attention_heads``,
``vocab_size``, ``tie_word_embeddings``) and the parameter count from its model card. Precision (bytes per weight /
per KV element) is *not* part of the geometry: it belongs to the release (quantization, kv-cache dtype). What the
geometry says about precision is which parameters a quantisation leaves alone: the input embedding and the output
head (``lm_head``), ``vocab_size x hidden_size`` each (once when the two are tied), stay at the activation dtype under
vLLM's FP8 (``Fp8Config.get_quant_method`` quantises ``LinearBase`` layers only, and neither
``VocabParallelEmbedding`` nor ``ParallelLMHead`` is one; vllm 0.32 ``model_executor/layers/quantization/fp8.py``).

Pure data: no Pulumi import.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogueEntry:
    hf_repo: str
    parameters: int  # total parameter count (model card)
    layers: int  # num_hidden_layers
    kv_heads: int  # num_key_value_heads
    head_dim: int  # head_dim (or hidden_size / num_attention_heads)
    attention_heads: int  # num_attention_heads
    hidden_size: int
    vocab_size: int  # vocab_size
    tie_word_embeddings: bool  # tie_word_embeddings: the output head shares the input embedding's weights

    @property
    def embedding_parameters(self) -> int:
        """Parameters of the input embedding and the output head (one matrix when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)


CATALOGUE: dict[str, CatalogueEntry] = {
    # Qwen/Qwen3-32B config.json: num_hidden_layers=64, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
    # hidden_size=5120, vocab_size=151936, tie_word_embeddings=false; model card: "Number of Parameters: 32.8B".
    "qwen3-32b": CatalogueEntry("Qwen/Qwen3-32B", 32_800_000_000, 64, 8, 128, 64, 5120, 151_936, False),
    # Qwen/Qwen3-8B config.json: num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    # hidden_size=4096, vocab_size=151936, tie_word_embeddings=false; model card: "Number of Parameters: 8.2B".
    "qwen3-8b": CatalogueEntry("Qwen/Qwen3-8B", 8_200_000_000, 36, 8, 128, 32, 4096, 151_936, False),
    # meta-llama/Llama-3.1-8B-Instruct config.json: num_hidden_layers=32, num_attention_heads=32,
    # num_key_value_heads=8, hidden_size=4096 (head_dim 4096/32=128), vocab_size=128256, tie_word_embeddings=false;
    # model card: 8.03B parameters.
    "llama-3.1-8b": CatalogueEntry(
        "meta-llama/Llama-3.1-8B-Instruct", 8_030_000_000, 32, 8, 128, 32, 4096, 128_256, False
    ),
    # meta-llama/Llama-3.1-70B-Instruct config.json: num_hidden_layers=80, num_attention_heads=64,
    # num_key_value_heads=8, hidden_size=8192 (head_dim 8192/64=128), vocab_size=128256, tie_word_embeddings=false;
    # model card: 70.6B parameters.
    "llama-3.1-70b": CatalogueEntry(
        "meta-llama/Llama-3.1-70B-Instruct", 70_600_000_000, 80, 8, 128, 64, 8192, 128_256, False
    ),
    # mistralai/Mistral-7B-Instruct-v0.3 config.json: num_hidden_layers=32, num_attention_heads=32,
    # num_key_value_heads=8, head_dim=128, hidden_size=4096, vocab_size=32768 (v0.3's extended vocabulary),
    # tie_word_embeddings=false; 7.25B parameters.
    "mistral-7b-v0.3": CatalogueEntry(
        "mistralai/Mistral-7B-Instruct-v0.3", 7_250_000_000, 32, 8, 128, 32, 4096, 32_768, False
    ),
}
