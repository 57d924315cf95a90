"""``python -m mrag_core corpora``: list, rename or delete the app's stored corpora, headless.

Works on the store the app uses (``--database`` or ``$MRAG_DATABASE_URL``, else the default file).
Listing shows per corpus what a deletion removes with it (query sets, queries, indexes and their
vectors, evaluation runs). ``--delete NAME`` deletes only with ``--yes``; without it, it says what would
go and changes nothing. Bad input ends with one line ``error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
from typing import Any

from mrag_core.cli import fail, named_corpus, store_command, text_table


def add_corpora_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``corpora`` sub-command on ``subparsers`` (from ``add_subparsers``)."""
    c = subparsers.add_parser("corpora", help="list, rename or delete stored corpora")
    action = c.add_mutually_exclusive_group()
    action.add_argument("--rename", nargs=2, metavar=("NAME", "NEW_NAME"), help="rename a corpus")
    action.add_argument("--delete", metavar="NAME", help="delete a corpus and all it holds (needs --yes)")
    c.add_argument("--description", help="with --rename: a new description")
    c.add_argument("--yes", action="store_true", help="with --delete: really delete")
    c.add_argument("--database", default=None, help="SQLAlchemy URL (default $MRAG_DATABASE_URL or the app's file)")
    return c


def format_corpora(corpora: list[Any], feet: dict[int, Any]) -> str:
    """The corpora with their counts as a plain table."""
    columns = [("corpus", "<32"), ("documents", ">9"), ("categories", ">10"), ("query sets", ">10"), ("queries", ">8"),
               ("indexes", ">7"), ("vectors MB", ">10.1f"), ("evaluations", ">11")]
    return text_table(columns, [[c.name, c.n_documents, c.n_categories, feet[c.id].n_query_sets, feet[c.id].n_queries,
                                 feet[c.id].n_indexes, feet[c.id].vector_bytes / 1e6, feet[c.id].n_eval_runs]
                                for c in corpora])


@store_command
def cmd_corpora(args: argparse.Namespace, store: Any) -> int:
    """List (default), rename or delete; returns the exit status (0 done, 2 bad input or refused)."""
    import db

    if args.description is not None and not args.rename:
        return fail("--description goes with --rename")
    if args.yes and not args.delete:
        return fail("--yes goes with --delete")
    if args.rename:
        old, new = args.rename
        corpus = named_corpus(store, old)
        try:
            renamed = db.rename_corpus(store, corpus.id, new, description=args.description)
        except (db.DuplicateError, db.InvalidInputError) as exc:
            return fail(str(exc))
        print(f"renamed corpus {corpus.name!r} to {renamed.name!r}")
        return 0
    if args.delete:
        corpus = named_corpus(store, args.delete)
        from mrag_core.workflows.corpus import describe_footprint, work_in_progress

        what = describe_footprint(corpus, db.corpus_footprints(store)[corpus.id])
        busy = work_in_progress(store, corpus.id)
        if busy:
            return fail(f"{corpus.name!r} cannot be deleted now: {'; '.join(busy)}; stop that first, or wait until "
                        "it ends")
        if not args.yes:
            return fail(f"deleting {corpus.name!r} would remove {what}; add --yes to delete it")
        db.delete_corpus(store, corpus.id)
        print(f"deleted corpus {corpus.name!r}: {what}")
        return 0
    corpora = db.list_corpora(store)
    print(format_corpora(corpora, db.corpus_footprints(store)) if corpora else "no corpus yet")
    return 0
