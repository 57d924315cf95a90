"""One cached search index serves every session at once: searches with different depths and votes, in threads,
each return what the same search returns alone.

The app keeps a finished run's CorpusIndex in ``st.cache_resource`` (``ui.state._run_index``), shared by all
sessions. Nothing per search may live on it: the HNSW backend passes each space's efSearch (which differs per space
and per vote) as per-call search parameters rather than setting it on the shared FAISS index, the torch backend and
the compiled kernels allocate their scratch per call. This guards that: it passed before issue 32's fixes too.
"""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core.corpus_index import CorpusIndex
from mrag_core.strategies import mrag_search, split_search, standard_search
from tests.support.concurrency import Tally, in_threads
from tests.support.random_embeddings import random_embeddings

N_DOCS, DIM, HEADS, HEAD_DIM = 1500, 64, 4, 16


@pytest.fixture(scope="module")
def data() -> tuple:
    rng = np.random.default_rng(3)
    docs = random_embeddings(rng, N_DOCS, DIM, HEADS, HEAD_DIM)
    queries = random_embeddings(rng, 40, DIM, HEADS, HEAD_DIM)
    return docs, queries


def lists(results) -> list[tuple[list[int], list[float]]]:  # noqa: ANN001 - list[Retrieved]
    return [(r.doc_ids, [round(s, 6) for s in r.scores]) for r in results]


@pytest.mark.parametrize("backend", ["torch", "faiss-flat", "faiss-hnsw"])
def test_searches_of_one_shared_index_in_threads(data, backend: str) -> None:
    docs, queries = data
    index = CorpusIndex.build(docs, backend=backend)
    searches = [  # HNSW: each depth and vote has its own efSearch (here from 32 up to about 300 in the head spaces)
        lambda: lists(mrag_search(index, queries, k=4, c=4, variant="importance")),
        lambda: lists(mrag_search(index, queries, k=50, c=300, variant="importance")),
        lambda: lists(mrag_search(index, queries, k=5, c=8, variant="distance")),
        lambda: lists(split_search(index, queries, k=10, c=64, variant="decay")),
        lambda: lists(standard_search(index, queries, k=20)),
    ]
    expected = [search() for search in searches]
    t = Tally()
    for got_rounds, want in zip(in_threads(searches, rounds=10), expected):
        for got in got_rounds:
            t.add(got, want, lambda a, b: a == b)
    assert t.clean, str(t)
