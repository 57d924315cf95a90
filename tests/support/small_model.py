"""A responder for :class:`tests.support.openai_server.FakeOpenAIServer` that answers category questions the way a
small model behind a small local server did (SmolLM2-135M-Instruct, issue 36): slowly, and often with a label that
is not one of the categories, or with no JSON at all.

Which documents it gets wrong is fixed by their title (a CRC32 draw), like a model at temperature 0 that gives the
same wrong answer every time it is asked the same question; a different question (a correction, a request for the
name only) gets another draw, and so does each request at a temperature above 0 (it samples: the n-th such request
about a document draws with n in the salt). ``schema`` says what the server does with ``response_format: json_schema``:
``"ignore"`` (answers as without it, as a server that does not know it), ``"honour"`` (the label is always one of
the schema's enum, as vLLM's and llama.cpp's constrained decoding make it), ``"refuse"`` (HTTP 400, as some servers
answer a ``response_format`` they do not support). ``logprobs``: answers carry token log-probabilities when asked
(each token of the label ``label_logprob``, the others -0.01).

Use it with ``FakeOpenAIServer(model, slots=1)`` and a ``delay_s``: one request at a time, each taking ``delay_s``.
Setting ``hang`` makes every answer take ``hang_s`` instead (the server stops keeping up).
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from tests.support.openai_server import Reply, document_title, last_user_message

__all__ = ["SmallModel", "draw", "tokens"]


def draw(title: str, salt: str) -> float:
    """A number in [0, 1) fixed by ``title`` and ``salt``."""
    return zlib.crc32(f"{salt}:{title}".encode()) / 2**32


def tokens(text: str) -> list[str]:
    """``text`` cut into word and punctuation tokens that spell it again."""
    return re.findall(r"\w+|\s+|[^\w\s]", text)


@dataclass
class SmallModel:
    """See the module docstring. ``truth(title)``: the category a good model would name for the document."""

    truth: Callable[[str], str]
    delay_s: float = 0.0
    off_list: float = 0.6
    fixed_by_correction: float = 0.6
    fixed_by_name: float = 0.75
    schema: str = "ignore"
    logprobs: bool = False
    label_logprob: float = -0.1
    hang: threading.Event = field(default_factory=threading.Event)
    hang_s: float = 60.0
    asked: Counter[str] = field(default_factory=Counter)  # requests per kind: first, correction, name
    _samples: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Reply:
        title = document_title(body)
        right = self.truth(title)
        fmt = body.get("response_format") or {}
        kind = self._kind(body)
        with self._lock:
            self.asked[kind] += 1
            self._samples[(title, kind)] += 1
            salt = kind if not body.get("temperature") else f"{kind}:{self._samples[(title, kind)]}"
        if fmt.get("type") == "json_schema" and self.schema == "refuse":
            return Reply.error(400, "response_format type 'json_schema' is not supported by this server")
        delay = self.hang_s if self.hang.is_set() else self.delay_s
        if fmt.get("type") == "json_schema" and self.schema == "honour":
            enum = fmt["json_schema"]["schema"]["properties"]["label"]["enum"]
            return self._json(right if right in enum else enum[0], body, delay)
        if kind == "first":
            wrong = draw(title, salt) < self.off_list
        elif kind == "correction":
            wrong = draw(title, salt) >= self.fixed_by_correction
        else:
            wrong = draw(title, salt) >= self.fixed_by_name
            return Reply.ok(f"I think it is about {title}." if wrong else f"{right}.", delay_s=delay)
        if not wrong:
            return self._json(right, body, delay)
        if draw(title, "form") < 0.5:  # the title as its label, as SmolLM2 often did
            return self._json(title, body, delay)
        return Reply.ok(f"This document is about {title.lower()}, {right.lower()} and more.", delay_s=delay)

    @staticmethod
    def _kind(body: dict[str, Any]) -> str:
        system = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system"), "")
        if str(system).startswith("You sort documents"):
            return "name"
        return "correction" if last_user_message(body).startswith("That answer cannot be used") else "first"

    def fixable(self, title: str, asked_before: int = 0) -> bool:
        """Whether the annotator's three prompts (first at temperature 0, then a correction and the name only at
        temperatures above 0, each asked ``asked_before`` times before) get a category for ``title``."""
        if draw(title, "first") >= self.off_list:
            return True
        return (draw(title, f"correction:{asked_before + 1}") < self.fixed_by_correction
                or draw(title, f"name:{asked_before + 1}") < self.fixed_by_name)

    def _json(self, label: str, body: dict[str, Any], delay: float) -> Reply:
        text = json.dumps({"label": label, "confidence": 0.9, "reason": "the text says so"})
        if not (self.logprobs and body.get("logprobs")):
            return Reply.ok(text, delay_s=delay)
        start = text.index(json.dumps(label)) + 1
        pairs, pos = [], 0
        for token in tokens(text):
            inside = pos < start + len(label) and pos + len(token) > start
            pairs.append((token, self.label_logprob if inside else -0.01))
            pos += len(token)
        return Reply.ok(text, delay_s=delay, logprobs=pairs)
