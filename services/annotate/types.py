"""Shared types of the pre-annotators: inputs (documents, categories) and the :class:`Suggestion` result.

A suggestion is a *machine* proposal (never a human decision). It mirrors the
``suggestions`` table of :mod:`db.models`: ``label`` is a category name (the
caller maps it to ``category_id``), ``status`` is ``"ok"`` or ``"failed"``; a
failed suggestion never carries a label and explains itself in ``error``.

``agent`` names the annotator family and model (``"llm:gpt-4o-mini"``,
``"zero-shot:all-MiniLM-L6-v2"``); ``model_version`` pins everything that
changes the output (prompt version, temperature), so "already annotated by the
same agent+model_version" is the resume criterion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, Sequence

from mrag_core.names import fold_name  # the label key: how annotators (and imports) compare names

__all__ = [
    "fold_name",
    "AnnotationDoc",
    "CategoryLike",
    "CategorySpec",
    "DocKey",
    "DocLike",
    "Suggestion",
    "SuggestionStatus",
    "validate_categories",
]

DocKey = int | str
SuggestionStatus = Literal["ok", "failed"]


class DocLike(Protocol):
    """Anything with a stable ``key`` plus ``title`` and ``text``."""

    @property
    def key(self) -> DocKey: ...

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


class CategoryLike(Protocol):
    """Anything with a ``name`` and a ``description`` (``db.models.Category`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


@dataclass(frozen=True)
class AnnotationDoc:
    """Plain document input for the annotators."""

    key: DocKey
    title: str
    text: str


@dataclass(frozen=True)
class CategorySpec:
    """Plain category input for the annotators."""

    name: str
    description: str = ""


@dataclass(frozen=True)
class Suggestion:
    """One machine label suggestion for one document.

    ``score`` is in [0, 1] (the model's confidence or a softmax probability) or
    ``None`` when unknown; ``label`` is ``None`` exactly when ``status == "failed"``.
    """

    document_key: DocKey
    label: str | None
    score: float | None
    reason: str
    status: SuggestionStatus
    error: str
    agent: str
    model_version: str

    @property
    def ok(self) -> bool:
        """Whether this suggestion carries a label."""
        return self.status == "ok"


def validate_categories(categories: Sequence[CategoryLike]) -> None:
    """Raise ``ValueError`` for an empty list, blank names or names equal up to case/whitespace."""
    if not categories:
        raise ValueError("The corpus has no categories to annotate with; add at least one category first.")
    seen: dict[str, str] = {}
    for category in categories:
        if not category.name or not category.name.strip():
            raise ValueError("A category has an empty name.")
        folded = fold_name(category.name)
        if folded in seen:
            raise ValueError(
                f"Categories {seen[folded]!r} and {category.name!r} differ only in case or spacing, so suggestions "
                "cannot be matched to one of them; merge them (rename one to the other's name under 'Rename, merge "
                "or delete a category' on the Annotate and Review page, or with 'mrag-studio corpora "
                "--corpus NAME --rename-category OLD NEW --merge'), or rename one."
            )
        seen[folded] = category.name
