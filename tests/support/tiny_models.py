"""Tiny Hugging Face model folders written in code (random weights, nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BERT_LONG_TEXT", "tiny_bert_folder", "tiny_gpt2_folder"]

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


BERT_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
BERT_LONG_TEXT = " ".join((["the", "cat", "sat"] * 100)[:298])  # 300 tokens with [CLS] and [SEP]


def tiny_bert_folder(path: Path, positions: int) -> Path:
    """A random 2-layer BERT (4 heads x 8) with ``positions`` positions and a word-piece tokenizer knowing "the cat
    sat", saved in ``path``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    BertTokenizer(vocab={w: i for i, w in enumerate(BERT_WORDS)}).save_pretrained(path)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(BERT_WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=positions)).save_pretrained(path)
    return path
