"""Requests in flight that adapt to a slow endpoint, and a batch that stops at once.

A small local server (llama.cpp, a SmolLM2 behind a minimal OpenAI-compatible server) answers one request at a
time: with 4 sent at once the 4th waits for the other three, and with a 60 s timeout and 20 s per answer it times
out although the server is fine. :class:`AdaptiveLimit` lowers the number of requests in flight when requests time
out and raises it again slowly, as TCP's congestion control does ("additive increase, multiplicative decrease"):

* a timeout halves the limit (``limit // 2``, at least 1), once per round: timeouts of requests sent before the
  last decrease (they were sent at the higher limit and are part of the same crowd) do not lower it again;
* ``2 * limit`` answers in a row without a timeout raise it by one, up to the configured maximum.

:func:`run_adaptive` runs ``fn`` over items with at most ``limiter.limit`` calls in flight, each on a daemon thread
of its own (no thread pool: a pool's threads are joined when the interpreter exits, so a request in flight kept a
stopped command alive until it timed out). The calling thread dispatches, takes results (``on_result``, from the
calling thread, as each finishes) and calls ``tick(in_flight)`` at least every :data:`TICK_S` seconds while it
waits (a page redraws its progress there; Streamlit raises its stop there, within a fraction of a second).

Stopping: once ``halt`` is set (a tripped :class:`~services.llm.breaker.Breaker`) nothing more is sent and the
calls in flight are waited for. Once ``cancel`` is set (the user's Cancel, a Ctrl+C), or when ``on_result`` or
``tick`` raises (Streamlit stopping the page), the calling thread stops waiting at once: ``abandon()`` is called
(it aborts the HTTP requests in flight, :meth:`~services.llm.client.LLMClient.abort_in_flight`) and whatever those
calls return later is dropped. ``fn`` raising :class:`Requeue` sends its item again later, through the limit.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from services.llm.client import LLMCancelled
from services.llm.concurrency import CancelFlag, Outcome

__all__ = ["TICK_S", "AdaptiveLimit", "Requeue", "Ticket", "run_adaptive"]

TICK_S = 0.1
"""Longest stretch the calling thread waits without calling ``tick``: a stop raised there (Streamlit's, when the
user presses Cancel) or a ``cancel`` set is acted on within it."""

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Ticket:
    """What a request was sent under: the limiter's round (``epoch``) and ``limit`` then."""

    epoch: int
    limit: int


class AdaptiveLimit:
    """How many requests may be in flight now (thread-safe); see the module docstring."""

    def __init__(self, maximum: int) -> None:
        if maximum < 1:
            raise ValueError(f"the concurrency must be at least 1, got {maximum}.")
        self.maximum = maximum
        self._limit = maximum
        self._epoch = 0
        self._streak = 0
        self._timeouts = 0
        self._lowest = maximum
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        with self._lock:
            return self._limit

    @property
    def timeouts(self) -> int:
        """Timeouts reported so far."""
        with self._lock:
            return self._timeouts

    @property
    def lowest(self) -> int:
        """The lowest limit reached so far."""
        with self._lock:
            return self._lowest

    def ticket(self) -> Ticket:
        """The round and limit a request is sent under now."""
        with self._lock:
            return Ticket(self._epoch, self._limit)

    def timed_out(self, ticket: Ticket) -> bool:
        """A request sent under ``ticket`` timed out: halve the limit unless this round was halved already.
        Returns whether the limit was lowered."""
        with self._lock:
            self._timeouts += 1
            self._streak = 0
            if ticket.epoch != self._epoch or self._limit == 1:
                return False
            self._limit = max(1, self._limit // 2)
            self._lowest = min(self._lowest, self._limit)
            self._epoch += 1
            return True

    def answered(self) -> None:
        """A request was answered in time: after ``2 * limit`` such in a row, one more may be in flight."""
        with self._lock:
            self._streak += 1
            if self._streak >= 2 * self._limit and self._limit < self.maximum:
                self._limit += 1
                self._streak = 0


class Requeue(Exception):
    """Raised by ``fn``: send this item again later (its request timed out while the limit was lowered)."""


_REQUEUE = object()


def run_adaptive(
    items: Sequence[T],
    fn: Callable[[T], R],
    *,
    limiter: AdaptiveLimit,
    on_result: Callable[[Outcome[R]], None],
    tick: Callable[[int], None] | None = None,
    halt: CancelFlag | None = None,
    cancel: CancelFlag | None = None,
    abandon: Callable[[], None] | None = None,
) -> None:
    """Run ``fn`` over ``items``, at most ``limiter.limit`` at once; see the module docstring.

    ``on_result(outcome)`` gets each finished item (``ok`` with its value, or ``error``: ``fn``'s exceptions are
    caught; an item whose ``fn`` raised :class:`~services.llm.client.LLMCancelled` is dropped, as one never sent).
    Items not sent when the batch halts or is cancelled are not reported; neither are those in flight when it is
    cancelled. Exceptions of ``on_result`` and ``tick`` propagate (after ``abandon()``)."""
    pending: deque[int] = deque(range(len(items)))
    running: set[int] = set()
    results: queue.SimpleQueue[tuple[int, object]] = queue.SimpleQueue()

    def work(index: int) -> None:
        try:
            outcome: object = Outcome(index=index, ok=True, value=fn(items[index]), error=None)
        except Requeue:
            outcome = _REQUEUE
        except LLMCancelled:
            outcome = Outcome(index=index, ok=False, value=None, error=None, cancelled=True)
        except Exception as exc:  # noqa: BLE001 - the contract is to capture fn's errors
            outcome = Outcome(index=index, ok=False, value=None, error=str(exc) or type(exc).__name__)
        results.put((index, outcome))

    try:
        while pending or running:
            if cancel is not None and cancel.is_set():
                break
            if halt is None or not halt.is_set():
                while pending and len(running) < limiter.limit:
                    index = pending.popleft()
                    running.add(index)
                    threading.Thread(target=work, args=(index,), daemon=True, name=f"mrag-llm-{index}").start()
            if not running:
                break
            try:
                index, outcome = results.get(timeout=TICK_S)
            except queue.Empty:
                if tick is not None:
                    tick(len(running))
                continue
            running.discard(index)
            if outcome is _REQUEUE:
                pending.append(index)
            elif isinstance(outcome, Outcome) and not outcome.cancelled:
                on_result(outcome)
            if tick is not None:
                tick(len(running))
    except BaseException:
        if running and abandon is not None:
            abandon()
        raise
    if running and abandon is not None:  # cancelled with requests in flight: not waited for
        abandon()
