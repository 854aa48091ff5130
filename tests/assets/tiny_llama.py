"""The tiny Llama the FSDP2 test scripts train (fsdp2_loop.py, fsdp2_trainer.py): 2 decoder layers,
hidden 32, 4 heads (2 KV heads), vocabulary 128, random weights from seed 0."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

CONFIG = LlamaConfig(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    use_cache=False,
)


def tiny_llama() -> LlamaForCausalLM:
    """A fresh model, the same weights every call (``torch.manual_seed(0)`` first)."""
    torch.manual_seed(0)
    return LlamaForCausalLM(CONFIG)
