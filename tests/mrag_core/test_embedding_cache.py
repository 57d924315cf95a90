"""Embedding cache: hits return equal arrays, anything that changes the vectors misses, damage is recomputed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from mrag_core.embedding_cache import cache_dir, cached_embed, content_hash, embedding_key
from mrag_core.extraction import embed_texts
from mrag_core.models.loader import model_from_module
from tests.support.tiny_tokenizer import WordTokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def lm():
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32,
                                 bos_token_id=1, eos_token_id=2))
    return model_from_module(model, WordTokenizer(64), name="tiny-gpt2-cache")


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


TEXTS = ["red apples fall", "the blue sea", "a quiet night"]


def test_hit_after_miss_with_equal_arrays(lm, cache: Path) -> None:
    assert cache_dir() == cache
    first, hit1 = cached_embed(lm, TEXTS)
    second, hit2 = cached_embed(lm, TEXTS)
    assert (hit1, hit2) == (False, True)
    np.testing.assert_array_equal(first.standard, second.standard)
    np.testing.assert_array_equal(first.heads, second.heads)
    fresh = embed_texts(lm, TEXTS)
    np.testing.assert_allclose(second.heads, fresh.heads, rtol=1e-6)
    assert len(list(cache.glob("*.npz"))) == 1
    assert not list(cache.glob("*.tmp*"))  # the atomic write leaves no temp file
    calls = []
    _, hit = cached_embed(lm, TEXTS, progress=lambda d, t: calls.append((d, t)))
    assert hit and calls == [(3, 3)]


def test_changes_miss(lm, cache: Path) -> None:
    cached_embed(lm, TEXTS)
    assert cached_embed(lm, TEXTS[:2] + ["a quiet day"])[1] is False  # changed text
    assert cached_embed(lm, TEXTS[::-1])[1] is False  # order matters
    assert cached_embed(lm, TEXTS, layer=0)[1] is False  # another layer
    assert cached_embed(lm, TEXTS, max_length=2)[1] is False
    lm_mean = dataclasses.replace(lm, head_pooling="mean")
    assert cached_embed(lm_mean, TEXTS)[1] is False  # another pooling
    lm_q = dataclasses.replace(lm, spec=lm.spec.with_options(query_prompt="q: "))
    assert cached_embed(lm_q, TEXTS, kind="query")[1] is False  # another prompt
    assert cached_embed(lm_q, TEXTS, kind="doc")[1] is True  # no doc prompt: same texts as before
    assert cached_embed(lm, TEXTS, use_cache=False)[1] is False


def test_content_hash_respects_boundaries() -> None:
    assert content_hash(["ab", "c"]) != content_hash(["a", "bc"])
    assert content_hash(["x"]) == content_hash(["x"])


def _cache_file(lm, texts) -> Path:
    return cache_dir() / f"{embedding_key(lm, texts, kind='doc', layer=-1, max_length=None)}.npz"


def test_garbage_cache_file_is_recomputed(lm, cache: Path) -> None:
    good, _ = cached_embed(lm, TEXTS)
    path = _cache_file(lm, TEXTS)
    assert path.is_file()
    path.write_bytes(b"this is not an npz file")
    again, hit = cached_embed(lm, TEXTS)
    assert hit is False
    np.testing.assert_allclose(again.heads, good.heads, rtol=1e-6)
    assert cached_embed(lm, TEXTS)[1] is True  # rewritten


def test_cache_with_wrong_row_count_is_recomputed(lm, cache: Path) -> None:
    cached_embed(lm, TEXTS)
    path = _cache_file(lm, TEXTS)
    np.savez(path, standard=np.zeros((1, 16), np.float32), heads=np.zeros((1, 2, 8), np.float32))
    emb, hit = cached_embed(lm, TEXTS)
    assert hit is False and len(emb) == 3


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_damaged_zip_cache_file_is_recomputed(lm, cache: Path, damage: str) -> None:
    good, _ = cached_embed(lm, TEXTS)
    path = _cache_file(lm, TEXTS)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    again, hit = cached_embed(lm, TEXTS)
    assert hit is False
    np.testing.assert_allclose(again.heads, good.heads, rtol=1e-6)
