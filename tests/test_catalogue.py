"""Catalogue geometry against the models' published config.json values (written out here by hand)."""

from __future__ import annotations

import pytest

from infra.config.catalogue import CATALOGUE
from infra.planning import capacity

# name: (num_hidden_layers, num_key_value_heads, head_dim, KV bytes/token at BF16 = 2*L*H*d*2)
PUBLISHED = {
    "qwen3-32b": (64, 8, 128, 2 * 64 * 8 * 128 * 2),  # 262,144
    "qwen3-8b": (36, 8, 128, 2 * 36 * 8 * 128 * 2),  # 147,456
    "llama-3.1-8b": (32, 8, 4096 // 32, 131_072),  # hidden 4096 / 32 heads
    "llama-3.1-70b": (80, 8, 8192 // 64, 327_680),  # hidden 8192 / 64 heads
    "mistral-7b-v0.3": (32, 8, 128, 131_072),
}


def test_catalogue_covers_published_table():
    assert set(CATALOGUE) == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_kv_bytes_per_token_match_published_config(name):
    layers, kv_heads, head_dim, expected = PUBLISHED[name]
    e = CATALOGUE[name]
    assert (e.layers, e.kv_heads, e.head_dim) == (layers, kv_heads, head_dim)
    g = capacity.Geometry(e.parameters, e.layers, e.kv_heads, e.head_dim, 2.0, 2.0)
    assert capacity.kv_bytes_per_token(g) == expected


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_head_dim_consistent_with_hidden_size_where_standard(name):
    e = CATALOGUE[name]
    # Qwen3 uses an explicit head_dim of 128 that differs from hidden/heads for the 32B (5120/64 = 80).
    if name != "qwen3-32b":
        assert e.hidden_size // e.attention_heads == e.head_dim
