"""``mrag-studio index``: build, update or resume a stored corpus' index, headless.

The index (an embedding run: standard and per-head vectors of one layer) is written to the same
store the app uses (``--database`` or ``$MRAG_DATABASE_URL``, else the default SQLite file), so
Compare, Maps and Evaluation Runs use it. As on the Index page: an up-to-date index is reused, an
unfinished one resumed, and after documents were added, edited or deleted only those without
vectors of their current text are embedded (``--rebuild`` embeds everything again). Ctrl+C stops
after the current batch; the saved batches are kept and the next call resumes. ``--list`` prints
the corpus' stored indexes instead. ``--backend milvus`` (or ``milvus-hnsw``) then builds, updates or resumes
the index's Milvus collections at ``$MRAG_MILVUS_URI`` (only documents whose vectors changed are written).
Bad input ends with one line ``error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from mrag_core.cli_basics import fail, positive_int, text_table
from services.cli.common import (
    add_database_option,
    every_few_seconds,
    named_corpus,
    stop_on_ctrl_c,
    stopped_elsewhere,
    store_command,
)


def add_index_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``index`` sub-command on ``subparsers`` (from ``add_subparsers``)."""
    i = subparsers.add_parser("index", help="build, update or resume the stored index of a stored corpus")
    i.add_argument("--corpus", required=True, help="corpus name (as on the Corpus Import page)")
    i.add_argument("--model", default="minilm", help="registry name (minilm, smollm2) or a local HF folder")
    i.add_argument("--layer", type=int, default=-1, help="layer for head embeddings (default -1 = last)")
    i.add_argument("--pooling", choices=("last", "first", "mean"), help="token pooling of head vectors "
                   "(default: the model's)")
    i.add_argument("--batch-size", type=positive_int, default=16)
    i.add_argument("--rebuild", action="store_true", help="embed every document again, in a new index")
    i.add_argument("--list", action="store_true", help="list the corpus' stored indexes and exit")
    i.add_argument("--device", default="auto", help="auto | cpu | cuda")
    i.add_argument("--half", action="store_true", help="float16 weights on CUDA")
    add_database_option(i)
    i.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    i.add_argument("--backend", choices=("milvus", "milvus-hnsw"), default=None,
                   help="also build (or update, or resume) the index's Milvus collections at $MRAG_MILVUS_URI: milvus "
                        "exact, milvus-hnsw approximate (the vectors stay in the store too)")
    return i


def run_settings(run: Any) -> str:
    """``minilm, layer 5, pooling mean`` (and the precision when it is not the default float32)."""
    text = f"{run.model_name}, layer {run.layer}, pooling {run.pooling}"
    return text if run.precision == "float32" else f"{text}, {run.precision}"


def format_indexes(rows: list[Any], milvus: dict[int, str] | None = None) -> str:
    """The stored indexes (:func:`~services.workflows.indexing.stored_indexes`) as a plain table; with ``milvus``
    (run id -> the state of its Milvus collections) a column that says it."""
    columns = [("index", ">6"), ("model", "<24"), ("layer", ">5"), ("pooling", "<7"), ("precision", "<9"),
               ("state", "<10"), ("documents", ">9"), ("size MB", ">8.1f"), ("evaluations", ">11")]
    table = [[f"#{s.run.id}", s.run.model_name, s.run.layer, s.run.pooling, s.run.precision, s.state, s.run.n_saved,
              s.size_bytes / 1e6, s.evaluations] for s in rows]
    if milvus is not None:
        columns.append(("milvus", "<24"))
        for row, s in zip(table, rows):
            row.append(milvus.get(s.run.id, "-"))
    return text_table(columns, table)


def milvus_states(store: Any, rows: list[Any]) -> dict[int, str] | None:
    """Run id -> the state of its Milvus collections (``milvus ready``, ``milvus-hnsw building``, several joined by
    ``; ``, ``-`` for none) when ``MRAG_MILVUS_URI`` is set, else None. An unusable Milvus raises
    MilvusUnavailableError."""
    from mrag_core import milvus_backend
    from services.workflows.milvus_sync import collection_state

    if milvus_backend.config_from_env() is None:
        return None
    states: dict[int, str] = {}
    for s in rows:
        found = [f"{backend} {state}" for backend in ("milvus", "milvus-hnsw")
                 if (state := collection_state(store, s.run, backend)) != "missing"]
        states[s.run.id] = "; ".join(found) or "-"
    return states


@store_command
def cmd_index(args: argparse.Namespace, store: Any) -> int:
    """Build / update / resume (or list) a corpus' index; returns the exit status (0 done, 1 cancelled,
    2 bad input)."""
    from services.workflows import indexing

    corpus = named_corpus(store, args.corpus)
    if args.list:
        from mrag_core.milvus_backend import MilvusUnavailableError

        rows = indexing.stored_indexes(store, corpus.id)
        if not rows:
            print(f"corpus {corpus.name!r} has no stored index")
            return 0
        try:
            milvus = milvus_states(store, rows)
        except MilvusUnavailableError as exc:  # the table still says what the store holds
            milvus = None
            print(f"note: the Milvus state is not shown: {exc}", file=sys.stderr)
        print(format_indexes(rows, milvus))
        return 0
    if corpus.n_documents == 0:
        return fail(f"corpus {corpus.name!r} has no documents")
    from mrag_core.device import configure_threads
    from mrag_core.models.loader import ModelLoadError, load_model

    if args.backend:  # before any embedding: an unusable Milvus is one line, exit 2
        from mrag_core import milvus_backend
        from services.workflows.milvus_sync import require_config

        try:
            milvus_backend.connect(require_config())
        except milvus_backend.MilvusUnavailableError as exc:
            return fail(str(exc))
    configure_threads(args.threads)
    try:
        lm = load_model(args.model, device=args.device, half=args.half, check_layer=args.layer)
        layer = lm.layer_index(args.layer)
    except (ModelLoadError, RuntimeError, ValueError, IndexError) as exc:
        return fail(str(exc))

    cancel = threading.Event()

    def show(stage: str, done: int, total: int, eta: float | None) -> None:
        left = f", about {eta:.0f} s left" if eta is not None and done < total else ""
        print(f"{stage}: {done}/{total}{left}", file=sys.stderr, flush=True)

    report = every_few_seconds(show)  # a line every 5 s, and the last one

    def progress(done: int, total: int, eta: float | None) -> None:
        report("documents", done, total, eta)

    with stop_on_ctrl_c(cancel) as pressed:
        result = indexing.build_embedding_run(
            store, corpus.id, lm, layer=layer, pooling=args.pooling, batch_size=args.batch_size,
            progress=progress, cancel=cancel, rebuild=args.rebuild)
    run = result.run
    if result.status == "cancelled":
        # the same command with --rebuild would start yet another index and leave this one unfinished
        again = "the same command without --rebuild" if args.rebuild else "the same command"
        print(f"index #{run.id}: cancelled with {run.n_saved} of {run.n_docs} documents saved; run {again} again to "
              "resume")
        if not pressed.is_set():
            print(f"stopped: {stopped_elsewhere('a Stop button in the app')}", file=sys.stderr)
        return 1
    if result.reused:
        print(f"index #{run.id}: up to date, {run.n_saved} documents ({run_settings(run)}); nothing to embed")
    else:
        how = f"{result.embedded_now} embedded"
        if result.copied:
            how += f", {result.copied} unchanged copied from earlier indexes"
        print(f"index #{run.id}: done, {run.n_saved} documents ({how}) in {result.seconds:.1f} s; {run_settings(run)}")
    return sync_milvus(store, run, args.backend, report) if args.backend else 0


def sync_milvus(store: Any, run: Any, backend: str, report: Any) -> int:
    """Build, update or resume the Milvus collections of finished ``run``; exit status 0 done, 1 stopped, 2 refused."""
    import db
    from mrag_core import milvus_backend
    from services.workflows.milvus_sync import sync_run_collections

    cancel = threading.Event()
    try:
        with stop_on_ctrl_c(cancel):
            res = sync_run_collections(store, run.id, backend, cancel=cancel,
                                       progress=lambda done, total: report("milvus", done, total, None))
    except (milvus_backend.MilvusUnavailableError, db.RunInProgressError) as exc:
        return fail(str(exc))
    if res.status == "cancelled":
        print(f"index #{run.id}: {backend} collections stopped after {res.written} documents written; run the same "
              "command again to resume")
        return 1
    if res.status == "reused":
        print(f"index #{run.id}: {backend} collections up to date, {res.n_docs} documents")
        return 0
    taken = f", updated from index #{res.adopted_from}'s" if res.adopted_from is not None else ""
    print(f"index #{run.id}: {backend} collections ready, {res.n_docs} documents ({res.written} written, "
          f"{res.deleted} rows deleted{taken}) in {res.seconds:.1f} s")
    return 0
