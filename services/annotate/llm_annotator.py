"""LLM pre-annotation: ask a chat model which of a corpus's categories a document belongs to.

Prompt contract (version :data:`PROMPT_VERSION`): the system message fixes the
task and the answer format; the user message lists the categories
(``- name: description``), the document title and text (text cut to
``char_budget`` characters with a note saying so), and repeats the expected
answer, JSON only::

    {"label": "<one of the category names>", "confidence": 0..1, "reason": "<one line>"}

The answer is asked for constrained to the categories where the endpoint can do it: ``response_format`` with a
JSON schema whose ``label`` is an enum of the category names (:func:`label_schema`; vLLM, llama.cpp's server and
OpenAI honour it); where the endpoint refuses that, as plain JSON mode, and where it refuses that too, as text (the
client remembers for the run: :attr:`~services.llm.client.LLMClient.unsupported`). The token log-probabilities
are asked for too: where they come back, the score is the probability of the label's tokens
(:func:`label_probability`), not the model's own "confidence". The answer is always parsed defensively:

1. ``<think>...</think>`` blocks and Markdown code fences are removed;
2. the first ``{...}`` that decodes as a JSON object is taken; if there is none but the answer
   starts an object it never closes (cut at the token limit), its complete members are read
   (:func:`truncated_json_object`), so a label written before a long reason still counts;
3. its ``label`` (key matched case-insensitively) must equal a category name up
   to case and whitespace; the category's canonical spelling is returned;
4. ``confidence`` becomes ``score``: a number in [0, 1], or a percentage in
   (1, 100] divided by 100; anything else gives ``score=None``.

An unusable answer (no JSON object, a label that is no category) is not asked again as it was: the same request gets
the same answer. :data:`ATTEMPTS` re-asks with a changed prompt and temperature: the conversation with a correction
(:func:`correction_messages`, temperature 0.5), then a shorter question for the name only
(:func:`name_only_messages`, read by :func:`parse_name_answer`, temperature 0.9). A document whose every answer is
unusable yields a ``status="failed"`` :class:`~services.annotate.types.Suggestion` whose ``error`` quotes each
answer; it never carries a label. So do endpoint errors (:class:`~services.llm.client.LLMError`) and refusals.
Every failure's ``error`` starts with its cause (``parse: ...``, ``timeout: ...``: :mod:`services.llm.causes`).

A batch (:func:`annotate_documents`) keeps at most an adaptive number of requests in flight
(:class:`~services.llm.adaptive.AdaptiveLimit`): timeouts halve it and the timed-out documents are sent again,
answers in time raise it back slowly. A cancel returns within a fraction of a second, abandoning the requests in
flight and discarding their answers.

With a ``cache`` (:mod:`services.llm.cache`, kind :data:`CACHE_KIND`) only
answers that parse into a valid suggestion are stored, so a re-run replays good
answers for free and asks again for the bad ones.
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Sequence

from mrag_core.wording import counted
from services.annotate.types import CategoryLike, DocKey, DocLike, Suggestion, fold_name, validate_categories
from services.llm.adaptive import AdaptiveLimit, Requeue, Ticket, run_adaptive
from services.llm.breaker import Breaker
from services.llm.cache import LLMCache, cached_complete
from services.llm.causes import tag
from services.llm.client import LLMClient, LLMError, LLMReply
from services.llm.concurrency import Outcome
from services.llm.config import redact_url

__all__ = [
    "ATTEMPTS",
    "Activity",
    "AnswerParseError",
    "CACHE_KIND",
    "DEFAULT_CHAR_BUDGET",
    "PROMPT_VERSION",
    "ParsedAnswer",
    "RunStats",
    "TIMEOUT_TRIES",
    "TruncatedObject",
    "annotate_document",
    "annotate_documents",
    "build_messages",
    "correction_messages",
    "label_probability",
    "label_schema",
    "name_only_messages",
    "parse_name_answer",
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
NAME_CHAR_BUDGET = 1500
#: The requests asked for one document until one answer names a category: (prompt, temperature). The same request
#: again would get the same answer (a resume at temperature 0 got the same 35 invalid answers), so each re-ask
#: changes the prompt and the temperature.
ATTEMPTS = (("first", 0.0), ("correction", 0.5), ("name", 0.9))
ATTEMPT_NAMES = {"first": "the first prompt", "correction": "corrected at temperature 0.5",
                 "name": "asked for the name only at temperature 0.9"}
#: Tries of a document whose requests time out, in a batch that adapts its concurrency (each at the limit then).
TIMEOUT_TRIES = 3

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
    """A valid answer: canonical category name, score in [0, 1] or None, one-line reason; ``raw_label`` the label
    as the answer wrote it."""

    label: str
    score: float | None
    reason: str
    raw_label: str = ""


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


def label_schema(categories: Sequence[CategoryLike]) -> dict[str, Any]:
    """The ``json_schema`` member of ``response_format`` that constrains an answer to the categories: an object
    with ``label`` (an enum of the category names), ``confidence`` (a number) and ``reason`` (a string), in that
    order, all required, nothing else (OpenAI's ``strict`` mode needs both)."""
    return {
        "name": "category_choice",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "enum": [category.name for category in categories]},
                "confidence": {"type": "number"},
                "reason": {"type": "string"},
            },
            "required": ["label", "confidence", "reason"],
            "additionalProperties": False,
        },
    }


def correction_messages(first: list[dict[str, str]], answer: str, problem: str,
                        categories: Sequence[CategoryLike]) -> list[dict[str, str]]:
    """The first prompt's messages, the unusable ``answer`` as the assistant's turn (cut to 500 characters), and a
    user turn saying what was wrong (``problem``, the parse error) and asking again, listing the names to copy."""
    names = json.dumps([category.name for category in categories], ensure_ascii=False)
    what = problem.split(": ", 1)[0] if problem else "the answer is unusable"
    return [*first, {"role": "assistant", "content": answer[:500]},
            {"role": "user", "content": f"That answer cannot be used: {what}. The label must be copied exactly from "
                                        f"this list: {names}. Reply again with the JSON object only."}]


def name_only_messages(doc: DocLike, categories: Sequence[CategoryLike], *, char_budget: int
                       ) -> list[dict[str, str]]:
    """A shorter prompt for the last re-ask, which small models follow better than a JSON format: the category
    names (with their descriptions), the document cut to ``char_budget`` characters, and "reply with the category
    name only"."""
    lines = [f"- {c.name}: {one_line(c.description, 120)}" if (c.description or "").strip() else f"- {c.name}"
             for c in categories]
    title = doc.title.strip() if doc.title and doc.title.strip() else "(untitled)"
    user = ("Categories:\n" + "\n".join(lines) + f"\n\nDocument title: {title}\nDocument text:\n"
            f'"""\n{truncate_text(doc.text or "", char_budget)}\n"""\n\n'
            "Which one category fits this document best? Reply with the category name only, exactly as written "
            "in the list.")
    return [{"role": "system", "content": "You sort documents into categories. Reply with one category name and "
                                          "nothing else."},
            {"role": "user", "content": user}]


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
        raw_label=str(raw_label),
    )


_NAME_PREFIX = re.compile(r"^\s*(?:the\s+)?(?:best\s+)?(?:category|label|answer)\s*(?:is)?\s*[:=-]?\s*", re.I)


def parse_name_answer(raw: str, categories: Sequence[CategoryLike]) -> ParsedAnswer:
    """Parse an answer to :func:`name_only_messages`: a JSON answer as :func:`parse_answer` reads it; else the
    answer itself as a category name (``Sports``, ``"sports".``, ``Category: Sports``); else the one category whose
    name the answer contains as a whole phrase (an answer naming two is ambiguous). Raises
    :class:`AnswerParseError` (quoting an excerpt) when none of these names exactly one category."""
    try:
        return parse_answer(raw, categories)
    except AnswerParseError:
        pass
    text = strip_wrappers(raw).strip()
    first_line = text.splitlines()[0] if text else ""
    candidate = _NAME_PREFIX.sub("", first_line).strip().strip("\"'`*.:;!")
    label = match_label(candidate, categories)
    if label is None:
        found = [c.name for c in categories
                 if re.search(rf"(?<!\w){re.escape(' '.join(c.name.split()))}(?!\w)", " ".join(text.split()), re.I)]
        label = found[0] if len(found) == 1 else None
    if label is None:
        raise AnswerParseError(f"answer names no category (or several): {one_line(raw, _EXCERPT_CHARS)!r}")
    return ParsedAnswer(label=label, score=None, reason="", raw_label=candidate)


_LABEL_KEY = re.compile(r'"label"\s*:\s*(?=")', re.I)


def label_probability(text: str, logprobs: Sequence[tuple[str, float]] | None, raw_label: str) -> float | None:
    """The probability the model gave the label it wrote: ``exp(sum of the log-probabilities of the tokens that
    overlap the label's characters)`` in the answer's first ``"label": "..."`` member, when that member's value is
    ``raw_label``. None without log-probabilities, when the tokens do not spell ``text`` (the endpoint returned
    them for another text), or when the member is not found. With the output constrained to the categories
    (:func:`label_schema`) this is the probability of this category among those the model could write."""
    if not logprobs or "".join(token for token, _ in logprobs) != text:
        return None
    match = _LABEL_KEY.search(text)
    if match is None:
        return None
    try:
        value, end = json.JSONDecoder(strict=False).raw_decode(text, match.end())
    except json.JSONDecodeError:
        return None
    if value != raw_label:
        return None
    start, stop = match.end() + 1, end - 1  # the value's characters, without its quotes
    total, pos = 0.0, 0
    for token, logprob in logprobs:
        if pos + len(token) > start and pos < stop:
            total += logprob
        pos += len(token)
    return min(1.0, math.exp(total))


def _failed(key: DocKey, error: str, agent: str, model_version: str) -> Suggestion:
    return Suggestion(
        document_key=key, label=None, score=None, reason="", status="failed", error=error, agent=agent,
        model_version=model_version,
    )  # fmt: skip


def _parses(categories: Sequence[CategoryLike], parse: Callable[[str, Sequence[CategoryLike]], Any]
            ) -> Callable[[LLMReply], bool]:
    """Cache acceptance check: the reply parses into a valid answer."""

    def accept(reply: LLMReply) -> bool:
        try:
            parse(reply.text, categories)
        except AnswerParseError:
            return False
        return True

    return accept


@dataclass
class RunStats:
    """What a batch did beyond one request per document (thread-safe counters): ``reasked`` unusable answers asked
    again with a changed prompt and temperature, ``fixed`` of them answered with a category then; ``requeued``
    documents sent again after a timeout (at the lowered concurrency)."""

    reasked: int = 0
    fixed: int = 0
    requeued: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)


@dataclass(frozen=True)
class Activity:
    """A batch's state while it runs, for its progress display: requests ``in_flight`` now, the concurrency
    ``limit`` now (``maximum``: the configured one), ``timeouts`` so far, and :class:`RunStats`' counts."""

    in_flight: int
    limit: int
    maximum: int
    timeouts: int
    reasked: int
    fixed: int

    def describe(self) -> str:
        """``"2 requests in flight, at most 2 at a time (lowered from 4 after 3 timeouts) · 5 unusable answers
        asked again, 3 fixed"``."""
        text = f"{counted(self.in_flight, 'request')} in flight"
        if self.limit < self.maximum:
            text += (f", at most {self.limit} at a time (lowered from {self.maximum} after "
                     f"{counted(self.timeouts, 'timeout')})")
        elif self.timeouts:
            text += f" ({counted(self.timeouts, 'timeout')} so far)"
        if self.reasked:
            text += f" · {counted(self.reasked, 'unusable answer')} asked again, {self.fixed} fixed"
        return text


def _timeout_error(client: LLMClient, tries: int, ticket: Ticket) -> LLMError:
    """The failure of a document whose every try timed out, saying how many tries and at what concurrency."""
    cfg = client.config
    times = "once" if tries == 1 else "twice" if tries == 2 else f"{tries} times"
    at = "one request" if ticket.limit == 1 else f"at most {ticket.limit} requests"
    return LLMError(
        f"LLM request to model {cfg.model!r} at {redact_url(cfg.base_url)} failed: no answer within "
        f"{cfg.timeout_s:g} s (MRAG_LLM_TIMEOUT), {times} (the last try with {at} in flight).",
        attempts=tries, retryable=True, cause="timeout")


def annotate_document(
    client: LLMClient,
    doc: DocLike,
    categories: Sequence[CategoryLike],
    *,
    char_budget: int = DEFAULT_CHAR_BUDGET,
    cache: LLMCache | None = None,
    breaker: Breaker | None = None,
    limiter: AdaptiveLimit | None = None,
    timeouts_before: int = 0,
    stats: RunStats | None = None,
) -> Suggestion:
    """Ask the model for ``doc``'s category. Never raises for model/endpoint problems: those give ``failed``, its
    ``error`` starting with its cause (:func:`services.llm.causes.tag`), and an endpoint-wide one trips
    ``breaker``. The retry waits end when ``breaker``'s cancel event is set: :class:`~services.llm.client.LLMCancelled`
    then propagates (no suggestion: the document stays to do).

    The answer is asked for as JSON constrained by :func:`label_schema` (where the endpoint refuses that, as plain
    JSON: the client remembers, see :attr:`LLMClient.unsupported`), with the tokens' log-probabilities (the label's
    probability becomes the score, :func:`label_probability`). An unusable answer is asked again as
    :data:`ATTEMPTS` says: with a correction at a higher temperature, then for the name only; only parsed answers
    are cached. With a ``limiter`` (a batch adapting its concurrency) a timeout lowers it and, while the document
    has tries left (``timeouts_before`` counts its earlier ones, :data:`TIMEOUT_TRIES` in all), raises
    :class:`~services.llm.adaptive.Requeue` to be sent again later; the last timeout of a document sent with one
    request in flight trips ``breaker`` (the endpoint cannot answer one request in time)."""
    agent, model_version = llm_identity(client.config.model)
    first = build_messages(doc, categories, char_budget=char_budget)
    schema = label_schema(categories)
    cancel = breaker.cancel_event if breaker is not None else None
    problems: list[str] = []
    last = ""
    for step, (kind, temperature) in enumerate(ATTEMPTS):
        if step and breaker is not None and breaker.is_set():
            break  # the batch stops: nothing more is sent
        if kind == "name":
            messages, parse = name_only_messages(doc, categories, char_budget=min(char_budget, NAME_CHAR_BUDGET)), \
                parse_name_answer
        else:
            messages = first if kind == "first" else correction_messages(first, last, problems[-1], categories)
            parse = parse_answer
        json_kind = kind != "name"
        if step and stats is not None:
            stats.add("reasked")
        ticket = limiter.ticket() if limiter is not None else None
        try:
            reply, _hit = cached_complete(
                client, cache, CACHE_KIND, messages, temperature=temperature, max_tokens=MAX_ANSWER_TOKENS,
                json_mode=json_kind, json_schema=schema if json_kind else None, logprobs=0 if json_kind else None,
                timeout_retries=0 if limiter is not None else 1, accept=_parses(categories, parse), cancel=cancel,
            )  # fmt: skip
        except LLMError as err:
            if err.cause == "timeout" and limiter is not None and ticket is not None:
                limiter.timed_out(ticket)
                if timeouts_before + 1 < TIMEOUT_TRIES:
                    if stats is not None:
                        stats.add("requeued")
                    raise Requeue from None
                err = _timeout_error(client, timeouts_before + 1, ticket)
                if ticket.limit == 1 and breaker is not None:
                    breaker.record(err)  # the only request in flight and still too slow: every request would be
                return _failed(doc.key, tag("timeout", str(err)), agent, model_version)
            if breaker is not None:
                breaker.record(err)
            return _failed(doc.key, tag(err.cause, str(err)), agent, model_version)
        if limiter is not None:
            limiter.answered()
        if reply.refusal is not None:
            return _failed(doc.key, tag("refusal", f"the model refused to answer: {one_line(reply.refusal, 200)!r}"),
                           agent, model_version)
        try:
            parsed = parse(reply.text, categories)
        except AnswerParseError as err:
            problems.append(str(err))
            last = reply.text
            continue
        if step and stats is not None:
            stats.add("fixed")
        score, reason = parsed.score, parsed.reason
        probability = label_probability(reply.text, reply.logprobs, parsed.raw_label) if json_kind else None
        if probability is not None:
            score, reason = probability, f"{reason} (score: the probability of the label's tokens)".lstrip()
        if step:
            reason = f"{reason} [answered when asked again: {ATTEMPT_NAMES[kind]}]".lstrip()
        return Suggestion(
            document_key=doc.key, label=parsed.label, score=score, reason=reason, status="ok", error="",
            agent=agent, model_version=model_version,
        )  # fmt: skip
    tries = "; ".join(f"{ATTEMPT_NAMES[ATTEMPTS[i][0]]}: {p}" for i, p in enumerate(problems))
    return _failed(doc.key, tag("parse", f"no usable answer in {counted(len(problems), 'try', 'tries')} ({tries})"),
                   agent, model_version)


class _UserStop:
    """Set once the user stops the run: ``cancel`` set, or the breaker's own cancel event (not its trip: a tripped
    batch waits for the requests in flight)."""

    def __init__(self, cancel: threading.Event | None, breaker: Breaker) -> None:
        self._cancel = cancel
        self._breaker = breaker

    def is_set(self) -> bool:
        return (self._cancel is not None and self._cancel.is_set()) or self._breaker.cancelled


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
    limiter: AdaptiveLimit | None = None,
    stats: RunStats | None = None,
    activity: Callable[[Activity], None] | None = None,
) -> list[Suggestion]:
    """Pre-annotate ``docs`` in parallel; returns one suggestion per finished document, in input order.

    * ``skip``: keys that already have a suggestion from this agent+model_version
      (see :func:`llm_identity`); they are neither sent nor returned (resume).
    * ``limit``: requests in flight at most, default ``client.config.concurrency``; ``limiter``, an
      :class:`~services.llm.adaptive.AdaptiveLimit` to share between the batches of a run (default: a new one
      starting at ``limit``): timeouts lower it, answers in time raise it back slowly, and a document whose request
      timed out is sent again later (:data:`TIMEOUT_TRIES` tries in all).
    * ``progress(done, total)``: ``done`` documents of the ``total`` non-skipped ones have their suggestion (ok or
      failed), called from the calling thread after each; documents dropped by a cancel are not counted, so
      ``done`` stops short of ``total`` then.
    * ``activity(Activity)``: the batch's state (requests in flight, the concurrency now, timeouts, answers asked
      again), from the calling thread at least every :data:`~services.llm.adaptive.TICK_S` seconds while
      it waits: a page's progress display, and where Streamlit stops the script when the user presses Cancel.
    * ``on_suggestion(suggestion)``: each document's suggestion as it comes, from the calling thread and before
      the ``progress`` call that counts it, so a caller keeps every suggestion ``progress`` announced even when
      that call raises (Streamlit stopping the script, a Ctrl+C): the exception then propagates at once.
    * ``cancel``: once set, documents not yet sent are dropped from the result, and so are those in flight: the
      batch stops waiting for them within :data:`~services.llm.adaptive.TICK_S` seconds, their requests
      are aborted (:meth:`LLMClient.abort_in_flight`) and their answers discarded. The same happens when
      ``progress``, ``activity`` or ``on_suggestion`` raises.
    * ``cache``: optional response cache; only parseable answers are stored.
    * ``stats``: a :class:`RunStats` to count into (one per run).

    When a request fails in a way every other would too (the endpoint unreachable, the key refused, the model
    unknown, 429 / 5xx through all retries, an answer that is not a chat completion, no answer in time even with
    one request in flight: see :mod:`services.llm.breaker`), documents not sent yet are not sent and are left out,
    as after a cancel: the failed ones come back failed, and a resume asks for all of them. Pass one ``breaker`` to
    every batch of a run (built on its ``cancel``) so that a later batch sends nothing once an earlier one tripped it.

    Raises ``ValueError`` for an empty or ambiguous category list.
    """
    validate_categories(categories)
    skipped = set(skip)
    todo = [doc for doc in docs if doc.key not in skipped]
    breaker = breaker if breaker is not None else Breaker(cancel)
    limiter = limiter if limiter is not None else AdaptiveLimit(limit if limit is not None else
                                                                client.config.concurrency)
    stats = stats if stats is not None else RunStats()
    finished: dict[int, Suggestion] = {}
    timeouts: dict[int, int] = {}  # document index -> its tries that timed out (each changed by its own worker)

    def ask(index: int) -> Suggestion:
        try:
            return annotate_document(client, todo[index], categories, char_budget=char_budget, cache=cache,
                                     breaker=breaker, limiter=limiter, timeouts_before=timeouts.get(index, 0),
                                     stats=stats)
        except Requeue:
            timeouts[index] = timeouts.get(index, 0) + 1
            raise

    def take(outcome: Outcome[Suggestion]) -> None:
        """Keep a finished document's suggestion (an internal error as a failed one), hand it over, count it."""
        suggestion = outcome.value if outcome.ok and outcome.value is not None else _failed(
            todo[outcome.index].key, f"internal error: {outcome.error}", *llm_identity(client.config.model))
        finished[outcome.index] = suggestion
        if on_suggestion is not None:
            on_suggestion(suggestion)
        if progress is not None:
            progress(len(finished), len(todo))

    def tick(in_flight: int) -> None:
        if activity is not None:
            activity(Activity(in_flight=in_flight, limit=limiter.limit, maximum=limiter.maximum,
                              timeouts=limiter.timeouts, reasked=stats.reasked, fixed=stats.fixed))

    run_adaptive(list(range(len(todo))), ask, limiter=limiter, on_result=take, tick=tick, halt=breaker,
                 cancel=_UserStop(cancel, breaker), abandon=client.abort_in_flight)
    return [finished[index] for index in sorted(finished)]
