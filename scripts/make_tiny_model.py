"""Build a tiny Llama-architecture model with random weights, and its tokenizer, for the real-vLLM tests.

Usage: ``.venv-vllm/bin/python scripts/make_tiny_model.py OUTPUT_DIR [--seed N] [--layers L] [--kv-heads H]``

What it writes into OUTPUT_DIR (about 1 MB, about 10 s with imports):
- ``config.json``, ``generation_config.json``, ``model.safetensors``: a ``LlamaForCausalLM`` with hidden size 128,
  2 layers, 2 attention heads (``--layers`` / ``--kv-heads`` give other shapes: 1 KV head = grouped-query
  attention), vocabulary 512, random weights from a fixed seed, stored in bfloat16;
- ``tokenizer.json``, ``tokenizer_config.json`` (+ special tokens map): a byte-level BPE tokenizer trained here
  with ``tokenizers`` on generated text, wrapped in ``PreTrainedTokenizerFast`` with a simple chat template.

Nothing is downloaded: HF_HUB_OFFLINE=1 is set before transformers is imported. The same seed gives
byte-identical files. The model's output is noise; it only has to load and generate through vLLM's real code paths.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the functions import them at run time, after HF_HUB_OFFLINE is set
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# One tokenizer-training thread: the merges must not depend on thread scheduling.
os.environ["TOKENIZERS_PARALLELISM"] = "false"

HIDDEN_SIZE = 128
INTERMEDIATE_SIZE = 256  # 2x hidden: the smallest usual MLP ratio; size does not matter for these tests
LAYERS = 2
HEADS = 2  # head_dim = 128 / 2 = 64, a size every CPU attention backend supports
VOCAB_SIZE = 512  # 256 byte symbols + 3 special tokens + 253 learned merges
#: Above every --max-model-len the tests serve, so vLLM accepts it: 256 for the session server, the staging stack's
#: rendered 16384 in tests/integration/test_traffic_real.py. Llama uses rotary position embeddings, so this adds
#: no weights (no learned position table): only config.json and the tokenizer's model_max_length change.
MAX_POSITIONS = 32768
SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]
BOS, EOS, PAD = SPECIAL_TOKENS
CORPUS_LINES = 4000  # enough text for 253 merges with counts well above the trainer's minimum frequency
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_WORDS = (
    "the model serves tokens from a cluster of accelerators while the gateway routes each request to the "
    "replica with the most free cache and the release names one revision of weights tokenizer and image "
    "latency throughput batch prefill decode queue memory page block shard node pool zone region"
).split()


def corpus(seed: int, lines: int = CORPUS_LINES) -> list[str]:
    """Deterministic English-like text with digits and punctuation, for training the BPE merges."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 14))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 4096)))
        out.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ","]))
    return out


def build_tokenizer(seed: int) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte is a token: no unknown input
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    # Prepend BOS like Llama tokenizers do; completions then always have at least one prompt token.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    if tok.get_vocab_size() > VOCAB_SIZE:
        raise SystemExit(f"tokenizer has {tok.get_vocab_size()} tokens, more than the model's {VOCAB_SIZE}")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        chat_template=CHAT_TEMPLATE,
        model_max_length=MAX_POSITIONS,
    )


def build_model(
    tokenizer: PreTrainedTokenizerFast, seed: int, layers: int = LAYERS, kv_heads: int = HEADS
) -> LlamaForCausalLM:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=kv_heads,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.eval()
    return model


def build(output_dir: Path, seed: int = 0, layers: int = LAYERS, kv_heads: int = HEADS) -> Path:
    output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(seed)
    model = build_model(tokenizer, seed, layers, kv_heads)
    model.save_pretrained(output_dir, safe_serialization=True)
    tokenizer.save_pretrained(output_dir)
    if not (output_dir / "model.safetensors").is_file():
        found = sorted(os.listdir(output_dir))
        raise SystemExit(f"expected {output_dir / 'model.safetensors'} after saving; found {found}")
    return output_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", type=Path, help="directory to write the model into (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the weights and the tokenizer corpus")
    parser.add_argument("--layers", type=int, default=LAYERS, help=f"decoder layers (default {LAYERS})")
    parser.add_argument(
        "--kv-heads",
        type=int,
        default=HEADS,
        choices=(1, HEADS),
        help=f"key/value heads (default {HEADS}; 1 = grouped-query attention)",
    )
    args = parser.parse_args(argv)
    out = build(args.output_dir, args.seed, args.layers, args.kv_heads)
    files = sorted(p.name for p in out.iterdir())
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"make_tiny_model: wrote {out} ({size / 1e6:.1f} MB): {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
