"""Compare workflow: marks, metrics, sub-query sources, one forward pass, and the MRAG evidence
matrix agreeing with the engine's vote arithmetic (sum of contributions = score, s_i * 2^-rank)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import db
from mrag_core.models.loader import model_from_module
from mrag_core.strategies import mrag_search
from services.workflows import compare as cmpmod
from services.workflows.compare import (
    MARK_AGAIN,
    MARK_CATEGORY,
    MARK_EXACT,
    MARK_MISS,
    compare,
    embed_query,
    head_aspects,
    mark_rows,
    resolve_subqueries,
    sentence_split,
)
from services.workflows.indexing import build_embedding_run, load_corpus_index, model_for_run
from tests.support.spies import record_texts
from tests.support.tiny_tokenizer import WordTokenizer

torch.set_num_threads(1)
VOCAB = 211
CATS = ("alpha", "beta", "gamma", "delta")
WORDS = ("river bread quantum violin glacier tax harbor orbit fern saddle lantern copper meadow "
         "opera cipher tide falcon marble pepper engine").split()


@pytest.fixture(scope="module")
def lm():
    from transformers import BertConfig, BertModel

    torch.manual_seed(11)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=48, num_hidden_layers=2, num_attention_heads=6,
                     intermediate_size=64, max_position_embeddings=128)
    return model_from_module(
        BertModel(cfg).eval(), WordTokenizer(VOCAB, specials=True, lowercase=True), name="tiny-bert"
    )


@pytest.fixture
def setup(tmp_path: Path, lm):
    store = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    c = db.create_corpus(store, "tiny")
    docs = []
    for i in range(32):
        rng = np.random.default_rng(i)
        docs.append({"title": f"Doc {i}", "text": " ".join(rng.choice(WORDS, size=5 + i % 7)) + f" n{i}",
                     "label": CATS[i % 4]})
    db.add_documents(store, c.id, docs)
    run = build_embedding_run(store, c.id, lm, layer=-1, batch_size=16).run
    bundle = load_corpus_index(store, run.id)
    yield store, c.id, run, bundle
    store.close()


def test_evidence_matrix_agrees_with_vote_arithmetic(setup, lm):
    store, _, run, bundle = setup
    lmr = model_for_run(lm, run)
    text = "river bread quantum violin glacier tax harbor"
    q, subs, _ = embed_query(lmr, run.layer, text)
    out = compare(bundle, q, subs, strategies=("mrag",), k=6, c=5, variant="importance")
    ev = out.evidence
    res = out.outcomes["mrag"].retrieved
    s = bundle.index.head_importance.score
    assert ev is not None and ev.rank.shape == (6, 6) and ev.docs == res.doc_ids
    # sum of contributions per document equals its MRAG score
    np.testing.assert_allclose(ev.contribution.sum(axis=0), res.scores, rtol=1e-12)
    # each contribution is s_h * 2^-rank where present, 0 elsewhere
    present = ev.rank >= 0
    expect = np.where(present, s[:, None] * np.exp2(-np.where(present, ev.rank, 0)), 0.0)
    np.testing.assert_allclose(ev.contribution, expect, rtol=1e-12)
    # the matrix agrees with the raw per-head lists: head h lists doc d at rank p
    for h in range(6):
        for j, d in enumerate(ev.docs):
            listed = [p for p, x in enumerate(res.space_ids[h, :5]) if x == d]
            assert (listed[0] if listed else -1) == ev.rank[h, j]
    # recomputing the vote from the head lists gives the same ranking
    totals: dict[int, float] = {}
    for h in range(6):
        for p, d in enumerate(res.space_ids[h, :5]):
            totals[int(d)] = totals.get(int(d), 0.0) + s[h] * 2.0 ** -p
    best = sorted(totals, key=lambda d: (-totals[d], d))[:6]
    assert best == ev.docs
    # heads_for lists exactly the heads with a rank, biggest vote first
    hs = ev.heads_for(0)
    assert set(hs) == set(np.nonzero(present[:, 0])[0].tolist())
    assert [ev.contribution[h, 0] for h in hs] == sorted((ev.contribution[h, 0] for h in hs), reverse=True)
    # the stored importance drives the vote (same as the engine's mrag_search on that index)
    direct = mrag_search(bundle.index, q, 6, 5, "importance")[0]
    assert direct.doc_ids == res.doc_ids


def test_marks_and_metrics_with_ground_truth(setup, lm):
    store, _, run, bundle = setup
    labels = bundle.labels
    # rows 0 (alpha) and 1 (beta) are the ground truth
    marks = mark_rows([0, 4, 8, 2, 1, 5], labels, [0, 1])
    assert marks == [MARK_EXACT, MARK_AGAIN, MARK_AGAIN, MARK_MISS, MARK_EXACT, MARK_AGAIN]
    assert mark_rows([4, 0], labels, [0, 1]) == [MARK_CATEGORY, MARK_EXACT]
    assert mark_rows([4, 0], labels, []) == ["", ""]

    lmr = model_for_run(lm, run)
    gt_ids = [bundle.doc_ids[0], bundle.doc_ids[1]]
    doc_texts = [r.text for r in db.get_documents(store, gt_ids)]
    query = f"{doc_texts[0]}.\n{doc_texts[1]}."  # two blocks: two sentences (the texts are lower case)
    subq, source = resolve_subqueries(query)
    assert source == "sentences" and len(subq) == 2
    q, subs, _ = embed_query(lmr, run.layer, query, subq)
    out = compare(bundle, q, subs, k=4, c=8, ground_truth=gt_ids, subqueries=subq, subquery_source=source)
    assert list(out.outcomes) == ["standard", "mrag", "split", "fusion", "fusion-mrag"]
    for o in out.outcomes.values():
        assert len(o.rows) == 4 and [r.rank for r in o.rows] == [1, 2, 3, 4]
        found = {r.doc_id for r in o.rows} & set(gt_ids)
        assert o.rsr == pytest.approx(len(found) / 2)
        cats = {r.category for r in o.rows} & {"alpha", "beta"}
        assert o.csr == pytest.approx(len(cats) / 2)
        assert o.weighted == pytest.approx((2 * o.rsr + o.csr) / 3)
        assert all(r.doc_id == bundle.doc_ids[r.row] for r in o.rows)
    # Fusion with each sub-query being one GT document's text finds both documents.
    assert out.outcomes["fusion"].rsr == 1.0
    assert sum(r.mark == MARK_EXACT for r in out.outcomes["fusion"].rows) == 2
    assert out.outcomes["fusion"].retrieved.sub_rankings[0][0] == 0  # sub-query 1 is doc row 0's text
    aspects = out.aspects
    assert len(aspects) == 6 and all(set(a.gt_categories) <= {"alpha", "beta"} for a in aspects)
    res = out.outcomes["mrag"].retrieved
    for a in aspects:
        for row, p in a.gt_docs:
            assert res.space_ids[a.head, p] == row and row in (0, 1)
    assert head_aspects(res, bundle.index.head_importance.score, bundle.labels, [0, 1])[0].head == 0


def test_one_forward_pass_for_query_and_subqueries(setup, lm, monkeypatch):
    store, _, run, bundle = setup
    calls = record_texts(monkeypatch, cmpmod, "embed_texts")
    q, subs, _ = embed_query(model_for_run(lm, run), run.layer, "main query", ["sub one", "sub two", "sub three"])
    assert calls == [["main query", "sub one", "sub two", "sub three"]]
    assert len(q) == 1 and len(subs) == 3
    # the split is positional: the query row equals a lone embedding of the query
    alone, _, _ = embed_query(model_for_run(lm, run), run.layer, "main query")
    np.testing.assert_allclose(q.heads, alone.heads, rtol=1e-4, atol=1e-5)


def test_subquery_sources():
    assert resolve_subqueries("A. B c.", ["x", " ", "y"]) == (["x", "y"], "stored")
    # the recommended strategy's sentences (mrag_core.query_parts): abbreviations kept, fragments joined
    assert resolve_subqueries("The keeper lit the lamp. A storm hit the coast? Dr. Ada Lovelace wrote it!", None) == (
        ["The keeper lit the lamp.", "A storm hit the coast?", "Dr. Ada Lovelace wrote it!"], "sentences")
    assert resolve_subqueries("One thing. Another thing? Third!", None) == (
        ["One thing. Another thing? Third!"], "sentences")
    assert resolve_subqueries("no punctuation here", []) == (["no punctuation here"], "sentences")
    assert sentence_split("Dr. Who\n\nnext line") == ["Dr. Who", "next line"]
    with pytest.raises(ValueError, match="no LLM"):
        resolve_subqueries("x", None, prefer="llm")


def test_llm_subqueries_through_fake_endpoint(tmp_path):
    from services.llm.client import LLMClient
    from services.workflows.llm_cache import StoreLLMCache
    from tests.support.openai_server import FakeOpenAIServer

    store = db.open_store(f"sqlite:///{tmp_path / 'c.db'}")
    with FakeOpenAIServer(lambda req: "lighthouse history\nfrench cheese\n") as server:
        client = LLMClient(server.llm_config())
        cache = StoreLLMCache(store)
        subs, source = resolve_subqueries("Tell me about lighthouses and cheese.", [], llm_client=client,
                                          llm_cache=cache, n=2)
        assert source == "llm" and subs == ["lighthouse history", "french cheese"]
        n_requests = len(server.requests)
        again, _ = resolve_subqueries("Tell me about lighthouses and cheese.", [], llm_client=client,
                                      llm_cache=cache, n=2)
        assert again == subs and len(server.requests) == n_requests  # served from the store cache
    store.close()


def test_llm_strategies_side_by_side(setup, lm, monkeypatch):
    from mrag_core.llm_strategies import LLM_STRATEGIES
    from services.llm.client import LLMClient
    from services.workflows.compare import embed_query_and_texts, resolve_expansions
    from services.workflows.llm_cache import StoreLLMCache
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    store, _, run, bundle = setup
    gt_ids = [bundle.doc_ids[0], bundle.doc_ids[1]]
    doc_texts = [r.text for r in db.get_documents(store, gt_ids)]
    query = "which documents talk about rivers and violins"

    def answer(prompt: str) -> Reply:
        if "diverse search queries" in prompt:  # the rewrites are the two ground-truth documents' texts
            return Reply.ok(f"1. {doc_texts[0]}\n2. {doc_texts[1]}", prompt_tokens=40, completion_tokens=14)
        if "encyclopedia" in prompt:
            return Reply.ok(f"<b>Passage:</b> {doc_texts[0]} and more words here.", prompt_tokens=30,
                            completion_tokens=12)
        return Reply.ok("1.\n2.", prompt_tokens=20, completion_tokens=5)  # unusable intent answer (numbering only)

    with FakeOpenAIServer(by_content(answer)) as server:
        client = LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)
        cache = StoreLLMCache(store)
        exp = resolve_expansions(client, query, ["multi-query", "hyde", "intent"], llm_cache=cache)
        assert len(server.requests) == 3
        assert exp["multi-query"].texts == tuple(doc_texts) and exp["multi-query"].tokens == 54
        assert exp["hyde"].ok and not exp["intent"].ok and "unusable" in exp["intent"].error
        again = resolve_expansions(client, query, ["multi-query", "hyde"], llm_cache=cache)
        assert len(server.requests) == 3 and again["multi-query"].cached and again["hyde"].cached

    calls = record_texts(monkeypatch, cmpmod, "embed_texts")
    ok = {f: o for f, o in exp.items() if o.ok}
    lmr = model_for_run(lm, run)
    q, subs, emb, _ = embed_query_and_texts(lmr, run.layer, query, ["sub a"], {f: o.texts for f, o in ok.items()})
    assert calls == [[query, "sub a", *doc_texts, exp["hyde"].texts[0]]]  # one forward pass
    assert len(q) == 1 and len(subs) == 1 and len(emb["multi-query"]) == 2 and len(emb["hyde"]) == 1
    names = [n for n in LLM_STRATEGIES if not n.startswith("intent")]
    out = compare(bundle, q, subs, strategies=["standard", *names], k=4, c=8, ground_truth=gt_ids,
                  expansions=ok, expansion_embeddings=emb)
    assert list(out.outcomes) == ["standard", *names]
    assert out.outcomes["multi-query"].label == "Multi-Query RAG" and out.outcomes["hyde-mrag"].label == "HyDE + MRAG"
    mq = out.outcomes["multi-query"]
    # each rewrite is a ground-truth document's own text: both lists start with it, RRF keeps both on top
    assert [r[0] for r in mq.retrieved.sub_rankings] == [0, 1] and mq.rsr == 1.0
    assert mq.llm is exp["multi-query"] and out.outcomes["standard"].llm is None
    assert out.outcomes["hyde"].retrieved.sub_rankings[1][0] == 0  # the query's list first, then the passage's
    assert set(out.expansions) == {"multi-query", "hyde"}
    with pytest.raises(ValueError, match="intent"):
        compare(bundle, q, subs, strategies=["intent"], k=4, expansions=exp, expansion_embeddings=emb)


def test_fusion_numbers_equal_an_evaluation_runs_at_every_k(setup, lm):
    """Compare scores Fusion RAG and Fusion MRAG as an evaluation run does at the same k (each sub-query
    searched to depth k, RRF, first k), whatever c is, so a run's per-query numbers can be opened here."""
    from mrag_core.evaluation import QueryCase, evaluate

    store, _, run, bundle = setup
    lmr = model_for_run(lm, run)
    texts = [r.text for r in db.get_documents(store, [bundle.doc_ids[i] for i in range(32)])]
    gt_rows = [(0, 5, 10), (3, 14, 25, 30)]
    k_max = 12
    for rows in gt_rows:
        query = " ".join(texts[r] for r in rows)
        subq = [f"{texts[r]} {texts[(r + 7) % 32]}" for r in rows]  # each sub-query mixes in a distractor
        q, subs, _ = embed_query(lmr, run.layer, query, subq)
        case = QueryCase(relevant=rows, n_aspects=len(rows), subquery_rows=tuple(range(len(rows))))
        res = evaluate(bundle.index, q, [case], bundle.labels, ("fusion", "fusion-mrag"), k_max=k_max, c=32,
                       subqueries=subs)
        for k in (1, 3, len(rows), 7, k_max):
            out = compare(bundle, q, subs, strategies=("fusion", "fusion-mrag"), k=k, c=32,
                          ground_truth=[bundle.doc_ids[r] for r in rows], subqueries=subq)
            for name in ("fusion", "fusion-mrag"):
                assert (out.outcomes[name].rsr, out.outcomes[name].csr) == pytest.approx(
                    (res.strategies[name].rsr[0, k - 1], res.strategies[name].csr[0, k - 1])), (name, k)
            if k == k_max:
                assert [r.row for r in out.outcomes["fusion"].rows] == res.strategies["fusion"].retrieved[0]


def test_the_recommended_alias_with_its_per_part_evidence(setup, lm):
    """``recommended`` resolves in Compare to the sentence round-robin (keyed and labelled by the registry); its list is
    the engine's, and the evidence names every part list that holds a returned document, with the MRAG heads."""
    from mrag_core.sentence_round_robin import LABEL, sentence_round_robin

    store, _, run, bundle = setup
    lmr = model_for_run(lm, run)
    query = "The river bread quantum violin glacier.\nA tax harbor orbit fern saddle."
    parts = sentence_split(query)
    assert parts == ["The river bread quantum violin glacier.", "A tax harbor orbit fern saddle."]
    q, subs, groups, _ = cmpmod.embed_query_and_texts(lmr, run.layer, query, parts=parts)
    pe = groups[cmpmod.PARTS_KEY]
    assert len(pe) == 2 and cmpmod.PARTS_KEY not in cmpmod.FUSION_STRATEGIES
    out = compare(bundle, q, subs, strategies=["standard", "recommended"], k=5, c=6, parts=pe, part_texts=parts)
    assert list(out.outcomes) == ["standard", "sentence-round-robin"]
    rec = out.outcomes["sentence-round-robin"]
    assert rec.label == LABEL == cmpmod.STRATEGY_LABELS["sentence-round-robin"]
    want = sentence_round_robin(bundle.index, pe, 5, 6, part_texts=parts)
    assert rec.retrieved.doc_ids == want.doc_ids and [r.row for r in rec.rows] == want.doc_ids
    ev = out.parts
    assert ev is not None and ev.parts == parts and ev.docs == want.doc_ids
    for j, d in enumerate(ev.docs):
        for hit in want.part_evidence[d]:
            assert ev.part_rank[hit.part, ("standard", "mrag").index(hit.view), j] == hit.rank
        # the view positions are the RRF terms' ranks: score = sum of 1 / (60 + position + 1) over the views
        pos = [int(r) for r in ev.view_rank[:, j] if r >= 0]
        assert ev.score[j] == pytest.approx(sum(1 / (61 + p) for p in pos))
        assert ev.found_by(j).startswith("s")
    first = ev.docs[0]
    line = ev.found_by(0)
    for hit in want.part_evidence[first]:
        assert f"s{hit.part + 1}: " in line
        assert (f"MRAG #{hit.rank + 1}" if hit.view == "mrag" else f"Standard #{hit.rank + 1}") in line
    with pytest.raises(ValueError, match="needs the query's parts"):
        compare(bundle, q, subs, strategies=["recommended"], k=5, c=6)
    with pytest.raises(ValueError, match="unknown strategy 'best'"):
        compare(bundle, q, subs, strategies=["best"], k=5)


def test_found_by_on_hand_values():
    from mrag_core.strategies import SpaceHit

    ev = cmpmod.PartEvidence(
        parts=["a", "b"], docs=[7], view_rank=np.array([[0], [2]]),
        part_rank=np.array([[[0], [1]], [[-1], [4]]]),
        heads=[[[SpaceHit(3, 0, 1.0), SpaceHit(0, 3, 0.125), SpaceHit(5, 1, 0.5), SpaceHit(1, 2, 0.25)]], [[]]],
        score=np.array([1 / 61 + 1 / 63]))
    assert ev.found_by(0) == "s1: Standard #1, MRAG #2 (h3 #1, h5 #2, h1 #3); s2: MRAG #5"
