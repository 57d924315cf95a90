"""The strategy registry: ids, aliases, labels, the uniform search adapter against the engine's own functions, and
the registry as the one list every other module reads."""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core import strategy_registry as reg
from mrag_core.extraction import Embeddings
from mrag_core.sentence_round_robin import LABEL, sentence_round_robin
from mrag_core.strategies import fusion_mrag_search, fusion_search, mrag_search, split_search, standard_search
from mrag_core.strategy_registry import (
    PRESELECTED,
    RECOMMENDED,
    STRATEGIES,
    QueryInputs,
    UnknownStrategyError,
    canonical,
    label_of,
    parse_strategies,
    resolve,
)
from tests.mrag_core.test_sentence_round_robin import index, parts  # noqa: F401 - the hand-computed example


def test_ids_aliases_and_labels():
    assert RECOMMENDED == "sentence-round-robin"
    assert resolve("recommended") is STRATEGIES["sentence-round-robin"]
    assert resolve(" Recommended ") is resolve("sentence-round-robin")
    assert canonical("recommended") == "sentence-round-robin" and canonical("mrag") == "mrag"
    assert label_of("recommended") == LABEL == "Sentence round-robin (Standard + MRAG per sentence)"
    assert label_of("standard") == "Standard RAG" and label_of("not-a-strategy") == "not-a-strategy"
    assert PRESELECTED == ("standard", "mrag", "sentence-round-robin")
    assert "recommended" in reg.names() and "sentence-round-robin" in reg.names()


def test_needs_llm_and_kinds():
    llm = [s.id for s in STRATEGIES.values() if s.needs_llm]
    assert llm == ["multi-query", "multi-query-mrag", "hyde", "hyde-mrag", "intent", "intent-mrag"]
    assert not resolve("recommended").needs_llm and resolve("recommended").kind == "parts"
    assert [s.id for s in STRATEGIES.values() if s.compare] == [
        "standard", "mrag", "split", "fusion", "fusion-mrag", "sentence-round-robin"]
    assert {s.kind for s in STRATEGIES.values()} == set(reg.KINDS)


def test_unknown_names_are_refused_with_the_valid_ones():
    with pytest.raises(UnknownStrategyError, match=r"unknown strategy 'bm25': use one of standard, mrag, .*"
                                                   r"\(aliases: recommended = sentence-round-robin\)"):
        resolve("bm25")
    with pytest.raises(UnknownStrategyError, match=r"unknown strategies \['bm25', 'x'\]"):
        parse_strategies("standard,bm25,x")
    with pytest.raises(UnknownStrategyError, match="no strategy given"):
        parse_strategies(" , ")


def test_parse_keeps_the_names_as_given_or_gives_ids():
    assert parse_strategies("standard, mrag,recommended,mrag") == ["standard", "mrag", "recommended"]
    assert parse_strategies(["standard", "recommended"], keep_names=False) == ["standard", "sentence-round-robin"]


def test_the_adapter_equals_the_engine_functions(index):  # noqa: F811
    rng = np.random.default_rng(3)
    q = Embeddings(np.array([[1, 2, 0.5, 0]], np.float32), np.array([[[0.6, 0.8], [0.2, 1]]], np.float32))
    subs = Embeddings(rng.normal(size=(2, 4)).astype(np.float32), rng.normal(size=(2, 2, 2)).astype(np.float32))
    inputs = QueryInputs(q, subqueries=subs, parts=parts(), part_texts=("first", "second"))
    expect = {
        "standard": standard_search(index, q, 3)[0],
        "mrag": mrag_search(index, q, 3, 2)[0],
        "mrag-decay": mrag_search(index, q, 3, 2, "decay")[0],
        "split": split_search(index, q, 3, 2)[0],
        "split-weighted": split_search(index, q, 3, 2, "importance")[0],
        "fusion": fusion_search(index, subs, 3, c=3),
        "fusion-mrag": fusion_mrag_search(index, subs, 3, c=3),
        "recommended": sentence_round_robin(index, parts(), 3, 2),
    }
    for name, want in expect.items():
        got = resolve(name).search(index, inputs, 3, 2)
        assert got.strategy == resolve(name).id
        assert (got.doc_ids, got.scores) == (want.doc_ids, want.scores), name
    # the hand-computed example at c = 3: [3, 0, 2, 1] (tests/mrag_core/test_sentence_round_robin.py)
    assert resolve("recommended").search(index, inputs, 4, 3).doc_ids == [3, 0, 2, 1]
    with pytest.raises(ValueError, match="needs the query's parts"):
        resolve("recommended").search(index, QueryInputs(q), 3, 2)
    with pytest.raises(ValueError, match="needs the hyde expansion"):
        resolve("hyde").search(index, QueryInputs(q), 3, 2)


def test_every_module_reads_the_registry():
    from mrag_core.evaluation import AUTHORS_FILE_NAMES, NAMED_STRATEGIES
    from mrag_core.llm_strategies import LLM_STRATEGIES, LLM_STRATEGY_LABELS

    assert NAMED_STRATEGIES is STRATEGIES
    assert list(LLM_STRATEGIES) == [s.id for s in STRATEGIES.values() if s.needs_llm]
    assert LLM_STRATEGY_LABELS["hyde-mrag"] == STRATEGIES["hyde-mrag"].label
    assert AUTHORS_FILE_NAMES == {"standard": "standard-rag", "mrag-decay": "mrag-strategy-decay",
                                  "mrag-distance": "mrag-strategy-distance", "split": "split-rag",
                                  "split-weighted": "split-rag-strategy-weighted", "fusion": "fusion-rag"}
