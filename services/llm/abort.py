"""Abort the HTTP requests a client has in flight, from another thread.

A blocking ``recv`` waits for the endpoint's answer (a minute, on a slow local server); closing its socket from
another thread does not wake it up on Linux, but ``shutdown(SHUT_RDWR)`` does: the read returns at once and the
request fails (``openai.APIConnectionError``). :class:`SocketTracker` wraps the network backend of the ``openai``
client's connection pool (``httpcore``), keeps the sockets it opens, and :meth:`SocketTracker.abort` shuts them all
down: the endpoint sees its clients go away (a server that notices, as llama.cpp's does, stops generating), and the
waiting threads come back within milliseconds. Idle pooled connections are shut down too; the pool drops them and
opens new ones for later requests.

The backend sits behind private attributes (``client._client._transport._pool._network_backend``);
:func:`track_sockets` returns None where they are not found (another HTTP stack), and then nothing is aborted: a
batch stops waiting all the same (:func:`~services.llm.adaptive.run_adaptive`), and the requests end at their
timeout.
"""

from __future__ import annotations

import socket
import threading
import weakref
from typing import Any

__all__ = ["SocketTracker", "track_sockets"]


class _TrackedStream:
    """A network stream that delegates everything, so the tracker can find its socket."""

    def __init__(self, inner: Any, tracker: SocketTracker) -> None:
        self._inner = inner
        self._tracker = tracker
        sock = inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            tracker.add(sock)

    def start_tls(self, *args: Any, **kwargs: Any) -> Any:
        # the TLS socket takes the connection's file descriptor over: track it too
        return _TrackedStream(self._inner.start_tls(*args, **kwargs), self._tracker)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class SocketTracker:
    """A network backend (httpcore's interface) that remembers the sockets of the connections it opens."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return _TrackedStream(self._inner.connect_tcp(*args, **kwargs), self)

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        return _TrackedStream(self._inner.connect_unix_socket(*args, **kwargs), self)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def abort(self) -> int:
        """Shut down every socket opened so far (requests in flight fail at once); returns how many were open."""
        with self._lock:
            sockets = list(self._sockets)
            self._sockets = weakref.WeakSet()
        count = 0
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                count += 1
            except OSError:  # closed already
                pass
        return count


def track_sockets(openai_client: Any) -> SocketTracker | None:
    """Put a :class:`SocketTracker` in front of ``openai_client``'s network backend; None where it cannot be found."""
    http = getattr(openai_client, "_client", None)
    pool = getattr(getattr(http, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None or not hasattr(backend, "connect_tcp"):
        return None
    tracker = SocketTracker(backend)
    pool._network_backend = tracker
    return tracker
