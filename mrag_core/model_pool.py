"""Loaded models shared by every caller of one process, each loaded once, and loadable in the background.

The app's sessions are threads of one process: they share one :class:`ModelPool`. :meth:`ModelPool.get` returns a
loaded model, loading it on first use; a second caller asking for a model another thread is loading waits for that
load rather than starting its own. :meth:`ModelPool.warm` starts a load on a background thread (the app warms its
default model at start-up) and returns at once; :meth:`ModelPool.state` tells a page whether asking will wait (it
says so with a spinner). A load that failed is not kept: every waiter gets its error, the next ``get`` tries again.
At most ``max_entries`` loaded models are kept, the least recently asked for dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, Literal

State = Literal["loaded", "loading", "absent"]


class ModelPool:
    """Models by key (e.g. ``(name, attention implementation)``), loaded by ``loader(*key)``."""

    def __init__(self, loader: Callable[..., Any], max_entries: int = 3) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._loader = loader
        self._max = max_entries
        self._lock = threading.Lock()
        self._slots: OrderedDict[Hashable, Future] = OrderedDict()
        self._started: dict[Hashable, float] = {}

    def state(self, *key: Hashable) -> State:
        """``loaded`` (``get`` returns at once), ``loading`` (a thread loads it now) or ``absent``."""
        with self._lock:
            fut = self._slots.get(key)
        if fut is None:
            return "absent"
        return "loaded" if fut.done() and fut.exception() is None else "loading" if not fut.done() else "absent"

    def loading_for(self, *key: Hashable) -> float | None:
        """Seconds since the load of ``key`` started, while it is loading; None otherwise."""
        with self._lock:
            fut, started = self._slots.get(key), self._started.get(key)
        return time.monotonic() - started if fut is not None and not fut.done() and started is not None else None

    def _claim(self, key: tuple) -> tuple[Future, bool]:
        """The slot of ``key`` and whether the caller must load it (it was absent, or its last load failed)."""
        with self._lock:
            fut = self._slots.get(key)
            if fut is not None and not (fut.done() and fut.exception() is not None):
                self._slots.move_to_end(key)
                return fut, False
            fut = Future()
            self._slots[key] = fut
            self._slots.move_to_end(key)
            self._started[key] = time.monotonic()
            return fut, True

    def _load(self, key: tuple, fut: Future) -> None:
        try:
            model = self._loader(*key)
        except BaseException as exc:  # noqa: BLE001 - handed to every waiter
            fut.set_exception(exc)
            with self._lock:
                if self._slots.get(key) is fut:  # not kept: the next get tries again
                    del self._slots[key]
                    self._started.pop(key, None)
            return
        fut.set_result(model)
        with self._lock:
            loaded = [k for k, f in self._slots.items() if f.done()]
            for old in loaded[:max(0, len(loaded) - self._max)]:  # least recently asked for first
                if old != key:
                    del self._slots[old]
                    self._started.pop(old, None)

    def get(self, *key: Hashable) -> Any:
        """The model of ``key``, loaded in this thread if no thread loads it yet, else when that load ends; the
        loader's error is raised to every caller waiting for it."""
        fut, mine = self._claim(key)
        if mine:
            self._load(key, fut)
        return fut.result()

    def warm(self, *key: Hashable) -> threading.Thread | None:
        """Start loading ``key`` on a background thread (returned), unless it is loaded or loading (None)."""
        fut, mine = self._claim(key)
        if not mine:
            return None
        thread = threading.Thread(target=self._load, args=(key, fut), name=f"mrag-model-warm-{key[0]}", daemon=True)
        thread.start()
        return thread
