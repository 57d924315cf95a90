"""Prompts for multi-aspect query generation (Multi-Head RAG, Besta et al.).

:func:`story_messages` reproduces the paper's story prompt word for word
(only the layout is ours): the LLM writes one story that references every
attached article in at least two sentences and mentions every title; that story
is the multi-aspect query. :func:`fusion_messages` optionally asks for ``n``
sub-queries, one per line, that together cover the story's information needs
(used by the Fusion RAG baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FUSION_PROMPT_START", "Article", "fusion_messages", "story_messages", "story_prompt", "truncate_text"]

#: How every Fusion sub-query request (:func:`fusion_messages`) begins.
FUSION_PROMPT_START = "The following text describes an information need."


@dataclass(frozen=True)
class Article:
    """A document attached to the story prompt."""

    title: str
    text: str


def truncate_text(text: str, max_chars: int | None) -> str:
    """Return ``text`` cut to at most ``max_chars`` characters, at a sentence end if possible.

    ``None`` means no limit. The cut is at the last ``". "`` in the second half of
    the window, else at the last space, else hard; an ellipsis marks a cut.
    """
    text = text.strip()
    if max_chars is None or len(text) <= max_chars:
        return text
    window = text[:max_chars]
    cut = window.rfind(". ")
    if cut >= max_chars // 2:
        return window[: cut + 1]
    space = window.rfind(" ")
    return (window[:space] if space > 0 else window).rstrip() + " ..."


def story_prompt(articles: list[Article], *, max_article_chars: int | None = None) -> str:
    """The paper's story prompt for ``articles`` (titles listed, then ``Article i: title\\ntext``)."""
    if not articles:
        raise ValueError("A story needs at least one article.")
    n = len(articles)
    titles = ", ".join(a.title for a in articles)
    noun = "article" if n == 1 else "articles"
    instructions = (
        f"Please create a story about the attached {n} {noun} on the topics {titles}. "
        "It is very important that each of the attached articles is relevant to the story, "
        "in a way that references the content of the article, not just its title. "
        "But please also mention each title at least once. "
        "Please make sure that all of the attached articles are relevant to your story, "
        "and that each article is referenced in at least two sentences! "
        "They do not necessarily have to be referenced in the same order, "
        "but make sure no article is forgotten. "
        "Important: Output only the story, no additional text. "
        "And do not use bullet points, or paragraphs."
    )
    blocks = [
        f"Article {i}: {a.title}\n{truncate_text(a.text, max_article_chars)}"
        for i, a in enumerate(articles, start=1)
    ]
    return instructions + "\n\n" + "\n\n".join(blocks)


def story_messages(articles: list[Article], *, max_article_chars: int | None = None) -> list[dict[str, str]]:
    """Chat messages (a single user turn) carrying :func:`story_prompt`."""
    return [{"role": "user", "content": story_prompt(articles, max_article_chars=max_article_chars)}]


def fusion_messages(text: str, n: int) -> list[dict[str, str]]:
    """Ask for ``n`` search sub-queries, one per line, covering the information needs of ``text``."""
    if n < 1:
        raise ValueError(f"The number of sub-queries must be at least 1, got {n}.")
    prompt = (
        f"{FUSION_PROMPT_START} Write exactly {n} short, "
        "self-contained search queries that together cover all the information needed "
        "to answer it; each query should target a different part of the text. "
        "Output one query per line, with no numbering, no quotes and no additional text.\n\n"
        f"Text:\n{text.strip()}"
    )
    return [{"role": "user", "content": prompt}]
