"""Offline zero-shot annotation by embedding similarity (no LLM endpoint needed).

Each category is embedded as ``"name: description"`` (just ``name`` when the
description is blank), each document as ``"title\\ntext"`` (text cut to
``char_budget`` characters). With rows L2-normalised, the cosine similarity is
the dot product ``S = D @ C.T`` (shape ``(n_docs, n_categories)``).

For one document with similarities ``s_1..s_k``:

* ``label = argmax_j s_j`` (ties: first category in list order);
* ``score = softmax(s / T)[label] = exp((s_max - s_max)/T) / sum_j exp((s_j - s_max)/T)``
  with temperature ``T`` (default :data:`DEFAULT_TEMPERATURE` = 0.05). Cosine
  gaps between sentence-embedding categories are small (typically 0.05-0.2),
  so a low ``T`` is needed for the probability to reflect them: with T=0.05 a
  gap of 0.1 between two categories gives ``e^2 ~ 7.4 : 1``;
* ``reason = "closest category by embedding similarity (cos=0.43; runner-up 'x' 0.31)"``.

A document whose embedding is all zeros or not finite gets a ``failed``
suggestion. ``agent = "zero-shot:<model name>"``; ``model_version`` also pins
``T`` (see :func:`zero_shot_identity`).
"""

from __future__ import annotations

import threading
from typing import Callable, Collection, Sequence

import numpy as np

from services.annotate.types import CategoryLike, DocKey, DocLike, Suggestion, validate_categories

__all__ = [
    "DEFAULT_TEMPERATURE",
    "EmbedFn",
    "category_text",
    "cosine_similarities",
    "describe_choice",
    "document_text",
    "l2_normalise",
    "softmax",
    "zero_shot_annotate",
    "zero_shot_identity",
]

DEFAULT_TEMPERATURE = 0.05
DEFAULT_CHAR_BUDGET = 2000
ZERO_SHOT_VERSION = "zs-v1"

EmbedFn = Callable[[list[str]], np.ndarray]


def zero_shot_identity(model_name: str, temperature: float = DEFAULT_TEMPERATURE) -> tuple[str, str]:
    """``(agent, model_version)``: ``("zero-shot:<model>", "<model>/zs-v1/T=<temperature>")``."""
    return f"zero-shot:{model_name}", f"{model_name}/{ZERO_SHOT_VERSION}/T={temperature:g}"


def category_text(category: CategoryLike) -> str:
    """``"name: description"``, or ``"name"`` when the description is blank."""
    description = " ".join((category.description or "").split())
    return f"{category.name}: {description}" if description else category.name


def document_text(doc: DocLike, char_budget: int = DEFAULT_CHAR_BUDGET) -> str:
    """``"title\\ntext"`` with the text cut to ``char_budget`` characters (title omitted when blank)."""
    body = (doc.text or "")[:char_budget]
    title = (doc.title or "").strip()
    return f"{title}\n{body}" if title else body


def l2_normalise(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise ``x / ||x||``; returns ``(normalised, valid)`` where rows with zero or non-finite norm stay 0
    and are ``False`` in ``valid``."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-D matrix of row vectors, got shape {matrix.shape}.")
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        norms = np.linalg.norm(matrix, axis=1)
        valid = np.isfinite(norms) & (norms > 0) & np.all(np.isfinite(matrix), axis=1)
        safe = np.where(valid, norms, 1.0)
        normalised = np.where(valid[:, None], matrix / safe[:, None], 0.0)
    return normalised, valid


def cosine_similarities(doc_vectors: np.ndarray, category_vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity matrix ``(n_docs, n_categories)`` of the L2-normalised rows (zero rows give 0)."""
    docs, _ = l2_normalise(doc_vectors)
    cats, _ = l2_normalise(category_vectors)
    return docs @ cats.T


def softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    """Row-wise ``exp((s - max s)/T) / sum exp((s - max s)/T)`` (shift for numerical stability)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}.")
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    shifted = (scores - scores.max(axis=1, keepdims=True)) / temperature
    weights = np.exp(shifted)
    return weights / weights.sum(axis=1, keepdims=True)


def describe_choice(similarities: np.ndarray, names: Sequence[str]) -> str:
    """Reason text for one similarity row: best cosine and, when there is one, the runner-up."""
    order = np.argsort(-similarities, kind="stable")
    best = float(similarities[order[0]])
    if len(order) < 2:
        return f"closest category by embedding similarity (cos={best:.2f})"
    second = int(order[1])
    return (
        f"closest category by embedding similarity (cos={best:.2f}; "
        f"runner-up {names[second]!r} {float(similarities[second]):.2f})"
    )


def _embed_checked(embed: EmbedFn, texts: list[str], what: str, dim: int | None = None) -> np.ndarray:
    """Call ``embed`` and check it returned one row per text (and the expected dimension)."""
    vectors = np.asarray(embed(texts), dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(
            f"The embedding function returned shape {vectors.shape} for {len(texts)} {what}; "
            "expected one vector per text."
        )
    if dim is not None and vectors.shape[1] != dim:
        raise ValueError(
            f"The embedding function returned {vectors.shape[1]}-dimensional vectors for {what} "
            f"but {dim}-dimensional ones for the categories."
        )
    return vectors


def zero_shot_annotate(
    embed: EmbedFn,
    docs: Sequence[DocLike],
    categories: Sequence[CategoryLike],
    *,
    model_name: str,
    temperature: float = DEFAULT_TEMPERATURE,
    skip: Collection[DocKey] = frozenset(),
    batch_size: int = 64,
    char_budget: int = DEFAULT_CHAR_BUDGET,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> list[Suggestion]:
    """Label each non-skipped document with its most similar category; results in input order.

    Documents are embedded in batches of ``batch_size``; ``progress(done, total)``
    is called after each batch and ``cancel`` is checked before each batch
    (documents of batches not started are omitted). Raises ``ValueError`` for an
    empty/ambiguous category list, a zero category embedding, or embedding
    output of the wrong shape.
    """
    validate_categories(categories)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}.")
    agent, model_version = zero_shot_identity(model_name, temperature)
    names = [category.name for category in categories]
    raw_categories = _embed_checked(embed, [category_text(c) for c in categories], "categories")
    category_vectors, category_ok = l2_normalise(raw_categories)
    if not category_ok.all():
        bad = names[int(np.argmin(category_ok))]
        raise ValueError(f"The embedding of category {bad!r} is all zeros or not finite; cannot compare with it.")

    skipped = set(skip)
    todo = [doc for doc in docs if doc.key not in skipped]
    suggestions: list[Suggestion] = []
    for start in range(0, len(todo), batch_size):
        if cancel is not None and cancel.is_set():
            break
        batch = todo[start : start + batch_size]
        raw_docs = _embed_checked(
            embed, [document_text(d, char_budget) for d in batch], "documents", raw_categories.shape[1]
        )
        doc_vectors, doc_ok = l2_normalise(raw_docs)
        similarities = doc_vectors @ category_vectors.T
        probabilities = softmax(similarities, temperature)
        for row, doc in enumerate(batch):
            if not doc_ok[row]:
                suggestions.append(
                    Suggestion(
                        document_key=doc.key, label=None, score=None, reason="", status="failed",
                        error="the document embedding is all zeros or not finite (empty text?)",
                        agent=agent, model_version=model_version,
                    )  # fmt: skip
                )
                continue
            best = int(np.argmax(similarities[row]))
            suggestions.append(
                Suggestion(
                    document_key=doc.key, label=names[best], score=float(probabilities[row, best]),
                    reason=describe_choice(similarities[row], names), status="ok", error="",
                    agent=agent, model_version=model_version,
                )  # fmt: skip
            )
        if progress is not None:
            progress(min(start + batch_size, len(todo)), len(todo))
    return suggestions
