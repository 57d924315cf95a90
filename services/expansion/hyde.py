"""HyDE (Hypothetical Document Embeddings): embed an LLM-written passage that would answer the question.

The LLM writes a short encyclopedia-style passage; retrieval then embeds the
passage instead of (or with) the question. The answer is cleaned (code fence,
a leading ``Passage:`` label and surrounding quotes removed, whitespace
collapsed); fewer than :data:`MIN_WORDS` words raises :class:`ExpansionError`.
Cache kind: ``'hyde'``.
"""

from __future__ import annotations

import re

from services.expansion.common import Expansion, ExpansionError, ask_and_parse, preview, strip_code_fence
from services.llm.cache import LLMCache
from services.llm.client import LLMClient, StopFlag

__all__ = ["KIND", "MIN_WORDS", "hyde_messages", "hypothetical_passage", "parse_passage"]

KIND = "hyde"
MIN_WORDS = 5
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:hypothetical\s+)?passage(?:\s*:\s*(?:\*\*)?|(?:\*\*)?\s*:)\s*", re.IGNORECASE
)


def hyde_messages(question: str) -> list[dict[str, str]]:
    """The HyDE prompt: a 3-5 sentence passage answering the question, passage only."""
    prompt = (
        "Write a short passage (3 to 5 sentences) in the style of an encyclopedia article that answers "
        "the following question. If you are not sure of the facts, write a plausible passage anyway. "
        "Output only the passage, with no title and no additional text.\n\n"
        f"Question: {question.strip()}"
    )
    return [{"role": "user", "content": prompt}]


def parse_passage(text: str) -> list[str]:
    """``[passage]`` after cleaning; :class:`ExpansionError` if it has fewer than ``MIN_WORDS`` words."""
    passage = _LABEL.sub("", strip_code_fence(text))
    passage = " ".join(passage.split())
    if len(passage) >= 2 and passage[0] == passage[-1] and passage[0] in "\"'":
        passage = passage[1:-1].strip()
    if len(passage.split()) < MIN_WORDS:
        raise ExpansionError(
            f"The LLM answer is too short to be a hypothetical passage (at least {MIN_WORDS} words "
            f"expected): {preview(text)!r}"
        )
    return [passage]


def hypothetical_passage(
    client: LLMClient, question: str, cache: LLMCache | None = None, *, max_tokens: int | None = 300,
    cancel: StopFlag | None = None,
) -> Expansion:
    """One hypothetical answer passage for ``question``; ``texts == [passage]``. ``cancel`` ends the client's
    retry waits."""
    if not question.strip():
        raise ValueError("The question is empty.")
    return ask_and_parse(client, cache, KIND, hyde_messages(question), lambda r: parse_passage(r.text),
                         max_tokens=max_tokens, cancel=cancel)
