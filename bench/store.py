"""Store benchmark: loading 10,000 x 1,024 float32 vectors (+ 16 x 64 heads) stored as BLOBs.

    python bench/store.py [--database URL]

Prints the store's ``load_vectors`` time next to a raw read of the same rows through the same
database driver (one plain ``SELECT`` on a DBAPI cursor, then ``np.frombuffer``), and
``RESULT load_vectors_s=X raw_driver_s=X ratio=X`` (target on SQLite: about 0.1 s on a laptop).
Default: a SQLite file in a temporary folder. ``--database`` takes any SQLAlchemy URL of an
**empty** database (e.g. PostgreSQL or MariaDB), which is left holding the benchmark's rows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import db  # noqa: E402

N, DIM, HEADS, HEAD_DIM = 10_000, 1024, 16, 64


def measure(url: str) -> tuple[float, float]:
    """``(load_vectors seconds, raw driver seconds)``, each the best of 5, on the database at ``url``."""
    store = db.open_store(url)
    try:
        c = db.create_corpus(store, "Big")
        ids = db.add_documents(store, c.id, [{"text": f"d{i}"} for i in range(N)]).document_ids
        run = db.create_embedding_run(store, c.id, model_name="m", layer=0, pooling="last",
                                      n_heads=HEADS, head_dim=HEAD_DIM, dim=DIM)
        rng = np.random.default_rng(0)
        for start in range(0, N, 2_000):
            batch = ids[start:start + 2_000]
            db.save_vectors(store, run.id, batch, rng.standard_normal((len(batch), DIM), dtype=np.float32),
                            rng.standard_normal((len(batch), HEADS, HEAD_DIM), dtype=np.float32))
        _, std, heads = db.load_vectors(store, run.id)  # also warms the caches
        assert std.shape == (N, DIM) and heads.shape == (N, HEADS, HEAD_DIM)
        t_store = min(_timed(lambda: db.load_vectors(store, run.id)) for _ in range(5))
        raw_connection = store.engine.raw_connection()
        try:
            marker = "?" if store.is_sqlite else "%s"  # the drivers' paramstyles (qmark; format / pyformat)
            sql = (f"SELECT document_id, standard, heads FROM embedding_vectors WHERE run_id = {marker} "
                   "ORDER BY document_id")

            def raw() -> None:
                cursor = raw_connection.cursor()
                cursor.execute(sql, (run.id,))
                rows = cursor.fetchall()
                cursor.close()
                np.stack([np.frombuffer(r[1], np.float32) for r in rows])
                np.stack([np.frombuffer(r[2], np.float32) for r in rows])

            t_raw = min(_timed(raw) for _ in range(5))
        finally:
            raw_connection.close()
    finally:
        store.close()
    return t_store, t_raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--database", help="SQLAlchemy URL of an empty database (default: a temporary SQLite file)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database or f"sqlite:///{Path(tmp) / 'bench.db'}"
        t_store, t_raw = measure(url)
    backend = url.split(":", 1)[0]
    print(f"{backend}: load_vectors {t_store:.3f}s, raw driver read {t_raw:.3f}s")
    print(f"RESULT load_vectors_s={t_store:.3f} raw_driver_s={t_raw:.3f} ratio={t_store / t_raw:.2f}")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
