"""Generate multi-aspect queries for planned document tuples.

With an :class:`~services.llm.client.LLMClient`, each plan becomes one
story prompt (:mod:`services.querygen.story_prompt`), sent through
:func:`~services.llm.concurrency.run_concurrent` with at most ``limit``
requests in flight. Without a client the deterministic offline composer
(:mod:`services.querygen.offline`) writes the query.

Status of a :class:`GeneratedQuery`:

* ``'ok'``: the story mentions every title and does not loop (and, if
  requested, the fusion sub-queries asked for were produced);
* ``'flagged'``: there is a story, but it misses at least one title
  (``missing_titles`` lists them), repeats one sentence at least three times
  (a model caught in a loop), or its fusion sub-queries could not be made, are
  fewer than asked for, or include the whole story (``error`` says which) - the
  UI shows it for review; flagged queries are still scored;
* ``'failed'``: no usable story - an LLM error, an empty or too-short answer
  (fewer than ``MIN_WORDS_PER_ASPECT * n_aspects`` words), an answer too long
  to be a query (more than ``MAX_STORY_CHARS_PER_ASPECT * n_aspects``
  characters: a model that ran on and on, or copied the articles), or a
  document that does not exist. ``text`` is then always ``None`` and ``error``
  says why.

A story the endpoint cut at its token limit (``finish_reason: length``) is
flagged: its last sentence is unfinished and later aspects may be missing.

Resuming: ``skip`` holds indices (into ``plans``) already done; they are not
sent again and are absent from the result. Plans not run because ``cancel``
was set are also absent, and so is a plan whose story request was waiting to
retry when ``cancel`` was set (the wait ends at once), so a later call with the
done indices in ``skip`` picks up exactly the remainder. A plan whose Fusion
request was waiting keeps its story (flagged, no sub-queries): it was paid for.

Such a story, and one whose Fusion request failed (its reason starts with :data:`FUSION_FAILED` or
:data:`FUSION_NOT_MADE`, see :func:`fusion_request_failed`), gets its sub-queries later from
:func:`ask_fusion_again`: only the Fusion request is sent again, the story is kept.

This module alone words the reasons that a story has no Fusion sub-queries (:func:`fusion_failure_reason`)
and finds them again among a query's reasons (:func:`split_fusion_reason`); callers use those two, never the
prefixes, so a reason that merely mentions the sub-queries is never taken for one.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Callable, Collection, Literal, Mapping, Protocol, Sequence

from services.llm.breaker import Breaker
from services.llm.client import LLMCancelled, LLMClient, LLMError
from services.llm.concurrency import run_concurrent
from services.querygen.checks import clean_subqueries, dedupe, missing_titles, normalize, repeated_sentence
from services.querygen.offline import GENERATOR_NAME as OFFLINE_GENERATOR
from services.querygen.offline import compose_story
from services.querygen.sampling import QueryPlan
from services.querygen.story_prompt import Article, fusion_messages, story_messages

__all__ = [
    "FUSION_FAILED",
    "FUSION_NOT_MADE",
    "FusionRepair",
    "GeneratedQuery",
    "MAX_STORY_CHARS_PER_ASPECT",
    "MIN_WORDS_PER_ASPECT",
    "Status",
    "TextDocument",
    "ask_fusion_again",
    "fusion_failure_reason",
    "fusion_request_failed",
    "generate_queries",
    "llm_generator",
    "regenerate_one",
    "split_fusion_reason",
    "written_by_llm",
]

Status = Literal["ok", "flagged", "failed"]
MIN_WORDS_PER_ASPECT = 5
# A story is a few sentences per article (two asked for); 3,000 characters per article is ample. A longer
# answer is not a query: stored, it filled the review table and every search embedded a truncated start of it.
MAX_STORY_CHARS_PER_ASPECT = 3000
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")
#: How a flag reason starts when the Fusion request failed (the error follows) or its answer had no usable line.
FUSION_FAILED = "Fusion sub-queries failed: "
#: How a flag reason starts when the Fusion request was not sent or its retry wait was ended by a stop.
FUSION_NOT_MADE = "Fusion sub-queries were not made: "
_NO_USABLE_LINES = FUSION_FAILED + "the LLM answer contained no usable lines."
#: A query's flag reasons are joined by this; a Fusion reason's detail never holds it (:func:`fusion_failure_reason`).
_REASONS_JOIN = "; "
_LLM_GENERATOR = "llm:"


def llm_generator(model: str) -> str:
    """The ``generator`` of a query whose story LLM ``model`` wrote: ``"llm:<model>"``."""
    return f"{_LLM_GENERATOR}{model}"


def written_by_llm(generator: str) -> bool:
    """Whether ``generator`` (a query's) names an LLM (:func:`llm_generator`): only such a story can have a flag
    reason of :func:`fusion_failure_reason`; a hand-written, imported or offline one never has."""
    return generator.startswith(_LLM_GENERATOR)


def fusion_failure_reason(detail: object, *, sent: bool = True) -> str:
    """The flag reason that a story has no Fusion sub-queries: the request failed (``sent``, ``detail`` the
    endpoint's error; :data:`FUSION_FAILED`) or was not sent, or stopped in its retry wait (``sent=False``;
    :data:`FUSION_NOT_MADE`). ``"; "`` in ``detail`` becomes ``", "``: a query's reasons are joined by ``"; "``,
    so the reason stays one of them and :func:`split_fusion_reason` finds where it ends."""
    text = str(detail).replace(_REASONS_JOIN, ", ").strip() or "unknown error"
    return f"{FUSION_FAILED if sent else FUSION_NOT_MADE}{text}"


def split_fusion_reason(error: str) -> tuple[str, str] | None:
    """Among a query's flag reasons ``error`` (joined by ``"; "``), the one saying that the story has no Fusion
    sub-queries (:func:`fusion_failure_reason`, or the LLM's answer had no usable line) and the other reasons,
    joined as they were and in their order; ``None`` when there is no such reason. It counts only as a whole
    reason that starts with :data:`FUSION_FAILED` or :data:`FUSION_NOT_MADE` and ends at the next ``"; "``:
    ``"check the Fusion sub-queries"``, ``"Fusion sub-queries: 3 asked for, ..."`` or a title quoting the wording
    inside another reason are not one. :func:`fusion_request_failed` tells whether asking again may help."""
    reasons = error.split(_REASONS_JOIN)
    for i, reason in enumerate(reasons):
        if reason.startswith((FUSION_FAILED, FUSION_NOT_MADE)):
            return reason, _REASONS_JOIN.join(reasons[:i] + reasons[i + 1:])
    return None


class TextDocument(Protocol):
    """What generation needs from a document: its title and text."""

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class GeneratedQuery:
    """One generated query for ``plan`` (``index`` = its position in the ``plans`` list)."""

    index: int
    plan: QueryPlan
    text: str | None
    fusion: tuple[str, ...]
    status: Status
    missing_titles: tuple[str, ...]
    error: str | None
    generator: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class _Settings:
    """Generation parameters shared by all plans of one run."""

    want_fusion: bool
    n_fusion: int
    temperature: float
    max_article_chars: int | None


def _clean_story(text: str) -> str:
    """Strip whitespace, a surrounding code fence and surrounding quotes; collapse whitespace."""
    text = _FENCE.sub("", text.strip()).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return " ".join(text.split())


def _articles(plan: QueryPlan, docs_by_id: Mapping[str, TextDocument]) -> list[Article]:
    """The plan's documents as prompt articles; ``KeyError`` with a readable message if one is missing."""
    missing = [d for d in plan.doc_ids if d not in docs_by_id]
    if missing:
        raise KeyError(f"document(s) {', '.join(missing)} not found in the collection")
    return [Article(title=docs_by_id[d].title, text=docs_by_id[d].text) for d in plan.doc_ids]


def _failed(index: int, plan: QueryPlan, error: str, generator: str, pt: int = 0, ct: int = 0) -> GeneratedQuery:
    return GeneratedQuery(index, plan, None, (), "failed", (), error, generator, pt, ct)


def _offline_fusion(extracts: tuple[str, ...], n: int) -> tuple[str, ...]:
    """At most ``n`` sub-queries from the per-article extracts: contiguous groups joined by spaces."""
    groups = min(n, len(extracts))
    size, extra = divmod(len(extracts), groups)
    out: list[str] = []
    start = 0
    for g in range(groups):
        end = start + size + (1 if g < extra else 0)
        out.append(" ".join(extracts[start:end]))
        start = end
    return tuple(out)


def _offline_one(index: int, plan: QueryPlan, docs_by_id: Mapping[str, TextDocument], s: _Settings) -> GeneratedQuery:
    """Offline composer for one plan (always 'ok' unless a document is missing)."""
    try:
        articles = _articles(plan, docs_by_id)
    except KeyError as exc:
        return _failed(index, plan, str(exc.args[0]), OFFLINE_GENERATOR)
    story = compose_story(articles)
    fusion = _offline_fusion(story.extracts, s.n_fusion) if s.want_fusion else ()
    missing = tuple(missing_titles(story.text, [a.title for a in articles]))
    status: Status = "flagged" if missing else "ok"
    return GeneratedQuery(index, plan, story.text, fusion, status, missing, None, OFFLINE_GENERATOR)


def _llm_one(
    index: int, plan: QueryPlan, docs_by_id: Mapping[str, TextDocument], client: LLMClient, s: _Settings,
    breaker: Breaker | None = None,
) -> GeneratedQuery:
    """Ask the LLM for one story (and optional fusion sub-queries). An endpoint-wide failure trips ``breaker``;
    raises only :class:`~services.llm.client.LLMCancelled`, when ``breaker``'s cancel event is set while the
    story request waits to retry (the plan then stays to do). Set while the Fusion request waits to retry (the
    user's Stop or another request's trip), the story already paid for is kept: ``flagged``, no sub-queries,
    ``error`` saying why, as when the Fusion request fails."""
    generator = llm_generator(client.config.model)
    try:
        articles = _articles(plan, docs_by_id)
    except KeyError as exc:
        return _failed(index, plan, str(exc.args[0]), generator)
    cancel = breaker.cancel_event if breaker is not None else None
    try:
        reply = client.complete(
            story_messages(articles, max_article_chars=s.max_article_chars), temperature=s.temperature, cancel=cancel
        )
    except LLMError as exc:
        if breaker is not None:
            breaker.record(exc)
        return _failed(index, plan, str(exc), generator)
    pt, ct = reply.prompt_tokens, reply.completion_tokens
    story = _clean_story(reply.text)
    min_words = MIN_WORDS_PER_ASPECT * plan.n_aspects
    if not story:
        return _failed(index, plan, "The LLM returned an empty answer instead of a story.", generator, pt, ct)
    if len(story.split()) < min_words:
        return _failed(
            index, plan,
            f"The LLM answer is too short to be a story about {plan.n_aspects} article(s) "
            f"({len(story.split())} words, at least {min_words} expected): {story[:80]!r}",
            generator, pt, ct,
        )
    max_chars = MAX_STORY_CHARS_PER_ASPECT * plan.n_aspects
    if len(story) > max_chars:
        return _failed(
            index, plan,
            f"The LLM answer is too long to be a query about {plan.n_aspects} article(s) ({len(story):,} "
            f"characters, at most {max_chars:,} expected): {story[:80]!r}",
            generator, pt, ct,
        )
    missing = tuple(missing_titles(story, [a.title for a in articles]))
    problems: list[str] = []
    if reply.cut_off:
        problems.append("The story was cut off at the endpoint's token limit (finish_reason 'length')")
    if (loop := repeated_sentence(story)) is not None:
        problems.append(f"The story repeats one sentence {loop[1]} times: {loop[0][:80]!r}")
    fusion: tuple[str, ...] = ()
    if s.want_fusion:
        try:
            asked = _ask_fusion(index, story, client, s.n_fusion, breaker)
            fusion, pt, ct = asked.fusion, pt + asked.prompt_tokens, ct + asked.completion_tokens
            problems.extend(asked.problems)
        except LLMCancelled as exc:  # the story is paid for: kept, flagged, without sub-queries
            problems.append(fusion_failure_reason(exc, sent=False))
    error = _REASONS_JOIN.join(problems) or None
    status: Status = "flagged" if (missing or error) else "ok"
    return GeneratedQuery(index, plan, story, fusion, status, missing, error, generator, pt, ct)


def _fusion_problems(fusion: tuple[str, ...], story: str, n_fusion: int) -> list[str]:
    """What is wrong with the sub-queries parsed from the LLM's answer (empty list: nothing)."""
    if not fusion:
        return [_NO_USABLE_LINES]
    problems = []
    if len(fusion) < n_fusion:
        problems.append(f"Fusion sub-queries: {n_fusion} asked for, the LLM gave {len(fusion)} distinct one(s)")
    if normalize(story) in {normalize(f) for f in fusion}:
        problems.append("Fusion sub-queries: the LLM repeated the whole story as a sub-query")
    return problems


@dataclass(frozen=True)
class FusionRepair:
    """The Fusion sub-queries asked for story ``index`` (its position in the ``stories`` list of
    :func:`ask_fusion_again`): ``fusion`` (empty when the request failed) and ``problems``, the flag reasons
    they leave (empty: the ``n_fusion`` asked for were made, none of them the whole story)."""

    index: int
    fusion: tuple[str, ...]
    problems: tuple[str, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0


def fusion_request_failed(reason: str) -> bool:
    """Whether flag reason ``reason`` says the story's Fusion request failed (:data:`FUSION_FAILED` with the
    endpoint's error) or was not sent (:data:`FUSION_NOT_MADE`): the story has no sub-queries and asking again
    may give them. An answer without one usable line (a model's answer, not a failed request) is not one."""
    return reason.startswith(FUSION_NOT_MADE) or (reason.startswith(FUSION_FAILED) and reason != _NO_USABLE_LINES)


def _ask_fusion(index: int, story: str, client: LLMClient, n_fusion: int, breaker: Breaker | None) -> FusionRepair:
    """One Fusion request for ``story`` (temperature 0): at most ``n_fusion`` distinct sub-queries (a line the
    token limit cut dropped) and what is wrong with them. A failed request is a problem (:data:`FUSION_FAILED`)
    and, when endpoint-wide, trips ``breaker``; raises :class:`~services.llm.client.LLMCancelled` when the
    breaker's cancel ends the request's retry wait."""
    cancel = breaker.cancel_event if breaker is not None else None
    try:
        reply = client.complete(fusion_messages(story, n_fusion), temperature=0.0, cancel=cancel)
    except LLMError as exc:
        if breaker is not None:
            breaker.record(exc)
        return FusionRepair(index, (), (fusion_failure_reason(exc),))
    lines = clean_subqueries(reply.text)
    if reply.cut_off and lines:
        lines = lines[:-1]  # the line the token limit cut is a sub-query cut in half
    fusion = tuple(dedupe(lines)[:n_fusion])
    return FusionRepair(index, fusion, tuple(_fusion_problems(fusion, story, n_fusion)), reply.prompt_tokens,
                        reply.completion_tokens)


def ask_fusion_again(
    stories: Sequence[str],
    *,
    client: LLMClient,
    n_fusion: int = 3,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    breaker: Breaker | None = None,
) -> list[FusionRepair]:
    """Ask for the Fusion sub-queries of stories that have none (their request failed or was not sent): one
    Fusion request per story, at most ``limit`` in flight (default ``client.config.concurrency``); no story is
    asked for again. Results are in story order; a story not sent (``cancel`` set, ``breaker`` tripped by an
    endpoint-wide failure, a retry wait ended by either) is absent, so a later call asks for it. Never raises
    for one request's failure (a :class:`FusionRepair` without sub-queries, its problem saying why); raises
    ``ValueError`` for ``n_fusion < 1`` or ``limit < 1``."""
    if n_fusion < 1:
        raise ValueError(f"The number of fusion sub-queries must be at least 1, got {n_fusion}.")
    breaker = breaker if breaker is not None else Breaker(cancel)
    items = list(enumerate(stories))
    outcomes = run_concurrent(items, lambda item: _ask_fusion(item[0], item[1], client, n_fusion, breaker),
                              limit=limit if limit is not None else client.config.concurrency, progress=progress,
                              cancel=breaker)
    results: list[FusionRepair] = []
    for outcome in outcomes:
        if outcome.cancelled:
            continue
        if outcome.ok and outcome.value is not None:
            results.append(outcome.value)
        else:  # an unexpected bug in _ask_fusion: still no sub-queries, and why
            results.append(FusionRepair(outcome.index, (), (fusion_failure_reason(outcome.error or ""),)))
    return results


def _settings(want_fusion: bool, n_fusion: int, temperature: float, max_article_chars: int | None) -> _Settings:
    if want_fusion and n_fusion < 1:
        raise ValueError(f"The number of fusion sub-queries must be at least 1, got {n_fusion}.")
    return _Settings(want_fusion, n_fusion, temperature, max_article_chars)


def generate_queries(
    plans: list[QueryPlan],
    docs_by_id: Mapping[str, TextDocument],
    *,
    client: LLMClient | None,
    want_fusion: bool = False,
    n_fusion: int = 3,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    skip: Collection[int] = (),
    temperature: float = 0.7,
    max_article_chars: int | None = 4000,
    breaker: Breaker | None = None,
) -> list[GeneratedQuery]:
    """Generate one query per plan not in ``skip`` (see module docstring for statuses/resume).

    ``limit`` = max LLM requests in flight (default ``client.config.concurrency``).
    ``progress(done, total)`` counts only the plans run in this call. Results
    are in plan order; skipped and cancelled plans are absent, and so are the
    plans not sent after a request failed in a way every other would too (the
    endpoint unreachable or hanging, the key refused, the model unknown...: see
    :mod:`services.llm.breaker`), so a resume asks for them. Never raises for
    a single plan's failure; raises ``ValueError`` for ``want_fusion`` with
    ``n_fusion < 1`` or ``limit < 1``. Pass one ``breaker`` (built on ``cancel``) to every batch of a run so
    that a later batch sends nothing once an earlier one tripped it.
    """
    settings = _settings(want_fusion, n_fusion, temperature, max_article_chars)
    skip_set = set(skip)
    todo = [(i, p) for i, p in enumerate(plans) if i not in skip_set]
    if client is None:
        results: list[GeneratedQuery] = []
        for done, (i, plan) in enumerate(todo, start=1):
            if cancel is not None and cancel.is_set():
                break
            results.append(_offline_one(i, plan, docs_by_id, settings))
            if progress is not None:
                progress(done, len(todo))
        return results
    llm = client
    breaker = breaker if breaker is not None else Breaker(cancel)

    def work(item: tuple[int, QueryPlan]) -> GeneratedQuery:
        return _llm_one(item[0], item[1], docs_by_id, llm, settings, breaker)

    outcomes = run_concurrent(
        todo, work, limit=limit if limit is not None else llm.config.concurrency, progress=progress, cancel=breaker
    )
    results = []
    for outcome in outcomes:
        i, plan = todo[outcome.index]
        if outcome.cancelled:
            continue
        if outcome.ok and outcome.value is not None:
            results.append(outcome.value)
        else:  # an unexpected bug in _llm_one: still a 'failed' row, never a query text
            results.append(_failed(i, plan, outcome.error or "unknown error", llm_generator(llm.config.model)))
    return results


def regenerate_one(
    plan: QueryPlan,
    docs_by_id: Mapping[str, TextDocument],
    *,
    client: LLMClient | None,
    index: int = 0,
    want_fusion: bool = False,
    n_fusion: int = 3,
    temperature: float = 0.9,
    max_article_chars: int | None = 4000,
) -> GeneratedQuery:
    """Generate one plan again (the UI's regenerate button); same statuses as :func:`generate_queries`.

    With a client a fresh LLM call is made (default temperature 0.9 for a
    different story); offline, the composer is deterministic and returns the
    same story again.
    """
    settings = _settings(want_fusion, n_fusion, temperature, max_article_chars)
    if client is None:
        return _offline_one(index, plan, docs_by_id, settings)
    return _llm_one(index, plan, docs_by_id, client, settings)
