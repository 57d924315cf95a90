"""Evaluation runs against a real store and the real MiniLM model."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from mrag_core.metrics import category_success_ratio, retrieval_success_ratio  # noqa: E402
from mrag_core.settings import RetrievalSettings  # noqa: E402
from services.workflows import (
    eval_comparison,  # noqa: E402
    eval_costs,  # noqa: E402
    eval_exports,  # noqa: E402
    eval_results,  # noqa: E402
    eval_sweeps,  # noqa: E402
)
from services.workflows import evaluation_runs as er  # noqa: E402

TOPICS = {
    "astronomy": ["The telescope observed a distant galaxy and its spiral arms.",
                  "A comet passed near the sun, its icy tail glowing.",
                  "Astronomers measured the orbit of a new exoplanet.",
                  "The lunar eclipse darkened the full moon for an hour."],
    "cooking": ["Knead the bread dough and let it rise for two hours.",
                "The chef seared the steak in a hot cast iron pan.",
                "Simmer tomatoes with garlic and basil for a pasta sauce.",
                "Whisk eggs and sugar to bake a fluffy sponge cake."],
    "football": ["The striker scored a late goal to win the cup final.",
                 "The goalkeeper saved a penalty in the shootout.",
                 "The coach changed tactics at half time and the team pressed high.",
                 "Fans filled the stadium for the derby match."],
}


@pytest.fixture(scope="module")
def lm():
    import torch

    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    return load_model("minilm")



@pytest.fixture
def setup(store):
    corpus = db.create_corpus(store, "Topics")
    docs = [{"title": f"{cat} {i}", "text": text, "label": cat}
            for cat, texts in TOPICS.items() for i, text in enumerate(texts)]
    ids = db.add_documents(store, corpus.id, docs).document_ids
    by_title = dict(zip([d["title"] for d in docs], ids))
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [
        {"text": "a comet with a glowing tail", "ground_truth": [by_title["astronomy 1"]]},
        {"text": "bread dough rising", "ground_truth": [by_title["cooking 0"]]},
        {"text": "penalty saved by the goalkeeper", "ground_truth": [by_title["football 1"]]},
        {"text": "A galaxy seen through a telescope while a striker scores a goal",
         "ground_truth": [by_title["astronomy 0"], by_title["football 0"]],
         "fusion": ["galaxy telescope", "striker goal"]},
        {"text": "Eclipse of the moon during a pasta dinner with tomato sauce",
         "ground_truth": [by_title["astronomy 3"], by_title["cooking 2"]],
         "fusion": ["lunar eclipse", "tomato pasta sauce"]},
        {"text": "Fans at the derby eating cake", "ground_truth": [by_title["football 3"], by_title["cooking 3"]]},
        {"text": "", "status": "failed", "error": "LLM failed"},
    ])
    labels = {d: cat for d, cat in zip(ids, [d["label"] for d in docs])}
    return corpus, qs, labels


def _recompute(results, queries, labels, k_max, prefix=True):
    """RSR / CSR with mrag_core.metrics on the stored retrieved ids."""
    gt = {q.id: q.ground_truth for q in queries}
    for r in results:
        g = gt[r.query_id]
        assert len(r.retrieved) == k_max and len(r.rsr) == len(r.csr) == k_max
        ks = range(1, k_max + 1) if prefix else [k_max]
        for k in ks:
            top = r.retrieved[:k]
            assert r.rsr[k - 1] == pytest.approx(retrieval_success_ratio(top, g))
            assert r.csr[k - 1] == pytest.approx(
                category_success_ratio([labels[d] for d in top], [labels[d] for d in g]))


@pytest.mark.every_backend
def test_run_stores_metrics_equal_to_recomputation(store, setup, lm) -> None:
    corpus, qs, labels = setup
    stages: list[str] = []
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(model="minilm", layer=-1,
                                                          strategies=["standard", "mrag", "fusion"], c=8, k_max=6,
                                                          variant="importance", w=2.0, seed=7),
                               lm=lm, progress=lambda s, d, t: stages.append(s))
    info = db.get_eval_run(store, run_id)
    assert info.status == "done" and info.seed == 7
    assert info.config["strategies"] == ["standard", "mrag", "fusion"]
    assert (info.config["c"], info.config["k_max"], info.config["layer"], info.config["w"]) == (8, 6, 5, 2.0)
    assert info.config["n_queries"] == 6  # the failed query is not scored
    assert {"embed_documents", "embed_queries", "evaluate", "total_s"} <= set(info.timing)
    assert {"documents", "queries", "sub-queries", "evaluation"} <= set(stages)
    assert info.n_results == 18
    queries = er.evaluable_queries(store, qs.id)
    for strat in ("standard", "mrag"):
        _recompute(db.load_eval_results(store, run_id, strat), queries, labels, 6)
    _recompute(db.load_eval_results(store, run_id, "fusion"), queries, labels, 6, prefix=False)
    # Standard retrieval's first hit is the cosine nearest document of the query (independent check).
    from mrag_core.embedding_cache import cached_embed

    doc_ids = db.document_ids(store, corpus.id)
    docs = db.get_documents(store, doc_ids)
    d_emb, _ = cached_embed(lm, [d.text for d in docs], kind="doc")
    q_emb, _ = cached_embed(lm, [q.text for q in queries], kind="query")
    dn = d_emb.standard / np.linalg.norm(d_emb.standard, axis=1, keepdims=True)
    qn = q_emb.standard / np.linalg.norm(q_emb.standard, axis=1, keepdims=True)
    best = [doc_ids[i] for i in (qn @ dn.T).argmax(axis=1)]
    std = {r.query_id: r.retrieved[0] for r in db.load_eval_results(store, run_id, "standard")}
    assert [std[q.id] for q in queries] == best
    # Single-aspect queries of this easy corpus are found at k=1 by standard RAG.
    assert [std[q.id] for q in queries[:3]] == [q.ground_truth[0] for q in queries[:3]]

    m = eval_results.load_run_metrics(store, run_id)
    assert len(m.per_query) == 18 * 6
    row = m.per_query[(m.per_query["strategy"] == "standard") & (m.per_query["k"] == 2)]
    assert np.allclose(row["weighted"], (2 * row["rsr"] + row["csr"]) / 3)
    single = eval_results.single_aspect_table(m)
    assert single.set_index("strategy").loc["standard", "hits@1"] == 3
    layout = json.loads(eval_exports.authors_json(m))
    assert set(layout) == {"standard", "mrag", "fusion"}
    assert len(layout["mrag"]["2"]["success_ratio"]) == 6 and len(layout["mrag"]["2"]["success_ratio"][0]) == 3
    theirs = json.loads(eval_exports.authors_file_json(m))  # the same numbers under the authors' keys and names
    assert set(theirs) == {"standard-rag", "mrag", "fusion-rag"}
    assert theirs["standard-rag"]["2"]["category_rat"] == layout["standard"]["2"]["category_success_ratio"]
    assert eval_exports.run_csv(m).splitlines()[0] == (
        "strategy,query_id,n_aspects,k,rsr,csr,weighted,run_id,w,k_max,label")
    imp = eval_results.relative_improvement(m, k=2)
    s = m.summary.set_index(["strategy", "n_aspects", "k"])
    r = imp.set_index(["strategy", "n_aspects"]).loc[("mrag", 2)]
    assert r["improvement"] == pytest.approx(
        s.loc[("mrag", 2, 2), "weighted"] / s.loc[("standard", 2, 2), "weighted"] - 1
    )


@pytest.mark.every_backend
def test_cancel_then_resume(store, setup, lm) -> None:
    corpus, qs, labels = setup
    cancel = threading.Event()

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "evaluation" and done >= 2:
            cancel.set()

    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=5, seed=1), lm=lm,
                               progress=progress, cancel=cancel, batch_size=2)
    info = db.get_eval_run(store, run_id)
    assert info.status == "cancelled"
    assert info.n_results == 2  # exactly one saved batch
    assert len(db.completed_queries(store, run_id, "standard")) == 2
    assert db.completed_queries(store, run_id, "mrag") == set()

    seen: list[int] = []
    er.resume_evaluation(store, run_id, lm=lm, progress=lambda s, d, t: seen.append(t) if s == "evaluation" else None)
    assert seen and seen[-1] == 10  # only the 4 + 6 missing results were computed
    info = db.get_eval_run(store, run_id)
    assert info.status == "done" and info.n_results == 12
    fresh = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                              settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=5, seed=1), lm=lm)
    a = {(r.strategy, r.query_id): (r.retrieved, r.rsr) for r in db.load_eval_results(store, run_id)}
    b = {(r.strategy, r.query_id): (r.retrieved, r.rsr) for r in db.load_eval_results(store, fresh)}
    assert a == b


def test_a_run_without_an_index_builds_one_and_keeps_it(store, setup, lm) -> None:
    from services.workflows.indexing import stored_indexes

    corpus, qs, labels = setup
    assert stored_indexes(store, corpus.id) == []
    stages: list[str] = []
    first = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                              settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=5), lm=lm,
                              progress=lambda s, d, t: stages.append(s))
    (kept,) = stored_indexes(store, corpus.id)
    assert kept.state == "current" and kept.run.n_saved == 12 and kept.evaluations == 1
    assert db.get_eval_run(store, first).embedding_run_id == kept.run.id and "documents" in stages
    # the next run searches the kept index: no document is embedded again
    stages.clear()
    second = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=5), lm=lm,
                               progress=lambda s, d, t: stages.append(s))
    assert "documents" not in stages and "embed_documents" not in db.get_eval_run(store, second).timing
    assert db.get_eval_run(store, second).embedding_run_id == kept.run.id
    a = {(r.strategy, r.query_id): r.retrieved for r in db.load_eval_results(store, first)}
    assert a == {(r.strategy, r.query_id): r.retrieved for r in db.load_eval_results(store, second)}
    # another seed samples the head importance again (the index's own was sampled with seed 0)
    seeded = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["mrag"], c=8, k_max=5, seed=3), lm=lm)
    assert db.get_eval_run(store, seeded).embedding_run_id == kept.run.id
    _recompute(db.load_eval_results(store, seeded, "mrag"), er.evaluable_queries(store, qs.id), labels, 5)


@pytest.mark.every_backend
def test_bad_input_writes_nothing(store, setup, lm) -> None:
    corpus, qs, _ = setup
    with pytest.raises(eval_results.EvaluationInputError, match="k_max"):
        er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id, settings=RetrievalSettings(k_max=50), lm=lm)
    with pytest.raises(eval_results.EvaluationInputError, match="unknown strategies"):
        er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                          settings=RetrievalSettings(strategies=["nope"]), lm=lm)
    with pytest.raises(eval_results.EvaluationInputError, match="does not exist"):
        er.run_evaluation(store, corpus_id=corpus.id, query_set_id=999, lm=lm)
    empty = db.create_query_set(store, corpus.id, "empty")
    with pytest.raises(eval_results.EvaluationInputError, match="no query"):
        er.run_evaluation(store, corpus_id=corpus.id, query_set_id=empty.id, settings=RetrievalSettings(k_max=5), lm=lm)
    assert db.list_eval_runs(store) == []


def test_compare_and_layer_sweep(store, setup, lm) -> None:
    corpus, qs, _ = setup
    ids = eval_sweeps.layer_sweep(store, corpus_id=corpus.id, query_set_id=qs.id, layers=[0, -1],
                         settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=4), lm=lm)
    assert len(ids) == 2
    runs = [db.get_eval_run(store, i) for i in ids]
    assert [r.config["layer"] for r in runs] == [0, 5]
    assert runs[0].config["sweep"] == runs[1].config["sweep"]
    frame = eval_sweeps.layer_sweep_frame(store, ids)
    assert sorted(frame["layer"].unique()) == [0, 5]
    # The standard embedding does not depend on the layer: same weighted ratio at both layers.
    std = frame[frame["strategy"] == "standard"]["weighted"].tolist()
    assert std[0] == pytest.approx(std[1])

    means, tests = eval_comparison.compare_runs(store, [(ids[1], "standard"), (ids[1], "mrag"), (ids[0], "mrag")])
    assert set(tests["item"]) == {f"#{ids[1]} mrag", f"#{ids[0]} mrag"}
    allrow = tests[(tests["n_aspects"] == "all") & (tests["item"] == f"#{ids[1]} mrag")].iloc[0]
    assert allrow["wins"] + allrow["ties"] + allrow["losses"] == 6
    # Standard vs itself in another run of the sweep: every query ties, p = 1.
    _, same = eval_comparison.compare_runs(store, [(ids[0], "standard"), (ids[1], "standard")])
    tot = same[same["n_aspects"] == "all"].iloc[0]
    assert (tot["ties"], tot["t_p"]) == (6, 1.0)


# --------------------------------------------------------------------------- LLM-assisted strategies

from tests.support.openai_server import Reply, by_content, fake_openai  # noqa: E402
from tests.support.spies import record_texts  # noqa: E402

__all__ = ["fake_openai"]  # re-exported fixture

LLM_COSTS = {"multi-query": (40, 12), "hyde": (30, 20), "intent": (50, 25), "broken": (11, 1)}


def _llm_responder(sent: list[tuple[int, int]]):
    """Fixed answers built from the question; the derby question's rewrites are unusable (numbering only)."""

    def answer(prompt: str) -> Reply:
        question = prompt.rsplit("Question: ", 1)[1].strip()
        if "diverse search queries" in prompt:
            family, text = "multi-query", f"1. {question}\n\n2. {question} explained\n3. facts about {question}"
            if "derby" in question:
                family, text = "broken", "1.\n\n2.\n"
        elif "encyclopedia" in prompt:
            family, text = "hyde", f"Passage: {question} is described in this short encyclopedia passage."
        else:
            family = "intent"
            text = json.dumps({"answers": [{"answer": "x", "statements": [question, f"{question} in brief"]}]})
        p, c = LLM_COSTS[family]
        sent.append((p, c))
        return Reply.ok(text, prompt_tokens=p, completion_tokens=c)

    return by_content(answer)


LLM_RUN = ["standard", "multi-query", "multi-query-mrag", "hyde", "intent-mrag"]


def test_llm_strategies_run_costs_cache_and_failures(store, setup, lm, fake_openai, monkeypatch) -> None:
    corpus, qs, labels = setup
    sent: list[tuple[int, int]] = []
    server = fake_openai(_llm_responder(sent))
    embedded = record_texts(monkeypatch, er, "cached_embed")
    stages: list[str] = []
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=LLM_RUN, c=8, k_max=6), lm=lm,
                               llm_config=server.llm_config(max_retries=0), progress=lambda s, d, t: stages.append(s))
    info = db.get_eval_run(store, run_id)
    assert info.status == "done" and info.n_results == 6 * len(LLM_RUN)
    assert {"LLM multi-query", "LLM hyde", "LLM intent", "expansions"} <= set(stages)
    assert info.config["llm"] == {"model": "fake-model", "n_rewrites": 4, "n_answers": 3, "hyde_with_query": True}
    # one request per (query, family): multi-query and multi-query-mrag share their rewrites
    assert len(server.requests) == 18
    # Token totals stored equal what the server reported.
    total = info.llm_usage["total"]
    assert total["spent_tokens"] == total["tokens"] == sum(p + c for p, c in sent)
    assert (total["prompt_tokens"], total["completion_tokens"]) == (sum(p for p, _ in sent), sum(c for _, c in sent))
    assert (total["expansions"], total["requests"], total["cached"], total["failed"]) == (18, 18, 0, 1)
    fams = info.llm_usage["families"]
    assert fams["multi-query"]["tokens"] == 5 * 52 + 12 and fams["multi-query"]["failed"] == 1
    assert fams["hyde"]["tokens"] == 6 * 50 and fams["intent"]["tokens"] == 6 * 75
    assert info.llm_usage["model"] == "fake-model" and info.timing["llm_expansions_s"] > 0
    assert "1 LLM expansion(s) failed" in info.timing["warning"]
    # All expansion texts (every family, the failed query's fallback text included) in one embedding call.
    exp_calls = [t for t in embedded if any("encyclopedia passage" in x for x in t)]
    assert len(exp_calls) == 1
    assert len(exp_calls[0]) == 5 * 3 + 1 + 6 + 6 * 2
    # Per-result details: texts and cost; the unusable answer is recorded and the query text searched.
    queries = {q.text: q for q in er.evaluable_queries(store, qs.id)}
    derby = queries["Fans at the derby eating cake"].id
    results = {(r.strategy, r.query_id): r for r in db.load_eval_results(store, run_id)}
    bad = results[("multi-query", derby)].details["llm"]
    assert bad["error"].startswith("unusable LLM answer") and bad["fallback"] == "query text" and bad["texts"] == []
    assert (bad["prompt_tokens"], bad["completion_tokens"]) == (11, 1)
    comet = queries["a comet with a glowing tail"].id
    good = results[("multi-query-mrag", comet)].details["llm"]
    assert good["texts"] == ["a comet with a glowing tail", "a comet with a glowing tail explained",
                             "facts about a comet with a glowing tail"]
    assert (good["prompt_tokens"], good["completion_tokens"], good["cached"]) == (40, 12, False)
    assert results[("standard", comet)].details is None
    # Stored scores are those of the stored lists (fused per k; k_max list scored at k_max).
    _recompute([r for (s, _), r in results.items() if s == "hyde"], list(queries.values()), labels, 6, prefix=False)
    # The view: accuracy next to tokens per strategy.
    m = eval_results.load_run_metrics(store, run_id)
    table = eval_costs.accuracy_and_cost(m).set_index("strategy")
    assert list(table.index) == LLM_RUN
    assert table.loc["standard", "tokens"] == 0 and table.loc["multi-query", "tokens"] == 272
    assert table.loc["multi-query", "failed"] == 1 and table.loc["intent-mrag", "tokens_per_query"] == 75
    assert 0 <= table.loc["hyde", "weighted"] <= 1
    cost = eval_costs.items_cost(store, [(run_id, "hyde"), (run_id, "standard")])
    assert cost["tokens"].tolist() == [300, 0]
    assert eval_costs.without_unused_cost(table).equals(table)  # tokens were spent: the cost columns stay
    free = table.loc[["standard"]].reset_index()  # a strategy that used no LLM: nothing to show
    assert list(eval_costs.without_unused_cost(free).columns) == ["strategy", "rsr", "csr", "weighted", "search_s"]

    # A second run with the same settings: every usable answer comes from the store's cache.
    n = len(server.requests)
    again = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                              settings=RetrievalSettings(strategies=LLM_RUN, c=8, k_max=6), lm=lm,
                              llm_config=server.llm_config(max_retries=0))
    assert len(server.requests) == n + 1  # only the unusable answer (never cached) is asked again
    usage = db.get_eval_run(store, again).llm_usage["total"]
    assert (usage["spent_tokens"], usage["cached"], usage["failed"]) == (12, 17, 1)
    a = {(r.strategy, r.query_id): r.retrieved for r in db.load_eval_results(store, run_id)}
    b = {(r.strategy, r.query_id): r.retrieved for r in db.load_eval_results(store, again)}
    assert a == b


def test_llm_run_cancel_resume_costs_no_tokens(store, setup, lm, fake_openai) -> None:
    corpus, qs, _ = setup
    sent: list[tuple[int, int]] = []
    server = fake_openai(_llm_responder(sent))
    cancel = threading.Event()

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "evaluation" and done >= 2:
            cancel.set()

    cfg = server.llm_config(max_retries=0)
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["hyde", "multi-query"], c=8, k_max=5), lm=lm,
                               llm_config=cfg, progress=progress, cancel=cancel, batch_size=2)
    info = db.get_eval_run(store, run_id)
    assert info.status == "cancelled" and info.n_results == 2
    assert len(server.requests) == 12 and info.llm_usage["total"]["spent_tokens"] == sum(p + c for p, c in sent)
    first_spent = info.llm_usage["total"]["spent_tokens"]
    er.resume_evaluation(store, run_id, lm=lm, llm_config=cfg)
    info = db.get_eval_run(store, run_id)
    assert info.status == "done" and info.n_results == 12
    # The resume asked only the unusable answer again; everything else came from the cache.
    assert len(server.requests) == 13
    assert info.llm_usage["total"]["spent_tokens"] == first_spent + 12  # totals add up over sessions
    # resumed: 4 hyde queries (2 were saved) + 6 multi-query queries, 9 of them cache hits
    assert info.llm_usage["total"]["cached"] == 9 and info.llm_usage["total"]["expansions"] == 12 + 10


@pytest.mark.every_backend
def test_the_llm_usage_so_far_is_stored_while_expanding(store, setup, lm, fake_openai, monkeypatch) -> None:
    """A session that dies while expanding (killed: no final write) leaves what it sent counted: the usage is
    stored as the answers come (here at every answer), not only when the session ends."""
    corpus, qs, _ = setup
    sent: list[tuple[int, int]] = []
    server = fake_openai(_llm_responder(sent))
    monkeypatch.setattr(er, "USAGE_EVERY_S", 0.0)
    seen: list[tuple[int, int, int]] = []

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "LLM hyde":
            run = db.list_eval_runs(store)[0]
            total_usage = run.llm_usage.get("total", {})
            seen.append((done, total_usage.get("spent_tokens"), total_usage.get("requests")))

    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["hyde"], c=8, k_max=5), lm=lm,
                               llm_config=server.llm_config(max_retries=0), progress=progress)
    assert db.get_eval_run(store, run_id).status == "done"
    # each hyde passage costs 30 + 20 tokens; at the n-th answer the run already holds n answers' worth
    assert [s for s in seen if s[0] > 0] == [(n, 50 * n, n) for n in range(1, 7)]


class _ScriptStopped(BaseException):
    """What Streamlit raises in the script thread on Stop (not an Exception)."""


def test_a_stop_halfway_through_a_family_keeps_the_costs_of_the_answers_received(
        store, setup, lm, fake_openai) -> None:
    corpus, qs, _ = setup
    sent: list[tuple[int, int]] = []
    server = fake_openai(_llm_responder(sent))

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "LLM hyde" and done == 4:
            raise _ScriptStopped()

    with pytest.raises(_ScriptStopped):
        er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                          settings=RetrievalSettings(strategies=["hyde"], c=8, k_max=5), lm=lm,
                          llm_config=server.llm_config(max_retries=0, concurrency=1), progress=progress)
    run = db.list_eval_runs(store)[0]
    assert run.status == "cancelled" and run.n_results == 0
    total = run.llm_usage["total"]
    assert (total["requests"], total["spent_tokens"], total["expansions"]) == (4, 200, 4)
    assert len(server.requests) >= 4  # a request in flight at the Stop may have been answered too, unrecorded


def test_llm_strategies_need_an_endpoint(store, setup, lm, monkeypatch) -> None:
    corpus, qs, _ = setup
    for var in ("MRAG_LLM_MODEL", "MRAG_LLM_BASE_URL", "OPENAI_API_KEY", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(eval_results.EvaluationInputError,
                       match="hyde, intent-mrag need an OpenAI-compatible LLM endpoint"):
        er.validate_request(store, corpus_id=corpus.id, query_set_id=qs.id,
                            settings=RetrievalSettings(strategies=["standard", "hyde", "intent-mrag"], c=8, k_max=5))
    with pytest.raises(eval_results.EvaluationInputError, match="MRAG_LLM_BASE_URL"):
        er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                          settings=RetrievalSettings(strategies=["multi-query"], c=8, k_max=5), lm=lm)
    monkeypatch.setenv("MRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # a URL but no model
    with pytest.raises(eval_results.EvaluationInputError, match="unusable"):
        er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                          settings=RetrievalSettings(strategies=["multi-query"], c=8, k_max=5), lm=lm)
    assert db.list_eval_runs(store) == []
    # Strategies without an LLM never need one.
    assert er.validate_request(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard"], c=8, k_max=5)) == ["standard"]


def test_topic_units_pure() -> None:
    from services.ingest.benchmarks import topic_source

    sources = [topic_source("legal", "wills"), "upload.csv row 2", topic_source("legal", "wills"),
               topic_source("legal", "leases"), topic_source("legal", "wills")]
    labels = ["law", "law", "law", "law", "other"]
    # rows 0 and 2 share (law, wills); row 4 is wills in another category; row 1 is its own unit
    assert er.topic_units(sources, labels) == [5, 1, 5, 6, 7]
    assert er.topic_units(["a.csv row 1", "b.txt"], ["x", "y"]) is None


def test_topic_layout_queries_are_scored_per_topic(store, lm) -> None:
    """Ground truth = every document of two topics: finding any one document of a topic counts it."""
    from services.ingest.benchmarks import topic_source

    corpus = db.create_corpus(store, "Legal")
    docs = [{"title": f"{cat} {i}", "text": text, "label": cat, "source": topic_source("legal", f"{cat}-{i // 2}")}
            for cat, texts in TOPICS.items() for i, text in enumerate(texts)]
    ids = db.add_documents(store, corpus.id, docs).document_ids
    topic_of = {d: doc["source"] for d, doc in zip(ids, docs)}
    qs = db.create_query_set(store, corpus.id, "Topics")
    gt = [d for d in ids if topic_of[d] in (topic_source("legal", "astronomy-0"), topic_source("legal", "cooking-1"))]
    assert len(gt) == 4
    db.add_queries(store, qs.id, [{"text": "A comet over the kitchen while tomatoes simmer", "ground_truth": gt,
                                   "n_aspects": 2}])
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard"], c=8, k_max=8), lm=lm)
    (res,) = db.load_eval_results(store, run_id, "standard")
    for k in range(1, 9):
        found = {topic_of[d] for d in res.retrieved[:k] if d in gt}
        assert res.rsr[k - 1] == pytest.approx(len(found) / 2)  # per topic, not len(hits) / 4
    assert res.rsr[-1] in (0.0, 0.5, 1.0)


def test_a_stale_index_is_updated_not_reembedded(store, setup, lm) -> None:
    from services.workflows.indexing import build_embedding_run

    corpus, qs, labels = setup
    first = build_embedding_run(store, corpus.id, lm, layer=-1, batch_size=8).run
    (added,) = db.add_documents(store, corpus.id, [{"title": "extra", "text": "A referee showed a red card.",
                                                    "label": "football"}]).document_ids
    labels[added] = "football"
    stages: list[tuple[str, int, int]] = []
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(model="minilm", layer=-1, strategies=["standard", "mrag"],
                                                          c=8, k_max=6),
                               lm=lm, progress=lambda s, d, t: stages.append((s, d, t)))
    info = db.get_eval_run(store, run_id)
    assert info.embedding_run_id not in (None, first.id)  # a new, current index of the same settings
    index = db.get_embedding_run(store, info.embedding_run_id)
    assert (index.status, index.n_saved, index.timings["copied"]) == ("done", 13, 12)  # 1 document embedded
    assert not db.is_stale(store, index.id)
    assert ("documents", 13, 13) in stages and ("documents", 12, 13) in stages
    for strat in ("standard", "mrag"):
        _recompute(db.load_eval_results(store, run_id, strat), er.evaluable_queries(store, qs.id), labels, 6)


# --------------------------------------------------------------------------- stopping, sweeps, run comparison views


@pytest.mark.every_backend
def test_stop_waits_until_the_run_has_stored_that_it_stopped(store, setup, lm) -> None:
    """A page's Stop reruns the page while the run still works in the previous script run: stop_runs sets the
    run's cancel event and returns once the run has stored 'cancelled' (the rerun listed it as 'running')."""
    corpus, qs, _ = setup
    cancel, reached = threading.Event(), threading.Event()

    def slow_progress(stage: str, done: int, total: int) -> None:
        if stage == "evaluation":
            reached.set()
            time.sleep(0.5)  # a long batch: the stop is seen only after it

    ids: list[int] = []
    worker = threading.Thread(target=lambda: ids.append(er.run_evaluation(
        store, corpus_id=corpus.id, query_set_id=qs.id,
        settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=5),
        lm=lm, progress=slow_progress, cancel=cancel, batch_size=2)))
    worker.start()
    assert reached.wait(60)
    (running,) = db.list_eval_runs(store)
    assert running.status == "running" and er.status_label(running) == "running"
    assert er.stop_runs(threading.Event()) == []  # another session's event stops nothing
    assert er.stop_runs(cancel, timeout=60) == [running.id]
    info = db.get_eval_run(store, running.id)  # stored at once, not some time after the rerun listed it
    assert info.status == "cancelled" and er.status_label(info) == "stopped" and running.id not in er.active_runs()
    worker.join(60)
    assert ids == [running.id] and 0 < info.n_results < 12
    # a run stored as running that no process runs (the server was stopped) is not said to be running
    stray = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, config={"model": "minilm", "layer": 5})
    assert stray.status == "running" and er.status_label(stray) == "interrupted"


def _stopped_run(store, corpus, qs, lm, strategies: list[str], batch_size: int, **kw) -> int:
    """A run of ``strategies`` (c 8, k_max 5) stopped by a Stop pressed when its first batch of ``batch_size`` results
    is stored (the first 'evaluation' progress report comes after that batch); returns its id."""
    cancel = threading.Event()
    return er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                             settings=RetrievalSettings(strategies=strategies, c=8, k_max=5), lm=lm, cancel=cancel,
                             batch_size=batch_size,
                             progress=lambda s, d, t: cancel.set() if s == "evaluation" else None, **kw)


@pytest.mark.every_backend
def test_a_run_cannot_be_resumed_twice_at_once(store, setup, lm) -> None:
    corpus, qs, _ = setup
    run_id = _stopped_run(store, corpus, qs, lm, ["standard"], batch_size=2)
    assert db.get_eval_run(store, run_id).status == "cancelled"
    er._claim(run_id, threading.Event())  # a Resume still at work in another session of this server
    try:
        with pytest.raises(eval_results.EvaluationInputError, match="already running"):
            er.resume_evaluation(store, run_id, lm=lm)
    finally:
        er._release(run_id)
    assert db.get_eval_run(store, run_id).status == "cancelled"


def test_a_stopped_sweep_resumes_all_its_layers(store, setup, lm) -> None:
    corpus, qs, _ = setup
    cancel = threading.Event()

    def stop_in_first_layer(stage: str, done: int, total: int) -> None:
        if stage.startswith("layer 2 (1/2): evaluation"):
            cancel.set()

    ids = eval_sweeps.layer_sweep(store, corpus_id=corpus.id, query_set_id=qs.id, layers=[2, 4],
                         settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=4), lm=lm,
                         progress=stop_in_first_layer, cancel=cancel, batch_size=2)
    assert len(ids) == 1 and db.get_eval_run(store, ids[0]).status == "cancelled"
    (plan,) = eval_sweeps.sweep_plans(store, corpus.id)
    assert plan.layers == [2, 4] and plan.missing == [4] and [r.id for r in plan.unfinished] == ids
    assert eval_sweeps.sweeps(store, corpus.id) == {}  # one stopped layer is no sweep to draw
    seen: list[str] = []
    resumed = eval_sweeps.resume_sweep(store, ids[0], lm=lm, progress=lambda s, d, t: seen.append(s))
    assert resumed[0] == ids[0] and len(resumed) == 2
    runs = [db.get_eval_run(store, r) for r in resumed]
    assert [r.status for r in runs] == ["done", "done"] and [r.config["layer"] for r in runs] == [2, 4]
    assert runs[1].config["sweep"] == runs[0].config["sweep"] and runs[1].config["c"] == 8
    assert runs[1].config["strategies"] == ["standard", "mrag"] and runs[1].n_results == 12
    assert any(s.startswith("layer 4 (2/2)") for s in seen)
    (plan,) = eval_sweeps.sweep_plans(store, corpus.id)
    assert plan.finished
    (drawn,) = eval_sweeps.sweeps(store, corpus.id).values()
    assert [r.config["layer"] for r in drawn] == [2, 4]
    # a finished sweep has nothing left: resuming it runs nothing
    assert eval_sweeps.resume_sweep(store, ids[0], lm=lm) == []


def test_a_sweep_stopped_between_layers_resumes_the_missing_ones(store, setup, lm) -> None:
    corpus, qs, _ = setup
    cancel = threading.Event()
    ids = eval_sweeps.layer_sweep(store, corpus_id=corpus.id, query_set_id=qs.id, layers=[1, 3, -1],
                         settings=RetrievalSettings(strategies=["standard"], c=8, k_max=4), lm=lm, cancel=cancel,
                         progress=lambda s, d, t: cancel.set() if s.startswith("layer 1") and d == t and
                         s.endswith("evaluation") else None)
    # layer 1 finished its last batch, then the cancel stopped the next layer's run before it stored anything
    (plan,) = eval_sweeps.sweep_plans(store, corpus.id)
    assert plan.layers == [1, 3, -1] and db.get_eval_run(store, ids[0]).status == "done"
    cancel.clear()
    eval_sweeps.resume_sweep(store, ids[0], lm=lm)
    (plan,) = eval_sweeps.sweep_plans(store, corpus.id)
    assert plan.finished and [r.config["layer"] for r in plan.runs] == [1, 3, 5]
    assert sorted(r.config["layer_requested"] for r in plan.runs) == [-1, 1, 3]


def test_run_comparison_views() -> None:
    import pandas as pd

    means = pd.DataFrame({"item": ["#4 standard", "#4 mrag"] * 3, "n_aspects": ["10", "10", "2", "2", "all", "all"],
                          "weighted": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]})
    table = eval_comparison.means_table(means, "weighted", [(4, "standard"), (4, "mrag")])
    assert list(table.columns) == ["#4 standard", "#4 mrag"]  # the reference first, not alphabetical
    assert list(table.index) == ["2", "10", "all"]
    assert eval_comparison.means_table(means, "weighted", [(4, "mrag"), (4, "standard")]).columns.tolist() == [
        "#4 mrag", "#4 standard"]
    assert [eval_comparison.signed(x) for x in (-0.0, -0.0004, 0.0004, 0.0, 0.125, -0.0421)] == [
        "0.000", "0.000", "0.000", "0.000", "+0.125", "-0.042"]
    assert eval_comparison.signed(float("nan")) == ""
    assert eval_comparison._no_negative_zero(-1e-17) == 0.0 and str(eval_comparison._no_negative_zero(-0.0)) == "0.0"
    assert eval_results.fused_depth_note(["standard", "mrag"]) is None
    assert "depth k" in eval_results.fused_depth_note(["standard", "fusion-mrag"])
    assert eval_results.fused_strategies(["standard", "fusion", "multi-query-mrag", "split"]) == [
        "fusion", "multi-query-mrag"]


def test_drilldown_names_the_runs_own_index_and_settings(store, setup, lm) -> None:
    corpus, qs, _ = setup
    ids = eval_sweeps.layer_sweep(store, corpus_id=corpus.id, query_set_id=qs.id, layers=[1, -1],
                         settings=RetrievalSettings(strategies=["standard", "mrag", "fusion"],
                                                    variant="decay", c=6, k_max=4),
                         lm=lm)
    first, last = (db.get_eval_run(store, i) for i in ids)
    assert first.embedding_run_id != last.embedding_run_id  # each layer has its index; the newest is layer 5's
    qid = er.evaluable_queries(store, qs.id)[3].id
    d = eval_comparison.drilldown(store, [(first.id, "standard"), (first.id, "mrag-decay")], qid)
    assert (d.run_id, d.query_id, d.embedding_run_id) == (first.id, qid, first.embedding_run_id)
    assert (d.variant, d.c, d.k, d.strategies, d.seed) == ("decay", 6, None, ["standard", "mrag"], 0)
    d = eval_comparison.drilldown(store, [(first.id, "standard"), (last.id, "fusion")], qid, run_id=last.id, k=3)
    assert (d.embedding_run_id, d.k, d.strategies) == (last.embedding_run_id, 3, ["standard", "fusion"])
    assert d.variant == "decay"  # no MRAG item of that run: the run's voting
    # the searched index deleted: another finished index of the same model, layer and pooling is used, else none
    db.delete_embedding_run(store, first.embedding_run_id)
    assert eval_comparison.drilldown(store, [(first.id, "standard")], qid).embedding_run_id is None
    with pytest.raises(eval_results.EvaluationInputError, match="does not exist"):
        eval_comparison.drilldown(store, [(999, "standard")], qid)


HOLD_CLAIM = """
import sys, time
import db
from services.heartbeat import Heartbeat
store = db.open_store(sys.argv[1])
run_id = int(sys.argv[2])
owner = db.new_owner()
db.claim_eval_run(store, run_id, owner)
print(owner, flush=True)
with Heartbeat(lambda: db.beat_eval_run(store, run_id, owner), every=0.2):
    time.sleep(300)
"""


@pytest.mark.every_backend
def test_a_run_another_process_works_on_runs_elsewhere_until_that_process_dies(store, setup, lm) -> None:
    """A second real process (as `mrag-studio eval --resume` beside the app) claims a stopped run and
    beats: this process sees it running elsewhere and may not resume it; once that process is killed and its
    heartbeat is old, the run reads as interrupted and resumes here."""
    import signal
    import subprocess
    import sys
    from datetime import timedelta
    from pathlib import Path

    from sqlalchemy import update

    from db.models import EvalRun, utcnow

    corpus, qs, _ = setup
    run_id = _stopped_run(store, corpus, qs, lm, ["standard"], batch_size=2)
    assert er.status_label(db.get_eval_run(store, run_id)) == "stopped"
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", HOLD_CLAIM, store.engine.url.render_as_string(hide_password=False),
                             str(run_id)], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                            stdout=subprocess.PIPE, text=True)
    try:
        owner = proc.stdout.readline().strip()
        assert f"pid {proc.pid} #" in owner
        first = db.get_eval_run(store, run_id)
        deadline = time.monotonic() + 20
        while db.get_eval_run(store, run_id).heartbeat_at == first.heartbeat_at and time.monotonic() < deadline:
            time.sleep(0.05)
        beating = db.get_eval_run(store, run_id)
        assert beating.heartbeat_at > first.heartbeat_at  # the other process beats
        assert beating.owner == owner and er.status_label(beating) == "running elsewhere"
        with pytest.raises(eval_results.EvaluationInputError,
                           match=rf"Evaluation run {run_id} is running in another process "
                                 rf"\(\S+ pid {proc.pid};"):
            er.resume_evaluation(store, run_id, lm=lm)
        assert db.get_eval_run(store, run_id).owner == owner  # the refused resume wrote nothing
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    last = db.get_eval_run(store, run_id).heartbeat_at
    time.sleep(0.6)
    assert db.get_eval_run(store, run_id).heartbeat_at == last  # a dead process beats no more
    with store.session() as session:  # ... and after LIVE_WINDOW_S of silence:
        session.execute(update(EvalRun).where(EvalRun.id == run_id)
                        .values(heartbeat_at=utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)))
    assert er.status_label(db.get_eval_run(store, run_id)) == "interrupted"
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id)
    assert done.status == "done" and done.n_results == 6 and done.owner != owner


@pytest.mark.every_backend
def test_a_stop_asked_through_the_database_stops_the_run_after_its_batch(store, setup, lm, monkeypatch) -> None:
    """Another process (the app's Stop beside a CLI run, or `eval --stop`) asks through the database: the run's
    next heartbeat sees it, the run stops after its current batch, stores 'cancelled' with what it saved, and
    resumes to the end."""
    monkeypatch.setattr(db, "BEAT_EVERY_S", 0.05)
    corpus, qs, _ = setup
    started, out = threading.Event(), {}

    def slow(stage: str, done: int, total: int) -> None:
        if stage == "evaluation":
            started.set()
            time.sleep(0.3)  # a batch that takes its time

    worker = threading.Thread(target=lambda: out.setdefault("id", er.run_evaluation(
        store, corpus_id=corpus.id, query_set_id=qs.id,
        settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=5),
        lm=lm, batch_size=1, progress=slow)))
    worker.start()
    assert started.wait(120)
    (running,) = [r for r in db.list_eval_runs(store) if r.status == "running"]
    assert db.request_eval_stop(store, running.id)
    worker.join(60)
    assert not worker.is_alive()
    info = db.get_eval_run(store, out["id"])
    assert info.status == "cancelled" and 0 < info.n_results < 12
    assert not db.eval_stop_requested(store, info.id)
    er.resume_evaluation(store, info.id, lm=lm)
    assert (db.get_eval_run(store, info.id).status, db.get_eval_run(store, info.id).n_results) == ("done", 12)


def test_a_stopped_run_keeps_its_search_seconds_and_a_resume_adds_to_them(store, setup, lm) -> None:
    """The Runs table's 'search s' read 0.00 for a stopped run: its per-strategy seconds were stored only when a
    run finished, and a resume that searched one strategy dropped the other's."""
    corpus, qs, _ = setup
    run_id = _stopped_run(store, corpus, qs, lm, ["standard", "mrag"], batch_size=6)
    stopped = db.get_eval_run(store, run_id)
    assert stopped.status == "cancelled" and stopped.n_results == 6  # standard done, mrag not started
    first = stopped.timing["evaluate"]
    assert set(first) == {"standard"} and first["standard"] > 0
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id).timing["evaluate"]
    assert set(done) == {"standard", "mrag"} and done["standard"] == pytest.approx(first["standard"])
    assert done["mrag"] > 0
    assert er._added_seconds({"a": 1.0, "b": 2}, {"b": 0.5, "c": 3.0}) == {"a": 1.0, "b": 2.5, "c": 3.0}
    assert er._added_seconds(None, {"c": 3.0}) == {"c": 3.0}


def test_a_query_edited_between_stop_and_resume_is_scored_again_and_its_fingerprint_follows(
        store, setup, lm) -> None:
    """A query edited while its run was stopped: the resume scored the missing strategy with the new text but
    kept the old text's results of the other and its old fingerprint, so the run mixed two versions of the query
    and its note named it as edited (or, edited back, as not). Now the resume scores it again for every
    strategy and records the version it scored."""
    corpus, qs, _ = setup
    run_id = _stopped_run(store, corpus, qs, lm, ["standard", "mrag"], batch_size=6)
    assert db.get_eval_run(store, run_id).n_results == 6  # standard scored every query, mrag none
    before = {r.query_id: r for r in db.load_eval_results(store, run_id, "standard")}
    comet = next(q for q in er.evaluable_queries(store, qs.id) if q.text == "a comet with a glowing tail")
    db.update_query(store, comet.id, text="a telescope observing a spiral galaxy")
    stopped = eval_results.load_run_metrics(store, run_id)
    assert stopped.edited == [comet.id]
    assert eval_results.edited_note(stopped).endswith("Resuming the run scores it again as it is now.")

    totals: list[int] = []
    er.resume_evaluation(store, run_id, lm=lm, progress=lambda s, d, t: totals.append(t) if s == "evaluation" else None)
    assert totals[-1] == 6 + 1  # mrag's 6 queries and standard's edited one
    info = db.get_eval_run(store, run_id)
    assert info.status == "done" and info.n_results == 12
    now = {q.id: q for q in er.evaluable_queries(store, qs.id)}
    assert info.config["queries"] == {str(q): eval_results.query_fingerprint(row) for q, row in now.items()}
    m = eval_results.load_run_metrics(store, run_id)
    assert m.edited == [] and eval_results.edited_note(m) is None
    # Every result equals a fresh run's on the query set as it is now; the unedited ones were not recomputed.
    fresh = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                              settings=RetrievalSettings(strategies=["standard", "mrag"], c=8, k_max=5), lm=lm)
    a = {(r.strategy, r.query_id): (r.retrieved, r.rsr) for r in db.load_eval_results(store, run_id)}
    b = {(r.strategy, r.query_id): (r.retrieved, r.rsr) for r in db.load_eval_results(store, fresh)}
    assert a == b
    assert a[("standard", comet.id)][0] != before[comet.id].retrieved  # the galaxy text finds other documents
    assert all(a[("standard", q)] == (r.retrieved, r.rsr) for q, r in before.items() if q != comet.id)


def test_a_finished_run_is_not_resumed_even_after_a_query_edit(store, setup, lm) -> None:
    """`resume` of a done run re-scored the queries edited since it finished, changing a record analysts compare
    against, while its edited note said to start a new run. It is refused now and nothing of the run changes."""
    corpus, qs, _ = setup
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard"], c=8, k_max=5), lm=lm)
    done = db.get_eval_run(store, run_id)
    results = db.load_eval_results(store, run_id)
    comet = next(q for q in er.evaluable_queries(store, qs.id) if q.text == "a comet with a glowing tail")
    db.update_query(store, comet.id, text="a telescope observing a spiral galaxy")
    assert eval_results.edited_note(eval_results.load_run_metrics(store, run_id)).endswith(
        "Start a new run to score the query set as it is now.")
    message = (f"evaluation run {run_id} is finished (done) and is not resumed: a finished run is kept as it is, to "
               "compare other runs against. To score the query set as it is now, start a new run with the same "
               "settings.")
    with pytest.raises(eval_results.EvaluationInputError) as exc:
        er.resume_evaluation(store, run_id, lm=lm)
    assert str(exc.value) == message
    with pytest.raises(eval_results.EvaluationInputError, match="is finished"):  # a sweep of one run resumes it alone
        eval_sweeps.resume_sweep(store, run_id, lm=lm)
    with pytest.raises(eval_results.EvaluationInputError, match="does not exist"):
        er.resume_evaluation(store, 999, lm=lm)
    after = db.get_eval_run(store, run_id)
    assert (after.status, after.finished_at, after.timing, after.config, after.owner) == (
        done.status, done.finished_at, done.timing, done.config, done.owner)
    assert db.load_eval_results(store, run_id) == results
    assert eval_results.load_run_metrics(store, run_id).edited == [comet.id]  # still the record of the old version


def test_a_resume_counts_the_queries_added_since_the_run_began_in_its_expected_results(store, setup, lm) -> None:
    """config["n_queries"] stayed the count of the run's first session: after a resume that scored a query added
    meanwhile, `eval --list` read 14/12 results and page 9's progress of a run elsewhere '14 of 12'."""
    corpus, qs, _ = setup
    run_id = _stopped_run(store, corpus, qs, lm, ["standard", "mrag"], batch_size=6)
    stopped = db.get_eval_run(store, run_id)
    assert (stopped.status, stopped.n_results, stopped.config["n_queries"]) == ("cancelled", 6, 6)
    football = [d for d in db.document_ids(store, corpus.id)][8]
    db.add_queries(store, qs.id, [{"text": "a late goal in the cup final", "ground_truth": [football]}])
    # A resume stopped before it stored anything already expects the 7 queries it scores.
    cancel = threading.Event()
    er.resume_evaluation(store, run_id, lm=lm, cancel=cancel,
                         progress=lambda s, d, t: cancel.set() if s == "queries" else None)
    again = db.get_eval_run(store, run_id)
    assert (again.status, again.n_results, again.config["n_queries"]) == ("cancelled", 6, 7)
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id)
    assert (done.status, done.n_results, done.config["n_queries"]) == ("done", 14, 7)  # 7 queries x 2 strategies
    # A query deleted while the run is stopped counts no more either.
    run_id = _stopped_run(store, corpus, qs, lm, ["standard"], batch_size=2)
    assert db.get_eval_run(store, run_id).config["n_queries"] == 7
    db.delete_query(store, max(q.id for q in er.evaluable_queries(store, qs.id)))
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id)
    assert (done.status, done.n_results, done.config["n_queries"]) == ("done", 6, 6)


def test_llm_tokens_and_the_cost_total_count_each_call_once_after_a_resume_served_from_the_cache(
        store, setup, lm, fake_openai) -> None:
    """The first session sends all 6 passages (6 x (30 + 20) = 300 tokens) and stops after storing 2 results; the
    resume gets the other 4 from the cache. Page 9's 'LLM tokens' read llm_usage["total"]["tokens"], which adds up
    the sessions (600: the cache hits again at their original cost); the total's 'spent' read the stored results,
    which record only the 2 calls of the results stored by the first session (100). Both now say 300."""
    corpus, qs, _ = setup
    sent: list[tuple[int, int]] = []
    server = fake_openai(_llm_responder(sent))
    cfg = server.llm_config(max_retries=0)
    run_id = _stopped_run(store, corpus, qs, lm, ["hyde", "hyde-mrag"], batch_size=2, llm_config=cfg)
    stopped = db.get_eval_run(store, run_id)
    assert (stopped.status, stopped.n_results, len(server.requests)) == ("cancelled", 2, 6)  # 6 passages asked
    er.resume_evaluation(store, run_id, lm=lm, llm_config=cfg)
    info = db.get_eval_run(store, run_id)
    assert (info.status, info.n_results, len(server.requests)) == ("done", 12, 6)  # the resume: all from the cache
    assert sum(p + c for p, c in sent) == 300 and info.llm_usage["total"]["tokens"] == 600
    assert eval_costs.runs_llm_tokens(store, [run_id]) == {run_id: 300}
    metrics = eval_results.load_run_metrics(store, run_id)
    stored_sent = [r for (_, _), d in metrics.details.items() if not (r := d["llm"])["cached"]]
    assert sum(r["prompt_tokens"] + r["completion_tokens"] for r in stored_sent) == 100  # what the results record
    total = eval_costs.llm_cost_total(metrics)
    assert (total["tokens"], total["llm_queries"], total["spent_tokens"], total["cached"]) == (300, 6, 300, 4)
    assert total["llm_s"] == pytest.approx(info.llm_usage["total"]["latency_s"])
    assert total["llm_s"] > sum(r["latency_s"] for r in stored_sent)
    # Each row too: hyde's stored results record 100 spent, hyde-mrag's none (all its results came from the cache);
    # both search the same 6 passages, which the run sent once for 300 tokens (their rows name each other).
    rows = eval_costs.accuracy_and_cost(metrics).set_index("strategy")
    assert rows.loc["hyde", "spent_tokens"] == rows.loc["hyde-mrag", "spent_tokens"] == 300
    assert rows.loc["hyde", "llm_s"] == pytest.approx(info.llm_usage["families"]["hyde"]["latency_s"])
    assert (rows.loc["hyde", "shared_with"], rows.loc["hyde-mrag", "shared_with"]) == ("hyde-mrag", "hyde")
    assert eval_costs.llm_total_note(metrics).startswith(
        "All LLM-assisted strategies together, each LLM call counted once: 300 tokens over 6 expansions, 300 spent, ")
    plain = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                              settings=RetrievalSettings(strategies=["standard"], c=8, k_max=5), lm=lm)
    assert eval_costs.runs_llm_tokens(store, [run_id, plain]) == {run_id: 300, plain: 0}
    assert eval_costs.runs_llm_tokens(store, []) == {}


def test_a_resume_drops_the_results_of_queries_no_longer_evaluable(store, setup, lm) -> None:
    """A query scored by the first session loses its ground truth (another its status: failed) while the run is
    stopped: the resume scores the 4 queries left, and their results are all the run keeps (4 x 2 = 8 of 8
    expected). The 2 queries' results stayed, and `eval --list` read 10/8."""
    corpus, qs, _ = setup
    run_id = _stopped_run(store, corpus, qs, lm, ["standard", "mrag"], batch_size=6)
    stopped = db.get_eval_run(store, run_id)
    assert (stopped.status, stopped.n_results, stopped.config["n_queries"]) == ("cancelled", 6, 6)
    first, second = sorted(q.id for q in er.evaluable_queries(store, qs.id))[:2]
    assert {r.query_id for r in db.load_eval_results(store, run_id)} >= {first, second}  # both scored by standard
    db.update_query(store, first, ground_truth=[])
    db.update_query(store, second, status="failed")
    kept = {q.id for q in er.evaluable_queries(store, qs.id)}
    assert len(kept) == 4
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id)
    assert (done.status, done.n_results, done.config["n_queries"]) == ("done", 8, 4)
    results = db.load_eval_results(store, run_id)
    assert {(r.strategy, r.query_id) for r in results} == {(s, q) for s in ("standard", "mrag") for q in kept}
    assert set(done.config["queries"]) == {str(q) for q in kept}
    metrics = eval_results.load_run_metrics(store, run_id)
    assert set(metrics.per_query["query_id"]) == kept and set(metrics.queries["query_id"]) == kept


def test_the_recommended_alias_runs_the_sentence_round_robin(store, setup, lm) -> None:
    """``recommended`` is stored as its id; every stored list is the engine's sentence round-robin over the run's
    index, with the query's sentences embedded as parts; its metrics are the recomputed ones; a drill-down opens
    it in Compare."""
    from mrag_core.embedding_cache import cached_embed
    from mrag_core.sentence_round_robin import query_parts, sentence_round_robin
    from services.workflows.indexing import load_corpus_index

    corpus, qs, labels = setup
    stages: list[str] = []
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard", "recommended"], c=8, k_max=6),
                               lm=lm, progress=lambda s, d, t: stages.append(s))
    info = db.get_eval_run(store, run_id)
    assert info.status == "done" and info.config["strategies"] == ["standard", "sentence-round-robin"]
    assert "query parts" in stages and info.n_results == 12
    queries = er.evaluable_queries(store, qs.id)
    stored = db.load_eval_results(store, run_id, "sentence-round-robin")
    _recompute(stored, queries, labels, 6)
    bundle = load_corpus_index(store, info.embedding_run_id)
    for q in queries:
        parts = query_parts(q.text)
        emb, _ = cached_embed(lm, parts, kind="query", layer=-1)
        want = sentence_round_robin(bundle.index, emb, 6, 8, part_texts=parts)
        got = next(r for r in stored if r.query_id == q.id)
        assert got.retrieved == [bundle.doc_ids[d] for d in want.doc_ids]
    with pytest.raises(eval_results.EvaluationInputError,
                       match=r"unknown strategies \['best'\]: use standard, .*recommended"):
        er.validate_request(store, corpus_id=corpus.id, query_set_id=qs.id,
                            settings=RetrievalSettings(strategies=["best"], k_max=6))
    assert er.validate_request(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["recommended", "mrag"], k_max=6)) == [
        "sentence-round-robin", "mrag"]
    d = eval_comparison.drilldown(store, [(run_id, "standard"), (run_id, "sentence-round-robin")], queries[0].id)
    assert d.strategies == ["standard", "sentence-round-robin"]
    import io

    import pandas as pd

    csv = pd.read_csv(io.StringIO(eval_exports.run_csv(eval_results.load_run_metrics(store, run_id))))
    assert set(zip(csv["strategy"], csv["label"])) == {
        ("standard", "Standard RAG"), ("sentence-round-robin", "Sentence round-robin (Standard + MRAG per sentence)")}
