"""Run work in several threads or processes at once, released together, and count what came back wrong.

:func:`in_threads` starts one thread per task; before each round every thread waits at one barrier, so
the calls of a round overlap as much as the machine allows. :func:`in_processes` does the same with
spawned processes (a fresh interpreter each: nothing is inherited from the test process). Both return
every call's result or exception; :class:`Tally` compares them with the one-at-a-time results.
"""

from __future__ import annotations

import multiprocessing
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Tally", "in_processes", "in_threads"]


def in_threads(tasks: Sequence[Callable[[], Any]], rounds: int) -> list[list[Any]]:
    """Run ``tasks[i]()`` ``rounds`` times in thread ``i``, all threads released together at each round;
    ``out[i][r]`` is round ``r``'s result of task ``i``, or the exception it raised."""
    barrier = threading.Barrier(len(tasks))
    out: list[list[Any]] = [[] for _ in tasks]

    def work(i: int) -> None:
        for _ in range(rounds):
            barrier.wait()
            try:
                out[i].append(tasks[i]())
            except Exception as exc:  # noqa: BLE001 - counted by the caller
                out[i].append(exc)

    threads = [threading.Thread(target=work, args=(i,), name=f"concurrency-{i}") for i in range(len(tasks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@dataclass
class Tally:
    """Calls that returned the expected value (``right``), another value (``wrong``), or raised (``errors``)."""

    right: int = 0
    wrong: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.right + self.wrong + len(self.errors)

    def add(self, got: Any, expected: Any, equal: Callable[[Any, Any], bool]) -> None:
        if isinstance(got, BaseException):
            self.errors.append(f"{type(got).__name__}: {str(got).splitlines()[0] if str(got) else ''}")
        elif equal(got, expected):
            self.right += 1
        else:
            self.wrong += 1

    def __str__(self) -> str:
        first = f"; first error: {self.errors[0]}" if self.errors else ""
        return f"{self.wrong} of {self.total} wrong, {len(self.errors)} raised{first}"

    @property
    def clean(self) -> bool:
        return self.wrong == 0 and not self.errors


def close(atol: float = 1e-5) -> Callable[[Any, Any], bool]:
    """Equality of (nested tuples / lists of) arrays within ``atol``, shapes included."""
    def equal(a: Any, b: Any) -> bool:
        if isinstance(a, (tuple, list)):
            return isinstance(b, (tuple, list)) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            a, b = np.asarray(a), np.asarray(b)
            return a.shape == b.shape and bool(np.allclose(a, b, rtol=0, atol=atol))
        return a == b
    return equal


def _process_main(target: Callable[..., Any], args: tuple, barrier: Any, results: Any, index: int) -> None:
    try:
        value = target(barrier, *args)
        results.put((index, value, None))
    except BaseException:  # noqa: BLE001 - sent to the parent
        results.put((index, None, traceback.format_exc()))


def in_processes(target: Callable[..., Any], arg_lists: Sequence[tuple], timeout: float = 120.0) -> list[Any]:
    """Run ``target(barrier, *args)`` in one spawned process per ``args`` (``target`` must be importable: a
    module-level function of an importable module); ``barrier`` is one ``multiprocessing.Barrier`` for all of
    them, so they can start their work together once each is ready. Returns each process's return value in
    order; RuntimeError with the child's traceback when one failed."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(arg_lists))
    results = ctx.Queue()
    procs = [ctx.Process(target=_process_main, args=(target, tuple(args), barrier, results, i), daemon=True)
             for i, args in enumerate(arg_lists)]
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    try:
        for _ in procs:
            index, value, error = results.get(timeout=timeout)
            if error is not None:
                raise RuntimeError(f"process {index} failed:\n{error}")
            out[index] = value
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    return [out[i] for i in range(len(arg_lists))]
