"""Built-in catalogue of model geometries for well-known open models.

Values come from each model's published ``config.json`` on its Hugging Face model page
(``num_hidden_layers``, ``num_key_value_heads``, ``head_dim`` or ``hidden_size / num_attention_heads``)
and the parameter count from its model card. Precision (bytes per weight / per KV element) is *not*
part of the geometry: it belongs to the release (quantization, kv-cache dtype).

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


CATALOGUE: dict[str, CatalogueEntry] = {
    # Qwen/Qwen3-32B config.json: num_hidden_layers=64, num_attention_heads=64,
    # num_key_value_heads=8, head_dim=128, hidden_size=5120; model card: "Number of Parameters: 32.8B".
    "qwen3-32b": CatalogueEntry("Qwen/Qwen3-32B", 32_800_000_000, 64, 8, 128, 64, 5120),
    # Qwen/Qwen3-8B config.json: num_hidden_layers=36, num_attention_heads=32,
    # num_key_value_heads=8, head_dim=128, hidden_size=4096; model card: "Number of Parameters: 8.2B".
    "qwen3-8b": CatalogueEntry("Qwen/Qwen3-8B", 8_200_000_000, 36, 8, 128, 32, 4096),
    # meta-llama/Llama-3.1-8B-Instruct config.json: num_hidden_layers=32, num_attention_heads=32,
    # num_key_value_heads=8, hidden_size=4096 (head_dim 4096/32=128); model card: 8.03B parameters.
    "llama-3.1-8b": CatalogueEntry("meta-llama/Llama-3.1-8B-Instruct", 8_030_000_000, 32, 8, 128, 32, 4096),
    # meta-llama/Llama-3.1-70B-Instruct config.json: num_hidden_layers=80, num_attention_heads=64,
    # num_key_value_heads=8, hidden_size=8192 (head_dim 8192/64=128); model card: 70.6B parameters.
    "llama-3.1-70b": CatalogueEntry("meta-llama/Llama-3.1-70B-Instruct", 70_600_000_000, 80, 8, 128, 64, 8192),
    # mistralai/Mistral-7B-Instruct-v0.3 config.json: num_hidden_layers=32, num_attention_heads=32,
    # num_key_value_heads=8, head_dim=128, hidden_size=4096; 7.25B parameters.
    "mistral-7b-v0.3": CatalogueEntry("mistralai/Mistral-7B-Instruct-v0.3", 7_250_000_000, 32, 8, 128, 32, 4096),
}
