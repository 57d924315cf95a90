"""``mrag-studio import`` and ``queries``: create a corpus and its query set headless.

With ``index`` and ``eval`` they run the app's whole pipeline without a browser (a GPU box over SSH):

    mrag-studio import --corpus Wiki wikipedia_articles_v1.json.bz2
    mrag-studio queries --corpus Wiki --name "Wiki queries" wikipedia_queries_v1.json.bz2
    mrag-studio index --corpus Wiki
    mrag-studio eval --corpus Wiki --query-set "Wiki queries"

``import`` reads files as the Corpus Import page does (:mod:`services.workflows.corpus`): tables (CSV /
TSV / JSON / JSONL / Parquet, optionally .bz2 / .gz; the text, title and label columns guessed from their
names unless given), ZIPs of text files (folder = label), plain .txt / .md files, and the MRAG legal /
accident topic layout (a folder or archive). The preview's problems are listed row by row; documents with
an error are left out, the others are written all or nothing (in chunks nobody sees until the last transaction
publishes them: a Ctrl+C or a kill leaves nothing; nothing at all when none is left), and ``--dry-run`` writes
nothing. ``queries`` imports a benchmark query file (:func:`~services.workflows.
querysets.import_benchmark_queries`); queries whose topic names no document are kept flagged and listed.
Bad input ends with one line ``error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mrag_core.cli_basics import CLIError, positive_int
from mrag_core.wording import counted
from services.cli.common import add_database_option, named_corpus, print_progress, store_command

KINDS = ("auto", "table", "zip", "wikipedia", "topics", "text")
TEXT_SUFFIXES = (".txt", ".md")
SHOWN_ISSUES = 20


def add_import_parsers(subparsers: Any) -> None:
    """Register the ``import`` and ``queries`` sub-commands on ``subparsers`` (from ``add_subparsers``)."""
    i = subparsers.add_parser("import", help="import documents into a new (or, with --add, an existing) corpus")
    i.add_argument("paths", nargs="+", metavar="PATH", help="files (or one folder of the topic layout / text files)")
    i.add_argument("--corpus", required=True, help="name of the corpus to create (or, with --add, to add to)")
    i.add_argument("--add", action="store_true", help="add to the existing corpus of that name")
    i.add_argument("--kind", choices=KINDS, default="auto",
                   help="auto: a folder is the topic layout (a folder of .txt / .md files and no .json: its text "
                        "files), .zip a ZIP of text files, .txt / .md plain text, anything else a table (each "
                        "file's columns guessed on its own); wikipedia: the MRAG benchmark's article JSON [{title, "
                        "text, label}]")
    i.add_argument("--text-column", help="table: the column holding the text (default: guessed from the names)")
    i.add_argument("--title-column", help="table: the title column (default: guessed)")
    i.add_argument("--label-column", help="table: the label column (default: guessed)")
    i.add_argument("--label", help="text files: the label of every document")
    i.add_argument("--no-folder-labels", action="store_true", help="zip: do not use folder names as labels")
    i.add_argument("--chunk", choices=("none", "paragraphs", "chars"), default="none",
                   help="split long documents: paragraphs merged to --min-chars..--max-chars, or fixed "
                        "--chunk-size characters with --overlap")
    i.add_argument("--chunk-size", type=positive_int, default=1500, help="--chunk chars: characters per chunk (1500)")
    i.add_argument("--overlap", type=int, default=150,
                   help="--chunk chars: characters shared by neighbouring chunks (150; less than --chunk-size)")
    i.add_argument("--min-chars", type=positive_int, default=800,
                   help="--chunk paragraphs: paragraphs are merged up to at least this many characters (800)")
    i.add_argument("--max-chars", type=positive_int, default=4000,
                   help="--chunk paragraphs: at most this many characters per chunk (4000)")
    i.add_argument("--keep-duplicates", action="store_true",
                   help="import texts that repeat within the files or are already in the corpus")
    i.add_argument("--dry-run", action="store_true", help="show what would be imported; write nothing")
    add_database_option(i)

    q = subparsers.add_parser("queries", help="import a benchmark query file as a query set of a stored corpus")
    q.add_argument("path", metavar="PATH", help="queries JSON / JSONL (.bz2 / .gz) of {topics | related, text, "
                                                "fusion}, or CSV / TSV with text and topics (titles split by |)")
    q.add_argument("--corpus", required=True, help="corpus name")
    q.add_argument("--name", required=True, help="name of the new query set")
    add_database_option(q)


def _text_folder(path: Path) -> bool:
    """Whether the folder ``path`` holds .txt / .md files and no .json file (so it cannot be the topic layout)."""
    names = [f.name.lower() for f in path.rglob("*") if f.is_file()]
    return any(n.endswith(TEXT_SUFFIXES) for n in names) and not any(n.endswith(".json") for n in names)


def guess_kind(paths: list[Path]) -> str:
    """The source kind of ``paths`` for ``--kind auto``: a folder is the topic layout, unless it holds .txt / .md
    files and no .json file (then its text files are read); a ``.zip`` is a ZIP of text files, ``.txt`` / ``.md``
    files plain text, anything else a table."""
    folders = [p for p in paths if p.is_dir()]
    if folders:
        return "text" if all(_text_folder(p) for p in folders) else "topics"
    names = [p.name.lower() for p in paths]
    if all(n.endswith(".zip") for n in names):
        return "zip"
    if all(n.endswith(TEXT_SUFFIXES) for n in names):
        return "text"
    return "table"


def _read_files(paths: list[Path], kind: str, linked: list[str] | None = None) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every file; a folder given for plain text contributes its .txt / .md files, not its
    symbolic links (as ``read_text_folder`` does: a link could lead anywhere), whose names (paths in the folder, as
    its files are named) go to ``linked``."""
    files: list[tuple[str, bytes]] = []
    for p in paths:
        if p.is_dir():
            if kind != "text":
                raise CLIError(f"{p} is a folder; only the topic layout (--kind topics) or text files "
                               "(--kind text) can be read from a folder")
            texts = sorted(f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(TEXT_SUFFIXES))
            inner = [f for f in texts if not f.is_symlink()]
            if linked is not None:
                linked.extend(f.relative_to(p).as_posix() for f in texts if f.is_symlink())
            if not inner:
                raise CLIError(f"{p} holds no .txt or .md file" + (" that is not a symbolic link" if texts else ""))
            files.extend((f.relative_to(p).as_posix(), f.read_bytes()) for f in inner)
        else:
            files.append((p.name, p.read_bytes()))
    return files


class UnreadableTable(CLIError):
    """A table whose columns cannot be read at all (e.g. a CSV quote never closed)."""


def _mapping(args: argparse.Namespace, name: str, data: Any, fmt: str) -> Any:
    """The column mapping of a table (``data``: its path, or its text opened once): the columns named by the
    options, the others guessed."""
    from services.ingest import ColumnMapping, IngestError, sniff_columns, suggest_mapping

    try:
        columns = sniff_columns(data, fmt, name)
    except IngestError as exc:  # its message starts with the file name already
        message = str(exc)
        raise UnreadableTable(f"cannot read {name}: {message.removeprefix(f'{name}: ')}") from None
    for option, col in (("--text-column", args.text_column), ("--title-column", args.title_column),
                        ("--label-column", args.label_column)):
        if col is not None and col not in columns:
            raise CLIError(f"{name} has no column {col!r} ({option}); its columns: {', '.join(columns)}")
    guess = suggest_mapping(columns)
    text = args.text_column or (guess.text if guess else None)
    if text is None:
        raise CLIError(f"cannot tell which column of {name} holds the text (columns: {', '.join(columns)}); "
                       "name it with --text-column")
    return ColumnMapping(text=text, title=args.title_column or (guess.title if guess else None),
                         label=args.label_column or (guess.label if guess else None))


def _table_files(paths: list[Path], args: argparse.Namespace) -> list[Any]:
    """Every table as a :class:`~services.workflows.import_stream.TableFile` read from its path (streamed, never
    held whole), its text opened once; one whose columns cannot be read is left out with its error (as on the
    page), and all of them unreadable is refused."""
    from services.ingest import ImportIssue, IngestError, guess_format, text_source
    from services.workflows.import_stream import TableFile

    tables: list[Any] = []
    unreadable: list[str] = []
    for p in paths:
        if p.is_dir():
            raise CLIError(f"{p} is a folder; only the topic layout (--kind topics) or text files "
                           "(--kind text) can be read from a folder")
        fmt = guess_format(p.name)
        if fmt is None:
            raise CLIError(f"cannot tell the table format of {p.name} from its name; use .csv, .tsv, .json, "
                           ".jsonl or .parquet (or --kind)")
        try:
            data = text_source(p, p.name) if fmt != "parquet" else p
            tables.append(TableFile(p.name, data, fmt, _mapping(args, p.name, data, fmt)))
        except (UnreadableTable, IngestError) as exc:  # left out whole, its problem listed as an error
            why = str(exc).removeprefix(f"cannot read {p.name}: ").removeprefix(f"{p.name}: ")
            unreadable.append(f"cannot read {p.name}: {why}")
            tables.append(TableFile(p.name, p, fmt, None, ImportIssue.of_file(
                p.name, f"the file cannot be read, so it is left out: {why}")))
    if len(unreadable) == len(paths):  # nothing to import: refused, nothing written
        raise CLIError("; ".join(unreadable))
    return tables


def read_source(args: argparse.Namespace) -> tuple[list[Any], Any, str]:
    """What the command's files hold, ready to be read as a stream (nothing written): the tables (read row by row,
    from disk) or the preview of the other kinds (read whole), and the source kind read (``auto`` resolved); raises
    CLIError."""
    from services.ingest import ImportIssue
    from services.workflows import corpus as cw

    paths = [Path(p).expanduser() for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise CLIError(f"no such file or folder: {', '.join(missing)}")
    kind = guess_kind(paths) if args.kind == "auto" else args.kind
    if kind == "topics":
        if len(paths) != 1:
            raise CLIError("the topic layout is read from one folder (or one archive of it)")
        return [], cw.read_topic_folder(paths[0]), kind
    if kind == "table":  # each table with its own columns: a CSV and a JSONL may name them differently
        return _table_files(paths, args), None, kind
    linked: list[str] = []
    files = _read_files(paths, kind, linked)
    try:
        read = cw.read_upload(kind, files, label_from_folder=not args.no_folder_labels, label=args.label)
        read.issues[:0] = [ImportIssue.of_file(name, "symbolic link skipped", "warning") for name in linked]
        return [], read, kind
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def chunk_options(args: argparse.Namespace) -> Any:
    """The :class:`~services.workflows.corpus.ChunkOptions` of ``--chunk`` (None: no chunking)."""
    from services.workflows.corpus import ChunkOptions

    if args.chunk == "none":
        return None
    if args.chunk == "chars":
        return ChunkOptions(method="chars", size=args.chunk_size, overlap=args.overlap)
    return ChunkOptions(method="paragraphs", min_chars=args.min_chars, max_chars=args.max_chars)


def format_issues(issues: list[Any], limit: int = SHOWN_ISSUES, total: int | None = None) -> str:
    """The first ``limit`` import issues, one per line naming the file and the row or line (``ERROR data.csv row 7:
    ...``, ``ERROR notes.zip:physics/a.md: ...`` for a member of an archive), and how many more there are (of
    ``total``, when only the first issues were kept)."""
    total = len(issues) if total is None else total
    lines = [f"  {issue}" for issue in issues[:limit]]
    if total > limit:
        lines.append(f"  ... and {total - limit} more")
    return "\n".join(lines)


@store_command
def cmd_import(args: argparse.Namespace, store: Any) -> int:
    """Read, check and import documents; returns the exit status (0 imported or previewed, 2 bad input)."""
    import db
    from services.workflows import corpus as cw

    existing = None
    if args.add:
        existing = named_corpus(store, args.corpus)
    else:  # checked before the files are read; the store strips the name as it saves it
        name = args.corpus.strip()
        if not name:
            raise CLIError("--corpus needs the name of the new corpus (or, with --add, of the corpus to add to)")
        if any(c.name == name for c in db.list_corpora(store)):
            raise CLIError(f"a corpus named {name!r} exists; pass --add to add documents to it")
    from services.workflows.import_stream import StreamedImport

    tables, read, kind = read_source(args)
    hashes = cw.corpus_text_hashes(store, existing.id) if existing is not None and not args.keep_duplicates \
        else set()
    chunking = chunk_options(args)
    try:
        if chunking is not None:
            chunking.validate()
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    labels = [c.name for c in db.list_categories(store, existing.id)] if existing is not None else []
    stream = StreamedImport(tables=tables, preview=read, chunking=chunking, deduplicate=not args.keep_duplicates,
                            existing_hashes=hashes, existing_labels=labels)
    preview = stream.report()  # read once to count and check: nothing is written yet
    n = preview.n_records
    n_labels = sum(1 for label in preview.labels if label)
    unit = "row" if kind in ("table", "wikipedia") else "file"
    dups = f"{counted(preview.n_duplicates, 'duplicate')} left out, " if preview.n_duplicates else ""
    print(f"read {counted(preview.n_rows_read, unit)}: {counted(n, 'document')} to import in "
          f"{counted(n_labels, 'category', 'categories')}; {dups}{counted(preview.n_errors, 'error')} "
          f"(left out), {counted(preview.n_warnings, 'warning')}")
    if preview.issues:
        print(format_issues(preview.issues, total=preview.n_issues))
    if n == 0:
        if existing is not None and preview.n_duplicates:  # --add of what is there already: a success, not an error
            which = "every document without an error" if preview.n_errors else "every document"
            print(f"nothing to import: {which} is already in corpus {existing.name!r}; nothing was written")
            return 0
        why = "no document is left after the problems above" if preview.n_issues else "the files hold no document"
        raise CLIError(f"nothing to import: {why}; nothing was written")
    if args.dry_run:
        print("dry run: nothing was written")
        return 0
    show = (lambda done: print_progress("writing documents", done, n)) if n > cw.IMPORT_CHUNK_ROWS else None
    try:
        result = cw.import_records(store, stream.records(), corpus_id=existing.id if existing else None,
                                   new_name=None if existing else args.corpus,
                                   deduplicate=not args.keep_duplicates, progress=show)
    except (ValueError, db.StoreError) as exc:
        raise CLIError(f"nothing was imported: {exc}") from None
    except KeyboardInterrupt:  # import_records discarded what it had written
        print("interrupted: nothing was imported", file=sys.stderr, flush=True)
        raise
    n_dups = preview.n_duplicates + result.skipped_duplicates  # left out by the preview, or refused on writing
    skipped = f" ({counted(n_dups, 'duplicate')} skipped)" if n_dups else ""
    print(f"imported {counted(result.added, 'document')} into {'new ' if result.created_corpus else ''}corpus "
          f"{result.corpus_name!r}{skipped}; next: mrag-studio index --corpus {result.corpus_name!r}")
    return 0


@store_command
def cmd_queries(args: argparse.Namespace, store: Any) -> int:
    """Import a query file as a new query set; returns the exit status (0 imported, 2 bad input)."""
    from services.workflows import querysets as qw

    corpus = named_corpus(store, args.corpus)
    path = Path(args.path).expanduser()
    if path.is_dir():
        raise CLIError(f"{path} is a folder: give the query file (JSON or CSV)")
    if not path.is_file():
        raise CLIError(f"no such file: {path}")
    try:
        report = qw.import_benchmark_queries(store, corpus.id, path, name=args.name, file_name=path.name)
    except qw.QuerySetError as exc:
        raise CLIError(f"nothing was imported: {exc}") from None
    print(f"query set {args.name!r} (#{report.query_set_id}): {counted(report.n_queries, 'query', 'queries')} "
          f"imported, {report.n_flagged} flagged, {counted(len(report.skipped), 'row')} skipped")
    for note in report.notes:
        print(f"  {report.file_name}: {note}")
    ambiguous = {(row, topic) for row, topic, _ in report.ambiguous}
    for row, topic in [u for u in report.unresolved if u not in ambiguous][:SHOWN_ISSUES]:
        print(f"  query {row}: no document is titled {topic!r} (flagged)")
    for row, topic, n in report.ambiguous[:SHOWN_ISSUES]:
        print(f"  query {row}: {n} documents are titled {topic!r} and the file does not say which one; none was "
              "taken (flagged)")
    for where, problem in report.skipped[:SHOWN_ISSUES]:
        print(f"  skipped {where}: {problem}")
    return 0
