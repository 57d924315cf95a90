"""Machine pre-annotation of documents into a corpus's categories.

Two annotators produce the same :class:`Suggestion` records:

* :func:`annotate_documents` — an OpenAI-compatible chat model (needs an endpoint);
* :func:`zero_shot_annotate` — offline, by embedding similarity to the category
  descriptions.

Suggestions are proposals for a human to accept or correct, never decisions.
"""

from __future__ import annotations

from services.annotate.llm_annotator import annotate_document, annotate_documents, llm_identity, parse_answer
from services.annotate.types import AnnotationDoc, CategorySpec, Suggestion
from services.annotate.zero_shot import zero_shot_annotate, zero_shot_identity

__all__ = [
    "AnnotationDoc",
    "CategorySpec",
    "Suggestion",
    "annotate_document",
    "annotate_documents",
    "llm_identity",
    "parse_answer",
    "zero_shot_annotate",
    "zero_shot_identity",
]
