"""Search for an offline retrieval strategy that beats Standard RAG with the default MiniLM (issue 33).

    python bench/strategy_search.py [DATA_DIR] [--half tune|test] [--groups a,b,...] [--layers -1,-2]

Every setting is chosen on the tune half of the v1 queries (``bench/v1_split.json``); ``--half test`` exists
only to print the test figures of the choice afterwards, never to choose. Embeddings are cached in
``$MRAG_CACHE_DIR`` (each configuration is embedded once). Scores are the project's: RSR and CSR per prefix
(:func:`mrag_core.evaluation.prefix_ratios`), weighted = (2 RSR + CSR) / 3, at the issue's settings
(n, k) = (5,5), (10,10), (10,20), (15,15), (20,20), (25,25).

Each row prints the weighted ratio at every setting, its ratio to Standard's (min over the n >= 10 settings
and at (5,5)), and RSR at (10,10). Lever groups (``--groups``):

* ``layers``: MRAG's layer (``--layers``, default -1..-6; each layer embeds the documents once more) with mean
  pooling, and first-token pooling at layer -1;
* ``votes``: MRAG's vote (decay, distance), Standard as one more voter (weight = mean s_i, or = sum s_i), RRF of
  Standard's and MRAG's lists, query-dependent head weights (s_i times the query's head norm over its mean);
* ``parts``: query decomposition: parts = sentences, windows of 2 or 3 sentences, paragraphs
  (:mod:`mrag_core.query_parts`); per part a Standard list, an MRAG list or both; with or without the whole
  query's lists; fused by RRF (k = 60, 10) or by each document's best cosine over the parts;
* ``agg``: fusions that keep each part's best documents: best cosine, best rank (round-robin), and RRF of a
  Standard and an MRAG view, with MMR on top;
* ``diversity``: MMR over the fused candidates (document vectors, Standard space), lambda 0.9 / 0.7 / 0.5;
* ``final``: the chosen strategy's two views alone, the choice through the engine function
  (:func:`mrag_core.sentence_round_robin.sentence_round_robin_many`) and its sensitivity to c.

SmolLM2 heads are not searched here: embedding the corpus with a 135M decoder at 512 tokens would take, scaled
from MiniLM's five minutes, an hour or more on two shared cores; the issue already found them far below
MiniLM's Standard on v1.
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

from mrag_core.backends import normalize_spaces  # noqa: E402
from mrag_core.benchmark import load_articles, load_queries, resolve_ground_truth  # noqa: E402
from mrag_core.corpus_index import CorpusIndex  # noqa: E402
from mrag_core.embedding_cache import cached_embed  # noqa: E402
from mrag_core.evaluation import prefix_ratios  # noqa: E402
from mrag_core.extraction import Embeddings  # noqa: E402
from mrag_core.metrics.weighted import weighted_success_ratio  # noqa: E402
from mrag_core.models.loader import load_model  # noqa: E402
from mrag_core.query_parts import paragraphs, split_sentences, windows  # noqa: E402
from mrag_core.rrf import reciprocal_rank_fusion  # noqa: E402
from mrag_core.sentence_round_robin import STRATEGY_ID, sentence_round_robin_many  # noqa: E402
from mrag_core.voting import vote_hits  # noqa: E402

SETTINGS = ((5, 5), (10, 10), (10, 20), (15, 15), (20, 20), (25, 25))
K_MAX = 32
C = 32
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mrag-wikipedia-v1"
SPLIT_FILE = ROOT / "bench" / "v1_split.json"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class QuerySet:
    """Queries to score: texts, ground truth (document indices) and aspect counts."""

    name: str
    texts: list[str]
    relevant: list[list[int]]
    n_aspects: list[int]


def load_v1(data: Path, half: str) -> tuple[list, QuerySet]:
    arts = load_articles(data / "wikipedia_articles_v1.json.bz2")
    qs = load_queries(data / "wikipedia_queries_v1.json.bz2")
    gt = resolve_ground_truth(qs, arts).doc_indices
    rows = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))[half]
    return arts, QuerySet(f"v1 {half}", [qs[i].text for i in rows], [gt[i] for i in rows],
                          [qs[i].n_aspects for i in rows])


def summarize(rankings: Sequence[Sequence[int]], qset: QuerySet,
              labels: Sequence[str]) -> dict[tuple[int, int], tuple[float, float]]:
    """(n, k) -> (mean weighted, mean RSR) over the queries with n aspects."""
    rsr = np.zeros((len(rankings), K_MAX))
    csr = np.zeros((len(rankings), K_MAX))
    for i, (ranking, rel) in enumerate(zip(rankings, qset.relevant)):
        rsr[i], csr[i] = prefix_ratios(list(ranking), rel, labels, K_MAX)
    na = np.asarray(qset.n_aspects)
    out = {}
    for n, k in SETTINGS:
        idx = np.flatnonzero(na == n)
        if len(idx):
            r, c = float(rsr[idx, k - 1].mean()), float(csr[idx, k - 1].mean())
            out[(n, k)] = (weighted_success_ratio(r, c), r)
    return out


class Table:
    """Prints rows of weighted ratios and their ratio to a baseline row."""

    def __init__(self) -> None:
        self.base: dict | None = None

    def header(self) -> None:
        cols = " ".join(f"{f'({n},{k})':>8}" for n, k in SETTINGS)
        print(f"{'strategy':<46} {cols} {'min>=10':>8} {'(5,5)':>6} {'RSR10':>6} {'RSRd':>6}")

    def row(self, name: str, res: dict) -> None:
        if self.base is None:
            self.base = res
        cells = " ".join(f"{res[s][0]:8.3f}" if s in res else f"{'-':>8}" for s in SETTINGS)
        ratios = [res[s][0] / self.base[s][0] for s in SETTINGS if s in res and s[0] >= 10]
        r55 = res[(5, 5)][0] / self.base[(5, 5)][0] if (5, 5) in res else float("nan")
        rsr10 = res[(10, 10)][1] if (10, 10) in res else float("nan")
        d = rsr10 - self.base[(10, 10)][1] if (10, 10) in res else float("nan")
        print(f"{name:<46} {cells} {min(ratios) if ratios else float('nan'):8.3f} {r55:6.3f} {rsr10:6.3f} {d:+6.3f}",
              flush=True)


# --------------------------------------------------------------------------- building blocks


def std_lists(index: CorpusIndex, emb: Embeddings, depth: int = C) -> tuple[np.ndarray, np.ndarray]:
    hits = index.standard.search(emb.standard[:, None, :], depth)
    return hits.ids[:, 0], hits.scores[:, 0]


def mrag_lists(index: CorpusIndex, emb: Embeddings, variant: str = "importance", depth: int = C,
               weights: np.ndarray | None = None) -> list[list[int]]:
    hits = index.heads.search(emb.heads, depth)
    imp = index.head_importance.score
    out = []
    for i in range(len(emb)):
        w = imp if weights is None else weights[i]
        out.append(vote_hits(hits.ids[i], hits.scores[i], w, variant, depth, index.metric,
                             with_evidence=False).doc_ids.tolist())
    return out


def rrf(lists: Sequence[Sequence[int]], k: int = 60) -> list[int]:
    return [int(d) for d, _ in reciprocal_rank_fusion([list(x) for x in lists], k)]


def best_cosine(id_rows: Sequence[np.ndarray], score_rows: Sequence[np.ndarray]) -> list[int]:
    best: dict[int, float] = {}
    for ids, scores in zip(id_rows, score_rows):
        for d, s in zip(ids.tolist(), scores.tolist()):
            if s > best.get(d, -9.0):
                best[d] = s
    return [d for d, _ in sorted(best.items(), key=lambda t: (-t[1], t[0]))]


def best_rank(lists: Sequence[Sequence[int]]) -> list[int]:
    """Documents by their best rank in any list; ties by the RRF sum (k = 60), then first appearance."""
    fused = reciprocal_rank_fusion([list(x) for x in lists], 60)
    order = {d: i for i, (d, _) in enumerate(fused)}
    best: dict[int, int] = {}
    for lst in lists:
        for r, d in enumerate(lst):
            if r < best.get(d, 1 << 30):
                best[d] = r
    return sorted(best, key=lambda d: (best[d], order[d]))


def mmr(candidates: Sequence[int], doc_unit: np.ndarray, lam: float, k: int = K_MAX) -> list[int]:
    """Maximal marginal relevance over ``candidates`` (best first): relevance 1 - rank/len, similarity = cosine
    of the documents' Standard vectors."""
    cand = list(candidates)[: 2 * k]
    if not cand:
        return []
    rel = 1.0 - np.arange(len(cand)) / len(cand)
    vecs = doc_unit[cand]
    sim = vecs @ vecs.T
    chosen: list[int] = []
    left = list(range(len(cand)))
    max_sim = np.full(len(cand), -1.0)
    while left and len(chosen) < k:
        scores = lam * rel[left] - (1 - lam) * max_sim[left] if chosen else rel[left]
        j = left[int(np.argmax(scores))]
        chosen.append(j)
        left.remove(j)
        max_sim = np.maximum(max_sim, sim[j])
    return [cand[j] for j in chosen]


# --------------------------------------------------------------------------- parts


PART_KINDS: dict[str, Callable[[str], list[str]]] = {
    "sentences": split_sentences,
    "win2": lambda t: windows(split_sentences(t), 2),
    "win3": lambda t: windows(split_sentences(t), 3),
    "paragraphs": paragraphs,
}


class PartEmbeddings:
    """All queries' parts of one kind, embedded in one cached call; ``rows[q]`` indexes the query's parts."""

    def __init__(self, lm, texts: Sequence[str], kind: str, layer: int) -> None:
        split = PART_KINDS[kind]
        flat: list[str] = []
        self.rows: list[list[int]] = []
        for t in texts:
            parts = split(t) or [t]
            self.rows.append(list(range(len(flat), len(flat) + len(parts))))
            flat.extend(parts)
        self.emb, _ = cached_embed(lm, flat, kind="query", layer=layer, batch_size=64)
        self.n_parts = len(flat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    ap.add_argument("--half", default="tune", choices=("tune", "test"))
    ap.add_argument("--groups", default="votes,parts,agg,diversity,final")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", default="-1,-2,-3,-4,-5,-6", help="layers for the 'layers' group (mean pooling; "
                    "'first' pooling is tried at -1)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    groups = set(args.groups.split(","))
    arts, qset = load_v1(Path(args.data), args.half)
    labels = [a.label for a in arts]
    lm = load_model("minilm", device="cpu")
    t0 = time.perf_counter()
    docs, _ = cached_embed(lm, [a.text for a in arts], kind="doc", layer=-1, batch_size=32)
    log(f"documents embedded in {time.perf_counter() - t0:.1f}s")
    index = CorpusIndex.build(docs, backend="torch", device="cpu")
    qemb, _ = cached_embed(lm, qset.texts, kind="query", layer=-1, batch_size=32)
    table = Table()
    table.header()
    print(f"# {qset.name}: {len(qset.texts)} queries; weighted ratio per (n,k); ratios to Standard")
    ids, std_scores = std_lists(index, qemb)
    std_rank = [r.tolist() for r in ids]
    table.row("standard", summarize(std_rank, qset, labels))
    mrag_rank = mrag_lists(index, qemb)
    table.row("mrag (layer -1, mean, importance)", summarize(mrag_rank, qset, labels))
    split_hits = index.split.search(qemb.split(index.n_heads), C)
    split_rank = [vote_hits(split_hits.ids[i], split_hits.scores[i], index.split_importance.score, "decay", C,
                            with_evidence=False).doc_ids.tolist() for i in range(len(qemb))]
    table.row("split (decay)", summarize(split_rank, qset, labels))

    if "layers" in groups:
        LAYERS = tuple(int(x) for x in args.layers.split(","))
        for pooling in ("mean", "first"):
            lmp = lm if pooling == "mean" else load_model("minilm", device="cpu", head_pooling=pooling)
            for layer in LAYERS if pooling == "mean" else (-1,):
                d, _ = cached_embed(lmp, [a.text for a in arts], kind="doc", layer=layer, batch_size=32)
                q, _ = cached_embed(lmp, qset.texts, kind="query", layer=layer, batch_size=32)
                idx = CorpusIndex.build(d, backend="torch", device="cpu")
                table.row(f"mrag layer {layer} {pooling}", summarize(mrag_lists(idx, q), qset, labels))

    if "votes" in groups:
        for variant in ("decay", "distance"):
            table.row(f"mrag vote {variant}", summarize(mrag_lists(index, qemb, variant), qset, labels))
        hits = index.heads.search(qemb.heads, C)
        imp = index.head_importance.score
        for label, w_std in (("mean s_i", imp.mean()), ("sum s_i", imp.sum())):
            runs = []
            for i in range(len(qemb)):
                ids_i = np.vstack([hits.ids[i], ids[i][None, :]])
                sc_i = np.vstack([hits.scores[i], np.zeros((1, C), np.float32)])
                runs.append(vote_hits(ids_i, sc_i, np.append(imp, w_std), "importance", C,
                                      with_evidence=False).doc_ids.tolist())
            table.row(f"mrag + standard voter (w = {label})", summarize(runs, qset, labels))
        table.row("rrf(standard, mrag)", summarize([rrf([a, b]) for a, b in zip(std_rank, mrag_rank)], qset, labels))
        qnorm = np.linalg.norm(qemb.heads, axis=2)
        qdep = imp[None, :] * qnorm / qnorm.mean(axis=1, keepdims=True)
        table.row("mrag, query-dependent weights", summarize(mrag_lists(index, qemb, weights=qdep), qset, labels))

    if groups & {"parts", "diversity", "agg", "final"}:
        doc_unit = normalize_spaces(docs.standard)
        part_embs = {kind: PartEmbeddings(lm, qset.texts, kind, -1) for kind in PART_KINDS}
        for kind, pe in part_embs.items():
            log(f"{kind}: {pe.n_parts} parts ({pe.n_parts / len(qset.texts):.1f} per query)")
        cache: dict[str, tuple] = {}

        def lists_of(kind: str) -> tuple:
            if kind not in cache:
                pe = part_embs[kind]
                s_ids, s_scores = std_lists(index, pe.emb)
                cache[kind] = (pe, s_ids, s_scores, mrag_lists(index, pe.emb))
            return cache[kind]

        def parts_run(kind: str, per_part: str, whole: bool, fuse: str, rrf_k: int = 60) -> list[list[int]]:
            pe, s_ids, s_scores, m_lists = lists_of(kind)
            out = []
            for qi, rows in enumerate(pe.rows):
                lists: list[list[int]] = []
                if whole:
                    if per_part in ("standard", "both"):
                        lists.append(std_rank[qi])
                    if per_part in ("mrag", "both"):
                        lists.append(mrag_rank[qi])
                for r in rows:
                    if per_part in ("standard", "both"):
                        lists.append(s_ids[r].tolist())
                    if per_part in ("mrag", "both"):
                        lists.append(m_lists[r])
                if fuse == "rrf":
                    out.append(rrf(lists, rrf_k))
                elif fuse == "best-rank":
                    out.append(best_rank(lists))
                else:  # best cosine over Standard lists
                    id_rows = [s_ids[r] for r in rows] + ([ids[qi]] if whole else [])
                    sc_rows = [s_scores[r] for r in rows] + ([std_scores[qi]] if whole else [])
                    out.append(best_cosine(id_rows, sc_rows))
            return out

        if "parts" in groups:
            for kind in PART_KINDS:
                for per_part in ("standard", "mrag", "both"):
                    for whole in (False, True):
                        name = f"parts {kind} {per_part}{' +whole' if whole else ''} rrf60"
                        table.row(name, summarize(parts_run(kind, per_part, whole, "rrf"), qset, labels))
            for kind in ("sentences", "win2"):
                for per_part in ("standard", "both"):
                    table.row(f"parts {kind} {per_part} +whole rrf10",
                              summarize(parts_run(kind, per_part, True, "rrf", 10), qset, labels))
                table.row(f"parts {kind} standard +whole best-cos",
                          summarize(parts_run(kind, "standard", True, "max"), qset, labels))
        if "agg" in groups:
            for kind in PART_KINDS:
                for whole in (False, True):
                    table.row(f"parts {kind} standard{' +whole' if whole else ''} best-cos",
                              summarize(parts_run(kind, "standard", whole, "max"), qset, labels))
            for kind in ("sentences", "win2"):
                for per_part in ("standard", "mrag", "both"):
                    table.row(f"parts {kind} {per_part} +whole best-rank",
                              summarize(parts_run(kind, per_part, True, "best-rank"), qset, labels))
            for kind in ("sentences", "win2"):
                cos = parts_run(kind, "standard", True, "max")
                mr = parts_run(kind, "mrag", True, "best-rank")
                table.row(f"rrf(best-cos std, best-rank mrag) {kind}",
                          summarize([rrf([a, b]) for a, b in zip(cos, mr)], qset, labels))
                table.row(f"rrf10(best-cos std, best-rank mrag) {kind}",
                          summarize([rrf([a, b], 10) for a, b in zip(cos, mr)], qset, labels))
                for lam in (0.9, 0.7):
                    table.row(f"parts {kind} standard +whole best-cos mmr {lam}",
                              summarize([mmr(r, doc_unit, lam) for r in cos], qset, labels))
        if "final" in groups:
            for kind in ("sentences",):
                for whole in (True, False):
                    cos = parts_run(kind, "standard", whole, "max")
                    br = parts_run(kind, "standard", whole, "best-rank")
                    mr = parts_run(kind, "mrag", whole, "best-rank")
                    w = " +whole" if whole else ""
                    table.row(f"C: rrf(best-cos std, best-rank mrag){w}",
                              summarize([rrf([a, b]) for a, b in zip(cos, mr)], qset, labels))
                    table.row(f"rrf(best-rank std, best-rank mrag){w}",
                              summarize([rrf([a, b]) for a, b in zip(br, mr)], qset, labels))
                    table.row(f"rrf(best-cos std, best-rank std, best-rank mrag){w}",
                              summarize([rrf([a, b, c]) for a, b, c in zip(cos, br, mr)], qset, labels))
                    table.row(f"rrf(std, mrag, best-cos std, best-rank mrag){w}",
                              summarize([rrf([e, f, a, b]) for e, f, a, b in zip(std_rank, mrag_rank, cos, mr)],
                                        qset, labels))
        if "final" in groups:  # the choice's two views alone, then the choice through the engine function
            for per_part in ("standard", "mrag"):
                table.row(f"parts sentences {per_part} best-rank (one view)",
                          summarize(parts_run("sentences", per_part, False, "best-rank"), qset, labels))
            pe = part_embs["sentences"]
            runs = sentence_round_robin_many(index, pe.emb, pe.rows, K_MAX, C)
            table.row(f"engine: {STRATEGY_ID}", summarize([r.doc_ids for r in runs], qset, labels))
            for depth in (16, 64):  # sensitivity only: c stays the project's 32
                runs = sentence_round_robin_many(index, pe.emb, pe.rows, K_MAX, depth)
                table.row(f"engine: {STRATEGY_ID}, c = {depth}", summarize([r.doc_ids for r in runs], qset, labels))
        if "diversity" in groups:
            table.row("standard + mmr 0.7", summarize([mmr(r, doc_unit, 0.7) for r in std_rank], qset, labels))
            for kind, per_part in (("sentences", "both"), ("sentences", "standard")):
                base = parts_run(kind, per_part, True, "rrf")
                for lam in (0.9, 0.7, 0.5):
                    table.row(f"parts {kind} {per_part} +whole rrf60 mmr {lam}",
                              summarize([mmr(r, doc_unit, lam) for r in base], qset, labels))


if __name__ == "__main__":
    main()
