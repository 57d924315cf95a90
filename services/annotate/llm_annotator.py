"""LLM pre-annotation: ask a chat model which of a corpus's categories a document belongs to.

Prompt contract (version :data:`PROMPT_VERSION`): the system message fixes the
task and the answer format; the user message lists the categories
(``- name: description``), the document title and text (text cut to
``char_budget`` characters with a note saying so), and repeats the expected
answer, JSON only::

    {"label": "<one of the category names>", "confidence": 0..1, "reason": "<one line>"}

JSON mode is requested (``response_format=json_object``; the client drops it
for endpoints that reject it), but the answer is always parsed defensively:

1. ``<think>...</think>`` blocks and Markdown code fences are removed;
2. the first ``{...}`` that decodes as a JSON object is taken; if there is none but the answer
   starts an object it never closes (cut at the token limit), its complete members are read
   (:func:`truncated_json_object`), so a label written before a long reason still counts;
3. its ``label`` (key matched case-insensitively) must equal a category name up
   to case and whitespace; the category's canonical spelling is returned;
4. ``confidence`` becomes ``score``: a number in [0, 1], or a percentage in
   (1, 100] divided by 100; anything else gives ``score=None``.

An answer without a JSON object, or whose label is not a category, yields a
``status="failed"`` :class:`~services.annotate.types.Suggestion` whose
``error`` quotes an excerpt of the raw answer; it never carries a label. So do
endpoint errors (:class:`~services.llm.client.LLMError`).

With a ``cache`` (:mod:`services.llm.cache`, kind :data:`CACHE_KIND`) only
answers that parse into a valid suggestion are stored, so a re-run replays good
answers for free and retries the bad ones.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

from services.annotate.types import CategoryLike, DocKey, DocLike, Suggestion, fold_name, validate_categories
from services.llm.breaker import Breaker
from services.llm.cache import LLMCache, cached_complete
from services.llm.client import LLMClient, LLMError, LLMReply
from services.llm.concurrency import Outcome, run_concurrent

__all__ = [
    "AnswerParseError",
    "CACHE_KIND",
    "DEFAULT_CHAR_BUDGET",
    "PROMPT_VERSION",
    "ParsedAnswer",
    "TruncatedObject",
    "annotate_document",
    "annotate_documents",
    "build_messages",
    "extract_json_object",
    "llm_identity",
    "one_line",
    "match_label",
    "parse_answer",
    "parse_confidence",
    "strip_wrappers",
    "truncate_text",
    "truncated_json_object",
]

PROMPT_VERSION = "annotate-v1"
CACHE_KIND = "annotate"
DEFAULT_CHAR_BUDGET = 6000
MAX_ANSWER_TOKENS = 300
_EXCERPT_CHARS = 200
# At most this many "{" are tried as the start of the answer's object: each failed try costs a pass over the
# rest of the text (json's error position), so a 200 KB answer full of braces took seconds per document.
MAX_OBJECT_STARTS = 64
_REASON_CHARS = 300
_DESCRIPTION_CHARS = 500

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)

SYSTEM_PROMPT = (
    "You label documents for a retrieval test collection. Choose exactly one category, the one "
    "that best describes the document's main aspect, from the list you are given. Answer with a "
    "single JSON object and nothing else, in the form "
    '{"label": "<category name>", "confidence": <number between 0 and 1>, "reason": "<one short line>"}. '
    "Copy the label exactly from the category names."
)


class AnswerParseError(ValueError):
    """The model's answer has no usable JSON object or names no valid category."""


@dataclass(frozen=True)
class ParsedAnswer:
    """A valid answer: canonical category name, score in [0, 1] or None, one-line reason."""

    label: str
    score: float | None
    reason: str


def llm_identity(model: str) -> tuple[str, str]:
    """``(agent, model_version)`` of suggestions made with ``model``: ``("llm:<model>", "<model>/annotate-v1")``."""
    return f"llm:{model}", f"{model}/{PROMPT_VERSION}"


def one_line(text: str, limit: int) -> str:
    """Collapse whitespace to single spaces and cut to ``limit`` characters (with ``...``)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def truncate_text(text: str, budget: int) -> str:
    """``text`` if it fits in ``budget`` characters, else its first ``budget`` characters plus a note."""
    if budget < 1:
        raise ValueError(f"char_budget must be positive, got {budget}.")
    if len(text) <= budget:
        return text
    return f"{text[:budget]}\n[... truncated: showing the first {budget} of {len(text)} characters]"


def build_messages(doc: DocLike, categories: Sequence[CategoryLike], *, char_budget: int) -> list[dict[str, str]]:
    """Chat messages (system + user) asking for the category of ``doc``; see the module docstring."""
    lines = []
    for category in categories:
        description = one_line(category.description or "", _DESCRIPTION_CHARS)
        lines.append(f"- {category.name}: {description}" if description else f"- {category.name}")
    names = json.dumps([category.name for category in categories], ensure_ascii=False)
    title = doc.title.strip() if doc.title and doc.title.strip() else "(untitled)"
    user = (
        "Categories:\n"
        + "\n".join(lines)
        + f"\n\nDocument title: {title}\nDocument text:\n"
        + f'"""\n{truncate_text(doc.text or "", char_budget)}\n"""\n\n'
        + f'Reply with JSON only: {{"label": one of {names}, "confidence": 0..1, "reason": "<one line>"}}'
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def strip_wrappers(raw: str) -> str:
    """Remove ``<think>`` blocks; if a Markdown code fence is present, keep only the fenced parts."""
    text = _THINK.sub("", raw)
    fenced = _FENCE.findall(text)
    return "\n".join(fenced) if fenced else text


def extract_json_object(raw: str) -> dict[str, Any] | None:
    """The first ``{...}`` in ``raw`` (after :func:`strip_wrappers`) that decodes as a JSON object, else None.

    Control characters inside strings (a raw line break in ``reason``) are accepted."""
    text = strip_wrappers(raw)
    decoder = json.JSONDecoder(strict=False)
    start = text.find("{")
    for _ in range(MAX_OBJECT_STARTS):
        if start == -1:
            break
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: thousands of nested brackets
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


@dataclass(frozen=True)
class TruncatedObject:
    """The complete members of a JSON object an answer never closes; ``cut_key``: the member whose
    string value the end of the text cut (kept with ``...`` appended), else None."""

    members: dict[str, Any]
    cut_key: str | None


def truncated_json_object(raw: str) -> TruncatedObject | None:
    """The members of a JSON object that the answer starts but never closes, else None.

    A reply cut at its token limit (a small model copying the document into ``reason``) stops
    inside the object: ``{"label": "Sports", "confidence": 0.9, "reason": "The match was``.
    Members are read from the first ``{`` (after :func:`strip_wrappers`) while they decode; a
    string value cut off by the end of the text is kept with ``...`` appended, a number at the very
    end is dropped (it may be cut short); the first member that does not decode otherwise ends the
    object. Returns None when no member decodes or when the text closes the object (then it is
    simply malformed JSON).
    """
    text = strip_wrappers(raw)
    start = text.find("{")
    if start == -1:
        return None
    decoder = json.JSONDecoder(strict=False)
    members: dict[str, Any] = {}
    pos = _skip_space(text, start + 1)
    while pos < len(text):
        try:
            key, pos = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            break
        pos = _skip_space(text, pos)
        if not isinstance(key, str) or text[pos : pos + 1] != ":":
            break
        pos = _skip_space(text, pos + 1)
        try:
            value, pos = decoder.raw_decode(text, pos)
        except RecursionError:
            break
        except json.JSONDecodeError:
            rest = text[pos:].rstrip()
            if rest.endswith("\\") and not rest.endswith("\\\\"):
                rest = rest[:-1]  # an escape cut in half
            try:  # a string the end of the text cut off: a closing quote added at the end closes it
                cut, end = decoder.raw_decode(rest + '"')
            except (json.JSONDecodeError, RecursionError):
                break
            if isinstance(cut, str) and end == len(rest) + 1:
                members[key] = f"{cut.rstrip()}..."
                return TruncatedObject(members, key)
            break
        pos = _skip_space(text, pos)
        if pos == len(text) and isinstance(value, (int, float)) and not isinstance(value, bool):
            break  # a number at the very end may be cut short ("0.85" -> "0.8")
        members[key] = value
        if text[pos : pos + 1] == ",":
            pos = _skip_space(text, pos + 1)
        elif text[pos : pos + 1] == "}":
            return None  # closed: not a truncated object
        else:
            break
    return TruncatedObject(members, None) if members else None


def match_label(raw_label: Any, categories: Sequence[CategoryLike]) -> str | None:
    """Canonical category name equal to ``raw_label`` up to case/whitespace (and surrounding quotes), else None."""
    if not isinstance(raw_label, str):
        return None
    wanted = fold_name(raw_label.strip().strip("\"'`"))
    for category in categories:
        if fold_name(category.name) == wanted:
            return category.name
    return None


def parse_confidence(value: Any) -> float | None:
    """Score in [0, 1] from a number or numeric string (``0.8``, ``"0.8"``, ``80``, ``"80%"``); else None.

    Values in (1, 100] are read as percentages; negatives, > 100, NaN and booleans give None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        percent = text.endswith("%")
        try:
            number = float(text.rstrip("%").strip())
        except ValueError:
            return None
        if percent:
            number /= 100.0
    elif isinstance(value, (int, float)):
        number = float(value)
    else:
        return None
    if number != number or number < 0 or number > 100:
        return None
    return number / 100.0 if number > 1 else number


def _get_key(obj: dict[str, Any], key: str) -> Any:
    """``obj[key]`` with the key matched case-insensitively (None if absent)."""
    for name, value in obj.items():
        if isinstance(name, str) and name.strip().casefold() == key:
            return value
    return None


def parse_answer(raw: str, categories: Sequence[CategoryLike]) -> ParsedAnswer:
    """Parse a model answer; raises :class:`AnswerParseError` (message quotes an excerpt) when unusable."""
    excerpt = one_line(raw, _EXCERPT_CHARS)
    obj = extract_json_object(raw)
    if obj is None:
        cut = truncated_json_object(raw)
        if cut is None:
            what = "a JSON object that is cut off or malformed" if "{" in raw else "no JSON object"
            raise AnswerParseError(f"answer contains {what}: {excerpt!r}")
        obj = cut.members
        if (cut.cut_key or "").strip().casefold() == "label" or _get_key(obj, "label") is None:
            raise AnswerParseError(f"answer is cut off before its label is complete: {excerpt!r}")
    raw_label = _get_key(obj, "label")
    label = match_label(raw_label, categories)
    if label is None:
        names = one_line(", ".join(c.name for c in categories), _EXCERPT_CHARS)
        raise AnswerParseError(
            f"answer names no valid category (label={raw_label!r}; expected one of {names}): {excerpt!r}"
        )
    reason = _get_key(obj, "reason")
    return ParsedAnswer(
        label=label,
        score=parse_confidence(_get_key(obj, "confidence")),
        reason=one_line(str(reason), _REASON_CHARS) if reason is not None else "",
    )


def _failed(key: DocKey, error: str, agent: str, model_version: str) -> Suggestion:
    return Suggestion(
        document_key=key, label=None, score=None, reason="", status="failed", error=error, agent=agent,
        model_version=model_version,
    )  # fmt: skip


def _parses(categories: Sequence[CategoryLike]) -> Callable[[LLMReply], bool]:
    """Cache acceptance check: the reply parses into a valid answer."""

    def accept(reply: LLMReply) -> bool:
        try:
            parse_answer(reply.text, categories)
        except AnswerParseError:
            return False
        return True

    return accept


def annotate_document(
    client: LLMClient,
    doc: DocLike,
    categories: Sequence[CategoryLike],
    *,
    char_budget: int = DEFAULT_CHAR_BUDGET,
    cache: LLMCache | None = None,
    breaker: Breaker | None = None,
) -> Suggestion:
    """Ask the model for ``doc``'s category. Never raises for model/endpoint problems: those give ``failed``
    (and an endpoint-wide one trips ``breaker``). The retry waits end when ``breaker``'s cancel event is set:
    :class:`~services.llm.client.LLMCancelled` then propagates (no suggestion: the document stays to do)."""
    agent, model_version = llm_identity(client.config.model)
    messages = build_messages(doc, categories, char_budget=char_budget)
    try:
        reply, _hit = cached_complete(
            client, cache, CACHE_KIND, messages, temperature=0.0, max_tokens=MAX_ANSWER_TOKENS, json_mode=True,
            accept=_parses(categories), cancel=breaker.cancel_event if breaker is not None else None,
        )  # fmt: skip
    except LLMError as err:
        if breaker is not None:
            breaker.record(err)
        return _failed(doc.key, str(err), agent, model_version)
    try:
        parsed = parse_answer(reply.text, categories)
    except AnswerParseError as err:
        return _failed(doc.key, str(err), agent, model_version)
    return Suggestion(
        document_key=doc.key, label=parsed.label, score=parsed.score, reason=parsed.reason, status="ok", error="",
        agent=agent, model_version=model_version,
    )  # fmt: skip


def annotate_documents(
    client: LLMClient,
    docs: Sequence[DocLike],
    categories: Sequence[CategoryLike],
    *,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    skip: Collection[DocKey] = frozenset(),
    char_budget: int = DEFAULT_CHAR_BUDGET,
    cache: LLMCache | None = None,
    breaker: Breaker | None = None,
    on_suggestion: Callable[[Suggestion], None] | None = None,
) -> list[Suggestion]:
    """Pre-annotate ``docs`` in parallel; returns one suggestion per finished document, in input order.

    * ``skip``: keys that already have a suggestion from this agent+model_version
      (see :func:`llm_identity`); they are neither sent nor returned (resume).
    * ``limit``: requests in flight, default ``client.config.concurrency``.
    * ``progress(done, total)``: ``done`` documents of the ``total`` non-skipped ones have their suggestion (ok or
      failed), called from the calling thread after each; documents dropped by a cancel are not counted, so
      ``done`` stops short of ``total`` then.
    * ``on_suggestion(suggestion)``: each document's suggestion as it comes, from the calling thread and before
      the ``progress`` call that counts it, so a caller keeps every suggestion ``progress`` announced even when
      that call raises (Streamlit stopping the script, a Ctrl+C): the exception then propagates once the requests
      in flight have ended (their answers are not returned; a cache keeps the good ones).
    * ``cancel``: once set, documents not yet sent are dropped from the result, and so is a document whose
      request waits to retry (the wait ends at once; see :class:`~services.llm.client.LLMCancelled`).
    * ``cache``: optional response cache; only parseable answers are stored.

    When a request fails in a way every other would too (the endpoint unreachable or hanging, the key refused,
    the model unknown, 429 / 5xx through all retries, an answer that is not a chat completion: see
    :mod:`services.llm.breaker`), documents not sent yet are not sent and are left out, as after a cancel:
    the failed ones come back failed, and a resume asks for all of them. Pass one ``breaker`` to every batch of
    a run (built on its ``cancel``) so that a later batch sends nothing once an earlier one tripped it.

    Raises ``ValueError`` for an empty or ambiguous category list.
    """
    validate_categories(categories)
    skipped = set(skip)
    todo = [doc for doc in docs if doc.key not in skipped]
    agent, model_version = llm_identity(client.config.model)
    breaker = breaker if breaker is not None else Breaker(cancel)
    finished: dict[int, Suggestion] = {}

    def take(outcome: Outcome[Suggestion]) -> None:
        """Keep a finished document's suggestion (an internal error as a failed one), hand it over, count it."""
        if outcome.cancelled:
            return
        suggestion = outcome.value if outcome.ok and outcome.value is not None else _failed(
            todo[outcome.index].key, f"internal error: {outcome.error}", agent, model_version)
        finished[outcome.index] = suggestion
        if on_suggestion is not None:
            on_suggestion(suggestion)
        if progress is not None:
            progress(len(finished), len(todo))

    run_concurrent(
        todo,
        lambda doc: annotate_document(client, doc, categories, char_budget=char_budget, cache=cache, breaker=breaker),
        limit=limit if limit is not None else client.config.concurrency,
        on_result=take,
        cancel=breaker,
    )
    return [finished[index] for index in sorted(finished)]
