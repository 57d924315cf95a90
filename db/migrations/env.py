"""Alembic environment for the MRAG Studio store; runs inside the caller's connection.

``db.engine.Store.upgrade`` passes its open connection in ``config.attributes["connection"]``
(the whole upgrade is then one transaction). Without one, ``sqlalchemy.url`` is used.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    """Emit SQL for ``--sql`` mode."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against the passed connection, or a fresh one from ``sqlalchemy.url``."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("No connection and no sqlalchemy.url given to the migrations.")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as fresh:
        context.configure(connection=fresh, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
