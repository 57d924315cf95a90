"""What the services' commands share: the ``--database`` option (defined once, :func:`add_database_option`) and
opening the store it names (:func:`store_command`), a stored corpus by name, Ctrl+C that stops resumable work after
its batch, progress lines, the LLM endpoint, and the LLM cost table of ``bench`` and ``eval``.

The plain parts the engine's ``bench`` needs too (:class:`~mrag_core.cli_basics.CLIError`, ``fail``, argument
types, tables, the LLM options) are :mod:`mrag_core.cli_basics`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from mrag_core.cli_basics import CLIError, fail, text_table

__all__ = [
    "COST_HEADING",
    "add_database_option",
    "database_failure",
    "every_few_seconds",
    "format_cost_table",
    "hide_secrets",
    "llm_endpoint",
    "named_corpus",
    "open_cli_store",
    "print_cost_table",
    "print_progress",
    "stop_on_ctrl_c",
    "stopped_elsewhere",
    "store_command",
    "url_secrets",
]

DATABASE_HELP = "SQLAlchemy URL (default $MRAG_DATABASE_URL or the app's file)"


def add_database_option(p: argparse.ArgumentParser) -> None:
    """``--database URL``: the store a command works on (default ``$MRAG_DATABASE_URL`` or the app's file); what
    :func:`store_command` opens."""
    p.add_argument("--database", default=None, help=DATABASE_HELP)


def open_cli_store(url: str | None) -> Any:
    """The app's store at ``url`` (else ``$MRAG_DATABASE_URL`` or the default file); raises :class:`CLIError`
    naming the problem (a bad URL, a file that is not a database, a failed migration)."""
    import db

    try:
        return db.open_store(url)
    except Exception as exc:  # noqa: BLE001 - any connection/migration problem, one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # not SQLAlchemy's "Background on..." line
        if url is None:
            url = db.engine.default_database_url()
        raise CLIError(f"cannot open the database: {hide_secrets(first, url)}") from None


def url_secrets(url: str) -> list[str]:
    """What of a database URL could be a password, longest first: the parsed password, and in its
    ``scheme://user:secret@host`` part the text after the first ``:`` (up to the last ``@``, or the
    whole rest, unless a number, when an ``@`` is missing: a parser takes it for a port)."""
    from sqlalchemy.engine import make_url

    found: set[str] = set()
    try:
        if password := make_url(url).password:
            found.add(str(password))
    except Exception:  # noqa: BLE001 - an unparsable URL: the text below still names the candidates
        pass
    netloc = url.partition("://")[2].split("/", 1)[0] if "://" in url else ""
    userinfo = netloc.rpartition("@")[0] if "@" in netloc else netloc
    after_colon = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    if "@" in netloc or not after_colon.isdigit():  # "host:5432" without "@" is a port, nothing secret
        found.add(after_colon)
    return sorted((s for s in found if s), key=len, reverse=True)


def hide_secrets(text: str, url: str) -> str:
    """``text`` with every :func:`url_secrets` of ``url`` written ``***``: an error from opening a database
    never shows its password."""
    for secret in url_secrets(url):
        text = text.replace(secret, "***")
    return text


def store_command(command: Callable[[argparse.Namespace, Any], int]) -> Callable[[argparse.Namespace], int]:
    """``command(args, store)`` as ``command(args)``: the store named by ``args.database`` is opened
    before it runs and closed after, and a :class:`CLIError` from either, or a store error the
    command did not handle itself (e.g. ``db.BusyError``: another writer held the database too
    long), or a database that refused a statement (read-only file, full disk, lost connection, a value it
    cannot store: :func:`database_failure`), ends as ``error: ...`` with exit status 2."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        from sqlalchemy.exc import DBAPIError

        import db

        try:
            store = open_cli_store(args.database)
        except CLIError as exc:
            return fail(str(exc))
        try:
            return command(args, store)
        except (CLIError, db.StoreError) as exc:
            return fail(str(exc))
        except DBAPIError as exc:  # its session was rolled back: what earlier sessions committed stays
            return fail(database_failure(exc))
        finally:
            store.close()

    return run


def database_failure(exc: Exception) -> str:
    """One line for a statement the database refused (a SQLAlchemy ``DBAPIError``): the driver's own first line
    (not the SQL, its parameters or SQLAlchemy's "Background on this error" link), that the transaction's change was
    not kept, and what to do: for a read-only database, to make it writable or give another one; for a value it
    cannot store (``DataError``: a NUL character on PostgreSQL, a text too long), to fix that value."""
    from sqlalchemy.exc import DataError

    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    if "readonly" in first.replace(" ", "").lower():
        advice = "Check that the database file and its folder may be written, or give another --database"
    elif isinstance(exc, DataError):
        advice = "A value of the input cannot be stored in this database: fix it and run the command again"
    else:
        advice = "Check the database (its disk, its server) and run the command again"
    return f"the database refused the change ({first}); nothing of it was written. {advice}"


def named_corpus(store: Any, name: str) -> Any:
    """The stored corpus called ``name`` (a ``db.CorpusInfo``); raises :class:`CLIError` naming the
    corpora there are when there is none."""
    import db

    try:
        return db.get_corpus_by_name(store, name)
    except db.NotFoundError:
        names = ", ".join(repr(c.name) for c in db.list_corpora(store)) or "none"
        raise CLIError(f"unknown corpus {name!r} (corpora: {names})") from None


@contextlib.contextmanager
def stop_on_ctrl_c(cancel: threading.Event, message: str = "stopping after the current batch (Ctrl+C again to "
                                                               "stop now)") -> Iterator[threading.Event]:
    """While the block runs, the first Ctrl+C sets ``cancel`` (resumable work then stops after its current batch,
    keeping what it saved) and says so on stderr (``message``); a second one stops at once (``KeyboardInterrupt``).
    Python's handler is put back afterwards. Outside the main thread (where signals cannot be caught) it does
    nothing. Yields an event set by a Ctrl+C: ``cancel`` set without it was set by someone else (a stop asked
    through the database, :func:`stopped_elsewhere`)."""
    pressed = threading.Event()

    def on_interrupt(_signum: int, _frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        print(message, file=sys.stderr, flush=True)
        pressed.set()
        cancel.set()

    previous = signal.signal(signal.SIGINT, on_interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        yield pressed
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def stopped_elsewhere(how: str) -> str:
    """Why a run stopped when no Ctrl+C stopped it: its heartbeat found a stop request (``how`` says where one is
    asked), or another claim."""
    return f"it was asked to stop from elsewhere ({how}), or another process took the work over"


def print_progress(stage: str, done: int, total: int) -> None:
    """``stage: done/total`` on stderr (the CLI's progress line)."""
    print(f"{stage}: {done}/{total}", file=sys.stderr, flush=True)


def every_few_seconds(show: Callable[..., None] = print_progress, seconds: float = 5.0) -> Callable[..., None]:
    """A progress callback ``(stage, done, total, *extra)`` that passes a stage's reports to ``show`` (with the
    same arguments; default :func:`print_progress`) at most once every ``seconds``, and always its first and last
    (``done == total``); a report equal to the last one shown is not shown again."""
    last: dict[str, float] = {}
    shown: dict[str, tuple[int, int]] = {}

    def progress(stage: str, done: int, total: int, *extra: Any) -> None:
        now = time.monotonic()
        if shown.get(stage) == (done, total):  # said already (a batch's last report, then the batch's own)
            return
        if done == total or stage not in last or now - last[stage] >= seconds:
            last[stage] = now
            shown[stage] = (done, total)
            show(stage, done, total, *extra)

    return progress


def llm_endpoint(needs: str | None = None) -> Any:
    """The environment's LLM endpoint (``MRAG_LLM_*``), or None when none is configured. Raises :class:`CLIError`
    for unusable settings, and when none is configured but ``needs`` (e.g. ``"hyde needs"``) says one is needed."""
    from services.llm.config import LLMConfig, LLMConfigError, no_endpoint_message

    try:
        cfg = LLMConfig.from_env()
    except LLMConfigError as exc:
        raise CLIError(f"the LLM endpoint settings are unusable: {exc}") from exc
    if cfg is None and needs:
        raise CLIError(no_endpoint_message(needs))
    return cfg


def format_cost_table(rows: list[dict[str, Any]]) -> str:
    """Plain-text LLM cost table: strategy, queries, tokens (prompt + completion of the expansions,
    cache hits at their original cost), tokens per query, spent (sent now), LLM seconds, cached, failed."""
    columns = [("strategy", "<18"), ("queries", ">7"), ("tokens", ">8"), ("tok/query", ">10.1f"), ("spent", ">7"),
               ("LLM s", ">7.2f"), ("cached", ">7"), ("failed", ">7")]
    return text_table(columns, [[r["strategy"], r["llm_queries"], r["tokens"], r["tokens_per_query"],
                                 r["spent_tokens"], r["llm_s"], r["cached"], r["failed"]] for r in rows])


COST_HEADING = "LLM cost (tokens of the expansions; spent = sent by this run, 0 when cached)"


def print_cost_table(rows: list[dict[str, Any]], strategies: Sequence[str]) -> None:
    """Print :data:`COST_HEADING`, the cost table of ``rows`` and, when some of ``strategies`` share their LLM
    expansions, the note that says so (:func:`~services.workflows.eval_costs.shared_expansions_note`)."""
    from services.workflows import eval_costs

    print(COST_HEADING)
    print(format_cost_table(rows))
    if shared := eval_costs.shared_expansions_note(strategies):
        print(f"note: {shared}")
