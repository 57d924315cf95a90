"""How far a pre-annotation's progress has counted, for tests that stop a run mid-batch from the fake endpoint's
thread: the worker sends the next document's request while the calling thread may still be taking the last
answer, and a stop that lands first is taken there (fewer answers stored, rightly, but not where the test meant to
press). Such a test waits until the progress has counted the answers it expects stored, as a user acts on what the
progress said."""

from __future__ import annotations

import threading
from typing import Any

from services.workflows import annotation as aw


class ProgressWatch:
    """The documents the run's progress has counted so far (set from the calling thread after each report the
    caller's own progress took without raising)."""

    def __init__(self) -> None:
        self.done = 0
        self._changed = threading.Condition()

    def counted(self, done: int) -> None:
        with self._changed:
            self.done = done
            self._changed.notify_all()

    def wait_for(self, done: int, timeout: float = 10.0) -> bool:
        """True once the progress has counted ``done`` documents (False after ``timeout`` seconds)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.done >= done, timeout)


def watch_preannotate_progress(monkeypatch: Any) -> ProgressWatch:
    """Wrap :func:`services.workflows.annotation.preannotate` (until ``monkeypatch`` undoes it) so that its
    ``progress`` reports also reach the returned :class:`ProgressWatch`; the page and the CLI call it through the
    module, so both are watched."""
    watch = ProgressWatch()
    real = aw.preannotate

    def preannotate(*args: Any, progress: Any = None, **kwargs: Any) -> Any:
        def shown(done: int, total: int) -> None:
            if progress is not None:
                progress(done, total)  # raises when the page is stopped or reruns
            watch.counted(done)

        return real(*args, progress=shown, **kwargs)

    monkeypatch.setattr(aw, "preannotate", preannotate)
    return watch
