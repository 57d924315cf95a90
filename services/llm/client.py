"""Thin, retrying wrapper around the ``openai`` chat-completions API.

:class:`LLMClient` talks to any OpenAI-compatible endpoint (OpenAI, vLLM,
llama.cpp, Ollama, ...). The ``openai`` client is built with ``max_retries=0``;
retries are ours so they are predictable and testable:

* retryable: HTTP 408, 409, 429, any 5xx, timeouts and connection errors;
  a timeout is retried once only (a server that kept a request past the
  timeout twice is hanging: more attempts would multiply the wait), or not at all
  with ``timeout_retries=0`` (a batch that lowers its concurrency sends it again itself);
* the wait before retry ``n`` (0-based) is the server's ``Retry-After`` /
  ``retry-after-ms`` when present, otherwise
  ``min(backoff_max_s, backoff_base_s * 2**n) * U(0.5, 1.0)`` ("equal jitter");
  a ``Retry-After`` longer than ``retry_after_cap_s`` is not waited for: the
  call fails at once, saying how long the server asked to wait;
* after ``1 + config.max_retries`` failed attempts, or at once for any other
  4xx (bad key, unknown model, bad request), :class:`LLMError` is raised;
* a call given a ``cancel`` (a :class:`StopFlag`) waits with ``cancel.wait(delay)``:
  once it is set (the user pressed Stop; for a batch's
  :class:`~services.llm.breaker.Breaker`, also another request failing for good),
  the wait ends at once and :class:`LLMCancelled` is raised instead of sending
  the retry (a request already in flight is not interrupted). The failed request that
  caused the wait was sent all the same: :attr:`LLMClient.cancelled_after_failure`
  counts the calls the user's cancel stopped so, for callers that count requests and failures.

A 200 answer is read by this module, not trusted: a body that is not JSON
(an HTML page from a wrong base URL), JSON without ``choices``, or a message
whose content is not text raises :class:`LLMError` naming what came back
(never retried: the same URL answers the same way). Bytes that are not UTF-8
are decoded with replacement characters. ``finish_reason`` is kept in
:class:`LLMReply` (``"length"``: the answer was cut at the token limit).

``json_mode=True`` asks for ``response_format={"type": "json_object"}``, ``json_schema=...`` for output
constrained to a JSON schema (``{"type": "json_schema", ...}``), ``logprobs=n`` for the tokens'
log-probabilities. If the endpoint rejects one of these (HTTP 400/422), the call is repeated without it
(the one the refusal names; all of them at once when it names none) and, when that goes through, the
client remembers it as unsupported (:attr:`LLMClient.unsupported`, with the endpoint's words); callers
must parse the text defensively anyway. A model's refusal to answer (``message.refusal``) is kept in
:attr:`LLMReply.refusal`.

Every :class:`LLMError` names its cause (``timeout``, ``connection``, ``auth``, ``rate_limit``, ...:
:mod:`services.llm.causes`). :meth:`LLMClient.abort_in_flight` abandons the requests in flight from any
thread: their connections are shut down and their calls raise :class:`LLMCancelled` at once.

All error messages are scrubbed of the API key (and ``sk-...``-like tokens).
So is every answer (:func:`scrub_answer`, in :meth:`LLMClient._reply`, the one place where an
endpoint's text enters the app): an endpoint that echoes the configured key inside a normal answer
never gets it into what is shown or stored (the LLM cache, annotations' reasons, generated queries,
reader answers all hold ``reply.text``). The client is safe to share between threads.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol

import openai

from services.llm.abort import track_sockets
from services.llm.config import LLMConfig, redact_url

__all__ = ["FEATURES", "LLMCancelled", "LLMClient", "LLMError", "LLMReply", "StopFlag", "backoff_delay",
           "parse_retry_after", "scrub_answer", "status_cause", "tripped_by"]

RETRYABLE_STATUS = frozenset({408, 409, 429})
#: Optional parts of a request an endpoint may refuse with HTTP 400 / 422, and what the client then does: asks
#: again without it (a JSON schema becomes plain JSON mode), and remembers for its later requests.
FEATURES = ("json_schema", "json_object", "logprobs")
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}")
_MAX_DETAIL_CHARS = 300


@dataclass(frozen=True)
class LLMReply:
    """One successful completion. ``latency_s`` is the wall time of the successful attempt only. ``refusal``: the
    model's refusal to answer (OpenAI's ``message.refusal``, the text then empty); ``logprobs``: ``(token,
    log-probability)`` of each token of the answer, when asked for and given."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str
    finish_reason: str | None = None
    refusal: str | None = None
    logprobs: tuple[tuple[str, float], ...] | None = None

    @property
    def cut_off(self) -> bool:
        """Whether the endpoint stopped the answer at its token limit (``finish_reason == "length"``)."""
        return self.finish_reason == "length"


class LLMError(Exception):
    """A chat completion failed for good. The message is user-readable and never contains the key.

    ``status_code`` is the last HTTP status (``None`` for timeouts/connection
    errors), ``attempts`` how many requests were made, ``retryable`` whether the
    last failure was of a transient kind (i.e. retries were exhausted), ``cause`` its cause
    (:data:`services.llm.causes.CAUSES`: ``timeout``, ``connection``, ``auth``, ...) and ``detail`` the last
    failure alone (``HTTP 400: ...``).
    """

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 1, retryable: bool = False,
                 cause: str | None = None, detail: str = ""):
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts
        self.retryable = retryable
        self.cause = cause if cause is not None else status_cause(status_code)
        self.detail = detail or message


def status_cause(status_code: int | None) -> str:
    """The cause (:mod:`services.llm.causes`) of a failed request from its HTTP status (None: no answer at all,
    taken as unreachable; a timeout says so itself)."""
    if status_code is None:
        return "connection"
    if status_code in (401, 403):
        return "auth"
    if status_code == 404:
        return "not_found"
    if status_code == 429:
        return "rate_limit"
    if status_code == 200:
        return "bad_answer"
    if status_code >= 500:
        return "server"
    return "rejected"


class StopFlag(Protocol):
    """What a call's ``cancel`` needs: a ``threading.Event`` (the user's Stop), or a
    :class:`~services.llm.breaker.Breaker`, set too once another request of the batch failed for good."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def tripped_by(cancel: StopFlag | None) -> str | None:
    """The error that tripped ``cancel`` when it is a tripped :class:`~services.llm.breaker.Breaker` (its
    ``tripped`` true and ``cancelled`` false, ``error`` the first endpoint-wide failure); None for a plain event,
    a breaker not tripped, or one the user's cancel stopped (a Stop is said as such)."""
    if cancel is None or getattr(cancel, "cancelled", None) is not False:
        return None
    if getattr(cancel, "tripped", None) is not True:
        return None
    return str(getattr(cancel, "error", None) or "an endpoint-wide error")


class LLMCancelled(Exception):
    """A call stopped because its ``cancel`` was set while it waited to retry; it has no answer.

    Not an :class:`LLMError`: nothing failed here, the user stopped the run (or, for a
    :class:`~services.llm.breaker.Breaker`, another request of the batch failed for good). Batch callers treat it
    like an item that was never sent (:func:`~services.llm.concurrency.run_concurrent` reports it as
    cancelled), so a resume asks for it again.
    """


def scrub(text: str, secret: str | None) -> str:
    """Remove ``secret`` and anything that looks like an API key from ``text``."""
    if secret:
        text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


MIN_SCRUBBED_KEY_CHARS = 8
"""A configured key shorter than this is a placeholder (``none``, ``EMPTY``, ``ollama``: a local server that
ignores it), not a secret: :func:`scrub_answer` leaves answers that happen to contain such a word alone."""


def scrub_answer(text: str, secret: str | None) -> str:
    """``text`` (an endpoint's answer) with every occurrence of the configured key ``secret`` written ``***``,
    when the key is at least :data:`MIN_SCRUBBED_KEY_CHARS` characters long. Unlike :func:`scrub` it leaves other
    ``sk-...``-like words alone: they are the answer's own text."""
    if secret and len(secret) >= MIN_SCRUBBED_KEY_CHARS and secret in text:
        return text.replace(secret, "***")
    return text


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date).

    Returns ``None`` when absent or unparseable; negative values become 0.
    """
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def backoff_delay(attempt: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Equal-jitter exponential backoff: ``min(max_s, base_s * 2**attempt) * U(0.5, 1.0)``."""
    raw = min(max_s, base_s * (2**attempt))
    return raw * (0.5 + 0.5 * rng.random())


@dataclass(frozen=True)
class _Failure:
    """Classification of one failed attempt."""

    detail: str
    status_code: int | None
    retryable: bool
    retry_after_s: float | None
    timed_out: bool = False


def _error_detail(exc: openai.APIStatusError, secret: str | None = None) -> str:
    """Short human-readable reason from an HTTP error (server message when present), with ``secret`` (the API key)
    and key-like strings scrubbed *before* it is cut to :data:`_MAX_DETAIL_CHARS`: a key that an endpoint echoes
    across the cut would otherwise leave its first part, which the later scrub of the whole message no longer
    recognises."""
    message = exc.message
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            message = inner["message"]
        elif isinstance(body.get("message"), str):
            message = body["message"]
    message = scrub(" ".join(str(message).split()), secret)
    if len(message) > _MAX_DETAIL_CHARS:
        message = message[:_MAX_DETAIL_CHARS] + "..."
    return f"HTTP {exc.status_code}: {message}"


def _classify(exc: Exception, secret: str | None = None) -> _Failure:
    """Map an openai exception to retryable/non-retryable with a readable detail (``secret`` scrubbed)."""
    if isinstance(exc, openai.APITimeoutError):
        return _Failure("request timed out", None, True, None, timed_out=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        reason = f" ({type(cause).__name__})" if cause is not None else ""
        return _Failure(f"could not connect{reason}", None, True, None)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in RETRYABLE_STATUS or status >= 500
        retry_after = parse_retry_after(exc.response.headers) if retryable else None
        return _Failure(_error_detail(exc, secret), status, retryable, retry_after)
    return _Failure(scrub(f"{type(exc).__name__}: {exc}", secret), None, False, None)


class LLMClient:
    """Retrying chat-completions client for one :class:`LLMConfig`.

    ``sleep`` and ``rng`` are injectable so tests run without real waiting. Without ``sleep`` the client
    waits for real: ``time.sleep``, or ``cancel.wait`` for a call given a ``cancel`` event; an injected
    ``sleep`` is used for every wait, and the event is checked when it returns.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        sleep: Callable[[float], None] | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        retry_after_cap_s: float = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._sleep = sleep
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._retry_after_cap_s = retry_after_cap_s
        self._rng = rng if rng is not None else random.Random()
        self._rng_lock = threading.Lock()
        self._unsupported: dict[str, str] = {}  # feature of FEATURES -> the endpoint's refusal
        self._cancelled_after_failure = 0
        self._count_lock = threading.Lock()
        self._abort_epoch = 0  # raised by abort_in_flight: a request sent before then is abandoned
        # A placeholder key keeps the openai client from reading OPENAI_API_KEY
        # from the process environment; local servers ignore it.
        self._openai = openai.OpenAI(
            api_key=config.api_key or "no-key",
            base_url=config.effective_base_url,
            timeout=config.timeout_s,
            max_retries=0,
        )
        self._sockets = track_sockets(self._openai)

    @property
    def config(self) -> LLMConfig:
        """The configuration this client was built from."""
        return self._config

    @property
    def json_mode_supported(self) -> bool:
        """False once the endpoint has rejected ``response_format=json_object``."""
        return "json_object" not in self._unsupported

    @property
    def unsupported(self) -> dict[str, str]:
        """The optional request parts (:data:`FEATURES`) this endpoint refused so far, each with its refusal
        (``HTTP 400: ...``): later requests go without them."""
        with self._count_lock:
            return dict(self._unsupported)

    def abort_in_flight(self) -> int:
        """Abandon every request of this client in flight now, from any thread: their connections are shut down
        (:mod:`services.llm.abort`), and each such call raises :class:`LLMCancelled` at once instead of waiting
        for its answer or retrying. Later calls are sent as usual. Returns how many connections were shut."""
        with self._count_lock:
            self._abort_epoch += 1
        return self._sockets.abort() if self._sockets is not None else 0

    @property
    def cancelled_after_failure(self) -> int:
        """How many calls of this client the caller's ``cancel`` (the user's Stop) ended in a retry wait.

        Each sent a request that failed (the 429 / 5xx / timeout it waited to retry) and has no answer: a batch
        that counts requests and failures counts it as one failed request, though it reports the item as never
        done (to do again). Calls stopped by a tripped :class:`~services.llm.breaker.Breaker`
        (:func:`tripped_by` names the error) are not counted here: their batch reports them failed itself.
        Read it before and after a batch: the difference is that batch's."""
        with self._count_lock:
            return self._cancelled_after_failure

    def close(self) -> None:
        """Close the underlying HTTP connection pool."""
        self._openai.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LLMClient({self._config!r})"

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
        json_schema: dict[str, Any] | None = None,
        logprobs: int | None = None,
        timeout_retries: int = 1,
        cancel: StopFlag | None = None,
    ) -> LLMReply:
        """Send ``messages`` and return the first choice's text with token usage.

        Retries transient failures (see module docstring) and raises
        :class:`LLMError` when the request cannot succeed, :class:`LLMCancelled`
        when ``cancel`` is set while it waits to retry (or :meth:`abort_in_flight` abandons it). Missing ``usage``
        in the response counts as 0 tokens; a missing message content is ``""``.

        ``json_schema``: the ``json_schema`` member of ``response_format={"type": "json_schema", ...}`` (``name``,
        ``schema``, ``strict``), output constrained to the schema where the endpoint supports it (vLLM, llama.cpp's
        server, OpenAI); ``json_mode``: ``response_format={"type": "json_object"}``; ``logprobs``: ask for the
        tokens' log-probabilities, with that many alternatives each (``top_logprobs``; 0: none). An endpoint that
        refuses one of these with HTTP 400 / 422 is asked again without it (a schema becomes JSON mode, then
        nothing), and a refusal that asking without it proves is remembered (:attr:`unsupported`): a 400 for this
        request alone (a prompt too long for the context) turns nothing off. ``timeout_retries``: how often a
        timed-out request is sent again (1; a batch that lowers its concurrency after timeouts passes 0 and sends it
        again itself).
        """
        with self._count_lock:
            epoch = self._abort_epoch
            fmt = ("json_schema" if json_schema is not None and "json_schema" not in self._unsupported else
                   "json_object" if (json_mode or json_schema is not None) and "json_object" not in self._unsupported
                   else None)
            top = logprobs if logprobs is not None and "logprobs" not in self._unsupported else None
        dropped: list[str] = []
        while True:
            try:
                reply = self._complete_with_retries(messages, temperature, max_tokens, cancel, epoch,
                                                    fmt=fmt, schema=json_schema, top_logprobs=top,
                                                    timeout_retries=timeout_retries)
            except LLMError as err:
                if err.status_code not in (400, 422) or (fmt is None and top is None):
                    raise
                named = _named_feature(err.detail, fmt, top is not None)
                if named is None and dropped:
                    raise  # asked without every part named so far, and still refused: this request's own fault
                if named == "logprobs":
                    top = None
                elif named is not None:  # the response format: one step down
                    fmt = "json_object" if fmt == "json_schema" and "json_object" not in self.unsupported else None
                else:  # a refusal that names nothing: once more without all optional parts, as one
                    named = "+".join(part for part in (fmt, "logprobs" if top is not None else None) if part)
                    fmt, top = None, None
                dropped.append(named)
                refusal = err.detail
                continue
            if dropped:  # asking without it went through: the endpoint refuses that part (or one of those)
                with self._count_lock:
                    for part in dropped[-1].split("+"):
                        if part == "json_schema" and "+" in dropped[-1]:
                            self._unsupported.setdefault("json_object", refusal)
                        self._unsupported.setdefault(part, refusal)
            return reply

    def _complete_with_retries(
        self, messages: list[dict[str, str]], temperature: float, max_tokens: int | None,
        cancel: StopFlag | None, epoch: int, *, fmt: str | None, schema: dict[str, Any] | None,
        top_logprobs: int | None, timeout_retries: int,
    ) -> LLMReply:
        attempts = 1 + self._config.max_retries
        timeouts = 0
        for attempt in range(attempts):
            started = time.perf_counter()
            try:
                self._check_abort(epoch)
                raw = self._create(messages, temperature, max_tokens, fmt, schema, top_logprobs)
            except openai.OpenAIError as exc:
                self._check_abort(epoch)
                failure = _classify(exc, self._config.api_key)
                timeouts += failure.timed_out
                if failure.timed_out:
                    failure = replace(failure, detail=f"no answer within {self._config.timeout_s:g} s "
                                                      "(MRAG_LLM_TIMEOUT)" + (", twice" if timeouts == 2 else
                                                      f", {timeouts} times" if timeouts > 2 else ""))
                if failure.retry_after_s is not None and failure.retry_after_s > self._retry_after_cap_s:
                    wait = f"{failure.retry_after_s:.0f} s"
                    failure = replace(failure, detail=f"{failure.detail} (the endpoint asks to wait {wait} before "
                                                      f"the next request, longer than the {self._retry_after_cap_s:g}"
                                                      " s this app waits: try again later)")
                    raise self._error(failure, attempt + 1) from None
                if not failure.retryable or attempt == attempts - 1 or timeouts > timeout_retries:
                    raise self._error(failure, attempt + 1) from None
                delay = self._delay(attempt, failure)
                if self._wait(delay, cancel):
                    tripped = tripped_by(cancel)  # read once: the count and the message say the same
                    if tripped is None:
                        with self._count_lock:
                            self._cancelled_after_failure += 1
                    raise self._cancelled(failure, delay, tripped) from None
                continue
            return self._reply(raw, time.perf_counter() - started)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _check_abort(self, epoch: int) -> None:
        """Raise :class:`LLMCancelled` when :meth:`abort_in_flight` was called since the call began."""
        with self._count_lock:
            aborted = self._abort_epoch != epoch
        if aborted:
            where = f"LLM request to model {self._config.model!r} at {redact_url(self._config.base_url)}"
            raise LLMCancelled(scrub(f"{where} abandoned: the run was stopped while it waited.", self._config.api_key))

    def _create(
        self, messages: list[dict[str, str]], temperature: float, max_tokens: int | None, fmt: str | None,
        schema: dict[str, Any] | None, top_logprobs: int | None,
    ) -> Any:
        kwargs: dict[str, Any] = {"model": self._config.model, "messages": messages, "temperature": temperature}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if fmt == "json_schema" and schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif fmt is not None:
            kwargs["response_format"] = {"type": "json_object"}
        if top_logprobs is not None:
            kwargs["logprobs"] = True
            if top_logprobs > 0:
                kwargs["top_logprobs"] = top_logprobs
        return self._openai.chat.completions.with_raw_response.create(**kwargs)

    def _delay(self, attempt: int, failure: _Failure) -> float:
        """Wait before the next attempt: Retry-After (at most the cap) or jittered exponential backoff."""
        if failure.retry_after_s is not None:
            return min(failure.retry_after_s, self._retry_after_cap_s)
        with self._rng_lock:
            return backoff_delay(attempt, self._backoff_base_s, self._backoff_max_s, self._rng)

    def _wait(self, delay: float, cancel: StopFlag | None) -> bool:
        """Wait ``delay`` seconds before a retry; True when ``cancel`` is set (then the wait ends early)."""
        if self._sleep is not None:
            self._sleep(delay)
        elif cancel is not None:
            return cancel.wait(delay)
        else:
            time.sleep(delay)
        return cancel is not None and cancel.is_set()

    def _cancelled(self, failure: _Failure, delay: float, tripped: str | None) -> LLMCancelled:
        """The stop during a retry wait, saying what the wait was for and why it ended: the user's cancel
        (``tripped`` None), or another request of the batch that failed for good (``tripped``: its error, from
        :func:`tripped_by`)."""
        where = f"LLM request to model {self._config.model!r} at {redact_url(self._config.base_url)}"
        if tripped is None:
            message = f"{where} stopped: cancelled while waiting {delay:.3g} s to retry after {failure.detail}."
        else:
            message = (f"{where} stopped while waiting {delay:.3g} s to retry after {failure.detail}: another "
                       f"request of this batch failed in a way every request would ({tripped}), so this one was "
                       "not sent again.")
        return LLMCancelled(scrub(message, self._config.api_key))

    def _error(self, failure: _Failure, attempts: int) -> LLMError:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        hint = ""
        if failure.status_code in (401, 403):
            hint = " Check the API key."
        elif failure.status_code == 404:
            hint = " Check the base URL and the model name."
        message = (
            f"LLM request to model {self._config.model!r} at {redact_url(self._config.base_url)} "
            f"failed{tries}: {failure.detail}.{hint}"
        )
        return LLMError(
            scrub(message, self._config.api_key),
            status_code=failure.status_code,
            attempts=attempts,
            retryable=failure.retryable,
            cause="timeout" if failure.timed_out else None,
            detail=scrub(failure.detail, self._config.api_key),
        )

    def _bad_answer(self, what: str) -> LLMError:
        """The endpoint answered 200 with something that is not a usable chat completion."""
        message = (
            f"LLM endpoint {redact_url(self._config.base_url)} answered model {self._config.model!r} with {what}. "
            "Check that the base URL is the endpoint's OpenAI-compatible API (usually ending in /v1)."
        )
        return LLMError(scrub(message, self._config.api_key), status_code=200)

    def _reply(self, raw: Any, latency_s: float) -> LLMReply:
        """Read a 200 response (an ``openai`` raw response) into an :class:`LLMReply`, or raise :class:`LLMError`."""
        body = raw.content if isinstance(raw.content, bytes) else str(raw.content).encode()
        text_body = body.decode("utf-8", errors="replace")
        try:
            data = json.loads(text_body)
        except (ValueError, RecursionError):
            excerpt = " ".join(scrub(text_body, self._config.api_key)[:120].split())  # scrubbed before the cut
            what = f"a body that is not JSON ({excerpt!r})" if excerpt else "an empty body"
            raise self._bad_answer(what) from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices:
            raise LLMError(
                scrub(f"LLM endpoint {redact_url(self._config.base_url)} returned no choices "
                      f"for model {self._config.model!r}.", self._config.api_key),
                status_code=200,
            )
        first = choices[0] if isinstance(choices[0], dict) else {}
        message = first.get("message")
        if not isinstance(message, dict):
            raise self._bad_answer("a choice without a message (no content)")
        content = message.get("content")
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            parts = [p.get("text") if isinstance(p, dict) else p for p in content]
            if not all(isinstance(p, str) for p in parts):
                raise self._bad_answer("a message whose content parts are not text")
            content = "".join(parts)
        if content is not None and not isinstance(content, str):
            raise self._bad_answer(f"a message whose content is not text ({type(content).__name__})")
        finish = first.get("finish_reason")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        model = data.get("model")
        key = self._config.api_key
        refusal = message.get("refusal")
        return LLMReply(
            text=scrub_answer(content or "", key),  # an echoed key never reaches what is shown or stored
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            latency_s=latency_s,
            model=scrub_answer(model, key) if isinstance(model, str) and model else self._config.model,
            finish_reason=scrub_answer(finish, key) if isinstance(finish, str) else None,
            refusal=scrub_answer(refusal, key) if isinstance(refusal, str) and refusal.strip() else None,
            logprobs=_token_logprobs(first.get("logprobs")),
        )


_FEATURE_WORDS = (("logprobs", ("logprob",)), ("json_schema", ("json_schema", "schema", "grammar", "guided")),
                  ("json_object", ("response_format", "json_object", "json mode", "json")))


def _named_feature(detail: str, fmt: str | None, logprobs: bool) -> str | None:
    """The optional request part an HTTP 400 / 422 refusal names (``logprobs``, or the response format being used),
    None when it names none of those in use (the refusal may be about this request alone)."""
    text = detail.lower()
    for feature, words in _FEATURE_WORDS:
        in_use = logprobs if feature == "logprobs" else fmt is not None and (feature == fmt or feature == "json_object")
        if in_use and any(word in text for word in words):
            return feature if feature == "logprobs" else str(fmt)
    return None


def _token_logprobs(value: Any) -> tuple[tuple[str, float], ...] | None:
    """``(token, logprob)`` of each answer token from a choice's ``logprobs`` (``{"content": [{"token",
    "logprob", ...}, ...]}``); None when absent or of another shape."""
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list) or not content:
        return None
    out = []
    for item in content:
        token = item.get("token") if isinstance(item, dict) else None
        logprob = item.get("logprob") if isinstance(item, dict) else None
        if not isinstance(token, str) or isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
            return None
        out.append((token, float(logprob)))
    return tuple(out)


def _count(value: Any) -> int:
    """A token count from ``usage``: a non-negative int, 0 when missing or not a number."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return max(0, number)
