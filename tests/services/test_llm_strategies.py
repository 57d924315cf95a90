"""LLM-assisted strategies: RRF arithmetic worked by hand, per-k evaluation, expansions against a real
OpenAI-compatible HTTP server (fixed answers, a malformed one, the cache, token accounting)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mrag_core.corpus_index import CorpusIndex
from mrag_core.evaluation import NAMED_STRATEGIES, QueryCase, evaluate, set_ratios
from mrag_core.importance import HeadImportance
from mrag_core.llm_strategies import LLM_STRATEGIES, LLMOptions, cost_summary, families_for, family_of, llm_search
from services.llm.cache import MemoryCache
from services.llm.client import LLMClient
from services.llm_strategies import expand_many
from tests.support.angles import angle_embeddings
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content, fake_openai, last_user_message
from tests.support.random_embeddings import random_embeddings

__all__ = ["fake_openai"]  # re-exported fixture

torch.set_num_threads(1)


# Documents as angles in (head 0, head 1); the standard vector is their concatenation, so its cosine
# with a query is the mean of the two heads' cosines.
DOCS = angle_embeddings([[0, 80], [20, 0], [50, 40], [90, 10]])
LABELS = ["a", "b", "a", "c"]
QUERY = angle_embeddings([[90, 90]])
# Three rewrites. Standard rankings worked out by hand from the mean cosines:
#   r1 = (0, 0):   d1 .970, d2 .704, d0 .587, d3 .492  -> [1, 2, 0, 3]
#   r2 = (90, 90): d2 .704, d3 .587, d0 .492, d1 .171  -> [2, 3, 0, 1]
#   r3 = (0, 80):  d0 1,    d2 .704, d1 .557, d3 .171  -> [0, 2, 1, 3]
REWRITES = angle_embeddings([[0, 0], [90, 90], [0, 80]])


@pytest.fixture(scope="module")
def index() -> CorpusIndex:
    imp = HeadImportance(np.ones(2), np.ones(2), np.array([3.0, 1.0]))
    return CorpusIndex.build(DOCS, device="cpu", head_importance_override=imp)


def test_multi_query_rrf_hand_worked(index) -> None:
    res = llm_search(index, "multi-query", QUERY, REWRITES, k=4, c=4)
    assert res.strategy == "multi-query"
    assert res.sub_rankings == [[1, 2, 0, 3], [2, 3, 0, 1], [0, 2, 1, 3]]
    # RRF, 1/(60 + rank), rank from 1:
    #   d2: ranks 2, 1, 2 -> 1/62 + 1/61 + 1/62 = 0.0486516
    #   d0: ranks 3, 3, 1 -> 1/63 + 1/63 + 1/61 = 0.0481394
    #   d1: ranks 1, 4, 3 -> 1/61 + 1/64 + 1/63 = 0.0478915
    #   d3: ranks 4, 2, 4 -> 1/64 + 1/62 + 1/64 = 0.0473790
    assert res.doc_ids == [2, 0, 1, 3]
    np.testing.assert_allclose(res.scores, [1 / 62 + 1 / 61 + 1 / 62, 2 / 63 + 1 / 61,
                                            1 / 61 + 1 / 64 + 1 / 63, 2 / 64 + 1 / 62], rtol=1e-12)
    np.testing.assert_allclose(res.scores, [0.0486516, 0.0481394, 0.0478915, 0.0473790], atol=1e-7)
    # k cuts the fused list
    assert llm_search(index, "multi-query", QUERY, REWRITES, k=2, c=4).doc_ids == [2, 0]


def test_multi_query_per_k_evaluation_hand_worked(index) -> None:
    # G = {0, 3} (categories a, c). Per k, each rewrite is searched to depth k, fused, first k kept:
    #   k=1: [1] [2] [0] all 1/61 -> first seen: [1]                      RSR 0,  CSR 0
    #   k=2: d2 1/62+1/61+1/62, d1 1/61, d0 1/61, d3 1/62 -> [2, 1]        RSR 0,  CSR .5
    #   k=3: d2 .04865, d0 2/63+1/61 = .04814, d1 1/61+1/63 = .03227, d3 1/62 -> [2, 0, 1]  RSR .5, CSR .5
    #   k=4: [2, 0, 1, 3]                                                  RSR 1,  CSR 1
    case = QueryCase((0, 3), 2, (), {"multi-query": (0, 1, 2)})
    res = evaluate(index, QUERY, [case], LABELS, ["multi-query"], k_max=4, c=4, expansions=REWRITES)
    sr = res.strategies["multi-query"]
    np.testing.assert_allclose(sr.rsr, [[0, 0, .5, 1]])
    np.testing.assert_allclose(sr.csr, [[0, .5, .5, 1]])
    assert sr.retrieved == [[2, 0, 1, 3]]


def test_hyde_fuses_with_the_query_or_not(index) -> None:
    passage = REWRITES.take([0])  # standard ranking [1, 2, 0, 3]; the query (90, 90) ranks [2, 3, 0, 1]
    alone = llm_search(index, "hyde", QUERY, passage, k=4, c=4, options=LLMOptions(hyde_with_query=False))
    assert alone.doc_ids == [1, 2, 0, 3] and alone.sub_rankings == [[1, 2, 0, 3]]
    fused = llm_search(index, "hyde", QUERY, passage, k=4, c=4)  # default: fused with the query
    # d2 1/61 + 1/62, d1 1/64 + 1/61, d3 1/62 + 1/64, d0 2/63
    assert LLMOptions().hyde_with_query is True
    assert fused.sub_rankings == [[2, 3, 0, 1], [1, 2, 0, 3]]
    assert fused.doc_ids == [2, 1, 3, 0]
    np.testing.assert_allclose(fused.scores, [1 / 61 + 1 / 62, 1 / 64 + 1 / 61, 1 / 62 + 1 / 64, 2 / 63])
    # evaluate() follows the same rule per k
    case = QueryCase((1,), 1, (), {"hyde": (0,)})
    on = evaluate(index, QUERY, [case], LABELS, ["hyde"], k_max=4, c=4, expansions=passage)
    off = evaluate(index, QUERY, [case], LABELS, ["hyde"], k_max=4, c=4, expansions=passage, hyde_with_query=False)
    assert on.strategies["hyde"].retrieved == [[2, 1, 3, 0]]
    assert off.strategies["hyde"].retrieved == [[1, 2, 0, 3]]
    np.testing.assert_allclose(off.strategies["hyde"].rsr, [[1, 1, 1, 1]])
    # k=1: [2] and [1] tie at 1/61, the query's list comes first -> [2]: doc 1 not found yet
    np.testing.assert_allclose(on.strategies["hyde"].rsr, [[0, 1, 1, 1]])


def test_every_llm_strategy_per_k_matches_its_search_definition() -> None:
    rng = np.random.default_rng(5)
    n = 30
    docs = random_embeddings(rng, n, 12, 3, 4)
    qs = random_embeddings(rng, 2, 12, 3, 4)
    texts = random_embeddings(rng, 7, 12, 3, 4)
    labels = [f"L{i % 5}" for i in range(n)]
    rows = [
        {"multi-query": (0, 1, 2), "hyde": (3,), "intent": (4, 5)},
        {"multi-query": (6,), "hyde": (2,), "intent": ()},
    ]
    cases = [QueryCase((1, 7, 20), 3, (), rows[0]), QueryCase((4, 9), 2, (), rows[1])]
    index = CorpusIndex.build(docs, device="cpu", pairs_per_doc=4)
    k_max = 6
    names = list(LLM_STRATEGIES)
    res = evaluate(index, qs, cases, labels, names, k_max=k_max, c=4, expansions=texts)
    for name in names:
        fam = family_of(name)
        for qi, case in enumerate(cases):
            sub = texts.take(list(case.expansion_rows[fam]))
            for k in range(1, k_max + 1):
                got = llm_search(index, name, qs.take([qi]), sub, k, c=k).doc_ids
                assert (res.strategies[name].rsr[qi, k - 1], res.strategies[name].csr[qi, k - 1]) == pytest.approx(
                    set_ratios(got, case.relevant, labels)), (name, qi, k)
            assert res.strategies[name].retrieved[qi] == got
    # no texts (intent of query 1): nothing retrieved
    assert res.strategies["intent"].retrieved[1] == [] and res.strategies["intent"].rsr[1].sum() == 0
    with pytest.raises(ValueError, match="expansion"):
        evaluate(index, qs, cases, labels, ["intent"], k_max=3)


def test_names_and_families() -> None:
    assert set(LLM_STRATEGIES) <= set(NAMED_STRATEGIES)
    assert [NAMED_STRATEGIES[n].kind for n in LLM_STRATEGIES] == ["fusion", "fusion-mrag"] * 3
    assert families_for(["standard", "intent-mrag", "multi-query", "hyde-mrag", "multi-query-mrag"]) == [
        "multi-query", "hyde", "intent"]
    assert families_for(["standard", "fusion"]) == []
    assert LLMOptions.from_dict(LLMOptions(5, 2, False).to_dict()) == LLMOptions(5, 2, False)
    assert LLMOptions.from_dict(None) == LLMOptions()


# --------------------------------------------------------------------------- against the fake endpoint

REWRITE_ANSWER = "1. moon landing history\n\n2. bread baking with yeast\n3) apollo program\n"
HYDE_ANSWER = "Passage: The Apollo 11 mission landed on the Moon in 1969 while bakers kept baking bread."
INTENT_ANSWER = json.dumps({"answers": [
    {"answer": "Apollo", "statements": ["Apollo 11 landed on the Moon.", "Neil Armstrong walked on the Moon."]},
    {"answer": "Bread", "statements": ["Bread rises with yeast."]}]})


def fixed(prompt: str) -> Reply:
    """Fixed answers by prompt; the question 'broken ...' gets an unusable answer (numbering only)."""
    if "broken" in prompt:
        return Reply.ok("1.\n\n2.\n", prompt_tokens=11, completion_tokens=1)
    if "diverse search queries" in prompt:
        return Reply.ok(REWRITE_ANSWER, prompt_tokens=40, completion_tokens=12)
    if "encyclopedia" in prompt:
        return Reply.ok(HYDE_ANSWER, prompt_tokens=30, completion_tokens=20)
    return Reply.ok(INTENT_ANSWER, prompt_tokens=50, completion_tokens=25)


def test_expansions_fixed_answers_malformed_cache_and_tokens(fake_openai) -> None:
    server: FakeOpenAIServer = fake_openai(by_content(fixed))
    client = LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)
    cache = MemoryCache()
    questions = ["moon landing and bread", "broken question"]
    opts = LLMOptions(n_rewrites=3, n_answers=2)
    mq = expand_many(client, "multi-query", questions, opts, cache)
    assert mq[0].ok and mq[0].texts == ("moon landing history", "bread baking with yeast", "apollo program")
    assert (mq[0].prompt_tokens, mq[0].completion_tokens, mq[0].cached) == (40, 12, False)
    assert not mq[1].ok and mq[1].texts == () and "unusable LLM answer" in (mq[1].error or "")
    assert (mq[1].prompt_tokens, mq[1].completion_tokens) == (11, 1)  # the rejected answer still cost tokens
    hy = expand_many(client, "hyde", questions[:1], opts, cache)
    assert hy[0].texts == ("The Apollo 11 mission landed on the Moon in 1969 while bakers kept baking bread.",)
    it = expand_many(client, "intent", questions[:1], opts, cache)
    assert it[0].texts == ("Apollo 11 landed on the Moon.", "Neil Armstrong walked on the Moon.",
                           "Bread rises with yeast.")
    assert "Give 2 distinct plausible answers" in last_user_message(server.requests[-1])
    assert len(server.requests) == 4
    usage = cost_summary(o.record() for o in [*mq, *hy, *it])
    served = [(40, 12), (11, 1), (30, 20), (50, 25)]
    assert usage["spent_tokens"] == usage["tokens"] == sum(p + c for p, c in served)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (131, 58)
    assert (usage["expansions"], usage["failed"], usage["cached"], usage["requests"]) == (4, 1, 0, 4)

    # Second time: the good answers come from the cache (no request); the unusable one was not cached.
    again = expand_many(client, "multi-query", questions, opts, cache)
    assert again[0].cached and again[0].latency_s == 0.0 and again[0].texts == mq[0].texts
    assert len(server.requests) == 5  # only "broken question" asked again
    hy2 = expand_many(client, "hyde", questions[:1], opts, cache)
    it2 = expand_many(client, "intent", questions[:1], opts, cache)
    assert len(server.requests) == 5
    usage2 = cost_summary(o.record() for o in [again[0], *hy2, *it2])
    assert usage2["spent_tokens"] == 0 and usage2["cached"] == 3 and usage2["tokens"] == 52 + 50 + 75


def test_transport_failure_is_a_failed_outcome(fake_openai) -> None:
    server = fake_openai(lambda body: Reply.error(500, "down"))
    client = LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)
    out = expand_many(client, "hyde", ["anything at all"], LLMOptions())
    assert not out[0].ok and out[0].error and "500" in out[0].error
    assert out[0].record()["error"] == out[0].error
