"""A tiny randomly initialised causal LM with a character-level tokenizer, built in the test
(nothing downloaded): 2 Llama layers, hidden size 64, one token per printable character."""

from __future__ import annotations

import string
from pathlib import Path

SPECIALS = ("<unk>", "<pad>", "</s>")


def build_tiny_model(out: Path, seed: int = 0) -> Path:
    """Save the model and tokenizer to ``out`` (a Hugging Face model directory)."""
    import torch
    from tokenizers import Tokenizer, decoders, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = sorted(set(string.printable))
    vocab = {t: i for i, t in enumerate((*SPECIALS, *chars))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", eos_token="</s>"
    )
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=8192,
        pad_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"], bos_token_id=None,
    )  # fmt: skip
    model = LlamaForCausalLM(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
