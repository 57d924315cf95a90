"""Everything retrieval needs about one embedded corpus: three searchable views and head importances.

* ``standard``: one space, the standard vectors [n, d].
* ``heads``: h spaces, the per-head vectors [n, h, head_dim] (MRAG).
* ``split``: h spaces, the standard vector cut into h pieces [n, h, d / h] (Split RAG).
Importances ``s_i`` are computed once per corpus for the head and the split spaces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mrag_core.backends import SpaceIndex, build_index
from mrag_core.extraction import Embeddings
from mrag_core.hnsw_tuning import VoteFn, describe
from mrag_core.importance import HeadImportance, head_importance
from mrag_core.voting import VARIANTS, vote_hits


@dataclass
class CorpusIndex:
    """Search views over a corpus's embeddings plus the importance of each space."""

    standard: SpaceIndex
    heads: SpaceIndex
    split: SpaceIndex
    head_importance: HeadImportance
    split_importance: HeadImportance
    metric: str
    backend: str
    n_docs: int
    n_heads: int

    @classmethod
    def build(
        cls, emb: Embeddings, *, backend: str = "torch", metric: str = "cosine", device: str = "auto",
        pairs_per_doc: int = 16, seed: int = 0, head_importance_override: HeadImportance | None = None,
        target_recall: float | None = 0.9,
    ) -> "CorpusIndex":
        """Index ``emb`` with one backend; importances from :func:`head_importance` unless given;
        HNSW spaces calibrated to ``target_recall``, and the head and split views also per vote, on
        the final lists (see :mod:`mrag_core.hnsw_tuning`)."""
        split = emb.split()
        head_imp = head_importance_override or head_importance(emb.heads, pairs_per_doc=pairs_per_doc, seed=seed)
        split_imp = head_importance(split, pairs_per_doc=pairs_per_doc, seed=seed)
        return cls(
            standard=build_index(emb.standard, backend, metric, device, target_recall),
            heads=build_index(emb.heads, backend, metric, device, target_recall,
                              votes=vote_functions(head_imp.score, metric, VARIANTS)),
            split=build_index(split, backend, metric, device, target_recall,
                              votes=vote_functions(split_imp.score, metric, SPLIT_VOTES)),
            head_importance=head_imp,
            split_importance=split_imp,
            metric=metric,
            backend=backend,
            n_docs=len(emb),
            n_heads=emb.n_heads,
        )

    def calibration_lines(self) -> list[str]:
        """One line per view whose HNSW efSearch was calibrated, then one per vote calibrated on a view's
        final lists, e.g. ``heads, importance vote: ...`` (empty for exact backends)."""
        views = (("standard", self.standard), ("heads", self.heads), ("split", self.split))
        lines = [describe(name, cal) for name, view in views if (cal := getattr(view, "calibration", None)) is not None]
        for name, view in views:
            for vote, cal in getattr(view, "vote_calibrations", {}).items():
                lines.append(describe(f"{name}, {vote} vote", cal))
        return lines


SPLIT_VOTES = ("decay", "importance")
"""The votes Split RAG uses: the authors' 2^-p and the importance-weighted variant (``split-weighted``)."""


def vote_functions(importance: np.ndarray, metric: str, variants: tuple[str, ...]) -> dict[str, VoteFn]:
    """``{variant: vote(ids [s, c], scores [s, c], k) -> doc ids}``: each voting variant as a plain
    function of one query's hits (what the HNSW vote calibration needs)."""
    def make(variant: str) -> VoteFn:
        return lambda ids, scores, k: vote_hits(ids, scores, importance, variant, k, metric,
                                                with_evidence=False).doc_ids
    return {v: make(v) for v in variants}


def query_arrays(q: Embeddings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(standard [q, 1, d], heads [q, h, hd], split [q, h, d/h]) for a batch of query embeddings."""
    return q.standard[:, None, :], q.heads, q.split()
