"""Engine/session behaviour: URL resolution, SQLite pragmas, transactions, concurrency (SQLite and PostgreSQL)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import IntegrityError

import db
from db import Store
from db.models import Corpus


def test_sqlite_pragmas_on_every_connection(sqlite_store: Store, db_path: Path) -> None:
    with sqlite_store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
    # WAL is a property of the file: a foreign connection sees it too.
    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()


def test_a_given_sqlite_url_in_a_missing_folder_is_refused_not_created(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    """Before, sqlite:////nonexistent/dir/x.db silently created /nonexistent/dir. A URL that is given (argument or
    MRAG_DATABASE_URL) must name a file in an existing folder; only the default location's folder is created."""
    missing = tmp_path / "nonexistent" / "dir"
    url = f"sqlite:///{missing / 'x.db'}"
    said = (f"the folder of the SQLite database {missing / 'x.db'} ({missing}) does not exist; create it first "
            "(nothing creates folders for a database URL that is given), or give another database URL")
    with pytest.raises(db.StoreError) as exc:
        db.open_store(url)
    assert str(exc.value) == said
    monkeypatch.setenv(db.ENV_DATABASE_URL, url)
    with pytest.raises(db.StoreError, match="does not exist; create it first"):
        db.open_store()
    assert not (tmp_path / "nonexistent").exists()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(db.StoreError, match=r"\(.*afile\) is not a folder"):
        db.open_store(f"sqlite:///{tmp_path / 'afile' / 'x.db'}")
    monkeypatch.delenv(db.ENV_DATABASE_URL)
    monkeypatch.setenv("MRAG_DATA_DIR", str(tmp_path / "data" / "nested"))
    with db.open_store() as store:  # the default location: its folder is created
        assert store.schema_revision() == db.head_revision()
    assert (tmp_path / "data" / "nested" / "mrag_studio.db").is_file()
    with db.open_store(f"sqlite:///{tmp_path / 'new.db'}"):  # a new file in an existing folder is created
        pass
    assert (tmp_path / "new.db").is_file()


def test_foreign_keys_are_enforced(store: Store) -> None:
    with pytest.raises(IntegrityError):
        with store.session() as session:
            session.execute(
                text(
                    "INSERT INTO categories (corpus_id, name, description) "
                    "VALUES (:cid, 'x', '')"
                ),
                {"cid": 12345},
            )


def test_env_database_url_is_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "not" / "yet" / "there" / "custom.db"
    target.parent.mkdir(parents=True)
    monkeypatch.setenv(db.ENV_DATABASE_URL, f"sqlite:///{target}")
    assert db.default_database_url() == f"sqlite:///{target}"
    with db.open_store() as store:
        db.create_corpus(store, "from env")
        assert store.schema_revision() == db.head_revision()
    assert target.exists()
    with db.open_store(f"sqlite:///{target}") as again:
        assert [c.name for c in db.list_corpora(again)] == ["from env"]


def test_default_location_follows_data_dir_then_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(db.ENV_DATA_DIR, str(tmp_path / "data"))
    assert db.default_data_dir() == tmp_path / "data"
    assert db.default_database_url() == f"sqlite:///{tmp_path / 'data' / 'mrag_studio.db'}"
    with db.open_store() as store:
        db.create_corpus(store, "c")
    assert (tmp_path / "data" / "mrag_studio.db").exists()

    monkeypatch.delenv(db.ENV_DATA_DIR)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert db.default_data_dir() == tmp_path / "xdg" / "mrag-studio"

    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert db.default_data_dir() == tmp_path / "home" / ".local" / "share" / "mrag-studio"


def test_session_commits_on_success_and_rolls_back_on_error(store: Store) -> None:
    with store.session() as session:
        session.add(Corpus(name="kept"))
    with pytest.raises(RuntimeError):
        with store.session() as session:
            session.add(Corpus(name="dropped"))
            session.flush()
            raise RuntimeError("boom")
    assert [c.name for c in db.list_corpora(store)] == ["kept"]


def test_write_session_takes_the_write_lock_at_begin(sqlite_store: Store, db_path: Path) -> None:
    store = sqlite_store
    other = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        with store.session() as session:
            session.execute(select(1))  # only a read, but BEGIN IMMEDIATE already locked
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        with store.session(readonly=True) as session:
            session.execute(select(Corpus.id)).all()
            other.execute("BEGIN IMMEDIATE")  # a read-only session does not block writers
            other.execute("ROLLBACK")
    finally:
        other.close()


def test_postgresql_write_session_holds_the_write_lock(postgresql_store: Store) -> None:
    store = postgresql_store
    other = store.engine.connect()  # another connection, as another process would hold

    def lock_free() -> bool:
        """Whether ``other`` could take the write lock now (released again at once)."""
        got = other.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": db.engine.PG_WRITE_LOCK_KEY}).scalar()
        other.rollback()
        return bool(got)

    try:
        assert lock_free()
        with store.session() as session:
            session.execute(select(1))  # only a read, but the write session holds the lock from its start
            assert not lock_free()
        assert lock_free()  # released at commit
        with store.session(readonly=True) as session:
            session.execute(select(Corpus.id)).all()
            assert lock_free()  # a read-only session does not block writers
    finally:
        other.close()


def test_mysql_write_session_holds_the_write_lock_and_gives_it_back(mysql_store: Store) -> None:
    store = mysql_store
    name = db.engine.mysql_lock_name(store.engine.url.database)
    other = store.engine.connect()  # another connection, as another process would hold

    def holder() -> int | None:
        """The connection id holding the write lock (None when free)."""
        value = other.execute(text("SELECT IS_USED_LOCK(:n)"), {"n": name}).scalar()
        other.rollback()
        return value

    try:
        assert holder() is None
        with store.session() as session:
            me = session.execute(text("SELECT CONNECTION_ID()")).scalar()
            assert holder() == me  # held by the session's own connection from its start
        assert holder() is None  # released after the commit
        with pytest.raises(RuntimeError):
            with store.session() as session:
                session.add(Corpus(name="rolled back"))
                session.flush()
                raise RuntimeError("boom")
        assert holder() is None and db.list_corpora(store) == []  # released after the rollback too
        with store.session(readonly=True) as session:
            session.execute(select(Corpus.id)).all()
            assert holder() is None  # a read-only session does not block writers
    finally:
        other.close()


def test_mysql_lock_names_differ_per_database_and_fit_mysql() -> None:
    names = {db.engine.mysql_lock_name(d) for d in ("a", "b", "x" * 64, None)}
    assert len(names) == 4 and all(len(n) <= 64 for n in names)


@contextmanager
def _write_lock_held_elsewhere(store: Store) -> Iterator[None]:
    """Hold ``store``'s database write lock from another connection, as another process would."""
    if store.is_sqlite:
        other = sqlite3.connect(str(store.engine.url.database), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
        return
    with store.engine.connect() as conn:
        if store.is_postgresql:
            take, give = "SELECT pg_advisory_lock(:k)", "SELECT pg_advisory_unlock(:k)"
            key: object = db.engine.PG_WRITE_LOCK_KEY
        else:
            take, give = "SELECT GET_LOCK(:k, 0)", "SELECT RELEASE_LOCK(:k)"
            key = db.engine.mysql_lock_name(store.engine.url.database)
        conn.execute(text(take), {"k": key})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text(give), {"k": key})
            conn.commit()


def test_a_writer_kept_waiting_past_the_busy_timeout_gets_a_clear_error(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's busy timeout, PostgreSQL's lock timeout and MySQL's GET_LOCK all end in one BusyError."""
    monkeypatch.setattr(db.engine, "BUSY_TIMEOUT_S", 0.5)
    impatient = db.open_store(_full_url(store))  # SQLite takes the timeout when it connects
    try:
        db.create_corpus(impatient, "before")
        with _write_lock_held_elsewhere(store):
            start = time.monotonic()
            with pytest.raises(db.BusyError, match="another writer held the database for 0.5 s; nothing was written"):
                db.add_categories(impatient, db.get_corpus_by_name(impatient, "before").id, ["blocked"])
            assert time.monotonic() - start < 5
            assert [c.name for c in db.list_corpora(impatient)] == ["before"]  # reading still works
        assert db.list_categories(impatient, db.get_corpus_by_name(impatient, "before").id) == []
        db.create_corpus(impatient, "after")  # the lock given back, writing works again
        assert [c.name for c in db.list_corpora(impatient)] == ["after", "before"]
    finally:
        impatient.close()


def _full_url(store: Store) -> str:
    return store.engine.url.render_as_string(hide_password=False)


def test_reopening_at_head_is_idempotent(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    with db.open_store(url) as store:
        db.create_corpus(store, "persisted")
    for _ in range(2):
        with db.open_store(url) as store:
            assert store.schema_revision() == db.head_revision()
            assert [c.name for c in db.list_corpora(store)] == ["persisted"]
            with store.engine.connect() as conn:
                assert conn.execute(text("SELECT COUNT(*) FROM alembic_version")).scalar() == 1


def test_opening_a_new_database_from_several_threads_at_once(empty_url: str) -> None:
    """Four stores (separate engines, like the app and CLI processes started together) open and
    migrate the same empty database at the same moment: all succeed, the schema is created once.
    Without the write lock around the upgrade, PostgreSQL fails the losers' CREATE TABLEs."""
    barrier = threading.Barrier(4)
    opened: list[Store] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            barrier.wait()
            opened.append(db.open_store(empty_url))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        assert not any(t.is_alive() for t in threads), "a store was still opening after 60 s (deadlocked migrations)"
        assert errors == []
        assert len(opened) == 4
        assert all(s.schema_revision() == db.head_revision() for s in opened)
        db.create_corpus(opened[0], "after the race")
        assert [c.name for c in db.list_corpora(opened[3])] == ["after the race"]
        with opened[1].engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM alembic_version")).scalar() == 1
    finally:
        for s in opened:
            s.close()


def test_unknown_schema_revision_gives_a_clear_error(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    db.open_store(url).close()
    raw = sqlite3.connect(db_path)
    raw.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    raw.commit()
    raw.close()
    with pytest.raises(db.SchemaError, match="newer version"):
        db.open_store(url)


def test_in_memory_url_works_for_quick_use() -> None:
    with db.open_store("sqlite://") as store:
        c = db.create_corpus(store, "mem")
        assert db.get_corpus(store, c.id).name == "mem"


def test_two_concurrent_read_then_write_transactions_both_succeed(store: Store) -> None:
    """Two writers (separate engines, like two processes) each read a counter, wait, and
    write it back +1. With BEGIN IMMEDIATE + busy_timeout (SQLite) or the advisory write lock
    (PostgreSQL) the second waits instead of failing or reading the old value, and no update is lost."""
    url = _full_url(store)
    stores = [db.open_store(url), db.open_store(url)]
    corpus_id = db.create_corpus(stores[0], "counter").id
    start = db.get_corpus(stores[0], corpus_id).version
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def bump(store: Store) -> None:
        try:
            barrier.wait()
            with store.session() as session:
                value = session.scalar(select(Corpus.version).where(Corpus.id == corpus_id))
                time.sleep(0.3)  # hold the transaction so the other writer must wait
                session.execute(
                    update(Corpus).where(Corpus.id == corpus_id).values(version=value + 1)
                )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=bump, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    try:
        assert errors == []
        assert db.get_corpus(stores[1], corpus_id).version == start + 2
    finally:
        for s in stores:
            s.close()


def test_concurrent_bulk_imports_from_two_threads(store: Store) -> None:
    corpus_id = db.create_corpus(store, "parallel").id
    errors: list[BaseException] = []

    def importer(prefix: str) -> None:
        try:
            for batch in range(5):
                db.add_documents(
                    store,
                    corpus_id,
                    [{"text": f"{prefix} {batch} {i}"} for i in range(100)],
                )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=importer, args=(p,)) for p in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    info = db.get_corpus(store, corpus_id)
    assert info.n_documents == 1000
    assert info.version == 1 + 10  # every batch bumped the version exactly once


def test_set_wal_retries_while_another_connection_holds_the_new_database(tmp_path: Path) -> None:
    """SQLite refuses the switch to WAL at once ("database is locked") while another connection holds the file, so
    four threads opening one new database failed now and then (test above); set_wal waits for it, up to a limit."""
    from db.engine import set_wal

    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")  # as a connection converting or migrating the new file holds it
    opener = sqlite3.connect(path, isolation_level=None, timeout=0)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        opener.execute("PRAGMA journal_mode = WAL")  # without the retry: refused at once
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        set_wal(opener.cursor(), timeout=0.1)  # held past the limit: the error as SQLite gave it

    threading.Timer(0.3, lambda: holder.execute("COMMIT")).start()
    t0 = time.monotonic()
    set_wal(opener.cursor(), timeout=5)
    assert 0.25 < time.monotonic() - t0 < 5
    assert opener.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    holder.close()
    opener.close()


def test_when_free_tries_a_busy_write_again_and_gives_up_after_its_tries() -> None:
    calls: list[int] = []

    def write(fails: int):
        def attempt() -> str:
            calls.append(1)
            if len(calls) <= fails:
                raise db.BusyError("busy")
            return "written"
        return attempt

    assert db.when_free(write(fails=2), tries=3) == "written" and len(calls) == 3
    calls.clear()
    with pytest.raises(db.BusyError):
        db.when_free(write(fails=5), tries=3)
    assert len(calls) == 3
    calls.clear()

    def other() -> None:
        calls.append(1)
        raise db.DuplicateError("taken")

    with pytest.raises(db.DuplicateError):
        db.when_free(other)
    assert len(calls) == 1


def test_when_free_waits_out_a_writer_that_holds_sqlite_past_the_busy_timeout(tmp_path, monkeypatch) -> None:
    """A real second writer holds the write lock for 1.5 busy timeouts: one try fails with BusyError, when_free's
    second try gets through and its row is stored once."""
    import db.engine as engine

    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 0.4)
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with db.open_store(url) as store:
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with store.session() as s:
                s.execute(text("SELECT 1"))
                held.set()
                release.wait(5)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(5)
        threading.Timer(0.6, release.set).start()
        with pytest.raises(db.BusyError):
            db.create_corpus(store, "once")
        corpus = db.when_free(lambda: db.create_corpus(store, "twice"))
        holder.join()
        assert corpus.name == "twice" and [c.name for c in db.list_corpora(store)] == ["twice"]
