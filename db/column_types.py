"""Column types that hold the same values on every supported database (used by the models and the migrations).

SQLite and PostgreSQL store them as plain ``DATETIME``/``TIMESTAMP WITH TIME ZONE``, ``TEXT`` and
``BLOB``/``BYTEA``. MySQL and MariaDB need bigger or finer variants, else values are cut:

* :data:`TIMESTAMP`: ``DATETIME(6)`` there (a bare ``DATETIME`` drops the microseconds, and
  identities such as id + creation time would no longer match what was stored);
* :data:`LONG_TEXT`: ``LONGTEXT`` (``TEXT`` holds 64 KB: a long document, or an LLM answer);
* :data:`BLOB`: ``LONGBLOB`` (``BLOB`` holds 64 KB: a 2-d map of 10,000 documents is 80 KB).

Migrations import these names rather than spelling the variants out: they only add MySQL variants,
so the schema they create on SQLite and PostgreSQL is what it always was.
"""

from __future__ import annotations

from sqlalchemy import DateTime, LargeBinary, Text
from sqlalchemy.dialects import mysql

TIMESTAMP = DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
BLOB = LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")

#: Table options for MySQL / MariaDB (ignored elsewhere): full Unicode, and a binary collation so names
#: compare as on SQLite and PostgreSQL ("News" and "news" are two corpora, trailing spaces count),
#: whatever the server's or the database's defaults are.
MYSQL_TABLE_OPTIONS = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}
