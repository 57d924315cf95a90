"""Attention maps: rows are distributions, decoders are causal, shapes and truncation for MiniLM."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from mrag_core.attention import AttentionUnavailable, attention_maps
from mrag_core.models.loader import model_from_module
from tests.support.tiny_models import BERT_LONG_TEXT, tiny_bert_folder

torch.set_num_threads(1)
VOCAB = 101


class WordTokenizer:
    pad_token = eos_token = unk_token = "<pad>"

    def _ids(self, text):
        return [3 + zlib.crc32(w.encode()) % (VOCAB - 3) for w in text.split()]

    def __call__(self, texts, padding=False, truncation=False, max_length=None, return_tensors="pt"):
        rows = [self._ids(t) for t in texts]
        if truncation and max_length:
            rows = [r[:max_length] for r in rows]
        return {
            "input_ids": torch.tensor(rows),
            "attention_mask": torch.ones(len(rows), len(rows[0]), dtype=torch.long),
        }

    def convert_ids_to_tokens(self, ids):
        return [f"t{i}" for i in ids]


def tiny_llama(impl: str):
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attn_implementation=impl)
    return model_from_module(LlamaModel(cfg).eval(), WordTokenizer(), name="tiny-llama")


TEXT = "the quick brown fox jumps over the lazy dog near the river bank"


def test_tiny_decoder_rows_sum_to_one_and_causal():
    lm = tiny_llama("eager")
    maps = attention_maps(lm, TEXT, layer=1)
    n = len(TEXT.split())
    assert maps.weights.shape == (4, n, n) and maps.n_heads == 4 and maps.layer == 1
    np.testing.assert_allclose(maps.weights.sum(axis=-1), 1.0, atol=1e-5)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert np.all(maps.weights[:, upper] == 0.0)
    # the first token can only attend to itself
    np.testing.assert_allclose(maps.weights[:, 0, 0], 1.0, atol=1e-6)
    # last-token view = last row of every head; later heads differ from earlier ones (not a constant map)
    np.testing.assert_array_equal(maps.from_token(-1), maps.weights[:, -1, :])
    assert not np.allclose(maps.weights[0], maps.weights[1])
    assert maps.tokens[0] == f"t{3 + zlib.crc32(b'the') % (VOCAB - 3)}" and not maps.truncated


def test_truncation_is_reported():
    lm = tiny_llama("eager")
    maps = attention_maps(lm, TEXT, layer=0, max_tokens=5)
    assert maps.weights.shape == (4, 5, 5) and maps.truncated and maps.n_tokens_total == len(TEXT.split())


def test_sdpa_model_is_refused_with_a_clear_error():
    lm = tiny_llama("sdpa")
    with pytest.raises(AttentionUnavailable, match="eager"):
        attention_maps(lm, TEXT)
    with pytest.raises(ValueError, match="empty"):
        attention_maps(tiny_llama("eager"), "   ")


def test_minilm_shapes():
    from mrag_core.models.loader import load_model

    lm = load_model("minilm", attn_implementation="eager", device="cpu")
    maps = attention_maps(lm, "Lighthouses guide ships; tempeh is fermented soybean.", layer=-1)
    t = len(maps.tokens)
    assert maps.weights.shape == (12, t, t) and maps.layer == 5
    assert maps.tokens[0] == "[CLS]" and maps.tokens[-1] == "[SEP]"
    np.testing.assert_allclose(maps.weights.sum(axis=-1), 1.0, atol=1e-5)
    # an encoder attends in both directions: some weight above the diagonal
    assert maps.weights[:, np.triu(np.ones((t, t), dtype=bool), k=1)].sum() > 0.1
    long = attention_maps(lm, "word " * 400, layer=0, max_tokens=64)
    assert long.truncated and long.weights.shape == (12, 64, 64)


def test_a_model_with_128_positions_is_cut_at_its_own_limit_not_at_a_larger_max_tokens(tmp_path):
    from mrag_core.attention import token_limit
    from mrag_core.models.loader import load_model

    lm = load_model(str(tiny_bert_folder(tmp_path, 128)), attn_implementation="eager", device="cpu")
    assert lm.spec.max_length == 128 and token_limit(lm, 256) == 128 and token_limit(lm, 96) == 96
    maps = attention_maps(lm, BERT_LONG_TEXT, layer=-1, max_tokens=256)  # was IndexError: position 128 does not exist
    assert maps.weights.shape == (4, 128, 128) and len(maps.tokens) == 128 and maps.n_tokens_total == 300
    assert maps.truncated and maps.cut_by_model
    assert maps.tokens[0] == "[CLS]" and maps.tokens[1:4] == ["the", "cat", "sat"] and maps.tokens[-1] == "[SEP]"
    np.testing.assert_allclose(maps.weights.sum(axis=-1), 1.0, atol=1e-5)
    at_limit = attention_maps(lm, BERT_LONG_TEXT, layer=-1, max_tokens=128)  # box at the limit: the model's cut
    np.testing.assert_array_equal(at_limit.weights, maps.weights)
    assert at_limit.cut_by_model
    boxed = attention_maps(lm, BERT_LONG_TEXT, layer=-1, max_tokens=64)  # the box cuts first
    assert boxed.weights.shape == (4, 64, 64) and boxed.truncated and not boxed.cut_by_model
    short = attention_maps(lm, "the cat sat", layer=-1, max_tokens=256)
    assert short.weights.shape == (4, 5, 5) and not short.truncated and not short.cut_by_model
