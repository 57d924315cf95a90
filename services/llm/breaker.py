"""Stop a batch of LLM calls once the endpoint has failed for good.

A batch (pre-annotation, query generation, the expansions of an evaluation run) sends one request per item.
When a request fails with an error that says nothing about its item - the endpoint cannot be reached or
hangs, refuses the key, does not know the model, kept answering 429 / 5xx through the client's retries, or
answers with something that is not a chat completion - every other item would fail the same way, each after
its own retries: 1,000 documents against a stopped server took 1,000 x (5 attempts + backoff). A
:class:`Breaker` records the first such error; the batch then sends nothing more, and the items not sent
stay to do (resume asks for them again).

Errors about one request (HTTP 400 / 413 / 422: a prompt too long for the model's context, a parameter the
endpoint rejects for this request) do not trip it.

``is_set()`` makes a breaker usable as :func:`~services.llm.concurrency.run_concurrent`'s ``cancel``: it
is true once tripped or once the caller's own ``cancel`` is set.

A request already sent may be waiting to retry (a 429 with ``Retry-After: 30``) when another thread trips the
breaker. Its wait ends then too: the breaker itself is what the client waits on (:attr:`Breaker.cancel_event`,
``LLMClient.complete(cancel=...)``), and :meth:`Breaker.wait` returns as soon as the breaker trips (its own
``threading.Event``, set by :meth:`Breaker.record`) or the caller's ``cancel`` is set (noticed within
:data:`POLL_S`). The client then raises :class:`~services.llm.client.LLMCancelled` instead of sending the retry,
and the batch reports the item like one it never sent: left to do, or failed "not sent" with the breaker's error.
"""

from __future__ import annotations

import threading
import time

from services.llm.client import LLMError

__all__ = ["POLL_S", "Breaker", "ends_batch"]

PER_REQUEST_STATUS = frozenset({400, 413, 422})

#: How often (seconds) :meth:`Breaker.wait` looks at the caller's ``cancel`` event; a trip ends it at once.
POLL_S = 0.05


def ends_batch(error: LLMError) -> bool:
    """Whether ``error`` would repeat for every other request to the same endpoint."""
    return error.status_code not in PER_REQUEST_STATUS


class Breaker:
    """Trips on the first endpoint-wide :class:`LLMError` (thread-safe); see the module docstring."""

    def __init__(self, cancel: threading.Event | None = None) -> None:
        self._cancel = cancel
        self._error: str | None = None
        self._cause: str | None = None
        self._lock = threading.Lock()
        self._tripped = threading.Event()  # set once, by the first endpoint-wide error

    def record(self, error: LLMError) -> None:
        """Note a failed request; the first endpoint-wide one trips the breaker."""
        if not ends_batch(error):
            return
        with self._lock:
            if self._error is None:
                self._error = str(error)
                self._cause = getattr(error, "cause", None)
                self._tripped.set()

    @property
    def error(self) -> str | None:
        """The error that tripped the breaker (None while it has not)."""
        with self._lock:
            return self._error

    @property
    def cause(self) -> str | None:
        """The cause (:mod:`services.llm.causes`) of the error that tripped the breaker (None while it has not)."""
        with self._lock:
            return self._cause

    @property
    def tripped(self) -> bool:
        """Whether an endpoint-wide error was recorded."""
        return self.error is not None

    @property
    def cancel_event(self) -> "Breaker":
        """What the client's retry waits wait on (``LLMClient.complete(cancel=...)``): the breaker itself, set once
        it trips or the caller's own ``cancel`` is set (see :meth:`wait`)."""
        return self

    @property
    def cancelled(self) -> bool:
        """Whether the caller's own ``cancel`` is set."""
        return self._cancel is not None and self._cancel.is_set()

    def is_set(self) -> bool:
        """True once tripped or cancelled: nothing more should be sent."""
        return self.tripped or self.cancelled

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`is_set` (at most ``timeout`` seconds, ``None``: no limit); returns :meth:`is_set`.

        Like ``threading.Event.wait``, so a client can wait on the breaker: a trip from any thread ends the wait at
        once, the caller's ``cancel`` within :data:`POLL_S` (a ``threading.Event`` cannot wait on two events).
        """
        if self._cancel is None:
            return self._tripped.wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if left <= 0:
                break
            self._tripped.wait(left)
        return self.is_set()

    def not_sent(self) -> str:
        """The reason an item was not sent, for its record."""
        return f"not sent: an earlier request failed: {self.error}"
