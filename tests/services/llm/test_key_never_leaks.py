"""Security: the API key never leaves the request header. A real OpenAI-compatible server on 127.0.0.1 echoes the
key in its error bodies (as OpenAI's "Incorrect API key provided: ..." does); the key must not appear in the error
messages, the SQLite file (all its bytes, WAL included), the LLM and embedding caches on disk, the log records
(DEBUG level, the ``openai`` and ``httpx`` loggers included) or the command line's output.

Two keys: one shaped like OpenAI's (``sk-...``, also caught by the key-like pattern) and one of a local server
that is not (only the exact-key scrub can catch it, so a key cut in two by a length limit leaked its first part).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from services.cli.main import main  # noqa: E402
from services.llm.client import LLMClient, LLMError  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402
from tests.support.openai_server import FakeOpenAIServer, Reply  # noqa: E402

KEYS = ["sk-test-SECRET123-0123456789", "local-SECRET123-token-abcdef"]


def _echo_401(body: dict[str, Any], key: str) -> Reply:
    """OpenAI's answer to a refused key: the key in the message."""
    return Reply.error(401, f"Incorrect API key provided: {key}. You can find your API key at the dashboard.")


@pytest.mark.parametrize("key", KEYS)
def test_a_key_echoed_across_the_length_cut_leaves_no_part_in_the_error(key: str) -> None:
    """The endpoint's message is cut at 300 characters: with the key echoed across the cut, the message kept its
    first 11 characters ('local-SECRE'), no longer the whole key, so the scrub missed them. A 200 body that is not
    JSON is quoted up to 120 characters: the same."""
    long_401 = Reply.error(401, "y" * 288 + " " + key)
    not_json = Reply.body(("<html>" + "z" * 104 + " " + key + " more</html>").encode())
    with FakeOpenAIServer(lambda body: long_401) as server:
        with LLMClient(server.llm_config(api_key=key, max_retries=0), sleep=lambda s: None) as client:
            with pytest.raises(LLMError) as info:
                client.complete([{"role": "user", "content": "hi"}])
    message = str(info.value)
    assert "HTTP 401" in message and "y" * 200 in message and "Check the API key" in message
    assert key[:8] not in message and "SECRET" not in message
    with FakeOpenAIServer(lambda body: not_json) as server:
        with LLMClient(server.llm_config(api_key=key, max_retries=0), sleep=lambda s: None) as client:
            with pytest.raises(LLMError) as info:
                client.complete([{"role": "user", "content": "hi"}])
    message = str(info.value)
    assert "a body that is not JSON" in message and "zzzz" in message
    assert key[:8] not in message and "SECRET" not in message


def _files_bytes(folder: Path) -> bytes:
    """Every file under ``folder`` (the database, its WAL, the caches), concatenated."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.mark.parametrize("key", KEYS)
def test_cli_annotate_and_generate_against_a_key_echoing_endpoint_store_and_print_no_key(
        key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """Pre-annotation and query generation through ``python -m mrag_core`` with the key from the environment:
    first the endpoint refuses it (401, the key echoed), then it answers; the failed suggestions and queries
    are stored with their reason. Nothing written or printed holds the key, though every request carried it."""
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    url, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    caplog.set_level(logging.DEBUG)
    refuse = [True]

    def respond(body: dict[str, Any]) -> Reply | str:
        if refuse[0]:
            return _echo_401(body, key)
        return '{"label": "space", "confidence": 0.8, "reason": "about space"}'

    with FakeOpenAIServer(respond) as server:
        server.set_env(monkeypatch)
        monkeypatch.setenv("MRAG_LLM_API_KEY", key)
        monkeypatch.setenv("MRAG_LLM_MAX_RETRIES", "0")
        main(["annotate", "--corpus", "Mini", "--database", url, "--annotator", "llm"])
        main(["generate", "--corpus", "Mini", "--name", "Q", "--aspects", "1", "--per-count", "1",
              "--generator", "llm", "--fusion", "0", "--database", url])
        refused = len(server.requests)
        refuse[0] = False
        main(["annotate", "--corpus", "Mini", "--database", url, "--annotator", "llm"])
        headers = list(server.request_headers)
    out = capsys.readouterr()
    assert refused >= 2 and len(headers) > refused  # both commands asked, and the resume asked again
    assert all(h.get("authorization") == f"Bearer {key}" for h in headers)  # the key was sent, in the header
    assert "401" in out.err  # the refusal was reported ...
    printed = out.out + out.err
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert caplog.records  # the DEBUG records of openai/httpx were captured
    stored = _files_bytes(tmp_path)
    assert b"Incorrect API key provided" in stored  # ... and stored as the failures' reason
    for secret in (key, key[:12], "SECRET123"):
        assert secret not in printed, printed
        assert secret not in logged
        assert secret.encode() not in stored


def _echoing(key_of: Any, fail_short: bool = False) -> Any:
    """A responder whose normal 200 answers quote the key the request carried (``key_of()``: its Authorization
    header): an annotation whose reason holds it, a story that holds it beside the titles, a reader answer."""
    import json
    import re

    from tests.support.openai_server import last_user_message

    def respond(body: dict[str, Any]) -> str:
        key = key_of()
        prompt = last_user_message(body)
        titles = re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)
        if titles:  # query generation: a story naming every title
            return (f"Once upon a time {' and '.join(titles)} met the courier who carried the token {key} and "
                    "told one long story that names every one of them.")
        if "What orbits the earth?" in prompt:  # the reader
            return f"The answer, sent with {key}: the moon."
        return json.dumps({"label": "space", "confidence": 0.8, "reason": f"I was called with {key}, so: space"})

    return respond


@pytest.mark.parametrize("key", KEYS)
def test_a_key_echoed_inside_normal_answers_is_stored_nowhere(key: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Before, an endpoint that quoted the key inside a normal 200 answer had it stored: in the LLM cache, in the
    suggestions' reasons, in the generated queries, in the reader's cached answers. Now every answer is scrubbed
    where it enters the app (LLMClient._reply): through the real CLI and the reader, no byte on disk holds it."""
    import db
    from services.reader import ReaderDoc, RemoteGenerator
    from services.workflows.llm_cache import StoreLLMCache

    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    url, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    server = FakeOpenAIServer(lambda body: "")
    server.responder = _echoing(lambda: server.request_headers[-1]["authorization"].removeprefix("Bearer "))
    with server:
        server.set_env(monkeypatch)
        monkeypatch.setenv("MRAG_LLM_API_KEY", key)
        assert main(["annotate", "--corpus", "Mini", "--database", url, "--annotator", "llm"]) == 0
        assert main(["generate", "--corpus", "Mini", "--name", "Q", "--aspects", "1,2", "--per-count", "1",
                     "--generator", "llm", "--fusion", "0", "--database", url]) == 0
        store = db.open_store(url)
        with LLMClient(server.llm_config(api_key=key, max_retries=0)) as client:
            reader = RemoteGenerator(client, StoreLLMCache(store))
            said = reader.answer("What orbits the earth?", [ReaderDoc("Moon", "space", "The moon orbits the earth.")])
        headers = list(server.request_headers)
    assert all(h.get("authorization") == f"Bearer {key}" for h in headers)  # the key went out, in the header
    assert said.text == "The answer, sent with ***: the moon."
    corpus = db.get_corpus_by_name(store, "Mini")
    reasons = [s.reason for d in db.list_documents(store, corpus.id).items for s in db.list_suggestions(store, d.id)]
    (qs,) = db.list_query_sets(store)
    texts = [q.text for q in db.list_queries(store, qs.id)]
    store.close()
    assert reasons and all(r == "I was called with ***, so: space" for r in reasons), reasons
    assert len(texts) == 2 and all("the token *** and" in t for t in texts), texts
    printed = capsys.readouterr()
    stored = _files_bytes(tmp_path)
    assert b"I was called with ***" in stored and b"the token *** and" in stored
    for secret in (key, "SECRET123"):
        assert secret.encode() not in stored
        assert secret not in printed.out + printed.err


def test_an_answer_cached_before_the_scrub_is_scrubbed_when_replayed(tmp_path: Path) -> None:
    """An LLM cache entry an earlier version stored with the key in it: the reader's answer from the cache shows
    "***", and no request is sent."""
    import db
    from services.llm.cache import cache_key
    from services.reader import READER_KIND, ReaderDoc, RemoteGenerator, reader_messages
    from services.workflows.llm_cache import StoreLLMCache

    key = KEYS[1]
    store = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    docs = [ReaderDoc("Moon", "space", "The moon orbits the earth.")]
    with FakeOpenAIServer(lambda body: "fresh") as server:
        with LLMClient(server.llm_config(api_key=key, max_retries=0)) as client:
            messages = reader_messages("What orbits?", docs)
            entry = cache_key(client.config.model, READER_KIND, messages,
                              {"temperature": 0.0, "max_tokens": 64, "json_mode": False})
            db.llm_cache_put(store, entry, model=client.config.model, kind=READER_KIND, request={},
                             response_text=f"old answer quoting {key}")
            said = RemoteGenerator(client, StoreLLMCache(store)).answer("What orbits?", docs, max_new_tokens=64)
        assert server.requests == []
    store.close()
    assert said.cached and said.text == "old answer quoting ***"


def test_a_placeholder_key_is_not_scrubbed_from_answers() -> None:
    """A key shorter than 8 characters is a local server's placeholder ("ollama", "none"), not a secret: an
    answer that uses the word keeps it; a real key is replaced wherever it appears."""
    from services.llm.client import scrub_answer

    with FakeOpenAIServer(lambda body: "Ask ollama, or none.") as server:
        with LLMClient(server.llm_config(api_key="ollama", max_retries=0)) as client:
            assert client.complete([{"role": "user", "content": "hi"}]).text == "Ask ollama, or none."
    assert scrub_answer("a sk-abcdefgh b sk-abcdefgh", "sk-abcdefgh") == "a *** b ***"
    assert scrub_answer("sk-other-token stays", "sk-abcdefgh") == "sk-other-token stays"
