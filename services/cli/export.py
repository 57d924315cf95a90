"""``mrag-studio export``: write a stored corpus, or one of its query sets, to a file headless, as the
Agreement and Export and Query Builder pages do.

A corpus: JSON Lines, CSV, Parquet or the MRAG benchmark's article JSON (``--format``; by default from the file's
extension), each document with its human label, else (unless ``--no-suggestions``) its machine suggestion marked
``label_source = "suggestion"``. A query set (``--query-set``): the MRAG benchmark's query JSON with each topic's
category and document id, which ``queries`` imports back. The file is written whole or not at all (a temporary file
beside it, renamed at the end), with the user's umask, and only at a new path or over a regular file (a symbolic
link, a FIFO or a device node there is refused). Bad input ends with one line ``error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mrag_core.cli_basics import fail, write_whole
from services.cli.common import add_database_option, named_corpus, store_command
from services.export import EXPORT_FORMATS

_BY_EXTENSION = {".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet", ".json": "benchmark"}


def add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``export`` sub-command on ``subparsers`` (from ``add_subparsers``)."""
    e = subparsers.add_parser("export", help="write a stored corpus (or one of its query sets) to a file")
    e.add_argument("path", metavar="PATH", help="the file to write (a regular file there is replaced; a link, FIFO "
                                                "or device is refused)")
    e.add_argument("--corpus", required=True, help="corpus name (as on the Corpus Import page)")
    e.add_argument("--format", choices=list(EXPORT_FORMATS), default=None,
                   help="jsonl, csv, parquet or benchmark (article JSON); default: from PATH's extension")
    e.add_argument("--no-suggestions", action="store_true",
                   help="documents nobody has decided on stay unlabelled (default: their machine suggestion)")
    e.add_argument("--skip-unlabeled", action="store_true",
                   help="benchmark format: leave unlabelled documents out (default: refuse the export)")
    e.add_argument("--query-set", metavar="NAME", default=None,
                   help="write this query set of the corpus instead, as MRAG benchmark query JSON")
    add_database_option(e)
    return e


@store_command
def cmd_export(args: argparse.Namespace, store: Any) -> int:
    """Export a corpus or a query set; returns the exit status (0 written, 2 bad input)."""
    import db
    from mrag_core.wording import counted
    from services.workflows import corpus as cw
    from services.workflows import querysets as qw

    corpus = named_corpus(store, args.corpus)
    path = Path(args.path)
    if path.is_dir():
        return fail(f"{path} is a folder: give the file to write")
    if args.query_set is not None:
        if args.format not in (None, "benchmark") or args.no_suggestions or args.skip_unlabeled:
            return fail("--query-set writes MRAG benchmark query JSON: --format, --no-suggestions and "
                        "--skip-unlabeled go with a corpus export")
        sets = [q for q in db.list_query_sets(store, corpus.id) if q.name == args.query_set.strip()]
        if not sets:
            names = ", ".join(repr(q.name) for q in db.list_query_sets(store, corpus.id)) or "none"
            return fail(f"unknown query set {args.query_set!r} in corpus {corpus.name!r} (query sets: {names})")
        text = qw.export_benchmark_json(store, sets[0].id)
        write_whole(text.encode("utf-8"), path)
        n = len(json.loads(text))
        print(f"wrote {path}: {counted(n, 'query', 'queries')} of query set {sets[0].name!r}")
        return 0
    fmt = args.format or _BY_EXTENSION.get(path.suffix.lower())
    if fmt is None:
        return fail(f"cannot tell the format from {path.name!r}: give --format ({', '.join(EXPORT_FORMATS)})")
    if args.skip_unlabeled and fmt != "benchmark":  # the other formats keep an unlabelled document, label empty
        return fail(f"--skip-unlabeled goes with the benchmark format; {EXPORT_FORMATS[fmt].name} keeps unlabelled "
                    "documents with an empty label")
    try:
        data = cw.export_documents(store, corpus.id, fmt, include_suggestions=not args.no_suggestions,
                                   unlabeled="skip" if args.skip_unlabeled else "error")
    except cw.ExportError as exc:
        hint = "; or pass --skip-unlabeled to leave them out" if fmt == "benchmark" and "no label" in str(exc) else ""
        return fail(f"cannot export {corpus.name!r}: {exc}{hint}")
    write_whole(data, path)
    n = len(json.loads(data)) if fmt == "benchmark" else corpus.n_documents  # --skip-unlabeled leaves some out
    left = corpus.n_documents - n
    left_out = f"; {counted(left, 'unlabelled document')} left out" if left else ""
    print(f"wrote {path}: {counted(n, 'document')} of {corpus.name!r} as {EXPORT_FORMATS[fmt].name} "
          f"({len(data):,} bytes){left_out}")
    return 0
