"""Opening the store: URL resolution, engine setup (SQLite pragmas), sessions, migrations.

Where the database lives (first match wins):
1. the ``url`` argument of :func:`open_store`;
2. env ``MRAG_DATABASE_URL`` (any SQLAlchemy URL);
3. ``sqlite:///<data dir>/mrag_studio.db`` where the data dir is :func:`default_data_dir`:
   env ``MRAG_DATA_DIR``, else ``$XDG_DATA_HOME/mrag-studio``, else
   ``~/.local/share/mrag-studio``.

Only that default location's folder is created when missing. A SQLite URL that is given (the argument or
``MRAG_DATABASE_URL``) must name a file in a folder that exists: ``sqlite:////nonexistent/dir/x.db`` is refused
with :class:`~db.errors.StoreError` naming the folder, rather than creating folders wherever a typo points (the
file itself is created when missing, as SQLite does).

SQLite connections get ``journal_mode=WAL``, ``foreign_keys=ON``, ``synchronous=NORMAL``
and a 10 s ``busy_timeout``. pysqlite's own transaction handling is switched off and every
write transaction starts with ``BEGIN IMMEDIATE`` (the SQLAlchemy pysqlite recipe), so
read-then-write transactions never fail half way with "database is locked" and never lose
updates; read-only sessions use a plain deferred ``BEGIN``.

PostgreSQL gets the same one-writer-at-a-time rule: every write session first takes a
transaction-level advisory lock (``pg_advisory_xact_lock``, waiting up to the same 10 s through
``lock_timeout``), so a read-then-write transaction (e.g. bumping a corpus' version) never loses
an update under its default READ COMMITTED isolation. MySQL and MariaDB likewise: a write session
holds a named lock (``GET_LOCK``, per database, the same 10 s) on its connection from before its
transaction begins until after it ends, and raises :class:`db.BusyError` when it cannot get it.
Other databases keep their own isolation.

The schema is brought to the Alembic head (``db/migrations``) every time a store is opened, in
one transaction under the same write lock (SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's advisory
lock, MySQL's named lock: its DDL is not transactional), so processes opening a new database
together create its schema once; no ``alembic.ini`` is needed.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from db.errors import BusyError, SchemaError, StoreError

T = TypeVar("T")

ENV_DATABASE_URL = "MRAG_DATABASE_URL"
ENV_DATA_DIR = "MRAG_DATA_DIR"
DB_FILENAME = "mrag_studio.db"
BUSY_TIMEOUT_S = 10.0
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_BEGIN_OPTION = "mrag_sqlite_begin"
#: Key of the PostgreSQL advisory lock every write session holds (any constant bigint; "MRAGSTUD" in ASCII).
PG_WRITE_LOCK_KEY = int.from_bytes(b"MRAGSTUD", "big") - 2**63
#: Prefix of the name of the MySQL / MariaDB lock every write session holds. ``GET_LOCK`` names are
#: server-wide: :func:`mysql_lock_name` adds the database, so databases on one server do not wait for each other.
MYSQL_WRITE_LOCK = "mrag_studio_write"


def default_data_dir() -> Path:
    """Directory for the default database: ``$MRAG_DATA_DIR``, else
    ``$XDG_DATA_HOME/mrag-studio``, else ``~/.local/share/mrag-studio`` (not created here)."""
    explicit = os.environ.get(ENV_DATA_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "mrag-studio"


def default_database_url() -> str:
    """``$MRAG_DATABASE_URL`` if set, else a SQLite file in :func:`default_data_dir`."""
    explicit = os.environ.get(ENV_DATABASE_URL)
    if explicit:
        return explicit
    return f"sqlite:///{default_data_dir() / DB_FILENAME}"


def _is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def _is_sqlite_memory(url: URL) -> bool:
    database = url.database or ""
    return database in ("", ":memory:") or database.startswith("file::memory:")


def _is_mysql(url: URL) -> bool:
    return url.get_backend_name() in ("mysql", "mariadb")


def _lower(value: Any) -> Any:
    """SQLite's ``lower()`` for every script (non-text values, NULL included, come back as they are)."""
    return value.lower() if isinstance(value, str) else value


def _check_sqlite_folder(url: URL, create: bool) -> None:
    """The folder of the SQLite file ``url`` names: created when ``create`` (the default location), else it must
    exist (:class:`StoreError` naming it and what to do). In-memory databases and ``file:`` URIs are left to
    SQLite."""
    database = url.database or ""
    if _is_sqlite_memory(url) or database.startswith("file:"):
        return
    folder = Path(database).expanduser().parent
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    elif not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise StoreError(f"the folder of the SQLite database {database} ({folder}) {what}; create it first "
                         "(nothing creates folders for a database URL that is given), or give another database "
                         "URL")


def _make_engine(url: URL, echo: bool) -> Engine:
    if _is_mysql(url):
        # SQLAlchemy's MySQL compiler links a join chain's FROM elements in a way its cartesian-product
        # check does not follow, so it warns about the (correct) outer joins of db._labels: checked on
        # SQLite and PostgreSQL instead.
        return create_engine(url, echo=echo, pool_pre_ping=True, enable_from_linting=False)
    if not _is_sqlite(url):
        return create_engine(url, echo=echo, pool_pre_ping=True)

    memory = _is_sqlite_memory(url)
    connect_args: dict[str, Any] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
    if memory:
        # One shared connection, so all sessions see one in-memory database (tests only).
        engine = create_engine(url, echo=echo, connect_args=connect_args, poolclass=StaticPool)
    else:
        engine = create_engine(url, echo=echo, connect_args=connect_args)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        # Disable pysqlite's implicit BEGIN; "begin" below emits our own.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # SQLite's own lower() folds ASCII only; Python's folds every script, as PostgreSQL's and
        # MySQL's do, so a case-insensitive search (``ilike`` is lower(x) LIKE lower(y) here) finds
        # "Été" when "ÉTÉ" is typed.
        dbapi_connection.create_function("lower", 1, _lower, deterministic=True)
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if not memory:
                set_wal(cursor)
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(_BEGIN_OPTION, "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")

    return engine


def alembic_config(connection: Any | None = None, url: str | None = None) -> Config:
    """An Alembic Config built in code, pointing at ``db/migrations``.

    Pass an open ``connection`` (used as is, inside its transaction) or a ``url``.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest schema revision this code knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def _take_pg_write_lock(connection: Connection | Session) -> None:
    """PostgreSQL: take the transaction-level advisory write lock, waiting up to the busy timeout
    (then the statement fails with a lock timeout instead of hanging). Released at commit/rollback."""
    connection.execute(text(f"SET LOCAL lock_timeout = '{int(BUSY_TIMEOUT_S * 1000)}ms'"))
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_WRITE_LOCK_KEY})


def mysql_lock_name(database: str | None) -> str:
    """The write lock's name for ``database`` (at most 64 characters, MySQL's limit)."""
    digest = hashlib.sha1((database or "").encode("utf-8")).hexdigest()[:16]
    return f"{MYSQL_WRITE_LOCK}:{digest}"


def set_wal(cursor: Any, timeout: float = BUSY_TIMEOUT_S, pause: float = 0.01) -> None:
    """``PRAGMA journal_mode = WAL`` on a new connection, retried for up to ``timeout`` seconds while SQLite answers
    "database is locked". While another connection turns a new database file into WAL mode, SQLite refuses the
    same switch at once, without waiting out the busy timeout, so two processes (or threads) opening one new
    database together failed now and then; any other error is raised as is."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)


def _busy() -> BusyError:
    return BusyError(f"another writer held the database for {BUSY_TIMEOUT_S:g} s; nothing was written, try again")


def is_lock_timeout(exc: DBAPIError) -> bool:
    """Whether ``exc`` is a database giving up waiting for a lock: SQLite's busy timeout, PostgreSQL's
    ``lock_timeout`` (SQLSTATE 55P03), MySQL's lock wait timeout (error 1205)."""
    orig = exc.orig
    if "database is locked" in str(orig):
        return True
    if getattr(orig, "sqlstate", None) == "55P03":
        return True
    args = getattr(orig, "args", ())
    return bool(args) and args[0] == 1205


@contextmanager
def _lock_timeouts_as_busy() -> Iterator[None]:
    """Turn a lock wait that ran out in the block into :class:`BusyError` (the transaction is rolled back)."""
    try:
        yield
    except OperationalError as exc:
        if is_lock_timeout(exc):
            raise _busy() from exc
        raise


@contextmanager
def _mysql_write_lock(connection: Connection, name: str) -> Iterator[None]:
    """MySQL / MariaDB: hold the named write lock (``GET_LOCK``, waiting up to the busy timeout) on
    ``connection`` for the block. It belongs to the connection, not a transaction, so it is taken
    and released outside the block's transaction (the snapshot of a REPEATABLE READ transaction
    begun after it sees everything the previous writer committed)."""
    got = connection.execute(text("SELECT GET_LOCK(:name, :wait)"),
                             {"name": name, "wait": int(BUSY_TIMEOUT_S)}).scalar()
    connection.commit()
    if got != 1:
        raise _busy()
    try:
        yield
    finally:
        try:
            if connection.in_transaction():
                connection.rollback()
            connection.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": name})
            connection.commit()
        except Exception:  # noqa: BLE001 - a broken connection: closing it releases the lock server-side
            connection.invalidate()


class Store:
    """An opened database: the engine plus transaction helpers. Thread-safe; share one per app."""

    def __init__(self, engine: Engine) -> None:
        # A statement's parameters are the user's data (a text with a NUL, a password typed into a field): never in
        # an error's text (a traceback, a page's exception, the CLI's error line) or the echo log, only the SQL.
        engine.hide_parameters = True
        self.engine = engine
        self.url: str = engine.url.render_as_string(hide_password=True)
        self.is_sqlite = _is_sqlite(engine.url)
        self.is_postgresql = engine.url.get_backend_name() == "postgresql"
        self.is_mysql = _is_mysql(engine.url)
        self._mysql_lock = mysql_lock_name(engine.url.database)
        self._write_sessions = sessionmaker(bind=engine, expire_on_commit=False)
        read_bind = engine.execution_options(**{_BEGIN_OPTION: "DEFERRED"}) if self.is_sqlite else engine
        self._read_sessions = sessionmaker(bind=read_bind, expire_on_commit=False)

    @contextmanager
    def session(self, readonly: bool = False) -> Iterator[Session]:
        """One transaction: commits when the block ends normally, rolls back on any exception.

        On SQLite a write session (the default) starts with ``BEGIN IMMEDIATE`` (takes the
        write lock up front, waiting up to the busy timeout); ``readonly=True`` uses a
        deferred ``BEGIN`` that never blocks other readers or the writer (WAL). On PostgreSQL a
        write session takes the advisory write lock first (waiting up to 10 s), a read-only one
        takes nothing; on MySQL / MariaDB a write session holds the named write lock on its own
        connection, taken before its transaction begins and given back after it ends.

        A write that waits for the lock longer than the busy timeout raises :class:`BusyError`
        (whatever the database), and nothing of the transaction is kept.

        Do not call the data-access functions (which open their own write sessions) from
        inside a write session of the same thread: the inner one would wait for the outer
        one's lock and fail after the busy timeout.
        """
        with _lock_timeouts_as_busy():
            if self.is_mysql and not readonly:
                with self.engine.connect() as connection, _mysql_write_lock(connection, self._mysql_lock):
                    with self._write_sessions(bind=connection) as session, session.begin():
                        yield session
                return
            factory = self._read_sessions if readonly else self._write_sessions
            with factory() as session:
                with session.begin():
                    if self.is_postgresql and not readonly:
                        _take_pg_write_lock(session)
                    yield session

    def largest_value_bytes(self) -> int:
        """The largest single BLOB this database takes in one statement: on MySQL / MariaDB half the
        server's ``max_allowed_packet`` less 64 KiB for the rest of the statement (PyMySQL writes bytes
        into the SQL text hex-encoded, two characters a byte; the packet is 16 MiB by default on MariaDB,
        64 MiB on MySQL 8), else 1e9 bytes (SQLite's default length limit; PostgreSQL takes up to 1 GiB)."""
        if not self.is_mysql:
            return 1_000_000_000
        with self.engine.connect() as connection:
            packet = int(connection.execute(text("SELECT @@max_allowed_packet")).scalar_one())
            connection.rollback()
        return max(0, (packet - 64 * 1024) // 2)

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at (None for an empty database)."""
        with self.engine.connect() as connection:
            revision = MigrationContext.configure(connection).get_current_revision()
            connection.rollback()
        return revision

    def upgrade(self, revision: str = "head") -> None:
        """Migrate the schema to ``revision`` in one transaction.

        Raises:
            SchemaError: the database is at a revision this code does not know (created by a
                newer MRAG Studio) or the migration failed.
            BusyError: another writer held the write lock past the busy timeout.
        """
        try:
            with _lock_timeouts_as_busy():
                self._upgrade(revision)
        except CommandError as exc:
            raise SchemaError(
                f"Cannot migrate the database at {self.url} to schema revision {revision!r}: "
                f"{exc}. It may have been created by a newer version of MRAG Studio."
            ) from exc

    def _upgrade(self, revision: str) -> None:
        """:meth:`upgrade` under the write lock."""
        if self.is_mysql:  # its DDL commits at once: the lock, not the transaction, keeps writers out
            with self.engine.connect() as connection, _mysql_write_lock(connection, self._mysql_lock), \
                    connection.begin():
                command.upgrade(alembic_config(connection), revision)
            return
        with self.engine.begin() as connection:
            if self.is_postgresql:  # SQLite: BEGIN IMMEDIATE already holds the write lock
                _take_pg_write_lock(connection)
            command.upgrade(alembic_config(connection), revision)

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r})"


def open_store(url: str | None = None, *, migrate: bool = True, echo: bool = False) -> Store:
    """Open (creating if needed) the database at ``url`` (default :func:`default_database_url`)
    and, unless ``migrate=False``, upgrade its schema to head and discard what imports killed before they were
    published left behind (:func:`db.imports.discard_abandoned_imports`). Idempotent and safe to call
    from several processes at once (the upgrade runs under the write lock). A SQLite file's folder is
    created only for the default location (neither ``url`` nor ``MRAG_DATABASE_URL`` given); a given
    URL whose folder does not exist raises :class:`StoreError`."""
    default = url is None and not os.environ.get(ENV_DATABASE_URL)
    resolved = make_url(url if url is not None else default_database_url())
    if _is_sqlite(resolved):
        _check_sqlite_folder(resolved, create=default)
    store = Store(_make_engine(resolved, echo))
    if migrate:
        try:
            store.upgrade("head")
        except BaseException:
            store.close()
            raise
        from db.imports import discard_abandoned_imports  # db.imports needs this module

        try:  # what a killed import left behind (db.imports); a busy database leaves it to the next start
            discard_abandoned_imports(store)
        except BusyError:
            pass
    return store


#: How often :func:`when_free` tries a write that found the database busy.
WRITE_TRIES = 5


def when_free(write: Callable[[], T], tries: int = WRITE_TRIES) -> T:
    """``write()`` (one write transaction), tried again up to ``tries`` times in all while another writer held the
    database past the busy timeout (:class:`BusyError`: nothing of the try was kept, so trying again is safe). Long
    work (an import's chunks, an index build's batches) waits and goes on rather than failing."""
    for attempt in range(1, tries + 1):
        try:
            return write()
        except BusyError:
            if attempt == tries:
                raise
    raise AssertionError("unreachable")  # pragma: no cover

