"""A real OpenAI-compatible HTTP server for tests (no mocking of the ``openai`` client).

:class:`FakeOpenAIServer` is a ``ThreadingHTTPServer`` on ``127.0.0.1`` with an
ephemeral port. It answers ``POST /v1/chat/completions`` (and
``/chat/completions``) with a proper ``chat.completion`` JSON body including
``usage``, and ``GET /v1/models``. What it answers is decided per request by a
*responder* ``Callable[[dict], Reply | str]`` that receives the decoded request
body (a plain ``str`` is shorthand for ``Reply.ok(str)``).

Usage::

    from tests.support.openai_server import FakeOpenAIServer, Reply, scripted, fake_openai

    with FakeOpenAIServer(scripted([Reply.error(429, retry_after=2), "hello"])) as server:
        client = LLMClient(server.llm_config(), sleep=lambda s: None)
        ...
        server.requests        # received JSON bodies, in arrival order
        server.max_in_flight   # highest number of simultaneous requests seen

or, with the fixture factory (servers are stopped at teardown)::

    def test_x(fake_openai):
        server = fake_openai(lambda body: Reply.ok("hi"))

``Reply.ok(text)`` / ``Reply.error(status, message, retry_after=...)`` /
``Reply.slow(delay_s, text)`` build replies; ``delay_s`` makes the server wait
before answering (to trigger client timeouts). :func:`scripted` replays a list
of replies in order, :func:`by_content` decides from the last user message.
``Reply.ok(text, logprobs=[(token, logprob), ...])`` sends token log-probabilities
(``choices[0].logprobs.content``), ``Reply.refused(text)`` OpenAI's ``message.refusal``.

``FakeOpenAIServer(responder, slots=1)`` works like a small local server (llama.cpp
with one slot): requests wait in a queue and each reply's ``delay_s`` is spent holding
the slot, so four requests at once take four times as long as one; a request whose
client goes away (a timeout, an aborted request) leaves the queue or its slot at once,
as llama.cpp's server does, counted in ``server.abandoned``. The clock of the queue is
real time. :mod:`tests.support.small_model` answers like a small model behind such a
server (slow, often off the category list, JSON schema honoured or refused).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Mapping, Sequence

import pytest

from services.llm.config import LLMConfig

__all__ = ["FakeOpenAIServer", "Reply", "Responder", "by_content", "by_document", "document_title", "fake_openai",
           "is_fusion_request", "last_user_message", "scripted"]

FAKE_MODEL = "fake-model"


@dataclass(frozen=True)
class Reply:
    """What the server sends for one request.

    ``status == 200`` sends a chat completion with ``text``; any other status
    sends an OpenAI-style error body ``{"error": {"message": ...}}``.
    ``raw_body`` (bytes) overrides the body entirely. Token counts default to
    whitespace word counts of the prompt/answer.
    """

    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    error_message: str = "fake error"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    raw_body: bytes | None = None
    model: str | None = None
    finish_reason: str = "stop"
    logprobs: tuple[tuple[str, float], ...] | None = None
    refusal: str | None = None

    @classmethod
    def ok(
        cls,
        text: str,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        delay_s: float = 0.0,
        model: str | None = None,
        logprobs: Sequence[tuple[str, float]] | None = None,
    ) -> Reply:
        """A 200 chat completion whose first choice's content is ``text`` (with ``logprobs``: the tokens, which
        must spell ``text``, and their log-probabilities)."""
        if logprobs is not None and "".join(token for token, _ in logprobs) != text:
            raise ValueError("the logprobs' tokens must spell the text")
        return cls(
            text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, delay_s=delay_s, model=model,
            logprobs=tuple(logprobs) if logprobs is not None else None,
        )

    @classmethod
    def refused(cls, refusal: str) -> Reply:
        """A 200 chat completion whose message declines to answer: ``content`` null, ``refusal`` set (OpenAI's
        structured outputs)."""
        return cls(refusal=refusal)

    @classmethod
    def error(
        cls, status: int, message: str = "fake error", *, retry_after: float | str | None = None, delay_s: float = 0.0
    ) -> Reply:
        """An HTTP error (e.g. 429 with ``Retry-After``, 500, 401)."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        return cls(status=status, error_message=message, headers=headers, delay_s=delay_s)

    @classmethod
    def slow(cls, delay_s: float, text: str = "late") -> Reply:
        """A good answer sent only after ``delay_s`` seconds."""
        return cls(text=text, delay_s=delay_s)

    @classmethod
    def cut(cls, text: str, *, completion_tokens: int | None = None) -> Reply:
        """A 200 answer stopped at the token limit: ``finish_reason: "length"``."""
        return cls(text=text, finish_reason="length", completion_tokens=completion_tokens)

    @classmethod
    def body(cls, raw: bytes, status: int = 200) -> Reply:
        """Send ``raw`` as the whole body (not JSON, JSON of another shape, bytes that are not UTF-8...)."""
        return cls(status=status, raw_body=raw)


Responder = Callable[[dict[str, Any]], "Reply | str"]


def last_user_message(body: Mapping[str, Any]) -> str:
    """Text of the last ``role == "user"`` message (content parts joined); ``""`` if none."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content", "")
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content)
    return ""


def is_fusion_request(body: Mapping[str, Any]) -> bool:
    """Whether a request asks for Fusion sub-queries (its prompt begins as
    :func:`services.querygen.story_prompt.fusion_messages` writes it), not for a story or anything else."""
    from services.querygen.story_prompt import FUSION_PROMPT_START

    return last_user_message(body).startswith(FUSION_PROMPT_START)


def scripted(replies: Sequence[Reply | str]) -> Responder:
    """Responder returning ``replies`` one per request, in order (thread-safe).

    Once exhausted it answers HTTP 599 "script exhausted", which the client
    treats as a server error, so an unexpected extra request fails the test.
    """
    queue = list(replies)
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Reply | str:
        with lock:
            if not queue:
                return Reply.error(599, "script exhausted: more requests than scripted replies")
            return queue.pop(0)

    return respond


def document_title(body: Mapping[str, Any]) -> str:
    """The ``Document title: ...`` line of the first user message that has one (a re-ask's conversation keeps the
    first prompt in front), ``""`` if none."""
    for message in body.get("messages", []):
        content = message.get("content", "") if message.get("role") == "user" else ""
        if isinstance(content, str) and "Document title: " in content:
            return content.split("Document title: ", 1)[1].split("\n", 1)[0]
    return ""


def by_document(fn: Callable[[str], Reply | str]) -> Responder:
    """Responder calling ``fn(the user message that asks about a document)``: the first one with a ``Document
    title:`` line (a pre-annotation's re-ask keeps the first prompt in front of its correction), else the last user
    message. A test that answers per document so answers every re-ask about it the same way."""

    def respond(body: dict[str, Any]) -> Reply | str:
        for message in body.get("messages", []):
            content = message.get("content", "") if message.get("role") == "user" else ""
            if isinstance(content, str) and "Document title: " in content:
                return fn(content)
        return fn(last_user_message(body))

    return respond


def by_content(fn: Callable[[str], Reply | str]) -> Responder:
    """Responder calling ``fn(last user message text)``."""

    def respond(body: dict[str, Any]) -> Reply | str:
        return fn(last_user_message(body))

    return respond


def _word_count(text: str) -> int:
    return len(text.split())


def _completion_body(reply: Reply, request: Mapping[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` JSON object as the OpenAI API returns it."""
    prompt_text = " ".join(str(m.get("content", "")) for m in request.get("messages", []))
    prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else _word_count(prompt_text)
    completion_tokens = reply.completion_tokens if reply.completion_tokens is not None else _word_count(reply.text)
    return {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or str(request.get("model", FAKE_MODEL)),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None if reply.refusal is not None else reply.text,
                            **({"refusal": reply.refusal} if reply.refusal is not None else {})},
                "finish_reason": reply.finish_reason,
                "logprobs": None if reply.logprobs is None else {
                    "content": [{"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}
                                for token, logprob in reply.logprobs]},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _gone(connection: Any) -> bool:
    """Whether the client closed (or shut down) the request's connection: readable with nothing to read."""
    import select
    import socket

    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _error_body(reply: Reply) -> dict[str, Any]:
    return {"error": {"message": reply.error_message, "type": "fake_error", "param": None, "code": str(reply.status)}}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence the default stderr access log."""

    def _send_json(self, status: int, payload: bytes, headers: Mapping[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to do

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            body = {"object": "list", "data": [{"id": FAKE_MODEL, "object": "model", "created": 0, "owned_by": "test"}]}
            self._send_json(200, json.dumps(body).encode())
        else:
            self._send_json(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(length)
        if self.path.split("?")[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, json.dumps({"error": {"message": "request body is not JSON"}}).encode())
            return
        owner = self.server.owner
        owner._record(body, {name.lower(): value for name, value in self.headers.items()})
        owner._enter()
        try:
            try:
                reply = owner.responder(body)
            except Exception as exc:  # noqa: BLE001 - surface responder bugs to the test
                owner.errors.append(f"{type(exc).__name__}: {exc}")
                reply = Reply.error(598, f"responder raised {type(exc).__name__}: {exc}")
            if isinstance(reply, str):
                reply = Reply.ok(reply)
            if not owner._serve(reply.delay_s, self.connection):
                return  # the client went away while waiting: nothing to send
        finally:
            owner._leave()
        if reply.raw_body is not None:
            payload = reply.raw_body
        elif reply.status == 200:
            payload = json.dumps(_completion_body(reply, body)).encode()
        else:
            payload = json.dumps(_error_body(reply)).encode()
        self._send_json(reply.status, payload, reply.headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeOpenAIServer


class FakeOpenAIServer:
    """Real HTTP server speaking the chat-completions API; see the module docstring."""

    def __init__(self, responder: Responder, *, slots: int | None = None) -> None:
        self.responder = responder
        self.slots = slots
        self.abandoned = 0  # requests whose client went away before the answer (with ``slots``)
        self._slot = threading.Semaphore(slots) if slots is not None else None
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []  # lower-cased header names
        self.errors: list[str] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; wakes up delayed replies so no thread lingers."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses / helpers -------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — what ``LLMConfig.base_url`` should be."""
        return f"http://127.0.0.1:{self.port}/v1"

    def llm_config(self, **overrides: Any) -> LLMConfig:
        """An :class:`LLMConfig` pointing here (model ``fake-model``, 1 s timeout, 2 retries)."""
        values: dict[str, Any] = {
            "base_url": self.base_url,
            "model": FAKE_MODEL,
            "api_key": "test-key",
            "timeout_s": 1.0,
            "max_retries": 2,
            "concurrency": 4,
        }
        values.update(overrides)
        return LLMConfig(**values)

    def set_env(self, monkeypatch: Any) -> None:
        """Point the app's environment configuration here: ``MRAG_LLM_BASE_URL``, model
        ``fake-model``, no retries (undone by ``monkeypatch`` at test end)."""
        monkeypatch.setenv("MRAG_LLM_BASE_URL", self.base_url)
        monkeypatch.setenv("MRAG_LLM_MODEL", FAKE_MODEL)
        monkeypatch.setenv("MRAG_LLM_MAX_RETRIES", "0")

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    # -- bookkeeping used by the handler ---------------------------------------------
    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _serve(self, delay_s: float, connection: Any) -> bool:
        """Spend ``delay_s`` answering: without ``slots`` just wait; with them, first wait for a free slot, then
        hold it for ``delay_s``. Returns False when the client went away meanwhile (checked every 20 ms)."""
        if self._slot is None:
            if delay_s > 0:
                self._stopping.wait(delay_s)
            return True
        while not self._slot.acquire(timeout=0.02):
            if self._stopping.is_set() or _gone(connection):
                return self._abandon()
        try:
            deadline = time.monotonic() + delay_s
            while (left := deadline - time.monotonic()) > 0:
                if self._stopping.wait(min(0.02, left)) or _gone(connection):
                    return self._abandon()
            return True
        finally:
            self._slot.release()

    def _abandon(self) -> bool:
        with self._lock:
            self.abandoned += 1
        return False


@pytest.fixture
def fake_openai() -> Iterator[Callable[[Responder], FakeOpenAIServer]]:
    """Factory fixture: ``fake_openai(responder)`` returns a started server, stopped at teardown."""
    servers: list[FakeOpenAIServer] = []

    def make(responder: Responder) -> FakeOpenAIServer:
        server = FakeOpenAIServer(responder).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
