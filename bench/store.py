"""Store benchmark: loading 10,000 x 1,024 float32 vectors (+ 16 x 64 heads) from SQLite BLOBs.

    python bench/store.py

Prints the store's ``load_vectors`` time next to a raw ``sqlite3`` read of the same rows, and
``RESULT load_vectors_s=X raw_sqlite_s=X ratio=X`` (target: about 0.1 s on a laptop).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import db  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        store = db.open_store(f"sqlite:///{path}")
        c = db.create_corpus(store, "Big")
        ids = db.add_documents(store, c.id, [{"text": f"d{i}"} for i in range(10_000)]).document_ids
        run = db.create_embedding_run(store, c.id, model_name="m", layer=0, pooling="last",
                                      n_heads=16, head_dim=64, dim=1024)
        rng = np.random.default_rng(0)
        for start in range(0, 10_000, 2_000):
            batch = ids[start:start + 2_000]
            db.save_vectors(store, run.id, batch, rng.standard_normal((len(batch), 1024), dtype=np.float32),
                            rng.standard_normal((len(batch), 16, 64), dtype=np.float32))
        db.load_vectors(store, run.id)  # warm the page cache
        t_store = min(_timed(lambda: db.load_vectors(store, run.id)) for _ in range(5))
        con = sqlite3.connect(path)

        def raw() -> None:
            rows = con.execute("SELECT document_id, standard, heads FROM embedding_vectors WHERE run_id = ? "
                               "ORDER BY document_id", (run.id,)).fetchall()
            np.stack([np.frombuffer(r[1], np.float32) for r in rows])
            np.stack([np.frombuffer(r[2], np.float32) for r in rows])

        t_raw = min(_timed(raw) for _ in range(5))
        print(f"load_vectors {t_store:.3f}s, raw sqlite3 {t_raw:.3f}s")
        print(f"RESULT load_vectors_s={t_store:.3f} raw_sqlite_s={t_raw:.3f} ratio={t_store / t_raw:.2f}")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
