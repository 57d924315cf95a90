"""A model's token limit comes from its own position table: a local folder whose model has fewer positions than the
spec's default (512) is read up to its positions, not crashed with "index out of range in self"."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mrag_core.extraction import embed_texts
from mrag_core.models.loader import load_model, model_from_module
from mrag_core.models.registry import position_limit
from services.workflows.indexing import query_window
from tests.support.tiny_models import tiny_bert_folder, tiny_gpt2_folder

torch.set_num_threads(1)

NO_LIMIT = int(1e30)  # transformers' tokenizer model_max_length when none is set


@pytest.mark.parametrize(("cfg", "tokenizer_max", "expected"), [
    (SimpleNamespace(model_type="bert", max_position_embeddings=128), None, 128),
    (SimpleNamespace(model_type="gpt2", n_positions=64), NO_LIMIT, 64),
    (SimpleNamespace(model_type="llama", max_position_embeddings=8192), NO_LIMIT, 512),  # capped at the spec's
    (SimpleNamespace(model_type="bert", max_position_embeddings=512), 100, 100),  # the tokenizer's, smaller
    (SimpleNamespace(model_type="bert", max_position_embeddings=128), 256, 128),
    (SimpleNamespace(model_type="bert", max_position_embeddings=128), 0, 128),  # not sane: ignored
    (SimpleNamespace(model_type="roberta", max_position_embeddings=130, pad_token_id=1), None, 128),  # ids from 2
    (SimpleNamespace(model_type="xlm-roberta", max_position_embeddings=514, pad_token_id=1), None, 512),
    (SimpleNamespace(model_type="gpt2", n_positions=None, max_position_embeddings=None), None, 512),  # none known
])
def test_position_limit_is_the_smallest_sane_limit_capped_at_the_spec(cfg, tokenizer_max, expected) -> None:
    assert position_limit(cfg, tokenizer_max, 512) == expected


def test_position_limit_keeps_a_smaller_spec_limit() -> None:
    assert position_limit(SimpleNamespace(model_type="bert", max_position_embeddings=512), 512, 256) == 256  # MiniLM


def test_bert_folder_with_128_positions_reads_long_texts_up_to_128_tokens(tmp_path: Path) -> None:
    lm = load_model(str(tiny_bert_folder(tmp_path, 128)), device="cpu")
    assert lm.spec.max_length == 128
    long_text = " ".join(["the cat sat"] * 100)  # 300 words: 302 tokens with [CLS] and [SEP]
    first = " ".join(long_text.split()[:126])  # the 126 words that fit with [CLS] and [SEP]
    emb = embed_texts(lm, [long_text, first], batch_size=1)
    np.testing.assert_allclose(emb.standard[0], emb.standard[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(emb.heads[0], emb.heads[1], rtol=1e-5, atol=1e-6)
    window = query_window(lm, long_text)
    assert (window.n_tokens, window.limit, window.cut) == (302, 128, True)


def test_gpt2_folder_with_64_positions_reads_long_texts_up_to_64_tokens(tmp_path: Path) -> None:
    lm = load_model(str(tiny_gpt2_folder(tmp_path, n_layer=2)), device="cpu")
    assert lm.spec.max_length == 64
    long_text = " ".join(["the cat sat"] * 70)  # 210 tokens, no special tokens
    emb = embed_texts(lm, [long_text, " ".join(long_text.split()[:64])], batch_size=1)
    np.testing.assert_allclose(emb.standard[0], emb.standard[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(emb.heads[0], emb.heads[1], rtol=1e-5, atol=1e-6)


def test_a_model_built_in_code_gets_its_positions_as_limit() -> None:
    from transformers import GPT2Config, GPT2Model

    model = GPT2Model(GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=40))
    assert model_from_module(model, None).spec.max_length == 40
