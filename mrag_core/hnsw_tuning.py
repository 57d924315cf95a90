"""efSearch chosen per space for a recall target, measured against exact search at build time.

HNSW's ``efSearch`` (the size of the candidate list a search keeps) trades speed for recall, and
the recall one ``efSearch`` buys depends on the space: on MiniLM-shaped random vectors at 10,000
documents, ``efSearch = 64`` gives recall@32 of about 0.95 in a 32-d head space but 0.65 in the
384-d standard space. A fixed ``efSearch`` therefore compares MRAG and Standard at different
accuracies. Instead, each space is calibrated once when the index is built:

* pseudo-queries of two kinds, ``count`` of each, seeded (:func:`calibration_queries`):
  *between*: the mean of two random documents (a query between two topics, the case MRAG is for);
  *generic*: a draw from the Gaussian fit (mean and covariance) of the documents, all spaces
  jointly (a query close to no document in particular: the hard case for a graph search, whose
  recall a calibration on ``between`` queries alone overstates; on 10,000 random 384-d vectors,
  the efSearch that gives recall@32 of 0.9 on ``between`` queries gives about 0.83 on generic ones);
* ground truth: exact inner-product top-``c`` (the vectors are already normalised for cosine);
* ``recall@c = |approximate top-c ∩ exact top-c| / c``, averaged over the queries of one kind;
  a space's recall is the lower of its two kinds' (the target must hold for both);
* ``efSearch`` for the space: the first value of the ladder ``c, 1.5c, 2c, 3c, 4c, 6c, ...,
  64c`` (capped at ``n``) whose recall reaches the target; the last one if none does (its recall
  is recorded, so callers can say the target was missed).

Views whose spaces are voted into one list (MRAG's heads, Split RAG's pieces) are also calibrated
per vote (:func:`calibrate_votes`): one ``efSearch`` for all the view's spaces, the smallest at which
the vote's *final* top-10 and top-``c`` lists reach the target against the same vote over exact
hits, on both kinds of queries. That is the accuracy the user sees. The rank-decayed votes (``s_i * 2^-p``,
``2^-p``) get there with less than per-space recall asks for; the ``1/distance`` vote needs more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from mrag_core.kernels import top_c_rows

SearchSpace = Callable[[int, np.ndarray, int, int], np.ndarray]
"""``search(space, queries [q, d], depth, ef) -> ids [q, depth]``: one space's approximate search."""

SearchAll = Callable[[np.ndarray, int, int], tuple[np.ndarray, np.ndarray]]
"""``search(queries [q, s, d], depth, ef) -> (ids, scores)`` [q, s, depth]: every space with one ``efSearch``."""

VoteFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
"""``vote(ids [s, c], scores [s, c], k) -> doc ids [<= k]``, best first: one query's final list from its
hits. A ranking, so the top ``k'`` for ``k' < k`` is the first ``k'`` of the top ``k``."""


@dataclass(frozen=True)
class Calibration:
    """Per-space ``ef`` [s] and the ``recall`` [s] it reached at ``depth``, for ``target``."""

    ef: np.ndarray
    recall: np.ndarray
    depth: int
    target: float
    measure: str = ""  # what ``recall`` measures; empty: each space's own recall@depth

    @property
    def met(self) -> bool:
        """Whether every space reached the target."""
        return bool((self.recall >= self.target).all())

    def ef_for(self, space: int, depth: int) -> int:
        """``efSearch`` for a search of ``depth``: the calibrated value, scaled up for deeper searches
        (``ceil(ef * depth / calibrated depth)``); shallower searches keep it (recall@k only rises as k falls)."""
        ef = int(self.ef[space])
        return max(ef, -(-ef * depth // self.depth))


def check_target(target: float) -> float:
    """``target`` if it is a recall in (0, 1], else ``ValueError`` with the reason."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the recall target must be above 0 and at most 1, got {target}")
    return float(target)


def describe(name: str, cal: Calibration) -> str:
    """One line for logs and the UI, e.g. ``heads: efSearch 48-64, recall@32 0.92-0.95 (target 0.90)``."""
    def span(values: np.ndarray, fmt: str) -> str:
        lo, hi = values.min(), values.max()
        return format(lo, fmt) if lo == hi else f"{lo:{fmt}}-{hi:{fmt}}"

    if cal.measure:  # one value for the whole view
        missed = "" if cal.met else ", below target"
        return (f"{name}: efSearch {span(cal.ef, 'd')}, {cal.measure} {span(cal.recall, '.2f')} "
                f"(target {cal.target:.2f}{missed})")
    missed = "" if cal.met else f", below target in {int((cal.recall < cal.target).sum())} of {len(cal.ef)} spaces"
    return (f"{name}: efSearch {span(cal.ef, 'd')}, recall@{cal.depth} {span(cal.recall, '.2f')} "
            f"(target {cal.target:.2f}{missed})")


def ef_ladder(depth: int, n_docs: int, max_factor: int = 64) -> list[int]:
    """``c, 1.5c, 2c, 3c, 4c, 6c, 8c, ...`` up to ``max_factor * c``, capped at ``n_docs``, without repeats."""
    steps, factor = [], 1
    while factor <= max_factor:
        steps += [depth * factor, depth * factor * 3 // 2]
        factor *= 2
    out: list[int] = []
    for ef in steps:
        ef = min(max(ef, depth), max(n_docs, depth))
        if ef <= depth * max_factor and ef not in out:
            out.append(ef)
    return out


def pseudo_queries(x: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    """``count`` queries [count, s, d]: each the mean of two different random documents of ``x`` [n, s, d]
    (the same two in every space). With one document, that document."""
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, size=count)
    b = (a + rng.integers(1, max(n, 2), size=count)) % n if n > 1 else a
    return ((x[a].astype(np.float64) + x[b]) / 2).astype(np.float32)


def gaussian_queries(x: np.ndarray, count: int, seed: int = 0, sample: int = 1024) -> np.ndarray:
    """``count`` queries [count, s, d] drawn from ``N(mu, Sigma)``, the Gaussian fit of up to ``sample``
    random documents of ``x`` [n, s, d] with all spaces flattened into one vector (a query is one text:
    its spaces are drawn jointly). Drawn as ``mu + g @ (X_m - mu) / sqrt(m - 1)`` with ``g ~ N(0, I_m)``,
    whose covariance is exactly the sample covariance of the ``m`` documents (no factorisation).
    With one document, that document."""
    n, s_count, d = x.shape
    rng = np.random.default_rng(seed)
    rows = rng.choice(n, size=min(n, sample), replace=False) if n > sample else np.arange(n)
    docs = x[rows].reshape(len(rows), s_count * d).astype(np.float64)
    mu = docs.mean(axis=0)
    if len(rows) < 2:
        return np.repeat(mu[None], count, axis=0).reshape(count, s_count, d).astype(np.float32)
    g = rng.standard_normal((count, len(rows)))
    return (mu + g @ (docs - mu) / np.sqrt(len(rows) - 1)).reshape(count, s_count, d).astype(np.float32)


def calibration_queries(x: np.ndarray, count: int, seed: int = 0) -> list[np.ndarray]:
    """The calibration's query sets, ``count`` queries [count, s, d] each: :func:`pseudo_queries` (between
    two documents) and :func:`gaussian_queries` (generic); a target must hold on each."""
    return [pseudo_queries(x, count, seed), gaussian_queries(x, count, seed + 1)]


def recall_at(got: np.ndarray, exact: np.ndarray) -> float:
    """Mean over rows of ``|got ∩ exact| / depth`` for id lists [q, depth] (ids < 0 are misses)."""
    depth = exact.shape[1]
    hits = [len(set(g[g >= 0].tolist()) & set(e.tolist())) / depth for g, e in zip(got, exact)]
    return float(np.mean(hits)) if hits else 1.0


def exact_hits(x: np.ndarray, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product ``(ids, scores)`` [q, s, depth] of ``queries`` [q, s, d] in every space of
    ``x`` [n, s, d]."""
    per_space = [top_c_rows(np.ascontiguousarray(queries[:, s, :] @ x[:, s, :].T, dtype=np.float32), depth)
                 for s in range(x.shape[1])]
    return np.stack([i for i, _ in per_space], axis=1), np.stack([v for _, v in per_space], axis=1)


CalibrationSet = tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]
"""One kind of calibration queries [q, s, d] with their exact ``(ids, scores)`` [q, s, depth]."""


def calibration_sets(x: np.ndarray, depth: int, count: int = 64, seed: int = 0) -> list[CalibrationSet]:
    """:func:`calibration_queries` of ``x`` [n, s, d] with their exact top-``depth`` hits, computed once
    for every calibration of an index (per space and per vote)."""
    return [(queries, exact_hits(x, queries, depth)) for queries in calibration_queries(x, count, seed)]


def first_reaching(ladder: Iterable[int], measure: Callable[[int], float], target: float) -> tuple[int, float]:
    """The first ``ef`` of ``ladder`` whose ``measure(ef)`` (a recall) reaches ``target``, with that recall;
    the last one tried, and its recall, if none does."""
    ef, r = 0, 0.0
    for ef in ladder:
        r = measure(ef)
        if r >= target:
            break
    return ef, r


def calibrate(search: SearchSpace, x: np.ndarray, depth: int = 32, target: float = 0.9, count: int = 64,
              seed: int = 0, sets: list[CalibrationSet] | None = None) -> Calibration:
    """Smallest ladder ``efSearch`` per space of ``x`` [n, s, d] whose recall@``depth`` reaches ``target`` on
    both kinds of :func:`calibration_queries` (``count`` of each; ``sets``: from :func:`calibration_sets`
    at this ``depth``, to share them)."""
    target = check_target(target)
    n, s_count, _ = x.shape
    depth = max(1, min(depth, n))
    sets = sets if sets is not None else calibration_sets(x, depth, count, seed)
    ladder = ef_ladder(depth, n)
    efs, recalls = np.zeros(s_count, np.int64), np.zeros(s_count)
    for s in range(s_count):
        per_set = [(np.ascontiguousarray(q[:, s, :]), exact[0][:, s]) for q, exact in sets]

        def measure(ef: int) -> float:  # the lower recall of the two kinds of queries
            return min(recall_at(search(s, q, depth, ef), exact) for q, exact in per_set)

        efs[s], recalls[s] = first_reaching(ladder, measure, target)
    return Calibration(ef=efs, recall=recalls, depth=depth, target=target)


def voted_lists(vote: VoteFn, hits: tuple[np.ndarray, np.ndarray], k: int) -> list[np.ndarray]:
    """Every query's final top-``k`` list from its hits ``(ids, scores)`` [q, s, c]."""
    return [vote(hits[0][i], hits[1][i], k) for i in range(hits[0].shape[0])]


def _lists_recall(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """Mean over queries of ``|got ∩ want| / |want|`` (queries with an empty ``want`` skipped)."""
    per_query = [len(set(g.tolist()) & set(w.tolist())) / len(w) for g, w in zip(got, want) if len(w)]
    return float(np.mean(per_query)) if per_query else 1.0


def _lists_per_k(vote: VoteFn, hits: tuple[np.ndarray, np.ndarray], ks: tuple[int, ...]) -> dict[int, list[np.ndarray]]:
    """``{k: every query's final top-k}`` for ``k`` in ``ks``: voted once at the largest ``k``, the
    others its prefixes (a vote is a ranking, see :data:`VoteFn`)."""
    longest = voted_lists(vote, hits, max(ks))
    return {k: [ids[:k] for ids in longest] for k in ks}


def _lowest_recall(got: dict[int, list[np.ndarray]], want: dict[int, list[np.ndarray]]) -> float:
    """The lowest over ``k`` of the recall@k of the lists ``got[k]`` against ``want[k]``."""
    return min(_lists_recall(got[k], want[k]) for k in want)


def final_list_recall(vote: VoteFn, hits: tuple[np.ndarray, np.ndarray], exact: tuple[np.ndarray, np.ndarray],
                      ks: tuple[int, ...]) -> float:
    """The lowest over ``k`` in ``ks`` of the mean recall@k of the voted lists from ``hits`` against the
    voted lists from ``exact`` (both ``(ids, scores)`` [q, s, c]); what a vote's user sees."""
    return _lowest_recall(_lists_per_k(vote, hits, ks), _lists_per_k(vote, exact, ks))


def calibrate_votes(search: SearchAll, x: np.ndarray, votes: dict[str, VoteFn], depth: int = 32, target: float = 0.9,
                    count: int = 64, seed: int = 0, ks: tuple[int, ...] = (10, 32),
                    sets: list[CalibrationSet] | None = None) -> dict[str, Calibration]:
    """Per vote, the smallest ladder ``efSearch`` (one for every space of ``x`` [n, s, d]) at which the
    *final* lists of the vote over the spaces' top-``depth`` hits reach recall@k >= ``target`` for every
    ``k`` in ``ks`` (capped at ``depth``), against the same vote over exact hits, on both kinds of the
    seeded :func:`calibration_queries` (:func:`final_list_recall`; ``sets`` as in :func:`calibrate`).
    The ladder is walked once: each step is searched once and serves every vote still below target,
    the exact lists are voted once, not once per step, and each query is voted once per step, at the
    largest ``k`` (the smaller are its prefixes).

    A vote that weighs rank ``p`` by ``2^-p`` depends mostly on each space's top ranks and needs a
    smaller ``efSearch`` than per-space recall@depth asks for; a vote by ``1/distance`` weighs deep
    ranks almost as much and needs more.
    """
    target = check_target(target)
    n, s_count, _ = x.shape
    depth = max(1, min(depth, n))
    ks = tuple(sorted({min(k, depth) for k in ks}))
    sets = sets if sets is not None else calibration_sets(x, depth, count, seed)
    want = {name: [_lists_per_k(vote, exact, ks) for _, exact in sets] for name, vote in votes.items()}
    found: dict[str, tuple[int, float]] = {}
    for ef in ef_ladder(depth, n):
        open_votes = [name for name in votes if name not in found or found[name][1] < target]
        if not open_votes:
            break
        hits = [search(queries, depth, ef) for queries, _ in sets]
        for name in open_votes:  # the lowest over both kinds of queries and every k
            found[name] = (ef, min(_lowest_recall(_lists_per_k(votes[name], got, ks), wanted)
                                   for got, wanted in zip(hits, want[name])))
    label = "/".join(str(k) for k in ks)
    return {name: Calibration(ef=np.full(s_count, ef, np.int64), recall=np.full(s_count, r), depth=depth,
                              target=target, measure=f"final top-{label} recall")
            for name, (ef, r) in found.items()}
