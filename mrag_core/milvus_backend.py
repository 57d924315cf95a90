"""The ``milvus`` and ``milvus-hnsw`` search backends: the spaces of an index in a Milvus collection.

Where: ``MRAG_MILVUS_URI`` names the engine, a ``*.db`` path for Milvus Lite (embedded in this process, from a
folder on disk) or ``http(s)://host:19530`` for a Milvus server or cluster; ``MRAG_MILVUS_TOKEN`` (``user:password``
or an API key) comes from the environment only and is never stored, logged or shown (:class:`MilvusConfig`).
One clear :class:`MilvusUnavailableError` names an engine that cannot be reached.

Layout: one collection per *view* of an index, each with the primary key ``id`` (the document id), ``vhash`` (a
hash of the document's stored vectors, so an update writes only what changed) and one vector field:

* ``standard`` [d]: the standard vector;
* ``heads`` [h x hd]: the h head vectors side by side, each normalised on its own (cosine);
* ``split`` [d]: the standard vector cut into h pieces, each normalised on its own (Split RAG's spaces,
  derived from the standard vector when it is written, never kept in SQL).

A view packs its spaces into one field, and a search of space ``i`` sends a *block query*: zeros except for
block ``i``, which holds the query's space-``i`` vector. Its inner product with a document is exactly
``q_i . e_i`` (the other blocks multiply zeros), so one request with ``q x h`` block queries returns every
space's top ``c`` for every query: MRAG and Split RAG cost one round trip, not h. This rather than one
field per head: a Milvus server accepts at most 10 vector fields per collection (``proxy.maxVectorFieldNum``,
default 4), fewer than 12 heads; and Milvus Lite (pure Python) makes one pass in Python over every row per
request, so h requests cost h times one. One collection per view rather than three fields in one: Milvus Lite
turns every column of every hit it returns into Python objects, so a hit costs less where it has fewer
(measured: 12 block queries, limit 10, 5,000 documents: 66 ms with one vector field, 179 ms with three).

Exactness: ``milvus`` is a FLAT (brute force) inner product over vectors normalised as the other backends
normalise them. Milvus orders equal scores as it likes, so every list is fetched :data:`TIE_MARGIN` deeper
and re-sorted by score, then by the smaller id; when a run of equal scores reaches the end of what was
fetched, that query is fetched again twice as deep, so the answer is the others' answer (ties by id).
``milvus-hnsw`` builds an HNSW graph per field; ``efSearch`` is calibrated per space and per vote as
``faiss-hnsw`` does (:mod:`mrag_core.hnsw_tuning`), and one packed request uses the largest of its spaces'.
Caveat: a packed field's graph links documents by their whole packed vector, while a block query scores one
block, so a head's neighbours are not the graph's and a recall target needs a larger ``efSearch`` than a graph
per head would (the calibration finds it; ``bench/scale.py`` at 1M documents with a fixed ``efSearch`` of 128:
Standard recall@32 0.93, MRAG's 0.29). For exact answers use ``milvus`` (FLAT).

Thread safety: a :class:`MilvusSpaces` keeps nothing per query; the client (gRPC) is shared by threads.
No Streamlit, SQL or LLM imports here; the store side is :mod:`services.workflows.milvus_sync`.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from mrag_core.backends import Hits, _prepare
from mrag_core.hnsw_tuning import (
    Calibration,
    VoteFn,
    calibrate_votes,
    calibration_sets,
    check_target,
    ef_ladder,
    recall_at,
)

MILVUS_KINDS = {"milvus": "FLAT", "milvus-hnsw": "HNSW"}
"""Backend name -> Milvus index type."""
ENV_URI = "MRAG_MILVUS_URI"
ENV_TOKEN = "MRAG_MILVUS_TOKEN"
PK = "id"
HASH = "vhash"
TIE_MARGIN = 2
"""Extra hits fetched beyond the depth asked, to re-sort equal scores by id (one is enough to see a run of equal
scores reach the cut; Milvus Lite spends about 0.25 ms on every hit it returns, so no more)."""
MAX_NQ = 4096
"""Block queries per request (Milvus accepts up to 16,384)."""
WRITE_BATCH = 1000
"""Documents per insert request (about 4.6 MB of vectors for MiniLM's three views)."""
EF_CONSTRUCTION = 80
STATE = "mrag.state"
N_DOCS = "mrag.n_docs"
LAYOUT = "mrag.layout"
CALIBRATION = "mrag.calibration"


class MilvusUnavailableError(RuntimeError):
    """The Milvus named by ``MRAG_MILVUS_URI`` cannot be used; the message says which and what to do."""


class MilvusNotReadyError(RuntimeError):
    """A collection is missing, unfinished or does not match the index it is asked for."""


@dataclass(frozen=True)
class MilvusConfig:
    """Where Milvus is: ``uri`` (a ``*.db`` path: Milvus Lite; ``http(s)://``: a server) and a ``token``
    (never in ``repr``, messages or the store)."""

    uri: str
    token: str = field(default="", repr=False)

    @property
    def is_lite(self) -> bool:
        """A Milvus Lite folder (embedded in this process) rather than a server."""
        return not self.uri.lower().startswith(("http://", "https://", "tcp://", "unix:"))

    @property
    def display(self) -> str:
        """The URI without any ``user:password@`` in it, for messages."""
        if self.is_lite:
            return self.uri
        parts = urlsplit(self.uri)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def config_from_env(env: Mapping[str, str] | None = None) -> MilvusConfig | None:
    """``MRAG_MILVUS_URI`` (and ``MRAG_MILVUS_TOKEN``) from the environment, or None when unset. A Lite path
    must end in ``.db`` (pymilvus' rule); a relative one is made absolute (every process then means the same)."""
    env = os.environ if env is None else env
    uri = (env.get(ENV_URI) or "").strip()
    if not uri:
        return None
    config = MilvusConfig(uri, (env.get(ENV_TOKEN) or "").strip())
    if config.is_lite:
        if not uri.endswith(".db"):
            raise MilvusUnavailableError(f"{ENV_URI}={uri!r} is neither an http(s):// address of a Milvus server nor "
                                         "a Milvus Lite path ending in .db (e.g. /data/mrag-milvus.db).")
        config = MilvusConfig(os.path.abspath(os.path.expanduser(uri)), config.token)
    return config


_clients: dict[tuple[str, str], Any] = {}
_clients_lock = threading.Lock()


def connect(config: MilvusConfig, timeout: float = 10.0) -> Any:
    """A ``MilvusClient`` for ``config`` (one per URI and token in a process, shared by threads; checked with
    one call). Raises :class:`MilvusUnavailableError` with one clear message (never the token)."""
    key = (config.uri, hashlib.sha256(config.token.encode()).hexdigest())
    with _clients_lock:
        client = _clients.get(key)
        if client is not None:
            return client
        try:
            from pymilvus import MilvusClient
        except ImportError as exc:  # pragma: no cover - a pinned requirement
            raise MilvusUnavailableError("pymilvus is not installed: pip install -r requirements.txt") from exc
        if config.is_lite and not os.path.isdir(os.path.dirname(config.uri) or "."):
            raise MilvusUnavailableError(f"Milvus Lite cannot open {config.uri}: the folder "
                                         f"{os.path.dirname(config.uri)} does not exist ({ENV_URI}).")
        try:
            client = MilvusClient(uri=config.uri, token=config.token, timeout=timeout)
            client.list_collections(timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - pymilvus raises several kinds; one message for all
            raise _unavailable(config, exc) from None
        _clients[key] = client
        return client


def _unavailable(config: MilvusConfig, exc: BaseException) -> MilvusUnavailableError:
    """The one message for an engine that cannot be used (``exc``'s text without the token)."""
    reason = str(getattr(exc, "message", "") or exc).strip().rstrip(".")
    if config.token:
        reason = reason.replace(config.token, "***")
    if config.is_lite:
        return MilvusUnavailableError(
            f"Milvus Lite could not open {config.uri} ({reason}). Milvus Lite serves one process at a time: if the "
            f"app or another command has it open, run one server for all of them (python -m milvus_lite server "
            f"--data-dir {config.uri} --port 19530) and set {ENV_URI}=http://127.0.0.1:19530.")
    return MilvusUnavailableError(
        f"Milvus at {config.display} cannot be reached ({reason}). Check that the server runs and that {ENV_URI} "
        f"(and {ENV_TOKEN}, if it needs one) are right.")


def pack_docs(x: np.ndarray) -> np.ndarray:
    """Prepared document vectors [n, s, d] as one packed field [n, s * d] (space ``i`` in block ``i``)."""
    n, s, d = x.shape
    return np.ascontiguousarray(x.reshape(n, s * d), dtype=np.float32)


def pack_queries(q: np.ndarray) -> np.ndarray:
    """Block queries [m * s, s * d] for prepared queries [m, s, d]: row ``j * s + i`` is zero except block ``i``,
    which is ``q[j, i]``; its inner product with a packed document is the space-``i`` similarity."""
    m, s, d = q.shape
    out = np.zeros((m, s, s, d), np.float32)
    idx = np.arange(s)
    out[:, idx, idx, :] = q
    return out.reshape(m * s, s * d)


def vector_hash(*parts: np.ndarray) -> str:
    """16 hex digits identifying one document's stored vectors (their float32 bytes)."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(np.ascontiguousarray(p, dtype="<f4").tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class View:
    """One vector field: ``n_spaces`` spaces of ``dim`` dimensions each, packed side by side."""

    field: str
    n_spaces: int
    dim: int

    @property
    def width(self) -> int:
        return self.n_spaces * self.dim


def hnsw_m(view: View) -> int:
    """HNSW links per node, as ``faiss-hnsw`` chooses them by the searched vector's width (16 up to 64-d, else 32)."""
    return 16 if view.width <= 64 else 32


def create_collection(client: Any, name: str, views: Iterable[View], index_type: str,
                      properties: Mapping[str, str] | None = None) -> None:
    """A new collection ``name``: ``id`` (INT64 primary key), ``vhash`` and one FLOAT_VECTOR field per view,
    each with an inner-product ``index_type`` (``FLAT`` or ``HNSW``) index, loaded, with ``properties``."""
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field(PK, DataType.INT64, is_primary=True)
    schema.add_field(HASH, DataType.VARCHAR, max_length=32)
    index = client.prepare_index_params()
    for view in views:
        schema.add_field(view.field, DataType.FLOAT_VECTOR, dim=view.width)
        params = {"M": hnsw_m(view), "efConstruction": EF_CONSTRUCTION} if index_type == "HNSW" else {}
        index.add_index(view.field, index_type=index_type, metric_type="IP", params=params)
    client.create_collection(name, schema=schema, index_params=index)
    if properties:
        set_properties(client, name, properties)
    load_collection(client, name)


#: How long :func:`settle` waits for Milvus to finish building a collection's indexes.
SETTLE_TIMEOUT_S = 600.0
#: Tries of a load that finds an index file still being written (Milvus Lite reads it with EAGAIN).
LOAD_TRIES = 5


def settle(client: Any, name: str, index_type: str) -> None:
    """Flush what was written; for HNSW, wait until every index has been built over every row, then release and
    load the collection so that every segment's graph is used by the next search (Milvus Lite builds them in the
    background otherwise, and searches unbuilt segments exhaustively, which a calibration would take for the
    graph's recall). Loading while the background build still wrote a segment's graph failed under load
    ("read error ... Resource temporarily unavailable"): hence the wait, and a load tried again on that error."""
    client.flush(name)
    if index_type == "HNSW":
        wait_indexed(client, name)
        client.release_collection(name)
        load_collection(client, name)


def wait_indexed(client: Any, name: str, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Wait until each index of collection ``name`` reports ``Finished`` with no row pending (``describe_index``);
    raises RuntimeError when one failed, TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    for index_name in client.list_indexes(name):
        while True:
            info = client.describe_index(name, index_name) or {}
            state = str(info.get("state", "Finished"))
            if state == "Failed":
                raise RuntimeError(f"Milvus could not build index {index_name} of {name}: {info.get('fail_reason')}")
            if state == "Finished" and int(info.get("pending_index_rows", 0) or 0) == 0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"Milvus had not built index {index_name} of {name} after {timeout_s:g} s")
            time.sleep(0.05)


def load_collection(client: Any, name: str, tries: int = LOAD_TRIES) -> None:
    """``client.load_collection(name)``, tried again (after 0.2 s, 0.4 s, ...) while it fails reading an index file
    another thread of the engine is still writing (EAGAIN); any other error is raised at once."""
    from pymilvus.exceptions import MilvusException

    for attempt in range(1, tries + 1):
        try:
            client.load_collection(name)
            return
        except MilvusException as exc:
            if attempt == tries or "Resource temporarily unavailable" not in str(exc):
                raise
            time.sleep(0.2 * attempt)


def set_properties(client: Any, name: str, properties: Mapping[str, str]) -> None:
    client.alter_collection_properties(name, properties={k: str(v) for k, v in properties.items()})


def properties(client: Any, name: str) -> dict[str, str]:
    """The collection's properties ({} when it has none)."""
    return {str(k): str(v) for k, v in (client.describe_collection(name).get("properties") or {}).items()}


def write_rows(client: Any, name: str, ids: np.ndarray, fields: Mapping[str, np.ndarray], hashes: list[str]) -> None:
    """Upsert documents ``ids`` with their packed vectors ``fields[field]`` [n, width] and ``hashes``."""
    rows = [{PK: int(doc), HASH: hashes[i], **{f: v[i] for f, v in fields.items()}} for i, doc in enumerate(ids)]
    if rows:
        client.upsert(name, rows)


def delete_ids(client: Any, name: str, ids: Iterable[int]) -> int:
    ids = [int(i) for i in ids]
    for start in range(0, len(ids), 10_000):
        client.delete(name, ids=ids[start:start + 10_000])
    return len(ids)


def stored_hashes(client: Any, name: str, batch: int = 10_000) -> dict[int, str]:
    """``{document id: vhash}`` of every row of the collection."""
    out: dict[int, str] = {}
    # Milvus Lite has no AllocTimestamp: the iterator says so at WARNING, with a traceback, and goes on without
    logging.getLogger("pymilvus.client.iterator.query_iterator").setLevel(logging.ERROR)
    it = client.query_iterator(name, batch_size=batch, filter=f"{PK} >= {-2**62}", output_fields=[PK, HASH])
    try:
        while True:
            page = it.next()
            if not page:
                return out
            out.update((int(r[PK]), str(r[HASH])) for r in page)
    finally:
        it.close()


def calibration_to_json(cal: Calibration | None, votes: Mapping[str, Calibration]) -> str:
    def one(c: Calibration) -> dict[str, Any]:
        return {"ef": c.ef.tolist(), "recall": c.recall.tolist(), "depth": c.depth, "target": c.target,
                "measure": c.measure}
    return json.dumps({"spaces": one(cal) if cal is not None else None, "votes": {k: one(v) for k, v in votes.items()}})


def calibration_from_json(text: str) -> tuple[Calibration | None, dict[str, Calibration]]:
    def one(d: dict[str, Any]) -> Calibration:
        return Calibration(np.asarray(d["ef"], np.int64), np.asarray(d["recall"], np.float64), int(d["depth"]),
                           float(d["target"]), str(d.get("measure", "")))
    data = json.loads(text) if text else {}
    spaces = data.get("spaces")
    return (one(spaces) if spaces else None), {k: one(v) for k, v in (data.get("votes") or {}).items()}


class MilvusSpaces:
    """``s`` spaces of one view, searched in a Milvus collection (a :class:`~mrag_core.backends.SpaceIndex`).

    ``doc_ids``: the ascending document ids of the index's rows (hits come back as rows, as from the other
    backends); None when the primary keys are the rows themselves. ``index_type``: ``FLAT`` (exact, ties by id)
    or ``HNSW`` (``calibration``, ``vote_calibrations`` give its ``efSearch``)."""

    def __init__(self, client: Any, collection: str, view: View, n_docs: int, metric: str = "cosine",
                 index_type: str = "FLAT", doc_ids: np.ndarray | None = None,
                 calibration: Calibration | None = None, vote_calibrations: Mapping[str, Calibration] | None = None,
                 ) -> None:
        self.client = client
        self.collection = collection
        self.view = view
        self.n_docs = int(n_docs)
        self.n_spaces = view.n_spaces
        self.dim = view.dim
        self.metric = metric
        self.index_type = index_type
        self.kind = "hnsw" if index_type == "HNSW" else "flat"
        self.doc_ids = None if doc_ids is None else np.asarray(doc_ids, np.int64)
        self.calibration = calibration
        self.vote_calibrations: dict[str, Calibration] = dict(vote_calibrations or {})

    def search_key(self, vote: str | None) -> str | None:
        """Searches for two votes with the same key return the same hits (HNSW: a vote with its own ef)."""
        return vote if self.index_type == "HNSW" and vote in self.vote_calibrations else None

    def ef_for(self, depth: int, vote: str | None = None) -> int:
        """The ``efSearch`` of one packed request of ``depth`` for ``vote``: the vote's calibrated value, else the
        largest of the spaces' (each space gets at least its own), else ``max(64, 2 depth)``."""
        if vote in self.vote_calibrations:
            return self.vote_calibrations[vote].ef_for(0, depth)
        if self.calibration is not None:
            return max(self.calibration.ef_for(s, depth) for s in range(self.n_spaces))
        return max(64, 2 * depth)

    def search(self, queries: np.ndarray, depth: int, vote: str | None = None) -> Hits:
        q = _prepare(queries, self.metric)
        if q.shape[1:] != (self.n_spaces, self.dim):
            raise ValueError(f"queries of shape {q.shape[1:]} for a view of {self.n_spaces} x {self.dim}")
        depth = min(int(depth), self.n_docs)
        ef = self.ef_for(depth, self.search_key(vote)) if self.index_type == "HNSW" else None
        ids, scores = self.search_packed(q, depth, ef)
        return Hits(ids=ids, scores=scores)

    def search_packed(self, q: np.ndarray, depth: int, ef: int | None) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, scores)`` [m, s, depth] for prepared queries ``q`` [m, s, d]: one request per :data:`MAX_NQ`
        block queries, ties re-sorted by row (= by document id)."""
        m, s, _ = q.shape
        if depth <= 0 or m == 0:
            return np.empty((m, s, 0), np.int64), np.empty((m, s, 0), np.float32)
        packed = pack_queries(q)
        ids = np.empty((m * s, depth), np.int64)
        scores = np.empty((m * s, depth), np.float32)
        for start in range(0, m * s, MAX_NQ):
            part = slice(start, min(m * s, start + MAX_NQ))
            ids[part], scores[part] = self._top(packed[part], depth, ef)
        return ids.reshape(m, s, depth), scores.reshape(m, s, depth)

    def _top(self, data: np.ndarray, depth: int, ef: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Top ``depth`` rows per block query, equal scores by the smaller row, fetched deeper where a run of
        equal scores reaches the end of what came back."""
        limit = min(self.n_docs, depth + TIE_MARGIN)
        rows, vals = self._request(data, limit, ef)
        while True:
            full = (rows[:, -1] >= 0) & (limit < self.n_docs)
            again = np.flatnonzero(full & (vals[:, depth - 1] == vals[:, limit - 1]))
            if not len(again):
                return rows[:, :depth], vals[:, :depth]
            limit = min(self.n_docs, 2 * limit)
            deeper_rows, deeper_vals = self._request(data[again], limit, ef)
            rows = np.concatenate([rows, np.full((len(rows), limit - rows.shape[1]), -1, np.int64)], axis=1)
            vals = np.concatenate([vals, np.full((len(vals), limit - vals.shape[1]), -np.inf, np.float32)], axis=1)
            rows[again], vals[again] = deeper_rows, deeper_vals

    def _request(self, data: np.ndarray, limit: int, ef: int | None) -> tuple[np.ndarray, np.ndarray]:
        """One search request: ``(rows, scores)`` [len(data), limit], each row sorted by score then row (-1 and
        -inf past the hits found)."""
        params: dict[str, Any] = {"metric_type": "IP"}
        if ef is not None:
            params["params"] = {"ef": max(int(ef), limit)}
        result = self.client.search(self.collection, data=list(data), anns_field=self.view.field, limit=limit,
                                    search_params=params, output_fields=[PK])
        rows = np.full((len(data), limit), -1, np.int64)
        vals = np.full((len(data), limit), -np.inf, np.float32)
        for j, hits in enumerate(result):
            got = len(hits)
            if not got:
                continue
            pks = np.fromiter((h["id"] for h in hits), np.int64, got)
            sc = np.fromiter((h["distance"] for h in hits), np.float32, got)
            r = self._rows(pks)
            order = np.lexsort((r, -sc))
            rows[j, :got], vals[j, :got] = r[order], sc[order]
        return rows, vals

    def _rows(self, pks: np.ndarray) -> np.ndarray:
        if self.doc_ids is None:
            return pks
        rows = np.searchsorted(self.doc_ids, pks)
        bad = (rows >= len(self.doc_ids)) | (self.doc_ids[np.minimum(rows, len(self.doc_ids) - 1)] != pks)
        if bad.any():
            raise MilvusNotReadyError(f"Milvus collection {self.collection} holds document {int(pks[bad][0])}, which "
                                      "this index does not: it is out of step with the store; update it.")
        return rows

    # ------------------------------------------------------------------ calibration (HNSW)
    def search_all(self, queries: np.ndarray, depth: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        """Every space searched with ``efSearch = ef`` (``hnsw_tuning.SearchAll``), queries prepared."""
        return self.search_packed(np.ascontiguousarray(queries, np.float32), depth, ef)

    def calibrate(self, x: np.ndarray, target: float = 0.9, depth: int = 32,
                  votes: Mapping[str, VoteFn] | None = None) -> None:
        """Calibrate ``efSearch`` on the prepared vectors ``x`` [n, s, d] this view holds: per space, the first
        ladder value whose recall@depth reaches ``target`` on both kinds of calibration queries (as
        :func:`~mrag_core.hnsw_tuning.calibrate`, with every space of a step in one request), then per vote
        (:func:`~mrag_core.hnsw_tuning.calibrate_votes`)."""
        target = check_target(target)
        depth = max(1, min(depth, self.n_docs))
        sets = calibration_sets(x, depth)
        efs = np.zeros(self.n_spaces, np.int64)
        recalls = np.full(self.n_spaces, -1.0)
        for ef in ef_ladder(depth, self.n_docs):
            todo = recalls < target
            if not todo.any():
                break
            got = [self.search_all(q, depth, ef)[0] for q, _ in sets]
            for s in np.flatnonzero(todo):
                efs[s] = ef
                recalls[s] = min(recall_at(g[:, s], exact[0][:, s]) for g, (_, exact) in zip(got, sets))
        self.calibration = Calibration(ef=efs, recall=recalls, depth=depth, target=target)
        self.vote_calibrations = calibrate_votes(self.search_all, x, dict(votes or {}), depth=depth, target=target,
                                                 sets=sets)


# ---------------------------------------------------------------------- an index built from vectors in memory
_scratch: dict[str, str] = {}


def scratch_config() -> MilvusConfig:
    """``MRAG_MILVUS_URI``, else a Milvus Lite folder of this process under the temporary directory (removed at exit),
    for indexes built from vectors in memory (the ``bench`` command, tests)."""
    config = config_from_env()
    if config is not None:
        return config
    with _clients_lock:
        if "uri" not in _scratch:
            folder = tempfile.mkdtemp(prefix="mrag-milvus-")
            atexit.register(shutil.rmtree, folder, True)
            _scratch["uri"] = os.path.join(folder, "scratch.db")
    return MilvusConfig(_scratch["uri"])


def _drop_quietly(client: Any, name: str) -> None:
    try:
        client.drop_collection(name)
    except Exception:  # noqa: BLE001 - at exit the engine may be gone already
        pass


def batches(n: int, size: int = WRITE_BATCH) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def build_milvus_index(vectors: np.ndarray, backend: str = "milvus", metric: str = "cosine",
                       target_recall: float | None = 0.9, votes: Mapping[str, VoteFn] | None = None,
                       config: MilvusConfig | None = None) -> MilvusSpaces:
    """A :class:`MilvusSpaces` over ``vectors`` [n, s, d] (rows are the primary keys) in a collection of its own,
    dropped when the index is garbage collected. ``milvus-hnsw`` is calibrated to ``target_recall``."""
    if backend not in MILVUS_KINDS:
        raise ValueError(f"unknown Milvus backend '{backend}': use one of {', '.join(MILVUS_KINDS)}")
    if target_recall is not None:
        check_target(target_recall)
    x = _prepare(vectors, metric)
    n, s, d = x.shape
    view = View("v", s, d)
    client = connect(config or scratch_config())
    name = f"mrag_scratch_{uuid.uuid4().hex[:16]}"
    index_type = MILVUS_KINDS[backend]
    create_collection(client, name, [view], index_type)
    packed = pack_docs(x)
    for part in batches(n):
        ids = np.arange(part.start, part.stop, dtype=np.int64)
        client.insert(name, [{PK: int(i), HASH: "", view.field: packed[i]} for i in ids])
    settle(client, name, MILVUS_KINDS[backend])
    index = MilvusSpaces(client, name, view, n, metric, index_type)
    dropper = weakref.finalize(index, _drop_quietly, client, name)
    dropper.atexit = not (config or scratch_config()).is_lite  # a Lite folder goes with its process
    if index_type == "HNSW" and target_recall is not None and n:
        index.calibrate(x, target_recall, votes=votes)
    return index
