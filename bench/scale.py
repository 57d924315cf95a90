"""Scale benchmark: synthetic documents shaped like MiniLM's vectors, on faiss-flat, faiss-hnsw and Milvus (HNSW).

    nice python bench/scale.py [--n 1000000] [--queries 30] [--backends faiss-flat,milvus,faiss-hnsw]

Documents: 384-d standard vectors and 12 heads x 32-d, clustered Gaussians (256 clusters per space, a document's
heads in clusters of their own, as aspects are), each vector normalised; generated in chunks of 50,000 from a
fixed seed, so every process makes the same ones without holding them all. Queries: the mean of two documents
plus noise (a query between two topics).

Each backend is served by a process of its own, which builds the index (timed: build seconds, documents per
second), then answers the queries one at a time: Standard (top 32 of the standard space) and MRAG (top 32 of
each head space, voted by importance), p50 / p95 in ms. Its resident memory (VmRSS) is read after the build,
with the generated arrays freed, and printed with, in brackets, what the build added to it (the process's
modules, torch among them, take a few hundred MB before any index): faiss holds every vector in that process;
with Milvus the serving process is a client and the vectors live in the Milvus Lite server, a process of its own
(``python -m milvus_lite server``), whose memory is printed beside it. faiss-hnsw is calibrated as the app builds
it (recall@32 >= 0.9 per space and for MRAG's vote); milvus (HNSW, M and efConstruction as faiss-hnsw) is
calibrated the same way (``MilvusSpaces.calibrate``). recall@32 against faiss-flat (exact) is printed for both.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

H, HD, D = 12, 32, 384
CHUNK = 50_000
CLUSTERS = 256
SEED = 35


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def centers() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    return _unit(rng.standard_normal((CLUSTERS, D))), _unit(rng.standard_normal((CLUSTERS, H, HD)))


def chunk(i: int, n: int, cs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Documents ``i * CHUNK`` .. (at most ``n``): standard [m, 384] and heads [m, 12, 32], normalised."""
    m = min(CHUNK, n - i * CHUNK)
    rng = np.random.default_rng([SEED, i])
    std = cs[0][rng.integers(0, CLUSTERS, m)] + rng.standard_normal((m, D), np.float32) / np.sqrt(D)
    k = rng.integers(0, CLUSTERS, (m, H))
    heads = cs[1][k, np.arange(H)] + rng.standard_normal((m, H, HD), np.float32) / np.sqrt(HD)
    return _unit(std), _unit(heads)


def queries(count: int, n: int, cs) -> tuple[np.ndarray, np.ndarray]:
    std, heads = chunk(0, n, cs)
    rng = np.random.default_rng(SEED + 1)
    a, b = rng.integers(0, len(std), count), rng.integers(0, len(std), count)
    noise = lambda shape: rng.standard_normal(shape, np.float32) * 0.02  # noqa: E731
    return (_unit(std[a] + std[b] + noise((count, D))), _unit(heads[a] + heads[b] + noise((count, H, HD))))


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve(backend: str, n: int, count: int, uri: str | None, ef: int = 0) -> dict:
    """Build ``backend`` over the ``n`` documents in this process, then time the queries; returns the figures."""
    from mrag_core.backends import build_index
    from mrag_core.corpus_index import vote_functions
    from mrag_core.importance import head_importance
    from mrag_core.voting import vote_hits

    cs = centers()
    qs_std, qs_heads = queries(count, n, cs)
    imp = head_importance(chunk(0, n, cs)[1], pairs_per_doc=4).score  # from the first chunk: a fixed weighting
    votes = vote_functions(imp, "cosine", ("importance",))
    gc.collect()
    base = rss_mb()  # the engine's modules (torch, faiss, pymilvus) and the queries, before any index
    t0 = time.perf_counter()
    if backend.startswith("faiss"):
        parts = [chunk(i, n, cs) for i in range(-(-n // CHUNK))]
        std = np.concatenate([p[0] for p in parts])
        heads = np.concatenate([p[1] for p in parts])
        del parts
        std_index = build_index(std, backend)
        head_index = build_index(heads, backend, votes=votes)
        del std, heads
    else:
        std_index, head_index = build_milvus(n, cs, uri, votes, ef)
    build_s = time.perf_counter() - t0
    gc.collect()
    rss = rss_mb()

    def timed(fn) -> tuple[list[float], list[np.ndarray]]:
        fn(0)
        times, ids = [], []
        for j in range(count):
            t = time.perf_counter()
            ids.append(fn(j))
            times.append(time.perf_counter() - t)
        return times, ids

    def standard(j: int) -> np.ndarray:
        return std_index.search(qs_std[j][None, None, :], 32).ids[0, 0]

    def mrag(j: int) -> np.ndarray:
        hits = head_index.search(qs_heads[j][None], 32, vote="importance")
        return vote_hits(hits.ids[0], hits.scores[0], imp, "importance", 32, with_evidence=False).doc_ids

    t_std, ids_std = timed(standard)
    t_mrag, ids_mrag = timed(mrag)
    ms = lambda ts, p: round(1000 * float(np.percentile(ts, p)), 2)  # noqa: E731
    return {"backend": backend, "n": n, "build_s": round(build_s, 1), "docs_per_s": round(n / build_s),
            "rss_mb": round(rss), "base_rss_mb": round(base), "std_p50": ms(t_std, 50), "std_p95": ms(t_std, 95),
            "mrag_p50": ms(t_mrag, 50),
            "mrag_p95": ms(t_mrag, 95), "ids_std": [i.tolist() for i in ids_std],
            "ids_mrag": [np.asarray(i).tolist() for i in ids_mrag]}


def build_milvus(n: int, cs, uri: str, votes, ef: int = 0) -> tuple:
    """The standard and head collections written chunk by chunk (this process never holds every vector), built,
    then calibrated like faiss-hnsw on the vectors regenerated for it and freed again; ``ef`` > 0: no calibration,
    that efSearch for every search (the client then never holds the vectors)."""
    from mrag_core import milvus_backend as mb

    client = mb.connect(mb.MilvusConfig(uri), timeout=60)
    views = {"standard": mb.View("standard", 1, D), "heads": mb.View("heads", H, HD)}
    for name, view in views.items():
        if client.has_collection(name):
            client.drop_collection(name)
        mb.create_collection(client, name, [view], "HNSW")
    for i in range(-(-n // CHUNK)):
        std, heads = chunk(i, n, cs)
        ids = np.arange(i * CHUNK, i * CHUNK + len(std))
        for name, x in (("standard", std[:, None, :]), ("heads", heads)):
            packed = mb.pack_docs(x)
            for part in mb.batches(len(ids)):
                client.insert(name, [{mb.PK: int(d), mb.HASH: "", name: packed[k]}
                                     for k, d in zip(range(part.start, part.stop), ids[part])])
    for name in views:
        mb.settle(client, name, "HNSW")
    std_index = mb.MilvusSpaces(client, "standard", views["standard"], n, index_type="HNSW")
    head_index = mb.MilvusSpaces(client, "heads", views["heads"], n, index_type="HNSW")
    if ef > 0:
        from mrag_core.hnsw_tuning import Calibration

        for index in (std_index, head_index):
            index.calibration = Calibration(np.full(index.n_spaces, ef), np.full(index.n_spaces, np.nan), 32, 0.9)
        return std_index, head_index
    parts = [chunk(i, n, cs) for i in range(-(-n // CHUNK))]
    std_index.calibrate(np.concatenate([p[0] for p in parts])[:, None, :])
    head_index.calibrate(np.concatenate([p[1] for p in parts]), votes=votes)
    del parts
    return std_index, head_index


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_child(backend: str, args: argparse.Namespace, uri: str | None) -> dict:
    cmd = [sys.executable, __file__, "--serve", backend, "--n", str(args.n), "--queries", str(args.queries),
           "--milvus-ef", str(args.milvus_ef)]
    if uri:
        cmd += ["--uri", uri]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{backend} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def recall(got: list[list[int]], want: list[list[int]]) -> float:
    return float(np.mean([len(set(g) & set(w)) / len(w) for g, w in zip(got, want)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--backends", default="faiss-flat,milvus,faiss-hnsw", help="faiss-flat first: the exact answers")
    ap.add_argument("--milvus-ef", type=int, default=0,
                    help="milvus: this efSearch instead of the calibration (which regenerates every vector in the "
                         "client; at 1M that is 3 GB and long)")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        print(json.dumps(serve(args.serve, args.n, args.queries, args.uri, args.milvus_ef)))
        return
    print(f"{'backend':<12} {'n':>9} {'build s':>8} {'docs/s':>7} {'serving RSS MB (index)':>22} {'engine RSS MB':>13} "
          f"{'std p50':>8} {'std p95':>8} {'mrag p50':>8} {'mrag p95':>8} {'recall@32 std/mrag':>18}", flush=True)
    exact: dict | None = None
    for backend in args.backends.split(","):
        server, engine_rss, uri = None, None, None
        if backend == "milvus":
            folder = tempfile.mkdtemp(prefix="mrag-scale-")
            port = free_port()
            server = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir",
                                       f"{folder}/scale.db", "--host", "127.0.0.1", "--port", str(port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            uri = f"http://127.0.0.1:{port}"
            deadline = time.time() + 120
            while time.time() < deadline:  # until the server listens
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.5)
        try:
            res = run_child(backend, args, uri)
            if server is not None:
                engine_rss = rss_mb(server.pid)
        finally:
            if server is not None:
                server.terminate()
                server.wait(60)
        if backend == "faiss-flat":
            exact = res
        rec = (f"{recall(res['ids_std'], exact['ids_std']):.3f}/{recall(res['ids_mrag'], exact['ids_mrag']):.3f}"
               if exact is not None else "-")
        serving = f"{res['rss_mb']} ({res['rss_mb'] - res['base_rss_mb']:+})"
        print(f"{backend:<12} {res['n']:>9} {res['build_s']:>8} {res['docs_per_s']:>7} {serving:>22} "
              f"{'-' if engine_rss is None else round(engine_rss):>13} {res['std_p50']:>8} "
              f"{res['std_p95']:>8} {res['mrag_p50']:>8} {res['mrag_p95']:>8} {rec:>18}", flush=True)


if __name__ == "__main__":
    main()
