"""``mrag-studio corpora``: list, rename or delete the app's stored corpora, and list, rename, merge or
delete the categories of one (``--corpus NAME``), headless.

Works on the store the app uses (``--database`` or ``$MRAG_DATABASE_URL``, else the default file).
Listing shows per corpus what a deletion removes with it (query sets, queries, indexes and their
vectors, evaluation runs). ``--delete NAME`` deletes only with ``--yes``; without it, it says what would
go and changes nothing. With ``--corpus``: ``--categories`` lists its categories with their documents;
``--rename-category OLD NEW`` renames one, and when NEW is another category's name (up to case and spacing)
merges the two with ``--merge`` (else says what a merge would do); ``--delete-category NAME`` deletes one whose
labels are moved with ``--move-to OTHER`` or deleted with ``--yes`` (else it says how many documents are labelled
with it and changes nothing), as on the Annotate and Review page. Bad input ends with one line ``error: ...`` and
exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mrag_core.cli_basics import fail, text_table
from services.cli.common import add_database_option, named_corpus, store_command


def add_corpora_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``corpora`` sub-command on ``subparsers`` (from ``add_subparsers``)."""
    c = subparsers.add_parser("corpora", help="list, rename or delete stored corpora, or the categories of one")
    action = c.add_mutually_exclusive_group()
    action.add_argument("--rename", nargs=2, metavar=("NAME", "NEW_NAME"), help="rename a corpus")
    action.add_argument("--delete", metavar="NAME", help="delete a corpus and all it holds (needs --yes)")
    category = c.add_mutually_exclusive_group()
    category.add_argument("--categories", action="store_true", help="with --corpus: list its categories")
    category.add_argument("--rename-category", nargs=2, metavar=("OLD", "NEW"),
                          help="with --corpus: rename a category (onto another category's name: add --merge)")
    category.add_argument("--delete-category", metavar="CATEGORY",
                          help="with --corpus: delete a category (its labels: --move-to OTHER, or --yes to delete "
                               "them)")
    c.add_argument("--corpus", metavar="NAME", help="the corpus whose categories --categories, --rename-category and "
                                                    "--delete-category work on")
    c.add_argument("--merge", action="store_true", help="with --rename-category: merge into the category named NEW")
    c.add_argument("--move-to", metavar="CATEGORY", help="with --delete-category: move its labels to this category")
    c.add_argument("--description", help="with --rename: a new description")
    c.add_argument("--yes", action="store_true", help="with --delete or --delete-category: really delete")
    add_database_option(c)
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
    if args.yes and not (args.delete or args.delete_category):
        return fail("--yes goes with --delete or --delete-category")
    if args.categories or args.rename_category or args.delete_category:
        if args.rename or args.delete:
            return fail("--rename and --delete (corpora) do not go with --categories, --rename-category or "
                        "--delete-category")
        return categories_command(args, store)
    if args.corpus or args.merge or args.move_to:
        return fail("--corpus, --merge and --move-to go with --categories, --rename-category or --delete-category")
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
        from services.workflows.corpus import describe_footprint, work_in_progress

        what = describe_footprint(corpus, db.corpus_footprints(store)[corpus.id])
        busy = work_in_progress(store, corpus.id)
        if busy:
            return fail(f"{corpus.name!r} cannot be deleted now: {'; '.join(busy)}; stop that first, or wait until "
                        "it ends")
        if not args.yes:
            return fail(f"deleting {corpus.name!r} would remove {what}; add --yes to delete it")
        db.delete_corpus(store, corpus.id)
        print(f"deleted corpus {corpus.name!r}: {what}")
        from services.workflows.milvus_sync import drop_orphans

        if left := drop_orphans(store):  # its indexes' Milvus collections
            print(f"warning: {left}", file=sys.stderr)
        return 0
    corpora = db.list_corpora(store)
    print(format_corpora(corpora, db.corpus_footprints(store)) if corpora else "no corpus yet")
    return 0


def format_categories(counts: dict[str, int], categories: list[Any]) -> str:
    """The categories with their labelled documents (``counts``: by category name) and descriptions."""
    return text_table([("category", "<32"), ("documents", ">9"), ("description", "<40")],
                      [[c.name, counts.get(c.name, 0), c.description] for c in categories])


def categories_command(args: argparse.Namespace, store: Any) -> int:
    """``--categories`` / ``--rename-category`` / ``--delete-category`` of ``--corpus``; the exit status."""
    import db
    from services.workflows import annotation as aw

    if not args.corpus:
        return fail("--categories, --rename-category and --delete-category need --corpus NAME")
    if args.merge and not args.rename_category:
        return fail("--merge goes with --rename-category")
    if args.move_to is not None and not args.delete_category:
        return fail("--move-to goes with --delete-category")
    if args.yes and args.move_to is not None:
        return fail("--yes and --move-to do not go together: --move-to keeps the labels, --yes deletes them")
    corpus = named_corpus(store, args.corpus)
    if args.categories:
        categories = db.list_categories(store, corpus.id)
        print(format_categories(db.category_counts(store, corpus.id), categories) if categories
              else f"corpus {corpus.name!r} has no categories yet")
        return 0
    try:
        if args.rename_category:
            old, new = args.rename_category
            message = aw.rename_category(store, corpus.id, old, new, merge=args.merge)
        else:
            message = aw.delete_category(store, corpus.id, args.delete_category, move_to=args.move_to,
                                         confirm=args.yes)
    except aw.MergeNeeded as exc:
        return fail(f"{exc} Add --merge to merge them; nothing was changed.")
    except aw.ConfirmationNeeded as exc:
        return fail(f"{exc} Add --yes to delete it, or --move-to CATEGORY to keep its labels; nothing was changed.")
    except (ValueError, db.StoreError) as exc:
        return fail(f"{exc} Nothing was changed.")
    print(message)
    return 0
