"""Extraction from one shared model under concurrency: every vector equals the one-at-a-time result.

The app loads each model once (``ui.state.get_model`` is ``st.cache_resource``) and every Streamlit session is a
thread of one process, so embeddings of queries (Compare, Reader, Maps), index builds and the CLI's runs use one
model object at once. Here several threads (and several processes) embed different texts at the same time, released
together at a barrier each round, and every vector must equal the one the same call gives alone.

Real MiniLM (shipped in the venv), CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import db
from mrag_core.attention import attention_maps
from mrag_core.extraction import Embeddings, embed_texts, forward_batch
from mrag_core.models.loader import load_model
from services.workflows.compare import embed_query
from services.workflows.indexing import BuildJob, query_window
from tests.support.concurrency import Tally, close, in_processes, in_threads
from tests.support.embed_worker import embed_in_process

torch.set_num_threads(1)

# Four queries of the same token count (checked below): a batch of one pads nothing, so any mix-up of two threads'
# head outputs goes unnoticed by the shapes and silently returns the other query's vectors.
SAME_LENGTH = [
    "The moon orbits the earth every month.",
    "Bread dough rises with warm yeast overnight.",
    "Jazz began in New Orleans long ago.",
    "A comet passed close to the sun.",
]
# Texts of different token counts: a mix-up here also meets tensors of another size.
MIXED_LENGTHS = [
    "Short.",
    "Volcanic eruptions can cool the global climate for several years by injecting sulfate aerosols.",
    "Photosynthesis converts light energy into chemical energy.",
    "The Treaty of Westphalia ended the Thirty Years' War in 1648 and reshaped the map of Europe for a century.",
]
LONG_QUERY = " ".join(f"aspect{i} of the question" for i in range(120))  # more than MiniLM's 256 tokens


def doc_texts(seed: int, n: int) -> list[str]:
    """``n`` documents of different lengths, different for each ``seed``."""
    words = ["river", "castle", "enzyme", "orbit", "harvest", "violin", "glacier", "senate", "pixel", "harbour"]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=int(rng.integers(3, 40)))) + f". Document {seed}-{i}." for i in range(n)]


@pytest.fixture(scope="module")
def lm():
    return load_model("minilm", device="cpu")


def alone(lm, texts: list[str], **kwargs) -> Embeddings:  # noqa: ANN001
    return embed_texts(lm, texts, **kwargs)


def arrays(emb: Embeddings) -> tuple[np.ndarray, np.ndarray]:
    return emb.standard, emb.heads


def tally(results: list[list[object]], expected: list[object], atol: float = 1e-5) -> Tally:
    t = Tally()
    for got_rounds, want in zip(results, expected):
        for got in got_rounds:
            t.add(got, want, close(atol))
    return t


def test_same_length_queries_in_threads(lm) -> None:
    counts = {len(lm.tokenizer(lm.spec.query_prompt + t)["input_ids"]) for t in SAME_LENGTH}
    assert len(counts) == 1, counts
    expected = [arrays(alone(lm, [t], kind="query")) for t in SAME_LENGTH]
    tasks = [lambda t=t: arrays(embed_texts(lm, [t], kind="query")) for t in SAME_LENGTH]
    t = tally(in_threads(tasks, rounds=25), expected)
    assert t.clean, str(t)


def test_mixed_length_texts_in_threads(lm) -> None:
    expected = [arrays(alone(lm, [t], kind="query")) for t in MIXED_LENGTHS]
    tasks = [lambda t=t: arrays(embed_texts(lm, [t], kind="query")) for t in MIXED_LENGTHS]
    t = tally(in_threads(tasks, rounds=25), expected)
    assert t.clean, str(t)


def test_document_batches_in_threads(lm) -> None:
    """Three builds of 16 documents each, in batches of 8 (padded, longest first), at once."""
    sets = [doc_texts(seed, 16) for seed in range(3)]
    expected = [arrays(alone(lm, texts, kind="doc", batch_size=8)) for texts in sets]
    tasks = [lambda texts=texts: arrays(embed_texts(lm, texts, kind="doc", batch_size=8)) for texts in sets]
    t = tally(in_threads(tasks, rounds=6), expected)
    assert t.clean, str(t)


def test_forward_batch_at_other_layers_and_poolings_in_threads(lm) -> None:
    """Threads tapping different layers (hooks on different modules) with different poolings at once."""
    settings = [(0, "mean"), (3, "first"), (-1, "mean"), (-1, "last")]

    def run(layer: int, pooling: str, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        std, heads = forward_batch(lm, texts, layer=layer, head_pooling=pooling)
        return std.numpy(), heads.numpy()

    jobs = [(layer, pooling, MIXED_LENGTHS[i:] + SAME_LENGTH[:i]) for i, (layer, pooling) in enumerate(settings)]
    expected = [run(*job) for job in jobs]
    tasks = [lambda job=job: run(*job) for job in jobs]
    t = tally(in_threads(tasks, rounds=20), expected)
    assert t.clean, str(t)


def test_intra_op_threads_still_used(lm) -> None:
    """Two torch intra-op threads per call, two calls at once: still the one-at-a-time vectors."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        sets = [doc_texts(10 + seed, 8) for seed in range(2)]
        expected = [arrays(alone(lm, texts, batch_size=8)) for texts in sets]
        tasks = [lambda texts=texts: arrays(embed_texts(lm, texts, batch_size=8)) for texts in sets]
        t = tally(in_threads(tasks, rounds=8), expected)
    finally:
        torch.set_num_threads(before)
    assert t.clean, str(t)


def test_tokenizer_settings_in_threads(lm) -> None:
    """The tokenizer is shared too, and a fast tokenizer keeps its truncation and padding settings between calls:
    the query-length check (untruncated) and embeddings (truncated to 256 tokens, padded) at once must each get
    their own settings. The check runs over and over for as long as the embedding of the round takes."""
    long_docs = [LONG_QUERY + f" variant {i}" for i in range(2)] + ["A short one."]
    expected_window = query_window(lm, LONG_QUERY)
    assert expected_window.cut and expected_window.n_tokens > lm.spec.max_length
    expected_docs = arrays(alone(lm, long_docs, batch_size=1))
    rounds_done = [0]

    def windows() -> list[object]:
        this_round, seen = rounds_done[0], []
        while rounds_done[0] == this_round or not seen:
            seen.append(query_window(lm, LONG_QUERY))
        return seen

    def embedding() -> tuple[np.ndarray, np.ndarray]:
        try:
            return arrays(embed_texts(lm, long_docs, batch_size=1))
        finally:
            rounds_done[0] += 1

    results = in_threads([windows, embedding], rounds=10)
    t = Tally()
    for got in results[0]:
        for window in got if isinstance(got, list) else [got]:
            t.add(window, expected_window, close())
    for got in results[1]:
        t.add(got, expected_docs, close())
    assert t.clean, str(t)


def test_attention_maps_in_threads() -> None:
    """Attention heatmaps of one eager model at different token limits, while the same model embeds."""
    eager = load_model("minilm", device="cpu", attn_implementation="eager")
    limits = [12, 40, 300]

    def maps(limit: int) -> tuple[list[str], np.ndarray, bool]:
        m = attention_maps(eager, LONG_QUERY, layer=2, max_tokens=limit)
        return m.tokens, m.weights, m.truncated

    expected = [maps(limit) for limit in limits] + [arrays(alone(eager, MIXED_LENGTHS, batch_size=4))]
    tasks = [lambda limit=limit: maps(limit) for limit in limits]
    tasks.append(lambda: arrays(embed_texts(eager, MIXED_LENGTHS, batch_size=4)))
    t = tally(in_threads(tasks, rounds=12), expected)
    assert t.clean, str(t)


def test_index_build_while_sessions_embed_queries(lm, tmp_path, monkeypatch) -> None:
    """The app's paths: the Index page's background build stores every document's own vectors while three
    sessions embed queries (Compare's one forward pass for a query and its sub-queries) and check their length."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    store = db.open_store(f"sqlite:///{tmp_path / 'app.db'}")
    try:
        docs = doc_texts(99, 24)
        corpus = db.create_corpus(store, "Shared")
        ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": t, "label": "x"}
                                                  for i, t in enumerate(docs)]).document_ids
        queries = [(q, [q.split(".")[0], "A second aspect."]) for q in MIXED_LENGTHS[1:] + [LONG_QUERY]]
        expected_q = [tuple(arrays(e) for e in embed_query(lm, -1, q, subs)[:2]) for q, subs in queries]
        expected_w = [query_window(lm, q) for q, _ in queries]

        job = BuildJob(store, corpus.id, lm, layer=-1, batch_size=4)
        tasks = [lambda i=i: (tuple(arrays(e) for e in embed_query(lm, -1, *queries[i])[:2]),
                              query_window(lm, queries[i][0])) for i in range(len(queries))]
        job.start()
        results = in_threads(tasks, rounds=8)
        job.wait(timeout=120)
        assert job.finished and job.error is None, repr(job.error)
        queried = tally(results, list(zip(expected_q, expected_w)))

        stored_ids, std, heads = db.load_vectors(store, job.result.run.id)
        by_id = {int(d): i for i, d in enumerate(stored_ids)}
        stored = Tally()
        for doc_id, text in zip(ids, docs):
            want = arrays(alone(lm, [text], kind="doc"))
            stored.add((std[by_id[doc_id]][None], heads[by_id[doc_id]][None]), want, close())
        assert queried.clean and stored.clean, f"queries: {queried}; stored document vectors: {stored}"
    finally:
        store.close()


def test_processes_embed_at_once(lm, tmp_path, monkeypatch) -> None:
    """Two processes (each with two threads: queries and documents) embed at once through one disk cache."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    shared_docs = doc_texts(7, 8)
    query_sets = [SAME_LENGTH, MIXED_LENGTHS]
    rounds = 4
    results = in_processes(embed_in_process, [(qs, shared_docs, rounds) for qs in query_sets])
    want_docs = arrays(alone(lm, shared_docs, kind="doc", batch_size=2))
    t = Tally()
    for qs, out in zip(query_sets, results):
        want_q = arrays(alone(lm, qs, kind="query", batch_size=1))
        assert len(out["queries"]) == len(out["docs"]) == rounds
        for got in out["queries"]:
            t.add(got, want_q, close())
        for got in out["docs"]:
            t.add(got, want_docs, close())
    assert t.clean, str(t)
