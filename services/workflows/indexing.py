"""Embedding runs joined with the store: build (resumable, cancellable), load as a search index.

A run is identified by (corpus, model, layer, pooling) at the corpus' current version.
:func:`build_embedding_run` creates such a run or resumes the newest unfinished one: it embeds
only the documents that have no vectors yet (``db.missing_documents``), saves every batch in
its own transaction (``db.save_vectors``), so a cancel or a crash loses at most one batch, and
on completion computes the head importance over all stored head vectors and records timings.
When the corpus changed, the new run first copies the vectors of every document whose text is
unchanged from earlier runs of the same settings (each vector row keeps the hash of its text), so
only new or edited documents are embedded.

:func:`load_corpus_index` turns a finished run back into a :class:`CorpusIndex` (the importance
stored with the run is reused, never recomputed), with document ids, labels and titles aligned
to the index rows. No Streamlit here.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

import db
from mrag_core.corpus_index import CorpusIndex
from mrag_core.extraction import POOLINGS, Embeddings, embed_texts, split_vectors, tokenize
from mrag_core.importance import HeadImportance, head_importance
from mrag_core.models.loader import LoadedModel
from mrag_core.wording import counted
from services.heartbeat import Heartbeat

ProgressFn = Callable[[int, int, float | None], None]
UNLABELED = "(unlabeled)"
MILVUS_BACKENDS = ("milvus", "milvus-hnsw")
DOC_FETCH_CHUNK = 500
MIN_SEARCH_DOCS = 2
"""Documents an index needs before it can be searched (:func:`load_run_index`): head importance compares pairs."""


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build_embedding_run` did.

    ``status``: ``done`` or ``cancelled``; ``embedded_now``: documents embedded in this call;
    ``resumed``: an unfinished run was continued; ``reused``: a finished run was already there
    (nothing embedded); ``copied``: documents whose vectors were taken from earlier runs of the
    same settings because their text is unchanged (:func:`db.copy_unchanged_vectors`).
    """

    run: db.EmbeddingRunInfo
    status: str
    embedded_now: int
    resumed: bool
    reused: bool
    seconds: float
    copied: int = 0


class IndexBundle(NamedTuple):
    """A run's search index with per-row document facts (row ``i`` of the index is ``doc_ids[i]``)."""

    index: CorpusIndex
    doc_ids: list[int]
    labels: list[str]
    titles: list[str]


def model_for_pooling(lm: LoadedModel, pooling: str | None) -> LoadedModel:
    """``lm`` with another head pooling (same weights; a shallow copy), or ``lm`` itself."""
    if pooling is None or pooling == lm.head_pooling:
        return lm
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling '{pooling}': use one of {', '.join(POOLINGS)}")
    return dataclasses.replace(lm, head_pooling=pooling)


def model_for_run(lm: LoadedModel, run: db.EmbeddingRunInfo) -> LoadedModel:
    """The model as the run used it (pooling), to embed queries into the run's spaces.
    Raises ValueError when ``lm`` is not the run's model."""
    if lm.spec.name != run.model_name:
        raise ValueError(f"embedding run {run.id} was made with '{run.model_name}', not '{lm.spec.name}'")
    if lm.n_heads != run.n_heads or lm.head_dim != run.head_dim:
        raise ValueError(f"model '{lm.spec.name}' does not match the shapes of embedding run {run.id}")
    return model_for_pooling(lm, run.pooling)


@dataclass(frozen=True)
class QueryWindow:
    """How much of a query the model reads: ``n_tokens`` tokens as embedded (the model's query prompt and special
    tokens included), of which it reads the first ``limit`` (``lm.spec.max_length``; the rest is cut off);
    ``chars_read`` of the query's ``length`` characters lie inside that window (None when the tokenizer gives
    no character offsets)."""

    n_tokens: int
    limit: int
    length: int
    chars_read: int | None

    @property
    def cut(self) -> bool:
        """Whether the end of the query is left out of its embedding."""
        return self.n_tokens > self.limit

    def note(self, text: str, model: str) -> str | None:
        """The cut in words (plain text: escape it for Markdown), with the last words read; None when uncut."""
        if not self.cut:
            return None
        head = f"The query is {self.n_tokens} tokens long and {model} reads at most {self.limit}: "
        if self.chars_read is None:
            return head + f"its embedding is made from its first {self.limit} tokens; the rest is left out."
        tail = " ".join(text[:self.chars_read].split()[-6:])
        return (head + f"its embedding is made from the first {self.chars_read} of its {self.length} characters, up "
                f"to \"…{tail}\"; the rest is left out.")


def query_window(lm: LoadedModel, text: str) -> QueryWindow:
    """How much of the query ``text`` ``lm`` reads when it embeds it (:class:`QueryWindow`): its tokens with the
    query prompt, untruncated, against ``lm.spec.max_length``, the truncation :func:`embed_texts` applies."""
    prompt = lm.spec.query_prompt or ""
    full = prompt + text
    n_tokens = len(tokenize(lm.tokenizer, [full], padding=False, truncation=False, return_tensors="pt")["input_ids"][0])
    limit = lm.spec.max_length
    chars_read: int | None = len(text)
    if n_tokens > limit:
        try:
            offsets = tokenize(lm.tokenizer, [full], truncation=True, max_length=limit, return_offsets_mapping=True)
            ends = [int(end) for _, end in offsets["offset_mapping"][0]]
            chars_read = max(0, max(ends, default=0) - len(prompt))
        except (TypeError, NotImplementedError, KeyError):  # a tokenizer without character offsets
            chars_read = None
    return QueryWindow(n_tokens, limit, len(text), chars_read)


def precision_of(lm: LoadedModel) -> str:
    """The weights' dtype as an embedding run records it: ``"float32"``, ``"float16"``..."""
    return str(lm.dtype).removeprefix("torch.")


def find_run(store: db.Store, corpus_id: int, model_name: str, layer: int, pooling: str,
             precision: str | None = None) -> db.EmbeddingRunInfo | None:
    """The newest run for these settings (any status; of ``precision`` when given), or None."""
    return db.latest_embedding_run(store, corpus_id, model_name, layer, pooling, precision=precision)


def run_state(store: db.Store, run: db.EmbeddingRunInfo | None) -> str:
    """``missing`` (no run), ``stale`` (corpus changed since), ``done``, ``building`` (unfinished, and some
    process keeps its heartbeat fresh: :func:`db.is_live`) or ``partial`` (unfinished, resumable)."""
    if run is None:
        return "missing"
    if db.is_stale(store, run):
        return "stale"
    if run.status == "done":
        return "done"
    return "building" if run.live else "partial"


def preferred_index(runs: list[db.EmbeddingRunInfo], stale: set[int]) -> db.EmbeddingRunInfo:
    """The index a page opens on when the user has named none: among the current indexes (all, when every one is
    stale), those of the newest one's model, pooling and precision; of these the deepest layer (MRAG's default
    is the last layer), the newest on a tie. After a layer sweep (which builds layers in the order asked) that is
    the last layer's index, not whichever layer the sweep built last. ``runs`` must not be empty."""
    if not runs:
        raise ValueError("no index to choose from")
    pool = [r for r in runs if r.id not in stale] or list(runs)
    newest = max(pool, key=lambda r: r.id)
    same = [r for r in pool if (r.model_name, r.pooling, r.precision) == (newest.model_name, newest.pooling,
                                                                          newest.precision)]
    return max(same, key=lambda r: (r.layer, r.id))


def _doc_texts(store: db.Store, ids: list[int]) -> dict[int, tuple[str, str]]:
    """``{document id: (text, content hash)}``."""
    out: dict[int, tuple[str, str]] = {}
    for start in range(0, len(ids), DOC_FETCH_CHUNK):
        for row in db.get_documents(store, ids[start:start + DOC_FETCH_CHUNK]):
            out[row.id] = (row.text, row.content_hash)
    return out


def copy_from_earlier_runs(store: db.Store, run_id: int) -> int:
    """Copy into ``run_id`` the vectors of every document whose text is unchanged since an earlier run of
    the same corpus, model, layer, pooling and precision computed them (newest run first); returns how many."""
    return sum(db.copy_unchanged_vectors(store, earlier, run_id) for earlier in db.reuse_candidates(store, run_id))


def build_embedding_run(
    store: db.Store,
    corpus_id: int,
    lm: LoadedModel,
    *,
    layer: int = -1,
    pooling: str | None = None,
    batch_size: int = 16,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    rebuild: bool = False,
    importance_pairs_per_doc: int = 16,
) -> BuildResult:
    """Create or resume the run of (corpus, model, layer, pooling, precision) and embed what is missing.
    The precision is the model's weights' dtype (:func:`precision_of`): a float16 build never resumes
    or copies from a float32 run, nor the other way round.

    * A finished, non-stale run is returned as is (``reused``) unless ``rebuild``.
    * An unfinished (running/cancelled/failed) non-stale run is resumed: only
      ``db.missing_documents`` are embedded.
    * Otherwise (none, stale, or ``rebuild``) a new run is created at the corpus' current version.
    * Unless ``rebuild``, documents whose text is unchanged since an earlier run of the same settings
      computed their vectors get those vectors copied (:func:`copy_from_earlier_runs`): after an import
      of 10 documents into a corpus of 10,000, only the 10 are embedded.

    ``progress(done, total, eta_s)`` is called after each saved batch (``eta_s`` None until a batch
    has been timed). Setting ``cancel`` stops between batches: the run is marked ``cancelled``
    and keeps its saved vectors. Any other error marks it ``failed`` and is re-raised.
    """
    t_start = time.perf_counter()
    layer_idx = lm.layer_index(layer)
    lm = model_for_pooling(lm, pooling)
    pooling = lm.head_pooling
    name = lm.spec.name
    precision = precision_of(lm)
    existing = None if rebuild else find_run(store, corpus_id, name, layer_idx, pooling, precision)
    state = run_state(store, existing)
    if existing is not None and state == "done" and not db.missing_documents(store, existing.id):
        return BuildResult(existing, "done", 0, resumed=False, reused=True, seconds=0.0)
    resumed = existing is not None and state in ("partial", "building", "done")
    owner = db.new_owner()  # this claim: stored with the run, beaten while it works (db.liveness)
    if resumed:
        assert existing is not None
        # RunInProgressError: another process builds it; a busy database (an import's chunk) is waited out
        run = db.when_free(lambda: db.claim_embedding_run(store, existing.id, owner))
    else:
        run = db.when_free(lambda: db.create_embedding_run(
            store, corpus_id, model_name=name, model_path=str(lm.path), layer=layer_idx, pooling=pooling,
            n_heads=lm.n_heads, head_dim=lm.head_dim, dim=lm.hidden_size, precision=precision, owner=owner,
        ))
    cancel = cancel if cancel is not None else threading.Event()
    with Heartbeat(lambda: db.beat_embedding_run(store, run.id, owner), db.BEAT_EVERY_S, on_lost=cancel.set):
        return _embed_missing(store, run, lm, layer_idx=layer_idx, batch_size=batch_size, progress=progress,
                              cancel=cancel, rebuild=rebuild, resumed=resumed,
                              importance_pairs_per_doc=importance_pairs_per_doc, owner=owner, t_start=t_start)


def _embed_missing(store: db.Store, run: db.EmbeddingRunInfo, lm: LoadedModel, *, layer_idx: int, batch_size: int,
                   progress: ProgressFn | None, cancel: threading.Event, rebuild: bool, resumed: bool,
                   importance_pairs_per_doc: int, owner: str, t_start: float) -> BuildResult:
    """:func:`build_embedding_run`'s body once ``owner`` has claimed ``run``: embed its missing documents, then
    store the head importance and its final status (only while the run is still ``owner``'s)."""
    prior_embed_s = float(run.timings.get("embed_s", 0.0)) if resumed else 0.0
    prior_copied = int(run.timings.get("copied", 0)) if resumed else 0
    copied = 0
    embedded = 0
    embed_s = 0.0
    try:
        copied = 0 if rebuild else copy_from_earlier_runs(store, run.id)
        missing = db.missing_documents(store, run.id)
        total = (run.n_saved if resumed else 0) + copied + len(missing)
        done = total - len(missing)
        texts = _doc_texts(store, missing)
        # Longest first: batches of similar length waste less padding.
        order = sorted(missing, key=lambda d: -len(texts[d][0]) if d in texts else 0)
        if progress is not None:
            progress(done, total, None)
        for start in range(0, len(order), batch_size):
            if cancel.is_set():
                info = db.finish_embedding_run(
                    store, run.id, status="cancelled", owner=owner,
                    timings={"embed_s": prior_embed_s + embed_s, "batch_size": batch_size,
                             "copied": prior_copied + copied},
                )
                return BuildResult(info, "cancelled", embedded, resumed, False, time.perf_counter() - t_start, copied)
            ids = order[start:start + batch_size]
            t0 = time.perf_counter()
            emb = embed_texts(lm, [texts[d][0] for d in ids], kind="doc", layer=layer_idx, batch_size=len(ids))
            db.when_free(lambda: db.save_vectors(store, run.id, ids, emb.standard, emb.heads,
                                                 content_hashes=[texts[d][1] for d in ids]))
            embed_s += time.perf_counter() - t0
            embedded += len(ids)
            done += len(ids)
            if progress is not None:
                rate = embedded / embed_s if embed_s > 0 else None
                progress(done, total, (total - done) / rate if rate else None)
        t0 = time.perf_counter()
        _, std, heads = db.load_vectors(store, run.id)
        imp = importance_record(std, heads, importance_pairs_per_doc) if len(heads) >= 2 else None
        importance_s = time.perf_counter() - t0
        all_embed_s = prior_embed_s + embed_s
        timings = {
            "embed_s": all_embed_s, "importance_s": importance_s, "batch_size": batch_size,
            "docs_per_s": ((len(heads) - prior_copied - copied) / all_embed_s) if all_embed_s > 0 else None,
            "device": str(lm.device), "copied": prior_copied + copied,
        }
        info = db.when_free(lambda: db.finish_embedding_run(store, run.id, status="done", owner=owner,
                                                            importance=imp, timings=timings))
        return BuildResult(info, "done", embedded, resumed, False, time.perf_counter() - t_start, copied)
    except BaseException as exc:
        try:
            db.finish_embedding_run(store, run.id, status="failed", error=f"{type(exc).__name__}: {exc}",
                                    timings={"embed_s": prior_embed_s + embed_s}, owner=owner)
        except Exception:  # noqa: BLE001 - keep the original error
            pass
        raise


def importance_record(standard: np.ndarray, heads: np.ndarray, pairs_per_doc: int = 16) -> dict:
    """What a finished run stores as its importance: the heads' (``norm``, ``spread``, ``score``) and, under
    ``split``, Split RAG's pieces' (so a search in Milvus needs no vectors in this process to weigh them)."""
    record = head_importance(heads, pairs_per_doc=pairs_per_doc).to_dict()
    record["split"] = head_importance(split_vectors(standard, heads.shape[1]), pairs_per_doc=pairs_per_doc).to_dict()
    return record


def run_importance(run: db.EmbeddingRunInfo) -> HeadImportance | None:
    """The head importance stored with a run (None while unfinished)."""
    return HeadImportance.from_dict(run.importance) if run.importance else None


def load_run_embeddings(store: db.Store, run_id: int) -> tuple[list[int], Embeddings]:
    """All stored vectors of a run: (doc ids ascending, embeddings in that order)."""
    ids, std, heads = db.load_vectors(store, run_id)
    return [int(i) for i in ids], Embeddings(std, heads)


def load_run_index(store: db.Store, run_id: int, backend: str = "torch", seed: int = 0
                   ) -> tuple[list[int], CorpusIndex]:
    """``(document ids, CorpusIndex)`` over a run's vectors (row ``i`` is ``ids[i]``, ascending ids), the run's
    stored importance reused (it was sampled with seed 0); another ``seed`` samples the importance pairs again
    with that seed. ``milvus`` / ``milvus-hnsw``: the run's Milvus collections, built by
    :func:`~services.workflows.milvus_sync.sync_run_collections` (MilvusNotReadyError until they are ready).
    Raises ValueError if the run is not finished or has fewer than two documents."""
    run = db.get_embedding_run(store, run_id)
    if run.status != "done":
        raise ValueError(f"embedding run {run_id} is not finished (status: {run.status}); build it first")
    if backend in MILVUS_BACKENDS:  # the vectors stay in Milvus; this process holds the document ids
        if run.n_saved < MIN_SEARCH_DOCS:
            raise ValueError(f"embedding run {run_id} holds {run.n_saved} document(s); at least two are needed")
        from services.workflows.milvus_sync import open_run_index

        return open_run_index(store, run_id, backend, seed)
    ids, emb = load_run_embeddings(store, run_id)
    if len(ids) < MIN_SEARCH_DOCS:
        raise ValueError(f"embedding run {run_id} holds {len(ids)} document(s); at least two are needed")
    stored = run_importance(run) if seed == 0 else None
    return ids, CorpusIndex.build(emb, backend=backend, seed=seed, head_importance_override=stored)


def search_backends() -> tuple[str, ...]:
    """The search backends a page offers: the in-process ones, and the Milvus ones when ``MRAG_MILVUS_URI`` is set."""
    from mrag_core.milvus_backend import MilvusUnavailableError, config_from_env
    from mrag_core.settings import BACKENDS, IN_PROCESS

    try:
        return BACKENDS if config_from_env() is not None else IN_PROCESS
    except MilvusUnavailableError:  # a malformed URI: the Milvus backends are offered and say what is wrong
        return BACKENDS


def serving_backend(store: db.Store, run: db.EmbeddingRunInfo) -> str:
    """The backend a finished run is searched with where none is chosen (Maps, the Reader, evaluation runs, Compare's
    default): ``milvus`` (exact) when ``MRAG_MILVUS_URI`` is set and the run's collections are ready, so the vectors
    stay out of this process; else ``torch``. Raises MilvusUnavailableError when the Milvus named cannot be used."""
    from mrag_core.milvus_backend import config_from_env

    if config_from_env() is None:
        return "torch"
    from services.workflows.milvus_sync import collection_state

    return "milvus" if collection_state(store, run, "milvus") == "ready" else "torch"


def too_small_to_search(run: db.EmbeddingRunInfo) -> str | None:
    """Why a finished ``run`` cannot be searched, in words (it holds fewer than :data:`MIN_SEARCH_DOCS`
    documents: :func:`load_run_index` would refuse it), or None when it can."""
    if run.n_saved >= MIN_SEARCH_DOCS:
        return None
    held = "no documents" if run.n_saved == 0 else counted(run.n_saved, "document")
    return (f"Index #{run.id} holds {held}; searching needs at least {MIN_SEARCH_DOCS} (head importance compares "
            "pairs of documents). Add documents on the Corpus Import page, then update the index on the Index page.")


def document_facts(store: db.Store, ids: list[int]) -> tuple[list[str], list[str]]:
    """``(labels, titles)`` of these documents as they are now: effective labels (``(unlabeled)`` when none)
    and titles (``#id`` for a document deleted since)."""
    rows = {r.id: r for start in range(0, len(ids), DOC_FETCH_CHUNK)
            for r in db.get_documents(store, ids[start:start + DOC_FETCH_CHUNK])}
    labels = [rows[i].label or UNLABELED if i in rows else UNLABELED for i in ids]
    titles = [rows[i].title if i in rows else f"#{i}" for i in ids]
    return labels, titles


def load_corpus_index(store: db.Store, run_id: int, backend: str = "torch", seed: int = 0) -> IndexBundle:
    """:func:`load_run_index` with the documents' current :func:`document_facts`."""
    ids, index = load_run_index(store, run_id, backend, seed)
    return IndexBundle(index, ids, *document_facts(store, ids))


@dataclass(frozen=True)
class StoredIndex:
    """One stored embedding run of a corpus, for the list of indexes.

    ``state``: ``current`` (the newest run of its settings, finished, corpus unchanged since),
    ``superseded`` (a newer finished run of the same settings and precision exists: an unfinished one, a cancelled
    rebuild say, replaces nothing), ``stale`` (the corpus changed since) or ``unfinished``; ``size_bytes``: its
    vectors (float32); ``evaluations``: evaluation runs that searched it.
    """

    run: db.EmbeddingRunInfo
    state: str
    size_bytes: int
    evaluations: int

    @property
    def settings(self) -> tuple[int, str, int, str]:
        """(corpus, model, layer, pooling): the key of :func:`find_run` and of a build job."""
        return (self.run.corpus_id, self.run.model_name, self.run.layer, self.run.pooling)


def stored_indexes(store: db.Store, corpus_id: int) -> list[StoredIndex]:
    """Every embedding run of the corpus, newest first, with its state (``current``, ``building`` (by a process
    whose heartbeat is fresh), ``unfinished``, ``stale`` or ``superseded``), size and use."""
    runs = db.list_embedding_runs(store, corpus_id)
    used: dict[int, int] = {}
    for ev in db.list_eval_runs(store, corpus_id=corpus_id):
        if ev.embedding_run_id is not None:
            used[ev.embedding_run_id] = used.get(ev.embedding_run_id, 0) + 1
    newest: set[tuple] = set()
    out = []
    for run in runs:  # newest first
        key = (run.model_name, run.layer, run.pooling, run.precision)
        if key in newest:
            state = "superseded"
        elif db.is_stale(store, run):
            state = "stale"
        else:
            state = "current" if run.status == "done" else "building" if run.live else "unfinished"
        if run.status == "done":
            newest.add(key)
        size = run.n_saved * (run.dim + run.n_heads * run.head_dim) * 4
        out.append(StoredIndex(run, state, size, used.get(run.id, 0)))
    return out


class BuildJob:
    """:func:`build_embedding_run` on a background thread, observable and cancellable; with ``milvus`` (a Milvus
    backend) then :func:`~services.workflows.milvus_sync.sync_run_collections` (``stage`` ``milvus``).

    The UI starts one, then polls :attr:`done`, :attr:`total`, :attr:`eta_s`, :attr:`finished`;
    :meth:`cancel` stops it between batches. ``result`` or ``error`` is set when it ends.
    """

    def __init__(self, store: db.Store, corpus_id: int, lm: LoadedModel, *, milvus: str | None = None,
                 **kwargs: object) -> None:
        self.milvus = milvus  # a Milvus backend: then its collections are built (or updated, resumed) too
        self.stage = "embedding"
        self.milvus_result: object | None = None
        self.cancel_event = threading.Event()
        self.done = 0
        self.total = 0
        self.eta_s: float | None = None
        self.result: BuildResult | None = None
        self.error: BaseException | None = None
        self.started = time.time()
        self._args = (store, corpus_id, lm)
        self._kwargs = kwargs
        self._thread = threading.Thread(target=self._work, name="mrag-embedding-build", daemon=True)

    def start(self) -> "BuildJob":
        self._thread.start()
        return self

    def _progress(self, done: int, total: int, eta_s: float | None) -> None:
        self.done, self.total, self.eta_s = done, total, eta_s

    def _work(self) -> None:
        try:
            result = build_embedding_run(*self._args, progress=self._progress, cancel=self.cancel_event,
                                         **self._kwargs)  # type: ignore[arg-type]
            if self.milvus and result.status == "done":
                from services.workflows.milvus_sync import sync_run_collections

                self.stage, self.done, self.total, self.eta_s = "milvus", 0, result.run.n_saved, None
                self.milvus_result = sync_run_collections(
                    self._args[0], result.run.id, self.milvus, cancel=self.cancel_event,
                    progress=lambda done, total: self._progress(done, total, None))
            self.result = result
        except BaseException as exc:  # noqa: BLE001 - reported to the UI
            self.error = exc

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def finished(self) -> bool:
        return not self._thread.is_alive() and (self.result is not None or self.error is not None)

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return self.finished


# --------------------------------------------------------------------------- the store, for the pages


def list_embedding_runs(
    store: db.Store,
    corpus_id: int | None = None,
    status: str | None = None,
) -> list[db.EmbeddingRunInfo]:
    """The indexes (embedding runs) of a corpus, or of all, optionally of one status
    (:func:`db.list_embedding_runs`)."""
    return db.list_embedding_runs(store, corpus_id, status)


def get_embedding_run(store: db.Store, run_id: int) -> db.EmbeddingRunInfo:
    """The index (embedding run) ``run_id`` (raises ``NotFoundError``) (:func:`db.get_embedding_run`)."""
    return db.get_embedding_run(store, run_id)


def delete_embedding_run(store: db.Store, run_id: int) -> None:
    """Delete an index with its vectors and maps (:func:`db.delete_embedding_run`)."""
    return db.delete_embedding_run(store, run_id)


def request_embedding_stop(store: db.Store, run_id: int) -> bool:
    """Ask a running index build to stop (wherever it runs); True when asked now (:func:`db.request_embedding_stop`)."""
    return db.request_embedding_stop(store, run_id)


def embedding_stop_requested(store: db.Store, run_id: int) -> bool:
    """Whether a stop was asked of the index build ``run_id`` (:func:`db.embedding_stop_requested`)."""
    return db.embedding_stop_requested(store, run_id)


def unchanged_documents(store: db.Store, run_id: int) -> int:
    """How many of the index's documents are unchanged since it was built (:func:`db.unchanged_documents`)."""
    return db.unchanged_documents(store, run_id)


def is_stale(store: db.Store, run: db.EmbeddingRunInfo | int) -> bool:
    """Whether the corpus changed since the index was built (:func:`db.is_stale`)."""
    return db.is_stale(store, run)
