"""The background heartbeat thread (services.heartbeat)."""

from __future__ import annotations

import threading
import time

import pytest

from services.heartbeat import Heartbeat


def _wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_beats_while_the_block_runs_and_stops_after() -> None:
    calls: list[float] = []
    with Heartbeat(lambda: calls.append(time.monotonic()) or True, every=0.02) as hb:
        assert _wait_for(lambda: len(calls) >= 3)
    after = len(calls)
    time.sleep(0.1)
    assert len(calls) == after and hb.beats == after and not hb.lost.is_set()
    assert all(b - a >= 0.015 for a, b in zip(calls, calls[1:]))  # not a busy loop


def test_a_lost_claim_calls_on_lost_once_and_stops_beating() -> None:
    calls = []
    cancel = threading.Event()
    lost_calls = []

    def beat() -> bool:
        calls.append(1)
        return len(calls) < 3  # the third beat finds the run taken over

    with Heartbeat(beat, every=0.02, on_lost=lambda: (lost_calls.append(1), cancel.set())) as hb:
        assert _wait_for(cancel.is_set)
        time.sleep(0.1)
    assert hb.lost.is_set() and lost_calls == [1] and len(calls) == 3 and hb.beats == 2


def test_a_failing_beat_is_skipped_and_the_next_one_tries_again() -> None:
    calls = []

    def beat() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("database is locked")
        return True

    with Heartbeat(beat, every=0.02) as hb:
        assert _wait_for(lambda: hb.beats >= 2)
    assert not hb.lost.is_set() and len(calls) >= 3


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Heartbeat(lambda: True, every=0)
