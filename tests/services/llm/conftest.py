"""Fixtures shared by the LLM client tests."""

from __future__ import annotations

import threading
from typing import Callable, Iterator

import pytest


@pytest.fixture
def later() -> Iterator[Callable[[float, Callable[[], None]], None]]:
    """``later(seconds, fn)``: run ``fn`` on a timer thread (cancelled at teardown)."""
    timers: list[threading.Timer] = []

    def start(seconds: float, fn: Callable[[], None]) -> None:
        timers.append(threading.Timer(seconds, fn))
        timers[-1].start()

    yield start
    for timer in timers:
        timer.cancel()
