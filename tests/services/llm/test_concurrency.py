"""run_concurrent: order, error capture, real concurrency limit, cancellation, progress."""

from __future__ import annotations

import signal
import threading
import time
from typing import Callable

import pytest

from services.llm.client import LLMCancelled, LLMClient
from services.llm.concurrency import Outcome, run_concurrent
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai, last_user_message

__all__ = ["fake_openai"]


def test_results_come_back_in_input_order() -> None:
    delays = [0.05, 0.0, 0.03, 0.0, 0.01]

    def work(i: int) -> int:
        time.sleep(delays[i])
        return i * 10

    outcomes = run_concurrent(list(range(5)), work, limit=3)
    assert [o.index for o in outcomes] == [0, 1, 2, 3, 4]
    assert [o.value for o in outcomes] == [0, 10, 20, 30, 40]
    assert all(o.ok and o.error is None and not o.cancelled for o in outcomes)


def test_exceptions_become_failed_outcomes() -> None:
    def work(x: int) -> int:
        if x == 1:
            raise ValueError("bad item 1")
        if x == 2:
            raise KeyError
        return x

    outcomes = run_concurrent([0, 1, 2, 3], work, limit=2)
    assert outcomes[1] == Outcome(index=1, ok=False, value=None, error="bad item 1")
    assert outcomes[2].ok is False and outcomes[2].error == "KeyError"
    assert [o.ok for o in outcomes] == [True, False, False, True]


def test_limit_is_respected_at_the_server(fake_openai: Callable[..., FakeOpenAIServer]) -> None:
    server = fake_openai(lambda body: Reply.ok(last_user_message(body), delay_s=0.2))
    client = LLMClient(server.llm_config(max_retries=0))
    items = [f"q{i}" for i in range(6)]
    outcomes = run_concurrent(items, lambda q: client.complete([{"role": "user", "content": q}]).text, limit=3)
    assert [o.value for o in outcomes] == items
    assert server.max_in_flight == 3  # parallel, but never more than the limit
    assert len(server.requests) == 6


def test_limit_one_is_sequential() -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def work(x: int) -> int:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.01)
        with lock:
            state["now"] -= 1
        return x

    run_concurrent(list(range(6)), work, limit=1)
    assert state["max"] == 1


def test_cancel_stops_items_not_yet_started() -> None:
    cancel = threading.Event()
    started: list[int] = []

    def work(x: int) -> int:
        started.append(x)
        if x == 2:
            cancel.set()
        return x

    outcomes = run_concurrent(list(range(6)), work, limit=1, cancel=cancel)
    assert started == [0, 1, 2]
    assert [o.ok for o in outcomes] == [True, True, True, False, False, False]
    assert [o.cancelled for o in outcomes] == [False, False, False, True, True, True]
    assert all(o.error is None and o.value is None for o in outcomes[3:])


def test_an_item_stopped_by_cancel_while_running_comes_back_cancelled() -> None:
    """``fn`` raising LLMCancelled (a client stopped in a retry wait) reads as never run, not as an error."""
    cancel = threading.Event()

    def work(x: int) -> int:
        if x == 1:
            cancel.set()
            raise LLMCancelled("stopped while waiting to retry")
        if x == 2:
            raise ValueError("a real bug")
        return x

    outcomes = run_concurrent([0, 1, 2], work, limit=1)
    assert [(o.ok, o.cancelled, o.error) for o in outcomes] == [(True, False, None), (False, True, None),
                                                                (False, False, "a real bug")]


def test_cancel_set_before_start_runs_nothing() -> None:
    cancel = threading.Event()
    cancel.set()
    calls: list[int] = []
    outcomes = run_concurrent([1, 2, 3], calls.append, limit=2, cancel=cancel)
    assert calls == [] and all(o.cancelled for o in outcomes)


def test_progress_counts_every_item_from_the_calling_thread() -> None:
    seen: list[tuple[int, int, str]] = []
    progress = lambda done, total: seen.append((done, total, threading.current_thread().name))  # noqa: E731
    run_concurrent(list(range(5)), lambda x: x, limit=3, progress=progress)
    assert [(d, t) for d, t, _ in seen] == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert {name for _, _, name in seen} == {threading.current_thread().name}


def test_progress_exception_cancels_queued_work_and_propagates() -> None:
    calls: list[int] = []

    def progress(done: int, total: int) -> None:
        raise RuntimeError("script stopped")

    with pytest.raises(RuntimeError, match="script stopped"):
        run_concurrent(list(range(50)), lambda x: calls.append(x) or time.sleep(0.01), limit=2, progress=progress)
    assert len(calls) < 50


def test_on_result_sees_each_finished_item_from_the_calling_thread_before_progress_even_when_progress_raises(
) -> None:
    events: list[tuple[str, object, str]] = []
    me = threading.current_thread().name

    def on_result(o) -> None:
        events.append(("result", (o.index, o.value), threading.current_thread().name))

    def progress(done: int, total: int) -> None:
        events.append(("progress", done, threading.current_thread().name))
        if done == 3:
            raise RuntimeError("script stopped")

    with pytest.raises(RuntimeError, match="script stopped"):
        run_concurrent(list(range(20)), lambda x: x * 10, limit=1, on_result=on_result, progress=progress)
    # each finished item's result is handed over before its progress call; three items, then the raise
    assert [kind for kind, _, _ in events] == ["result", "progress"] * 3
    assert [what for kind, what, _ in events if kind == "progress"] == [1, 2, 3]
    results = [what for kind, what, _ in events if kind == "result"]
    assert len({i for i, _ in results}) == 3 and all(value == 10 * i for i, value in results)
    assert {name for _, _, name in events} == {me}


def test_empty_input_and_invalid_limit() -> None:
    assert run_concurrent([], lambda x: x, limit=4) == []
    with pytest.raises(ValueError, match="at least 1"):
        run_concurrent([1], lambda x: x, limit=0)


class _Stopped(Exception):
    """What the test's signal handler raises (as Python's raises ``KeyboardInterrupt`` for a Ctrl+C)."""


def test_a_signal_taken_by_a_worker_thread_reaches_the_caller_while_the_item_still_runs() -> None:
    # A signal the kernel hands to a worker thread only flags Python's handler to run in the main thread, which
    # sat blocked until some item finished: a second Ctrl+C waited for the request in flight (up to its timeout).
    handled = threading.Event()
    seen_while_running: list[bool] = []

    def handler(_signum: int, _frame: object) -> None:
        handled.set()
        raise _Stopped

    def work(_item: int) -> None:
        time.sleep(0.1)  # the calling thread is blocked waiting by now
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)  # to this worker thread, not the main one
        seen_while_running.append(handled.wait(5))

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        with pytest.raises(_Stopped):
            run_concurrent([0], work, limit=1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seen_while_running == [True]  # the handler ran (and raised) while the item was still running
