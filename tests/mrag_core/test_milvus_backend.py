"""The ``milvus`` backends on Milvus Lite (the real engine, embedded from a folder): exact parity with in-process
search (ties by id), block queries, threads, HNSW calibration, and the one clear error of an unusable URI."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from mrag_core import milvus_backend as mb
from mrag_core.backends import build_index
from mrag_core.corpus_index import CorpusIndex
from mrag_core.extraction import Embeddings
from mrag_core.strategies import mrag_search, split_search, standard_search
from tests.support.random_embeddings import random_embeddings


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> mb.MilvusConfig:
    """One Milvus Lite folder for the module (starting it costs a few seconds)."""
    return mb.MilvusConfig(str(tmp_path_factory.mktemp("milvus") / "lite.db"))


def tied_vectors(rng: np.random.Generator, n: int, s: int, d: int) -> np.ndarray:
    """Vectors on a coarse grid (many equal scores), with some documents repeated exactly."""
    x = np.round(rng.normal(size=(n, s, d)), 0).astype(np.float32)
    x[[40, 90, 91, 150]] = x[3]
    return x


def test_block_queries_give_each_space_its_own_inner_product():
    q = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    packed = mb.pack_queries(q)
    assert packed.shape == (6, 6)
    assert packed[4].tolist() == [0, 0, 8, 9, 0, 0]  # query 1, space 1: block 1 only
    doc = np.array([[[1, 2], [3, 4], [5, 6]]], np.float32)
    got = packed @ mb.pack_docs(doc)[0]
    want = np.einsum("qsd,sd->qs", q, doc[0]).reshape(-1)  # q[j, i] . doc[i]
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("spaces,dim", [(1, 24), (6, 4)])
def test_flat_equals_exact_search_with_ties_by_id(lite, spaces, dim):
    rng = np.random.default_rng(spaces)
    x = tied_vectors(rng, 300, spaces, dim)
    queries = np.concatenate([x[[3, 7]], rng.normal(size=(3, spaces, dim)).astype(np.float32)])
    milvus = mb.build_milvus_index(x, "milvus", config=lite)
    exact = build_index(x, "torch", device="cpu")
    for depth in (1, 5, 32):
        got, want = milvus.search(queries, depth), exact.search(queries, depth)
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_allclose(got.scores, want.scores, atol=1e-5)
    if spaces == 1:  # the copies of document 3 first, by id
        assert milvus.search(x[[3]], 5).ids[0, 0].tolist() == [3, 40, 90, 91, 150]


def test_a_run_of_equal_scores_past_the_fetched_depth_is_fetched_deeper(lite):
    """Written largest id first, so Milvus Lite meets (and returns) equal scores largest id first: the first
    fetch (depth + TIE_MARGIN) holds only the largest ids of the run of ties; the answer must be the smallest."""
    client = mb.connect(lite)
    view = mb.View("v", 1, 4)
    mb.create_collection(client, "ties_written_backwards", [view], "FLAT")
    vectors = np.zeros((60, 4), np.float32)
    vectors[:, 0] = 1.0  # every document scores the same against a query along the first axis
    vectors[17, 0] = 2.0
    client.insert("ties_written_backwards", [{mb.PK: i, mb.HASH: "", "v": vectors[i]} for i in range(59, -1, -1)])
    client.flush("ties_written_backwards")
    milvus = mb.MilvusSpaces(client, "ties_written_backwards", view, 60, metric="ip")
    first = client.search("ties_written_backwards", data=[[1.0, 0, 0, 0]], anns_field="v", limit=12,
                          search_params={"metric_type": "IP"}, output_fields=[mb.PK])
    assert [h["id"] for h in first[0]][:3] == [17, 59, 58]  # what the engine alone gives
    hits = milvus.search(np.array([[[1.0, 0, 0, 0]]], np.float32), 10)
    assert hits.ids[0, 0].tolist() == [17, 0, 1, 2, 3, 4, 5, 6, 7, 8]  # 17 first, then ties by the smaller id
    assert hits.scores[0, 0].tolist() == [2.0] + [1.0] * 9


def test_strategies_on_milvus_equal_torch(lite, monkeypatch):
    monkeypatch.setenv(mb.ENV_URI, lite.uri)
    rng = np.random.default_rng(5)
    emb = random_embeddings(rng, 200, 24, 4, 6)
    emb = Embeddings(np.round(emb.standard, 1), np.round(emb.heads, 1))
    q = Embeddings(emb.standard[:4] + 0.05, emb.heads[:4] + 0.05)
    milvus = CorpusIndex.build(emb, backend="milvus")
    torch_ = CorpusIndex.build(emb, backend="torch", device="cpu")
    for a, b in zip(standard_search(milvus, q, 10), standard_search(torch_, q, 10)):
        assert a.doc_ids == b.doc_ids
    for variant in ("importance", "decay", "distance"):
        for a, b in zip(mrag_search(milvus, q, 10, 16, variant), mrag_search(torch_, q, 10, 16, variant)):
            assert a.doc_ids == b.doc_ids
            np.testing.assert_allclose(a.scores, b.scores, rtol=1e-4)
    for a, b in zip(split_search(milvus, q, 10, 16), split_search(torch_, q, 10, 16)):
        assert a.doc_ids == b.doc_ids


def test_threads_sharing_one_index_get_the_one_at_a_time_answers(lite):
    rng = np.random.default_rng(9)
    x = rng.normal(size=(400, 4, 8)).astype(np.float32)
    milvus = mb.build_milvus_index(x, "milvus", config=lite)
    queries = [rng.normal(size=(2, 4, 8)).astype(np.float32) for _ in range(12)]
    alone = [milvus.search(q, 8).ids for q in queries]
    together: list[np.ndarray | None] = [None] * len(queries)
    start = threading.Barrier(6)

    def work(k: int) -> None:
        start.wait()
        for j in range(k, len(queries), 6):
            together[j] = milvus.search(queries[j], 8).ids

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)


def test_hnsw_is_calibrated_per_space_and_vote(lite):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 3, 8)).astype(np.float32)
    votes = {"decay": lambda ids, scores, k: np.unique(ids)[:k]}
    index = mb.build_milvus_index(x, "milvus-hnsw", target_recall=0.9, votes=votes, config=lite)
    assert index.calibration is not None and index.calibration.ef.shape == (3,)
    assert index.calibration.met and index.vote_calibrations["decay"].met
    assert index.search_key("decay") == "decay" and index.search_key("importance") is None
    exact = build_index(x, "torch", device="cpu")
    got = index.search(x[:5], 10).ids
    want = exact.search(x[:5], 10).ids
    assert np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got.reshape(-1, 10), want.reshape(-1, 10))]) >= 0.9


def test_calibration_round_trips_through_json(lite):
    rng = np.random.default_rng(3)
    index = mb.build_milvus_index(rng.normal(size=(120, 2, 4)).astype(np.float32), "milvus-hnsw",
                                  votes={"v": lambda ids, scores, k: ids[0, :k]}, config=lite)
    cal, votes = mb.calibration_from_json(mb.calibration_to_json(index.calibration, index.vote_calibrations))
    np.testing.assert_array_equal(cal.ef, index.calibration.ef)
    assert votes["v"].measure == index.vote_calibrations["v"].measure


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_gets_one_clear_error_without_the_token():
    config = mb.config_from_env({mb.ENV_URI: f"http://127.0.0.1:{_free_port()}", mb.ENV_TOKEN: "root:s3cret"})
    assert "s3cret" not in repr(config)
    with pytest.raises(mb.MilvusUnavailableError) as err:
        mb.connect(config, timeout=3)
    text = str(err.value)
    assert text.startswith(f"Milvus at {config.display} cannot be reached") and mb.ENV_URI in text
    assert "s3cret" not in text


def test_uri_forms():
    assert mb.config_from_env({}) is None
    with pytest.raises(mb.MilvusUnavailableError, match="neither an http"):
        mb.config_from_env({mb.ENV_URI: "/data/milvus-folder"})
    lite = mb.config_from_env({mb.ENV_URI: "rel/x.db"})
    assert lite.is_lite and lite.uri.endswith("/rel/x.db") and lite.uri.startswith("/")
    server = mb.config_from_env({mb.ENV_URI: "https://user:pw@milvus.example:19530"})
    assert not server.is_lite and server.display == "https://milvus.example:19530"
    with pytest.raises(mb.MilvusUnavailableError, match="does not exist"):
        mb.connect(mb.MilvusConfig("/no/such/folder/x.db"))


def test_a_lite_folder_open_in_another_process_says_how_to_share_it(tmp_path):
    path = tmp_path / "held.db"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pymilvus import MilvusClient
        MilvusClient({str(path)!r}).list_collections()
        print("open", flush=True)
        sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(mb.MilvusUnavailableError, match="one process at a time") as err:
            mb.connect(mb.MilvusConfig(str(path)))
        assert "python -m milvus_lite server" in str(err.value)
    finally:
        holder.stdin.close()
        holder.wait(30)


def test_the_backend_imports_no_app_store_or_llm_module():
    code = ("import sys, mrag_core.milvus_backend; "
            "print([m for m in ('streamlit', 'sqlalchemy', 'db', 'openai') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr[-1000:]


def test_settle_waits_until_every_hnsw_index_is_built_over_every_row(lite):
    """After ``settle`` each index says Finished with no row pending, and a search sees every row (before, a load
    could read a graph file the engine was still writing)."""
    client = mb.connect(lite)
    view = mb.View("heads", 2, 8)
    mb.create_collection(client, "settle_hnsw", [view], "HNSW")
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((3000, view.width)).astype(np.float32)
    client.insert("settle_hnsw", [{mb.PK: i, mb.HASH: "h", "heads": v.tolist()} for i, v in enumerate(vectors)])
    mb.settle(client, "settle_hnsw", "HNSW")
    info = client.describe_index("settle_hnsw", "heads")
    assert (info["state"], info["pending_index_rows"], info["indexed_rows"]) == ("Finished", 0, 3000)
    assert len(client.query("settle_hnsw", filter=f"{mb.PK} >= 0", output_fields=[mb.PK], limit=16384)) == 3000


class _Loads:
    """A client whose first ``fails`` loads raise ``error`` (the engine's error, as pymilvus raises it)."""

    def __init__(self, fails: int, error: str) -> None:
        self.fails, self.error, self.calls = fails, error, 0

    def load_collection(self, name: str) -> None:
        from pymilvus.exceptions import MilvusException

        self.calls += 1
        if self.calls <= self.fails:
            raise MilvusException(code=1, message=self.error)


def test_a_load_that_reads_an_index_file_still_being_written_is_tried_again():
    eagain = "read error in .../data_000001_000023.heads.hnsw.idx: 0 != 1 (Resource temporarily unavailable)"
    client = _Loads(fails=2, error=eagain)
    mb.load_collection(client, "c")
    assert client.calls == 3
    with pytest.raises(Exception, match="Resource temporarily unavailable"):
        mb.load_collection(_Loads(fails=9, error=eagain), "c", tries=2)


def test_a_load_that_fails_otherwise_is_not_tried_again():
    client = _Loads(fails=1, error="collection not found")
    with pytest.raises(Exception, match="collection not found"):
        mb.load_collection(client, "c")
    assert client.calls == 1
