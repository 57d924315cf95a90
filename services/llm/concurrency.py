"""Bounded, cancellable, order-preserving parallel map for I/O-bound jobs (LLM calls).

:func:`run_concurrent` runs ``fn`` over ``items`` on a thread pool of
``limit`` workers and returns one :class:`Outcome` per item **in input order**.
It never raises because of ``fn``: an ``Exception`` becomes ``ok=False`` with
``error=str(exc)`` (the exception class name when ``str`` is empty).

Cancellation is cooperative: once ``cancel`` is set, items whose ``fn`` has not
started yet are not run and come back with ``cancelled=True``; running items
finish normally, except that an ``fn`` raising
:class:`~services.llm.client.LLMCancelled` (a client stopped in a retry wait)
comes back ``cancelled=True`` too, as if it never ran. ``progress(done, total)`` is called once per item (cancelled
ones included, so ``done`` reaches ``total``) **from the calling thread**,
which is what Streamlit needs to update widgets; ``on_result(outcome)`` is called there
too, once per item as it completes (before ``progress``), so a caller can keep what
finished even if a later ``progress`` call raises.

The calling thread wakes at least every :data:`WAKE_EVERY_S` seconds while it waits for
the workers. Python runs signal handlers (Ctrl+C) only in the main thread, between bytecodes: a
SIGINT that the kernel hands to another thread, or that lands just before the main thread blocks
again, would otherwise wait until some request finished (minutes, for a slow endpoint).
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Generic, Protocol, Sequence, TypeVar

from services.llm.client import LLMCancelled

__all__ = ["CancelFlag", "Outcome", "WAKE_EVERY_S", "run_concurrent"]

WAKE_EVERY_S = 0.2
"""Longest stretch the calling thread blocks waiting for a worker: the delay a pending Ctrl+C can meet."""


class CancelFlag(Protocol):
    """What ``cancel`` needs: a ``threading.Event``, or a :class:`~services.llm.breaker.Breaker`."""

    def is_set(self) -> bool: ...

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """Result of one item: ``ok`` with ``value``, or failed with ``error``, or ``cancelled`` (never run)."""

    index: int
    ok: bool
    value: R | None
    error: str | None
    cancelled: bool = False


def _error_text(exc: BaseException) -> str:
    """``str(exc)``, or the exception class name when that is empty."""
    return str(exc) or type(exc).__name__


def _run_one(index: int, item: T, fn: Callable[[T], R], cancel: CancelFlag | None) -> Outcome[R]:
    """Run ``fn(item)`` unless cancelled first; capture any ``Exception`` (:class:`LLMCancelled`: cancelled)."""
    if cancel is not None and cancel.is_set():
        return Outcome(index=index, ok=False, value=None, error=None, cancelled=True)
    try:
        return Outcome(index=index, ok=True, value=fn(item), error=None)
    except LLMCancelled:
        return Outcome(index=index, ok=False, value=None, error=None, cancelled=True)
    except Exception as exc:  # noqa: BLE001 - the contract is to capture fn's errors
        return Outcome(index=index, ok=False, value=None, error=_error_text(exc))


def run_concurrent(
    items: Sequence[T],
    fn: Callable[[T], R],
    *,
    limit: int,
    progress: Callable[[int, int], None] | None = None,
    cancel: CancelFlag | None = None,
    on_result: Callable[[Outcome[R]], None] | None = None,
) -> list[Outcome[R]]:
    """Apply ``fn`` to every item with at most ``limit`` calls in flight; results in input order.

    Raises ``ValueError`` if ``limit < 1``. An exception raised by ``progress`` or
    ``on_result`` (e.g. Streamlit stopping the script) cancels the queued items, waits
    for the running ones and propagates; ``fn`` exceptions never propagate.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}.")
    total = len(items)
    if total == 0:
        return []
    results: list[Outcome[R] | None] = [None] * total
    with ThreadPoolExecutor(max_workers=min(limit, total), thread_name_prefix="mrag-llm") as pool:
        pending: set[Future[Outcome[R]]] = {
            pool.submit(_run_one, index, item, fn, cancel) for index, item in enumerate(items)
        }
        done_count = 0
        try:
            while pending:
                finished, pending = wait(pending, timeout=WAKE_EVERY_S, return_when=FIRST_COMPLETED)
                for future in finished:
                    outcome = future.result()
                    results[outcome.index] = outcome
                    done_count += 1
                    if on_result is not None:
                        on_result(outcome)
                    if progress is not None:
                        progress(done_count, total)
        except BaseException:
            # e.g. Streamlit's StopException raised inside ``progress``: drop queued work.
            for future in pending:
                future.cancel()
            raise
    return [outcome for outcome in results if outcome is not None]
