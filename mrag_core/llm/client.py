"""Thin, retrying wrapper around the ``openai`` chat-completions API.

:class:`LLMClient` talks to any OpenAI-compatible endpoint (OpenAI, vLLM,
llama.cpp, Ollama, ...). The ``openai`` client is built with ``max_retries=0``;
retries are ours so they are predictable and testable:

* retryable: HTTP 408, 409, 429, any 5xx, timeouts and connection errors;
* the wait before retry ``n`` (0-based) is the server's ``Retry-After`` /
  ``retry-after-ms`` when present (capped at ``retry_after_cap_s``), otherwise
  ``min(backoff_max_s, backoff_base_s * 2**n) * U(0.5, 1.0)`` ("equal jitter");
* after ``1 + config.max_retries`` failed attempts, or at once for any other
  4xx (bad key, unknown model, bad request), :class:`LLMError` is raised.

``json_mode=True`` asks for ``response_format={"type": "json_object"}``. If
the endpoint rejects that (HTTP 400/422), the call is repeated once without it
and the client remembers that JSON mode is unsupported; callers must parse the
text defensively anyway.

All error messages are scrubbed of the API key (and ``sk-...``-like tokens).
The client is safe to share between threads.
"""

from __future__ import annotations

import email.utils
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import openai

from mrag_core.llm.config import LLMConfig, redact_url

__all__ = ["LLMClient", "LLMError", "LLMReply", "backoff_delay", "parse_retry_after"]

RETRYABLE_STATUS = frozenset({408, 409, 429})
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}")
_MAX_DETAIL_CHARS = 300


@dataclass(frozen=True)
class LLMReply:
    """One successful completion. ``latency_s`` is the wall time of the successful attempt only."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str


class LLMError(Exception):
    """A chat completion failed for good. The message is user-readable and never contains the key.

    ``status_code`` is the last HTTP status (``None`` for timeouts/connection
    errors), ``attempts`` how many requests were made, ``retryable`` whether the
    last failure was of a transient kind (i.e. retries were exhausted).
    """

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 1, retryable: bool = False):
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts
        self.retryable = retryable


def scrub(text: str, secret: str | None) -> str:
    """Remove ``secret`` and anything that looks like an API key from ``text``."""
    if secret:
        text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


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


def _error_detail(exc: openai.APIStatusError) -> str:
    """Short human-readable reason from an HTTP error (server message when present)."""
    message = exc.message
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            message = inner["message"]
        elif isinstance(body.get("message"), str):
            message = body["message"]
    message = " ".join(str(message).split())
    if len(message) > _MAX_DETAIL_CHARS:
        message = message[:_MAX_DETAIL_CHARS] + "..."
    return f"HTTP {exc.status_code}: {message}"


def _classify(exc: Exception) -> _Failure:
    """Map an openai exception to retryable/non-retryable with a readable detail."""
    if isinstance(exc, openai.APITimeoutError):
        return _Failure("request timed out", None, True, None)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        reason = f" ({type(cause).__name__})" if cause is not None else ""
        return _Failure(f"could not connect{reason}", None, True, None)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in RETRYABLE_STATUS or status >= 500
        retry_after = parse_retry_after(exc.response.headers) if retryable else None
        return _Failure(_error_detail(exc), status, retryable, retry_after)
    return _Failure(f"{type(exc).__name__}: {exc}", None, False, None)


class LLMClient:
    """Retrying chat-completions client for one :class:`LLMConfig`.

    ``sleep`` and ``rng`` are injectable so tests run without real waiting.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
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
        self._json_mode_supported = True
        # A placeholder key keeps the openai client from reading OPENAI_API_KEY
        # from the process environment; local servers ignore it.
        self._openai = openai.OpenAI(
            api_key=config.api_key or "no-key",
            base_url=config.effective_base_url,
            timeout=config.timeout_s,
            max_retries=0,
        )

    @property
    def config(self) -> LLMConfig:
        """The configuration this client was built from."""
        return self._config

    @property
    def json_mode_supported(self) -> bool:
        """False once the endpoint has rejected ``response_format=json_object``."""
        return self._json_mode_supported

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
    ) -> LLMReply:
        """Send ``messages`` and return the first choice's text with token usage.

        Retries transient failures (see module docstring) and raises
        :class:`LLMError` when the request cannot succeed. Missing ``usage`` in
        the response counts as 0 tokens; a missing message content is ``""``.
        """
        use_json = json_mode and self._json_mode_supported
        try:
            return self._complete_with_retries(messages, temperature, max_tokens, use_json)
        except LLMError as err:
            if use_json and err.status_code in (400, 422):
                self._json_mode_supported = False
                return self._complete_with_retries(messages, temperature, max_tokens, False)
            raise

    def _complete_with_retries(
        self, messages: list[dict[str, str]], temperature: float, max_tokens: int | None, json_mode: bool
    ) -> LLMReply:
        attempts = 1 + self._config.max_retries
        for attempt in range(attempts):
            started = time.perf_counter()
            try:
                completion = self._create(messages, temperature, max_tokens, json_mode)
            except openai.OpenAIError as exc:
                failure = _classify(exc)
                if not failure.retryable or attempt == attempts - 1:
                    raise self._error(failure, attempt + 1) from None
                self._sleep(self._delay(attempt, failure))
                continue
            return self._reply(completion, time.perf_counter() - started)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _create(
        self, messages: list[dict[str, str]], temperature: float, max_tokens: int | None, json_mode: bool
    ) -> Any:
        kwargs: dict[str, Any] = {"model": self._config.model, "messages": messages, "temperature": temperature}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        return self._openai.chat.completions.create(**kwargs)

    def _delay(self, attempt: int, failure: _Failure) -> float:
        """Wait before the next attempt: Retry-After (capped) or jittered exponential backoff."""
        if failure.retry_after_s is not None:
            return min(failure.retry_after_s, self._retry_after_cap_s)
        with self._rng_lock:
            return backoff_delay(attempt, self._backoff_base_s, self._backoff_max_s, self._rng)

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
        )

    def _reply(self, completion: Any, latency_s: float) -> LLMReply:
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise LLMError(
                f"LLM endpoint {redact_url(self._config.base_url)} returned no choices "
                f"for model {self._config.model!r}."
            )
        message = choices[0].message
        text = (message.content if message is not None else None) or ""
        usage = getattr(completion, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        return LLMReply(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency_s,
            model=getattr(completion, "model", None) or self._config.model,
        )
