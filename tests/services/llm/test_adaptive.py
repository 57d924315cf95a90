"""AdaptiveLimit (halve on a timeout once per round, one more after 2 x limit answers in time) and run_adaptive
(at most the limit in flight, items sent again on Requeue, a cancel or a raising callback returns at once and
abandons what is in flight, a halt waits for it)."""

from __future__ import annotations

import threading
import time

import pytest

from services.llm.adaptive import AdaptiveLimit, Requeue, run_adaptive
from services.llm.concurrency import Outcome


def test_the_limit_halves_once_per_round_and_grows_back_one_at_a_time() -> None:
    limit = AdaptiveLimit(8)
    crowd = [limit.ticket() for _ in range(4)]  # four requests sent at 8
    assert limit.timed_out(crowd[0]) is True and limit.limit == 4
    assert limit.timed_out(crowd[1]) is False and limit.limit == 4  # the same crowd: not halved again
    assert limit.timed_out(limit.ticket()) is True and limit.limit == 2  # sent at 4, timed out too
    assert limit.timed_out(limit.ticket()) is True and limit.limit == 1
    assert limit.timed_out(limit.ticket()) is False and limit.limit == 1  # never below 1
    assert (limit.timeouts, limit.lowest) == (5, 1)
    limit.answered()
    assert limit.limit == 1
    limit.answered()  # 2 x 1 answers in a row
    assert limit.limit == 2
    for _ in range(3):
        limit.answered()
    assert limit.limit == 2  # 3 of the 4 needed at 2
    limit.timed_out(limit.ticket())  # a timeout ends the streak and halves
    assert limit.limit == 1
    for _ in range(2 + 4 + 6 + 8 + 10 + 12 + 14):
        limit.answered()
    assert limit.limit == 8 and limit.lowest == 1
    for _ in range(16):
        limit.answered()
    assert limit.limit == 8  # never above the configured maximum
    with pytest.raises(ValueError):
        AdaptiveLimit(0)


def test_no_more_than_the_limit_in_flight_and_it_follows_the_limiter() -> None:
    limit = AdaptiveLimit(3)
    running, peaks, lock = [0], [], threading.Lock()

    def work(item: int) -> int:
        with lock:
            running[0] += 1
            peaks.append((item, running[0]))
        time.sleep(0.05)
        if item == 2:
            limit.timed_out(limit.ticket())  # the limit drops to 1 while items 0-2 run
        with lock:
            running[0] -= 1
        return item * 10

    results: list[Outcome[int]] = []
    run_adaptive(list(range(8)), work, limiter=limit, on_result=results.append)
    assert sorted(o.value for o in results) == [i * 10 for i in range(8)]
    assert max(n for _, n in peaks) == 3
    assert all(n == 1 for item, n in peaks if item >= 5)  # once the three in flight ended: one at a time


def test_requeued_items_are_sent_again_and_reported_once() -> None:
    tries: dict[int, int] = {}

    def work(item: int) -> int:
        tries[item] = tries.get(item, 0) + 1
        if item == 1 and tries[item] < 3:
            raise Requeue
        return item

    results: list[Outcome[int]] = []
    run_adaptive([0, 1, 2], work, limiter=AdaptiveLimit(1), on_result=results.append)
    assert [o.value for o in results] == [0, 2, 1] and tries == {0: 1, 1: 3, 2: 1}


def test_a_cancel_returns_at_once_and_abandons_what_is_in_flight() -> None:
    cancel, release = threading.Event(), threading.Event()
    abandoned: list[float] = []
    results: list[Outcome[str]] = []

    def work(item: str) -> str:
        if item != "quick":
            cancel.set()
            release.wait(10)  # a request the endpoint answers in 10 s
        return item

    started = time.monotonic()
    run_adaptive(["quick", "slow", "slower", "never sent"], work, limiter=AdaptiveLimit(2), on_result=results.append,
                 cancel=cancel, abandon=lambda: abandoned.append(time.monotonic()))
    took = time.monotonic() - started
    release.set()
    assert took < 0.5 and len(abandoned) == 1
    assert [o.value for o in results] == ["quick"]  # nothing of the items in flight or not sent


def test_a_raising_tick_abandons_and_propagates() -> None:
    class Stopped(BaseException):
        pass

    release = threading.Event()
    abandoned: list[bool] = []

    def tick(in_flight: int) -> None:
        raise Stopped  # Streamlit stopping the page in the progress display

    started = time.monotonic()
    with pytest.raises(Stopped):
        run_adaptive([1, 2], lambda item: release.wait(10), limiter=AdaptiveLimit(2), on_result=lambda o: None,
                     tick=tick, abandon=lambda: abandoned.append(True))
    release.set()
    assert time.monotonic() - started < 0.5 and abandoned == [True]


def test_a_halt_sends_nothing_more_and_waits_for_the_requests_in_flight() -> None:
    halt = threading.Event()
    sent: list[int] = []

    def work(item: int) -> int:
        sent.append(item)
        if item == 0:
            halt.set()  # the endpoint failed for good while item 1 is in flight
        time.sleep(0.2 if item == 1 else 0)
        return item

    results: list[Outcome[int]] = []
    run_adaptive(list(range(6)), work, limiter=AdaptiveLimit(2), on_result=results.append, halt=halt,
                 abandon=lambda: pytest.fail("a halt waits for the requests in flight"))
    assert sorted(sent) == [0, 1] and sorted(o.value for o in results) == [0, 1]
