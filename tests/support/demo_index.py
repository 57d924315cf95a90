"""One demo index per test session: the demo corpus and its query set with a finished MiniLM index (the last
layer, the model's default pooling, as the Index page and an evaluation run build it by default) in a SQLite
file, built once and copied for every test or module that starts from it.

Building it costs about 8 s of CPU (96 long documents through MiniLM); many page and browser tests need the index
only to exist. A copy of a closed SQLite file is that database: the store is closed (its WAL folded into the
file) before the first copy. Tests that check how an index gets built still build their own.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path


def build_demo_index(path: Path) -> None:
    """The demo corpus, its query set and a finished MiniLM index (layer -1) in a new SQLite file at ``path``."""
    import db
    from mrag_core.models.loader import load_model
    from services.demo.store import ensure_demo_corpus
    from services.workflows.indexing import build_embedding_run

    store = db.open_store(f"sqlite:///{path}")
    try:
        corpus_id = ensure_demo_corpus(store).corpus_id
        build_embedding_run(store, corpus_id, load_model("minilm", device="cpu"), layer=-1, batch_size=32)
    finally:
        store.close()
    with sqlite3.connect(path) as conn:  # nothing left in a -wal file: the one file is the whole database
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def copy_demo_index(src: Path, dest: Path) -> None:
    """``dest`` (a SQLite file nothing has opened yet) becomes a copy of the demo index database at ``src``."""
    if dest.exists() or Path(f"{dest}-wal").exists():
        raise FileExistsError(f"{dest} exists: the demo index is copied before anything opens the database")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
