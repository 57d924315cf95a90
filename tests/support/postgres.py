"""A real PostgreSQL server for the store tests: the one ``MRAG_TEST_POSTGRES_URL`` names, or a throwaway
one started from Debian's ``postgresql`` binaries in a temporary folder (as the ``postgres`` user when the
tests run as root, since ``initdb`` refuses root). Each test gets a database of its own.

``MRAG_TEST_POSTGRES_URL`` is a server URL without a database name, e.g.
``postgresql+psycopg://user:secret@127.0.0.1:5432``; its user must be allowed to create databases.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.servers import DatabaseServer, free_port

ENV_URL = "MRAG_TEST_POSTGRES_URL"
USER = "mrag"


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (newest Debian version first, then PATH), or None."""
    for initdb in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True):
        return Path(initdb).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


class PostgresServer(DatabaseServer):
    """A server to create test databases on: :meth:`start` one (or take ``MRAG_TEST_POSTGRES_URL``),
    :meth:`create_database` / :meth:`drop_database` per test, :meth:`stop` at the end."""

    env_url = ENV_URL
    driver = ("psycopg", "psycopg")
    product = ("PostgreSQL", "postgresql")
    system_user = "postgres"
    admin_database = "postgres"

    def __init__(self, url: str, data_dir: Path | None = None, run_as: list[str] | None = None,
                 bin_dir: Path | None = None) -> None:
        super().__init__(url.rstrip("/"))
        self._data_dir = data_dir
        self._run_as = run_as or []
        self._bin_dir = bin_dir

    @staticmethod
    def binaries_found() -> bool:
        return find_bin_dir() is not None

    @classmethod
    def start(cls) -> PostgresServer:
        """The server of ``MRAG_TEST_POSTGRES_URL``, else a new one on a free port of 127.0.0.1."""
        explicit = os.environ.get(ENV_URL)
        if explicit:
            return cls(explicit)
        bin_dir = find_bin_dir()
        assert bin_dir is not None
        root = Path(tempfile.mkdtemp(prefix="mrag-pg-"))
        data = root / "data"
        run_as: list[str] = []
        if os.geteuid() == 0:
            run_as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(root, "postgres")
        port = free_port()
        subprocess.run([*run_as, str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", USER, "-E", "UTF8",
                        "--no-sync"], check=True, capture_output=True)
        options = f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run([*run_as, str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"),
                        "-w", "start"], check=True, capture_output=True)
        return cls(f"postgresql+psycopg://{USER}@127.0.0.1:{port}", data, run_as, bin_dir)

    def create_statement(self, name: str) -> str:
        return f'CREATE DATABASE "{name}"'

    def copy_database(self, template: str, name: str) -> None:
        self._admin_execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')

    def drop_statement(self, name: str) -> str:
        return f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'  # closing whatever still uses it

    def stop(self) -> None:
        """Stop and remove a server this class started (one named by the environment is left alone)."""
        if self._data_dir is None or self._bin_dir is None:
            return
        subprocess.run([*self._run_as, str(self._bin_dir / "pg_ctl"), "-D", str(self._data_dir), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(self._data_dir.parent, ignore_errors=True)
