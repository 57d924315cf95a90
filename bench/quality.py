"""Retrieval quality of Standard, MRAG, Split and the recommended strategy (sentence round-robin), issue 33.

    python bench/quality.py [DATA_DIR] [--threads 2] [--latency-queries 1]

DATA_DIR defaults to ``../shared/data/mrag-wikipedia-v1`` beside the repository. Embeddings are cached in
``$MRAG_CACHE_DIR`` (default ``~/.cache/mrag-studio``); the first run embeds the 1,250 v1 documents.

Query sets (the model is the default MiniLM, layer -1; exact search, c = 32):

* ``v1 test``: the test half of the v1 queries (``bench/v1_split.json``; the strategy was chosen on the
  other half, ``bench/strategy_search.py``);
* ``generated``: queries the offline composer (:mod:`services.querygen.offline`) writes over the v1 documents,
  planned with :func:`services.querygen.plan_queries` (seed 33, 12 queries each with 5, 10, 15, 20, 25
  aspects; nothing stored). Its stories are sentences copied from the documents, which flatters any
  sentence-level strategy;
* ``demo``: the app's demo corpus (96 documents, 24 queries of 1-6 aspects).

Scores are the project's: per query RSR and CSR of the first k documents
(:func:`mrag_core.evaluation.prefix_ratios`), weighted = (2 RSR + CSR) / 3, averaged over the queries with n
aspects, at (n, k) = (5,5), (10,10), (10,20), (15,15), (20,20), (25,25) (the v1 test half also at (n, n) for
its other aspect counts 1, 2, 3, 4, 6); the demo, whose queries have at most 6 aspects, prints (n, n) for
n = 1..6 and the mean over its 24 queries at k = n.

Latency: per query, on CPU, one torch thread, ``OMP_WAIT_POLICY=PASSIVE``, 10,000 documents (the v1
documents' vectors repeated 8 times, so the search touches 10k x d numbers), query embedding included:
Standard, MRAG and Split embed the query (one forward pass) and search (MRAG / Split vote, no evidence); the
recommended strategy cuts the query into sentences, embeds them in one batch, searches and fuses (no
evidence). Each strategy is timed on the same queries (``--latency-queries``, default 1, per aspect count of
the v1 test half: 10 queries of 1 to 25 aspects), the strategies alternating per query, best of 3 each; the mean
over the queries is printed, and the embedding alone of Standard and of the recommended strategy (what
dominates).

The last line is::

    RESULT recommended_vs_standard_min=X rsr_gain_10=X latency_ratio_10k=X

* ``recommended_vs_standard_min``: on the v1 test half, the smallest over the six (n, k) settings of
  weighted(recommended) / weighted(standard) (targets: >= 1.25 at every setting with n >= 10 and >= 1.10 at
  (5,5); so a value >= 1.25 meets both, and lines above say which settings miss);
* ``rsr_gain_10``: on the v1 test half, RSR(recommended) - RSR(standard) at n = k = 10 (target >= 0);
* ``latency_ratio_10k``: mean per-query latency of the recommended strategy over Standard's at 10k
  documents (target <= 5).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mrag_core.benchmark import Article, BenchQuery, load_articles, load_queries, resolve_ground_truth  # noqa: E402
from mrag_core.corpus_index import CorpusIndex  # noqa: E402
from mrag_core.embedding_cache import cached_embed  # noqa: E402
from mrag_core.evaluation import prefix_ratios  # noqa: E402
from mrag_core.extraction import Embeddings, embed_texts  # noqa: E402
from mrag_core.metrics.weighted import weighted_success_ratio  # noqa: E402
from mrag_core.models.loader import LoadedModel, load_model  # noqa: E402
from mrag_core.sentence_round_robin import (  # noqa: E402
    LABEL,
    STRATEGY_ID,
    query_parts,
    sentence_round_robin,
    sentence_round_robin_many,
)
from mrag_core.strategies import mrag_search, split_search, standard_search  # noqa: E402
from services.demo import load_demo  # noqa: E402
from services.querygen import DocRef, compose_story, plan_queries  # noqa: E402
from services.querygen.story_prompt import Article as StoryArticle  # noqa: E402

SETTINGS = ((5, 5), (10, 10), (10, 20), (15, 15), (20, 20), (25, 25))
STRATEGIES = ("standard", "mrag", "split", "recommended")
K_MAX = 32
C = 32
SEED = 33
GENERATED_COUNTS = (5, 10, 15, 20, 25)
GENERATED_PER_COUNT = 12
LATENCY_DOCS = 10_000
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mrag-wikipedia-v1"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class QuerySet:
    name: str
    texts: list[str]
    relevant: list[list[int]]
    n_aspects: list[int]


@dataclass
class Corpus:
    name: str
    texts: list[str]
    labels: list[str]


def v1_sets(data: Path) -> tuple[Corpus, QuerySet, QuerySet]:
    """The v1 corpus, its test half and the generated set over its documents."""
    arts = load_articles(data / "wikipedia_articles_v1.json.bz2")
    qs = load_queries(data / "wikipedia_queries_v1.json.bz2")
    gt = resolve_ground_truth(qs, arts).doc_indices
    rows = json.loads((ROOT / "bench" / "v1_split.json").read_text(encoding="utf-8"))["test"]
    test = QuerySet("v1 test", [qs[i].text for i in rows], [gt[i] for i in rows], [qs[i].n_aspects for i in rows])
    refs = [DocRef(f"{i:05d}", a.title, a.label) for i, a in enumerate(arts)]
    plans = plan_queries(refs, list(GENERATED_COUNTS), GENERATED_PER_COUNT, SEED)
    texts, rel, na = [], [], []
    for plan in plans:
        docs = [int(d) for d in plan.doc_ids]
        texts.append(compose_story([StoryArticle(arts[d].title, arts[d].text) for d in docs]).text)
        rel.append(docs)
        na.append(plan.n_aspects)
    generated = QuerySet("generated", texts, rel, na)
    return Corpus("v1", [a.text for a in arts], [a.label for a in arts]), test, generated


def demo_set() -> tuple[Corpus, QuerySet]:
    demo = load_demo()
    arts = [Article(d["title"], d["text"], d["label"]) for d in demo.documents]
    queries = [BenchQuery(str(q["text"]), tuple(q["topics"])) for q in demo.queries]  # type: ignore[arg-type]
    gt = resolve_ground_truth(queries, arts).doc_indices
    return (Corpus("demo", [a.text for a in arts], [a.label for a in arts]),
            QuerySet("demo", [q.text for q in queries], gt, [q.n_aspects for q in queries]))


def rankings(lm: LoadedModel, index: CorpusIndex, qset: QuerySet) -> dict[str, list[list[int]]]:
    """Each strategy's top K_MAX per query (embeddings cached)."""
    q, _ = cached_embed(lm, qset.texts, kind="query", batch_size=32)
    parts = [query_parts(t) for t in qset.texts]
    flat = [p for ps in parts for p in ps]
    rows, pos = [], 0
    for ps in parts:
        rows.append(list(range(pos, pos + len(ps))))
        pos += len(ps)
    pe, _ = cached_embed(lm, flat, kind="query", batch_size=64)
    return {
        "standard": [r.doc_ids for r in standard_search(index, q, K_MAX)],
        "mrag": [r.doc_ids for r in mrag_search(index, q, K_MAX, C, "importance", with_evidence=False)],
        "split": [r.doc_ids for r in split_search(index, q, K_MAX, C, "decay", with_evidence=False)],
        "recommended": [r.doc_ids for r in sentence_round_robin_many(index, pe, rows, K_MAX, C)],
    }


def scores(ranked: Sequence[Sequence[int]], qset: QuerySet, labels: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    rsr = np.zeros((len(ranked), K_MAX))
    csr = np.zeros((len(ranked), K_MAX))
    for i, (r, g) in enumerate(zip(ranked, qset.relevant)):
        rsr[i], csr[i] = prefix_ratios(list(r), g, labels, K_MAX)
    return rsr, csr


def table(qset: QuerySet, ranked: dict[str, list[list[int]]], labels: Sequence[str],
          settings: Sequence[tuple[int, int]], with_mean: bool = False) -> dict[str, dict[object, tuple[float, float]]]:
    """Print weighted and RSR per strategy and setting; return {strategy: {(n, k): (weighted, rsr)}}."""
    na = np.asarray(qset.n_aspects)
    out: dict[str, dict[object, tuple[float, float]]] = {}
    present = [s for s in settings if (na == s[0]).any()]
    cols = [f"({n},{k})" for n, k in present] + (["mean k=n"] if with_mean else [])
    counts = ", ".join(f"n={n}: {int((na == n).sum())}" for n in dict.fromkeys(n for n, _ in present))
    print(f"\n{qset.name} ({len(qset.texts)} queries; {counts})")
    print(f"{'':<14}" + "".join(f"{c:>16}" for c in cols))
    print(f"{'strategy':<14}" + "".join(f"{'weighted   RSR':>16}" for _ in cols))
    for name, ranks in ranked.items():
        rsr, csr = scores(ranks, qset, labels)
        res: dict[object, tuple[float, float]] = {}
        for n, k in present:
            idx = np.flatnonzero(na == n)
            r, c = float(rsr[idx, k - 1].mean()), float(csr[idx, k - 1].mean())
            res[(n, k)] = (weighted_success_ratio(r, c), r)
        if with_mean:
            kk = na - 1
            r, c = float(rsr[np.arange(len(na)), kk].mean()), float(csr[np.arange(len(na)), kk].mean())
            res["mean"] = (weighted_success_ratio(r, c), r)
        out[name] = res
        print(f"{name:<14}" + "".join(f"{w:>9.3f}{r:>7.3f}" for w, r in res.values()))
    base = out["standard"]
    print(f"{'rec/standard':<14}" + "".join(f"{out['recommended'][s][0] / base[s][0]:>9.2f}{'':>7}" for s in base))
    print(f"{'rec/mrag':<14}" + "".join(f"{out['recommended'][s][0] / out['mrag'][s][0]:>9.2f}{'':>7}" for s in base))
    return out


def latency(lm: LoadedModel, docs: Embeddings, qset: QuerySet, per_count: int) -> dict[str, float]:
    """Mean per-query seconds of each strategy at LATENCY_DOCS documents (see the module docstring)."""
    reps = -(-LATENCY_DOCS // len(docs))
    big = Embeddings(np.tile(docs.standard, (reps, 1))[:LATENCY_DOCS], np.tile(docs.heads, (reps, 1, 1))[:LATENCY_DOCS])
    index = CorpusIndex.build(big, backend="torch", device="cpu")
    na = np.asarray(qset.n_aspects)
    chosen = [int(i) for n in sorted(set(na.tolist())) for i in np.flatnonzero(na == n)[:per_count]]
    texts = [qset.texts[i] for i in chosen]
    k = 10

    def embed(t: Sequence[str]) -> Embeddings:
        return embed_texts(lm, t, kind="query", batch_size=max(1, len(t)))

    runs: dict[str, Callable[[str], object]] = {
        "standard": lambda t: standard_search(index, embed([t]), k),
        "mrag": lambda t: mrag_search(index, embed([t]), k, C, "importance", with_evidence=False),
        "split": lambda t: split_search(index, embed([t]), k, C, "decay", with_evidence=False),
        "recommended": lambda t: sentence_round_robin(index, embed(query_parts(t)), k, C, with_evidence=False),
        "standard: embedding only": lambda t: embed([t]),
        "recommended: embedding only": lambda t: embed(query_parts(t)),
    }
    for fn in runs.values():  # warm up (kernels, allocator)
        fn(texts[0])
    best = {name: np.full(len(texts), np.inf) for name in runs}
    for _ in range(3):
        for i, t in enumerate(texts):
            for name, fn in runs.items():
                t0 = time.perf_counter()
                fn(t)
                best[name][i] = min(best[name][i], time.perf_counter() - t0)
    return {name: float(v.mean()) for name, v in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="folder of the v1 benchmark files")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for embedding the corpora")
    ap.add_argument("--latency-queries", type=int, default=1, help="v1 test queries per aspect count timed")
    args = ap.parse_args()
    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    lm = load_model("minilm", device="cpu")
    v1, test, generated = v1_sets(Path(args.data))
    demo, demo_queries = demo_set()
    print(f"recommended = {STRATEGY_ID}: {LABEL}; MiniLM layer -1, exact search, c = {C}")
    results = {}
    for corpus, sets in ((v1, (test, generated)), (demo, (demo_queries,))):
        t0 = time.perf_counter()
        docs, hit = cached_embed(lm, corpus.texts, kind="doc", batch_size=32)
        log(f"{corpus.name}: {len(docs)} documents embedded{' (cache)' if hit else ''} in "
            f"{time.perf_counter() - t0:.0f}s")
        index = CorpusIndex.build(docs, backend="torch", device="cpu")
        for qset in sets:
            ranked = rankings(lm, index, qset)
            if qset.name == "demo":
                settings = [(n, n) for n in sorted(set(qset.n_aspects))]
                table(qset, ranked, corpus.labels, settings, with_mean=True)
            else:
                results[qset.name] = table(qset, ranked, corpus.labels, SETTINGS)
                if qset.name == "v1 test":  # the other aspect counts, to show where it does not win
                    table(qset, ranked, corpus.labels, [(n, n) for n in (1, 2, 3, 4, 6)])
        if corpus.name == "v1":
            v1_docs = docs
    torch.set_num_threads(1)
    lat = latency(lm, v1_docs, test, args.latency_queries)
    print(f"\nlatency per query at {LATENCY_DOCS} documents (CPU, 1 thread, query embedding included; "
          f"{args.latency_queries} v1 test queries per aspect count, best of 3, mean):")
    for name, sec in lat.items():
        print(f"  {name:<28} {sec * 1000:8.1f} ms   x{sec / lat['standard']:.2f} Standard")
    res = results["v1 test"]
    std, rec, mrag = res["standard"], res["recommended"], res["mrag"]
    ratios = {s: rec[s][0] / std[s][0] for s in SETTINGS}
    print("\ntargets on the v1 test half:")
    for s, r in ratios.items():
        need = 1.10 if s == (5, 5) else 1.25
        print(f"  weighted {s}: {r:.2f}x Standard (target >= {need:.2f}) {'ok' if r >= need else 'MISSED'}; "
              f"{'above' if rec[s][0] > mrag[s][0] else 'NOT above'} MRAG ({rec[s][0]:.3f} vs {mrag[s][0]:.3f})")
    gain = rec[(10, 10)][1] - std[(10, 10)][1]
    ratio = lat["recommended"] / lat["standard"]
    print(f"  RSR at (10,10): {rec[(10, 10)][1]:.3f} vs Standard {std[(10, 10)][1]:.3f} "
          f"({'ok' if gain >= 0 else 'MISSED'})")
    print(f"  latency at 10k: {ratio:.2f}x Standard (target <= 5) {'ok' if ratio <= 5 else 'MISSED'}")
    log(f"total {time.perf_counter() - t_start:.0f}s")
    print(f"RESULT recommended_vs_standard_min={min(ratios.values()):.3f} rsr_gain_10={gain:.3f} "
          f"latency_ratio_10k={ratio:.3f}")


if __name__ == "__main__":
    main()
