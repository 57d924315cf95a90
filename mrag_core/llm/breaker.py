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

``is_set()`` makes a breaker usable as :func:`~mrag_core.llm.concurrency.run_concurrent`'s ``cancel``: it
is true once tripped or once the caller's own ``cancel`` is set.
"""

from __future__ import annotations

import threading

from mrag_core.llm.client import LLMError

__all__ = ["Breaker", "ends_batch"]

PER_REQUEST_STATUS = frozenset({400, 413, 422})


def ends_batch(error: LLMError) -> bool:
    """Whether ``error`` would repeat for every other request to the same endpoint."""
    return error.status_code not in PER_REQUEST_STATUS


class Breaker:
    """Trips on the first endpoint-wide :class:`LLMError` (thread-safe); see the module docstring."""

    def __init__(self, cancel: threading.Event | None = None) -> None:
        self._cancel = cancel
        self._error: str | None = None
        self._lock = threading.Lock()

    def record(self, error: LLMError) -> None:
        """Note a failed request; the first endpoint-wide one trips the breaker."""
        if not ends_batch(error):
            return
        with self._lock:
            if self._error is None:
                self._error = str(error)

    @property
    def error(self) -> str | None:
        """The error that tripped the breaker (None while it has not)."""
        with self._lock:
            return self._error

    @property
    def tripped(self) -> bool:
        """Whether an endpoint-wide error was recorded."""
        return self.error is not None

    @property
    def cancel_event(self) -> threading.Event | None:
        """The caller's own ``cancel`` event, for the client's retry waits (``LLMClient.complete(cancel=...)``)."""
        return self._cancel

    @property
    def cancelled(self) -> bool:
        """Whether the caller's own ``cancel`` is set."""
        return self._cancel is not None and self._cancel.is_set()

    def is_set(self) -> bool:
        """True once tripped or cancelled: nothing more should be sent."""
        return self.tripped or self.cancelled

    def not_sent(self) -> str:
        """The reason an item was not sent, for its record."""
        return f"not sent: an earlier request failed: {self.error}"
