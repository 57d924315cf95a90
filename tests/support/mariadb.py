"""A real MariaDB (or MySQL) server for the store and workflow tests: the one ``MRAG_TEST_MYSQL_URL`` names,
or a throwaway one started from Debian's ``mariadb-server`` binaries in a temporary folder (run as the
``mysql`` user when the tests run as root), reached through its Unix socket. Each test gets a database
of its own, created with a latin1, case-insensitive default that the schema's own table options override.

``MRAG_TEST_MYSQL_URL`` is a server URL without a database name, e.g.
``mysql+pymysql://user:secret@127.0.0.1:3306?charset=utf8mb4``; its user must be allowed to create databases.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.servers import DatabaseServer

ENV_URL = "MRAG_TEST_MYSQL_URL"


def find_server() -> tuple[Path, Path] | None:
    """``(mariadbd, mariadb-install-db)`` from Debian's ``mariadb-server`` (or PATH), or None."""
    server = shutil.which("mariadbd") or ("/usr/sbin/mariadbd" if Path("/usr/sbin/mariadbd").exists() else None)
    install = shutil.which("mariadb-install-db")
    return (Path(server), Path(install)) if server and install else None


class MariaDBServer(DatabaseServer):
    """:meth:`start` a server (or take ``MRAG_TEST_MYSQL_URL``), a database per test, :meth:`stop` at the end."""

    env_url = ENV_URL
    driver = ("pymysql", "PyMySQL")
    product = ("MariaDB", "mariadb-server")
    system_user = "mysql"
    admin_database = "mysql"

    def __init__(self, url: str, root: Path | None = None, process: subprocess.Popen | None = None) -> None:
        super().__init__(url)
        self._root = root
        self._process = process

    @staticmethod
    def binaries_found() -> bool:
        return find_server() is not None

    @classmethod
    def start(cls, timeout_s: float = 60.0) -> MariaDBServer:
        """The server of ``MRAG_TEST_MYSQL_URL``, else a new one listening on a socket in a temporary folder."""
        explicit = os.environ.get(ENV_URL)
        if explicit:
            return cls(explicit)
        found = find_server()
        assert found is not None
        server, install = found
        root = Path(tempfile.mkdtemp(prefix="mrag-mariadb-"))
        user = "mysql" if os.geteuid() == 0 else os.environ.get("USER") or str(os.geteuid())
        if os.geteuid() == 0:
            shutil.chown(root, "mysql")
        data, sock = root / "data", root / "sock"
        subprocess.run([str(install), "--no-defaults", f"--datadir={data}", f"--user={user}",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)
        log = open(root / "log", "wb")  # noqa: SIM115 - closed with the server
        process = subprocess.Popen(
            [str(server), "--no-defaults", f"--datadir={data}", f"--socket={sock}", f"--user={user}",
             "--skip-networking", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0",
             "--innodb-buffer-pool-size=64M", f"--pid-file={root / 'pid'}"],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout_s
        while not sock.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"MariaDB did not start: {(root / 'log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        return cls(f"mysql+pymysql://root@localhost?unix_socket={sock}&charset=utf8mb4", root, process)

    def create_statement(self, name: str) -> str:
        # Deliberately the unfriendly defaults of older servers (latin1, case-insensitive): the schema must
        # not depend on them (db.column_types.MYSQL_TABLE_OPTIONS sets every table's own).
        return f"CREATE DATABASE `{name}` CHARACTER SET latin1 COLLATE latin1_swedish_ci"

    def drop_statement(self, name: str) -> str:
        return f"DROP DATABASE IF EXISTS `{name}`"

    def copy_database(self, template: str, name: str) -> None:
        """MariaDB has no database templates: each table is created by the template's own ``SHOW CREATE TABLE``
        (indexes, foreign keys, charsets and all; read once) and its rows (Alembic's revision) copied."""
        from sqlalchemy import create_engine, text

        tables = getattr(self, "_tables", None)
        engine = create_engine(self.database_url(template), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                if tables is None:
                    names = [row[0] for row in conn.execute(text("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'"))]
                    tables = self._tables = [(t, conn.execute(text(f"SHOW CREATE TABLE `{t}`")).one()[1])
                                             for t in names]
                conn.execute(text(self.create_statement(name)))
                conn.execute(text(f"USE `{name}`"))
                conn.execute(text("SET FOREIGN_KEY_CHECKS = 0"))
                for table, ddl in tables:
                    conn.execute(text(ddl))
                    conn.execute(text(f"INSERT INTO `{name}`.`{table}` SELECT * FROM `{template}`.`{table}`"))
                conn.execute(text("SET FOREIGN_KEY_CHECKS = 1"))
        finally:
            engine.dispose()

    def stop(self) -> None:
        if self._process is None or self._root is None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
        shutil.rmtree(self._root, ignore_errors=True)
