"""Tiny Hugging Face model folders written in code (random weights, nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["tiny_gpt2_folder"]

WORDS = ["<|endoftext|>", "[UNK]", "the", "cat", "sat", "lighthouse", "tempeh"]


def tiny_gpt2_folder(path: Path, n_layer: int = 8) -> Path:
    """A GPT-2 (``n_layer`` layers, 2 heads x 8) with a word-level fast tokenizer, saved in ``path``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=WORDS[0], unk_token="[UNK]").save_pretrained(path)
    config = GPT2Config(vocab_size=len(WORDS), n_positions=64, n_embd=16, n_layer=n_layer, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(path)
    return path
