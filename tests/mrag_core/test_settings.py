"""RetrievalSettings: defaults written once, checks, and the stored dict round trip (old run configs included)."""

from __future__ import annotations

import json

import pytest

from mrag_core import settings as st
from mrag_core.settings import RetrievalSettings


def test_defaults_are_the_named_constants():
    s = RetrievalSettings()
    assert (s.model, s.layer, s.pooling, s.c, s.k_max, s.w, s.variant, s.seed, s.strategies, s.backend) == (
        "minilm", -1, None, 32, 32, 2.0, "importance", 0, ("standard", "mrag"), "torch")
    assert (st.DEFAULT_C, st.DEFAULT_K_MAX, st.DEFAULT_W) == (32, 32, 2.0)
    assert RetrievalSettings.field_names() == ("model", "layer", "pooling", "c", "k_max", "w", "variant", "seed",
                                               "strategies", "backend")


def test_round_trip_through_json():
    s = RetrievalSettings(model="smollm2", layer=3, pooling="mean", c=8, k_max=6, w=1.5, variant="decay", seed=7,
                          strategies=["standard", "recommended"], backend="faiss-hnsw")
    assert s.strategies == ("standard", "recommended")  # a list is kept as a tuple: frozen, hashable
    stored = json.loads(json.dumps(s.to_dict()))
    assert stored["strategies"] == ["standard", "recommended"]
    assert RetrievalSettings.from_dict(stored) == s
    assert hash(s) == hash(RetrievalSettings.from_dict(stored))
    with pytest.raises(AttributeError):
        s.c = 4  # type: ignore[misc]
    assert s.with_(c=4).c == 4 and s.c == 8


def test_an_old_stored_run_config_still_loads():
    """A run's config as run_evaluation stored it before this class (no backend, no seed inside, extra keys, c capped
    at the corpus size, the layer resolved from -1)."""
    old = {"model": "minilm", "layer": 5, "layer_requested": -1, "pooling": "last", "strategies": ["standard", "mrag"],
           "variant": "importance", "c": 12, "c_requested": 32, "k_max": 12, "w": 2.0, "n_queries": 24,
           "corpus_version": 3, "queries": {"1": "1:abc"}, "llm": {"n_rewrites": 4}}
    s = RetrievalSettings.from_dict(old, seed=3)
    assert (s.layer, s.c, s.k_max, s.seed, s.pooling, s.backend) == (5, 12, 12, 3, "last", "torch")
    asked = RetrievalSettings.from_dict(old, requested=True)
    assert (asked.layer, asked.c, asked.seed) == (-1, 32, 0)
    # an older one still: no w, no variant, no pooling; a w of 0 is kept (not taken for missing)
    assert RetrievalSettings.from_dict({"model": "minilm", "layer": 2, "strategies": ["mrag"], "c": 4,
                                        "k_max": 4}) == RetrievalSettings(layer=2, strategies=("mrag",), c=4, k_max=4)
    assert RetrievalSettings.from_dict({"w": 0}).w == 0.0
    assert RetrievalSettings.from_dict(None) == RetrievalSettings() == RetrievalSettings.from_dict({})


def test_check_names_the_bad_value():
    assert RetrievalSettings().check() == RetrievalSettings()
    for bad, msg in [(dict(c=0), "c and k_max must be at least 1"), (dict(w=-1), "non-negative"),
                     (dict(variant="vote"), "unknown voting variant 'vote'"), (dict(backend="x"), "unknown backend"),
                     (dict(pooling="max"), "unknown pooling"), (dict(strategies=("bm25",)), "unknown strategies")]:
        with pytest.raises(ValueError, match=msg):
            RetrievalSettings(**bad).check()
