"""Intent-aware hypothetical queries (MuISQA-style).

A multi-intent question can have several plausible answers, each resting on
different facts. The LLM is asked for ``n_answers`` plausible answers, each
decomposed into short intent-specific factual statements, as JSON::

    {"answers": [{"answer": "...", "statements": ["...", "..."]}, ...]}

Each statement is embedded and retrieved separately (the lead's search
strategy merges the rankings).

Defensive parsing (:func:`parse_intent_answer`):

1. the content of a code fence, if any, else the raw text;
2. the first JSON value decodable at a ``{`` or ``[`` (trailing text ignored);
   accepted shapes: ``{"answers": [...]}``, a bare list of answers,
   ``{"statements": [...]}``; an answer is an object with ``statements``
   (strings) - or, lacking statements, its ``answer`` string - or a plain string;
3. if no JSON yields a statement: line parsing with
   :func:`~services.querygen.checks.clean_subqueries` (only the numbered or
   bulleted items when there are any; preamble, ``Sure!`` / ``Here are ...`` /
   ``Let me know ...`` chatter, quotes and Markdown dropped), dropping
   JSON-looking lines and ``Answer 1:`` / ``Statement:`` labels, keeping lines
   of >= 3 words; so prose around the statements never becomes a statement.

``texts`` = all statements flattened in order, de-duplicated. Nothing usable ->
:class:`ExpansionError`. Cache kind: ``'intent'``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from services.expansion.common import Expansion, ExpansionError, ask_and_parse, preview, strip_code_fence
from services.llm.cache import LLMCache
from services.llm.client import LLMClient, StopFlag
from services.querygen.checks import clean_subqueries, dedupe

__all__ = ["KIND", "intent_messages", "intent_statements", "parse_intent_answer"]

KIND = "intent"
MAX_ANSWERS = 8
_LABEL = re.compile(r"^(?:answer|statement|intent|fact)\s*\d*\s*[:.)-]\s*", re.IGNORECASE)
_JSONISH = re.compile(r'^[\[\]{}]|"\s*:')
_MIN_FALLBACK_WORDS = 3
# At most this many "{" / "[" are tried as the start of the answer's JSON: each failed try costs a pass over
# the rest of the text (json's error position), which made a 200 KB answer of brackets take seconds.
MAX_JSON_STARTS = 64


def intent_messages(question: str, n_answers: int) -> list[dict[str, str]]:
    """The prompt: ``n_answers`` plausible answers, each as 2-4 factual statements, JSON only."""
    prompt = (
        f"The following question may have several plausible answers or intents. Give {n_answers} distinct "
        "plausible answers. Decompose each answer into 2 to 4 short, self-contained factual statements that "
        "a document supporting that answer would contain; each statement must make sense on its own "
        "(repeat names instead of using pronouns).\n"
        'Respond with JSON only, exactly in this form: {"answers": [{"answer": "...", '
        '"statements": ["...", "..."]}]}\n\n'
        f"Question: {question.strip()}"
    )
    return [{"role": "user", "content": prompt}]


def _first_json(text: str) -> Any | None:
    """The first JSON object/array decodable at a ``{`` or ``[`` in ``text`` (trailing text ignored)."""
    decoder = json.JSONDecoder()
    for n, match in enumerate(re.finditer(r"[\[{]", text)):
        if n >= MAX_JSON_STARTS:
            break
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError):  # RecursionError: thousands of nested brackets
            continue
        if isinstance(value, (dict, list)):
            return value
    return None


def _strings(value: Any) -> list[str]:
    """Non-blank stripped strings of a JSON list (a single string counts as a one-element list)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [" ".join(v.split()) for v in value if isinstance(v, str) and v.strip()]


def _statements_from_json(data: Any) -> list[str]:
    """Flatten the accepted JSON shapes into statements (see module docstring)."""
    if isinstance(data, dict):
        if "answers" in data:
            data = data["answers"]
        elif "statements" in data:
            return _strings(data["statements"])
        else:
            return []
    if not isinstance(data, list):
        return []
    out: list[str] = []
    for item in data:
        if isinstance(item, str):
            out.extend(_strings(item))
        elif isinstance(item, dict):
            statements = _strings(item.get("statements"))
            out.extend(statements if statements else _strings(item.get("answer")))
    return out


def _statements_from_lines(text: str) -> list[str]:
    """Fallback: one statement per line, labels and JSON-looking lines removed, >= 3 words."""
    out: list[str] = []
    for line in clean_subqueries(text):
        if _JSONISH.search(line):
            continue
        line = _LABEL.sub("", line).strip()
        if len(line.split()) >= _MIN_FALLBACK_WORDS:
            out.append(line)
    return out


def parse_intent_answer(text: str, *, cut_off: bool = False) -> list[str]:
    """Statements from the LLM answer (JSON first, then lines); :class:`ExpansionError` if none.

    ``cut_off``: the endpoint stopped the answer at its token limit. Statements decoded from JSON are whole strings
    (a JSON string cut in half does not decode); from the line fallback the last one is half-written and is
    dropped, as :func:`~services.expansion.common.parse_list` drops a cut list's last item."""
    body = strip_code_fence(text)
    data = _first_json(body)
    statements = _statements_from_json(data) if data is not None else []
    if not statements:
        statements = _statements_from_lines(body)
        if cut_off and statements:
            statements = statements[:-1]
            if not statements:
                raise ExpansionError(
                    "The LLM answer contains no intent statements: its only statement was cut off at the token "
                    f"limit (raise the endpoint's or the request's token limit): {preview(text)!r}"
                )
    statements = dedupe(statements)
    if not statements:
        raise ExpansionError(
            "The LLM answer contains no intent statements (expected JSON "
            f'{{"answers": [{{"answer": ..., "statements": [...]}}]}}): {preview(text)!r}'
        )
    return statements


def intent_statements(
    client: LLMClient, question: str, n_answers: int = 3, cache: LLMCache | None = None, *,
    cancel: StopFlag | None = None,
) -> Expansion:
    """Ask for ``n_answers`` (1..8) answers as statements; ``texts`` = all statements, flattened and deduped.
    ``cancel`` ends the client's retry waits."""
    if not question.strip():
        raise ValueError("The question is empty.")
    if not 1 <= n_answers <= MAX_ANSWERS:
        raise ValueError(f"The number of answers must be between 1 and {MAX_ANSWERS}, got {n_answers}.")
    return ask_and_parse(
        client, cache, KIND, intent_messages(question, n_answers),
        lambda r: parse_intent_answer(r.text, cut_off=r.cut_off), json_mode=True, cancel=cancel,
    )
