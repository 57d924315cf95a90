"""The Reader page against a real local server that misbehaves: a 200 whose body is an HTML page (a traceback on
the page before: JSONDecodeError) and an answer the endpoint cut at its token limit without reporting usage
(no 'cut off' note before: the note looked only at the token count, 0 without usage)."""

from __future__ import annotations

import json

from tests.support.openai_server import FakeOpenAIServer, Reply
from tests.ui.test_reader_page import demo_index, no_llm, ok, open_page

__all__ = ["demo_index", "no_llm"]

QUESTION = "Which violin maker worked in Cremona, and what is a glacier?"


def _ask(server: FakeOpenAIServer, monkeypatch):  # noqa: ANN001, ANN202
    server.set_env(monkeypatch)
    at = open_page()
    at.radio(key="reader_source").set_value("Type a query").run()
    ok(at.text_area(key="reader_typed").input(QUESTION).run())
    return ok(at.button(key="reader_go").click().run())


def test_an_html_page_is_a_message_not_a_traceback(no_llm):
    with FakeOpenAIServer(lambda body: Reply.body(b"<html><body>Login</body></html>")) as server:
        at = _ask(server, no_llm)
        errors = [e.value for e in at.error]
        assert errors and all("No answer:" in e and "not JSON" in e and "base URL" in e for e in errors)
        assert not at.metric


def test_an_answer_cut_at_the_token_limit_says_so(no_llm):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Andrea Amati worked in"},
                         "finish_reason": "length"}]}  # no usage: 0 tokens
    with FakeOpenAIServer(lambda request: Reply.body(json.dumps(body).encode())) as server:
        at = _ask(server, no_llm)
        assert not at.error, [e.value for e in at.error]
        assert sum("token limit" in c.value for c in at.caption) == 2
