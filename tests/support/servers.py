"""Real database servers for the store and workflow tests, one per test session: the one an environment
variable names, or a throwaway server started from Debian's binaries in a temporary folder. Each test
gets a database of its own (:meth:`DatabaseServer.store`).

Subclasses: :class:`tests.support.postgres.PostgresServer`, :class:`tests.support.mariadb.MariaDBServer`.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

#: The databases the store and workflow tests run on (a fixture ``<name>_store`` / ``<name>_server`` each).
BACKENDS = ["sqlite", "postgresql", "mysql"]


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def has_user(name: str) -> bool:
    """Whether the system has a user called ``name`` (to run a server as, when the tests run as root)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


class DatabaseServer:
    """A server to create test databases on. ``url``: its SQLAlchemy URL without a database name;
    subclasses say how to create and drop a database and how to stop a server they started."""

    #: The database administrative statements run in.
    admin_database: str = ""
    #: What :meth:`available` checks: the environment variable naming an existing server, the driver's
    #: module and name, the product and its Debian package, and the system user it runs as under root.
    env_url: str = ""
    driver: tuple[str, str] = ("", "")
    product: tuple[str, str] = ("", "")
    system_user: str = ""

    def __init__(self, url: str) -> None:
        self.url = url

    @staticmethod
    def binaries_found() -> bool:
        """Whether the server's programs are installed here (to start a throwaway server)."""
        raise NotImplementedError

    @classmethod
    def available(cls) -> str | None:
        """Why no server can be had here (None when one can)."""
        if os.environ.get(cls.env_url):
            return None
        if importlib.util.find_spec(cls.driver[0]) is None:
            return f"the {cls.driver[1]} driver is not installed"
        if not cls.binaries_found():
            return f"{cls.product[0]} is not installed (apt-get install {cls.product[1]}) and {cls.env_url} is not set"
        if os.geteuid() == 0 and not has_user(cls.system_user):
            return f"running as root and there is no '{cls.system_user}' user to run the server as"
        return None

    def database_url(self, name: str) -> str:
        """The URL of database ``name`` on this server (the server URL's query options kept)."""
        return make_url(self.url).set(database=name).render_as_string(hide_password=False)

    def _admin_execute(self, sql: str) -> None:
        """Run ``sql`` outside a transaction (CREATE / DROP DATABASE)."""
        from sqlalchemy import create_engine, text

        engine = create_engine(self.database_url(self.admin_database), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(sql))
        finally:
            engine.dispose()

    def create_statement(self, name: str) -> str:
        raise NotImplementedError

    def drop_statement(self, name: str) -> str:
        raise NotImplementedError

    def create_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        name = f"mrag_test_{uuid.uuid4().hex[:12]}"
        self._admin_execute(self.create_statement(name))
        return self.database_url(name)

    def drop_database(self, url: str) -> None:
        """Drop a database made by :meth:`create_database`."""
        self._admin_execute(self.drop_statement(str(make_url(url).database)))

    def create_migrated_database(self) -> str:
        """A new database at the schema's head; returns its URL. The first is migrated (``db.open_store``) and kept
        as this server's template; later ones are copies of it (:meth:`copy_database`), which costs a tenth of
        running every migration again."""
        import db

        template = getattr(self, "_template", None)
        if template is None:
            url = self.create_database()
            db.open_store(url).close()
            template = self._template = str(make_url(url).database)
        name = f"mrag_test_{uuid.uuid4().hex[:12]}"
        self.copy_database(template, name)
        return self.database_url(name)

    def copy_database(self, template: str, name: str) -> None:
        """Create database ``name`` as a copy of database ``template`` (which nothing else uses meanwhile)."""
        raise NotImplementedError

    @contextmanager
    def store(self) -> Iterator[Any]:
        """A migrated store (``db.Store``) on a new database of its own (:meth:`create_migrated_database`), dropped
        afterwards."""
        import db

        url = self.create_migrated_database()
        try:
            s = db.open_store(url)
            try:
                yield s
            finally:
                s.close()
        finally:
            self.drop_database(url)

    def stop(self) -> None:
        """Stop and remove a server this class started (one named by the environment is left alone)."""


_sqlite_template: list[Path] = []


def migrated_sqlite_url(path: Path) -> str:
    """The URL of a new SQLite file at ``path`` at the schema's head: a copy of one file migrated once per test
    process (its WAL folded in), as :meth:`DatabaseServer.create_migrated_database` copies a server's template."""
    import db

    if not _sqlite_template:
        template = Path(tempfile.mkdtemp(prefix="mrag-sqlite-template-")) / "head.db"
        db.open_store(f"sqlite:///{template}").close()
        with sqlite3.connect(template) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _sqlite_template.append(template)
    if path.exists():
        raise FileExistsError(f"{path} exists: a migrated copy is made before anything opens the database")
    shutil.copyfile(_sqlite_template[0], path)
    return f"sqlite:///{path}"
