"""LLM pre-annotation: prompt, defensive parsing, and batch runs against a real fake endpoint."""

from __future__ import annotations

import threading
from typing import Callable

import pytest

from services.annotate.llm_annotator import (
    AnswerParseError,
    annotate_documents,
    build_messages,
    extract_json_object,
    llm_identity,
    match_label,
    parse_answer,
    parse_confidence,
    truncate_text,
    truncated_json_object,
)
from services.annotate.types import AnnotationDoc, CategorySpec
from services.llm.client import LLMClient
from tests.support.openai_server import FakeOpenAIServer, Reply, document_title, fake_openai, last_user_message

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
CATEGORIES = [
    CategorySpec("Sports", "games, athletes and competitions"),
    CategorySpec("Public Health", "disease, vaccines, hospitals"),
    CategorySpec("Finance", ""),
]


def _doc(key: int, title: str, text: str = "some text") -> AnnotationDoc:
    return AnnotationDoc(key=key, title=title, text=text)


# -- parsing ---------------------------------------------------------------------------


def test_plain_json_answer() -> None:
    parsed = parse_answer('{"label": "Sports", "confidence": 0.9, "reason": "a match report"}', CATEGORIES)
    assert (parsed.label, parsed.score, parsed.reason) == ("Sports", 0.9, "a match report")


def test_fenced_json_with_prose_and_think_block() -> None:
    raw = (
        "<think>maybe {not json} ... sports?</think>\nSure! Here is the answer:\n"
        '```json\n{"Label": "  public   health ", "confidence": "85%", "reason": "about\\nvaccines"}\n```\nThanks.'
    )
    parsed = parse_answer(raw, CATEGORIES)
    assert parsed.label == "Public Health"  # canonical spelling
    assert parsed.score == pytest.approx(0.85)
    assert parsed.reason == "about vaccines"  # one line


def test_first_decodable_object_is_used() -> None:
    assert extract_json_object('noise {broken: } then {"label": "Finance"} and {"label": "Sports"}') == {
        "label": "Finance"
    }
    assert extract_json_object("[1, 2] no object") is None


def test_malformed_answer_is_an_error_quoting_the_answer() -> None:
    with pytest.raises(AnswerParseError, match="no JSON object") as info:
        parse_answer("I think this is about Sports.", CATEGORIES)
    assert "I think this is about Sports." in str(info.value)


def test_answer_cut_at_the_token_limit_keeps_the_label_written_before_the_reason() -> None:
    # what SmolLM2-135M answered for a lighthouse article: it copied the article into "reason" until max_tokens
    raw = '```json\n{\n  "label": "sports",\n  "confidence": 0.5,\n  "reason": "The match at Wembley was the \\"final'
    parsed = parse_answer(raw, CATEGORIES)
    assert (parsed.label, parsed.score, parsed.reason) == ("Sports", 0.5, 'The match at Wembley was the "final...')
    cut = truncated_json_object(raw)
    assert cut is not None and cut.cut_key == "reason"


@pytest.mark.parametrize(
    ("raw", "members", "cut_key"),
    [
        ('{"label": "Finance", "confidence": 0.8,', {"label": "Finance", "confidence": 0.8}, None),
        # the number may be cut: "0.85" -> "0.8"
        ('{"label": "Finance", "confidence": 0.85', {"label": "Finance"}, None),
        ('{"label": "Finance", "reason": "ends in an escape \\', {"label": "Finance", "reason": "ends in an escape..."},
         "reason"),
        ('{"label": "Fin', {"label": "Fin..."}, "label"),
        ('{"label": "Finance", "ok": true', {"label": "Finance", "ok": True}, None),
    ],
)
def test_truncated_json_object_reads_the_complete_members(raw: str, members: dict, cut_key: str | None) -> None:
    cut = truncated_json_object(raw)
    assert cut is not None and (cut.members, cut.cut_key) == (members, cut_key)


@pytest.mark.parametrize("raw", ['{"label": "Finance"}', '{"label": "Finance"} trailing', "no object", '{"lab', "{"])
def test_truncated_json_object_is_none_for_closed_or_memberless_objects(raw: str) -> None:
    assert truncated_json_object(raw) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"label": "Fin', "cut off before its label is complete"),  # the label itself is cut
        ('{"confidence": 0.9, "reason": "long', "cut off before its label is complete"),
        ('{"lab', "cut off or malformed"),
        ('{"label": Finance}', "cut off or malformed"),
    ],
)
def test_cut_or_malformed_objects_say_so(raw: str, message: str) -> None:
    with pytest.raises(AnswerParseError, match=message):
        parse_answer(raw, CATEGORIES)


def test_raw_line_break_inside_a_string_is_accepted() -> None:
    parsed = parse_answer('{"label": "Finance", "reason": "two\nlines"}', CATEGORIES)  # a real line break: invalid JSON
    assert (parsed.label, parsed.reason) == ("Finance", "two lines")


@pytest.mark.parametrize("label", ["Weather", None, 3, "Sport"])
def test_invalid_label_is_an_error(label: object) -> None:
    import json

    with pytest.raises(AnswerParseError, match="no valid category"):
        parse_answer(json.dumps({"label": label, "confidence": 0.5}), CATEGORIES)


def test_match_label_is_case_and_whitespace_insensitive_only() -> None:
    assert match_label("public health", CATEGORIES) == "Public Health"
    assert match_label('"FINANCE"', CATEGORIES) == "Finance"
    assert match_label("PublicHealth", CATEGORIES) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.25, 0.25), (1, 1.0), (0, 0.0), ("0.4", 0.4), (85, 0.85), ("70%", 0.7), (-0.1, None), (250, None),
     ("high", None), (True, None), (None, None), (float("nan"), None)],
)  # fmt: skip
def test_parse_confidence(value: object, expected: float | None) -> None:
    result = parse_confidence(value)
    assert result == (pytest.approx(expected) if expected is not None else None)


def test_missing_confidence_still_ok_with_unknown_score() -> None:
    parsed = parse_answer('{"label": "Finance"}', CATEGORIES)
    assert (parsed.label, parsed.score, parsed.reason) == ("Finance", None, "")


# -- prompt ----------------------------------------------------------------------------


def test_prompt_lists_categories_document_and_format() -> None:
    messages = build_messages(_doc(1, "Cup final", "The team won 3-1."), CATEGORIES, char_budget=1000)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "- Sports: games, athletes and competitions" in user
    assert "- Finance\n" in user  # no dangling colon for a blank description
    assert "Document title: Cup final" in user and "The team won 3-1." in user
    assert '["Sports", "Public Health", "Finance"]' in user
    assert "truncated" not in user
    assert "JSON" in messages[0]["content"]


def test_long_text_is_truncated_with_a_note() -> None:
    text = "x" * 50 + "TAIL"
    assert truncate_text(text, 50) == "x" * 50 + "\n[... truncated: showing the first 50 of 54 characters]"
    user = build_messages(_doc(1, "", text), CATEGORIES, char_budget=50)[1]["content"]
    assert "TAIL" not in user and "first 50 of 54 characters" in user and "(untitled)" in user


# -- end to end against the fake endpoint ---------------------------------------------------

ANSWERS = {
    "good": '{"label": "Sports", "confidence": 0.9, "reason": "match report"}',
    "fenced": '```json\n{"label": "finance", "confidence": 0.6, "reason": "stocks"}\n```',
    "malformed": "Definitely Sports, no doubt.",
    "invalid": '{"label": "Weather", "confidence": 0.99, "reason": "rain"}',
}


def _by_title(body: dict) -> str:
    """The answer for the document, to every prompt about it (the first one and the re-asks alike)."""
    title = document_title(body)
    if title in ANSWERS:
        return ANSWERS[title]
    raise AssertionError(f"unexpected prompt: {last_user_message(body)[:200]}")


def test_annotate_documents_mixed_answers(fake_openai: Factory) -> None:
    server = fake_openai(_by_title)
    client = LLMClient(server.llm_config(max_retries=0))
    docs = [_doc(i, title) for i, title in enumerate(ANSWERS)]
    ticks: list[tuple[int, int]] = []
    result = annotate_documents(client, docs, CATEGORIES, limit=2, progress=lambda d, t: ticks.append((d, t)))
    agent, version = llm_identity("fake-model")
    assert [s.document_key for s in result] == [0, 1, 2, 3]
    assert all(s.agent == agent == "llm:fake-model" and s.model_version == version for s in result)
    good, fenced, malformed, invalid = result
    assert (good.status, good.label, good.score, good.reason, good.error) == ("ok", "Sports", 0.9, "match report", "")
    assert (fenced.status, fenced.label, fenced.score) == ("ok", "Finance", 0.6)
    # the prose answer names one category: read as such when the last re-ask asks for the name only
    assert (malformed.status, malformed.label, malformed.score) == ("ok", "Sports", None)
    assert malformed.reason == "[answered when asked again: asked for the name only at temperature 0.9]"
    assert (invalid.status, invalid.label) == ("failed", None)
    assert invalid.error.startswith("parse: no usable answer in 3 tries (the first prompt: answer names no valid "
                                    "category (label='Weather'")
    assert ticks[-1] == (4, 4) and len(ticks) == 4
    # good and fenced once; malformed and invalid three times each: first prompt, correction, name only
    assert len(server.requests) == 8
    first = [body for body in server.requests if body["temperature"] == 0.0]
    assert len(first) == 4 and all(body["response_format"]["type"] == "json_schema" for body in first)
    assert sorted(body["temperature"] for body in server.requests if body["temperature"]) == [0.5, 0.5, 0.9, 0.9]


def test_resume_skips_documents_already_done(fake_openai: Factory) -> None:
    server = fake_openai(_by_title)
    client = LLMClient(server.llm_config())
    docs = [_doc(i, title) for i, title in enumerate(ANSWERS)]
    result = annotate_documents(client, docs, CATEGORIES, limit=2, skip={0, 2, 3})
    assert [s.document_key for s in result] == [1]
    assert len(server.requests) == 1
    assert "Document title: fenced\n" in last_user_message(server.requests[0])


def test_cancel_returns_what_finished(fake_openai: Factory) -> None:
    cancel = threading.Event()

    def respond(body: dict) -> str:
        cancel.set()  # the user presses "stop" while the first request is answered
        return ANSWERS["good"]

    server = fake_openai(respond)
    client = LLMClient(server.llm_config())
    docs = [_doc(i, "good") for i in range(5)]
    result = annotate_documents(client, docs, CATEGORIES, limit=1, cancel=cancel)
    assert [(s.document_key, s.label) for s in result] == [(0, "Sports")]
    assert len(server.requests) == 1


def test_endpoint_errors_become_failed_suggestions(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.error(401, "invalid key"))
    client = LLMClient(server.llm_config(api_key="sk-secret-value-123456"))
    (suggestion,) = annotate_documents(client, [_doc(7, "good")], CATEGORIES)
    assert (suggestion.document_key, suggestion.status, suggestion.label) == (7, "failed", None)
    assert "401" in suggestion.error and "sk-secret" not in suggestion.error


def test_unusable_categories_are_rejected_before_any_request(fake_openai: Factory) -> None:
    server = fake_openai(_by_title)
    client = LLMClient(server.llm_config())
    with pytest.raises(ValueError, match="no categories"):
        annotate_documents(client, [_doc(1, "good")], [])
    with pytest.raises(ValueError, match="differ only in case"):
        annotate_documents(client, [_doc(1, "good")], [CategorySpec("Sports"), CategorySpec(" sports")])
    assert server.requests == []


def test_cache_replays_good_answers_and_retries_bad_ones(fake_openai: Factory) -> None:
    from services.llm.cache import MemoryCache

    server = fake_openai(_by_title)
    client = LLMClient(server.llm_config())
    cache = MemoryCache()
    docs = [_doc(0, "good"), _doc(1, "malformed")]
    first = annotate_documents(client, docs, CATEGORIES, cache=cache)
    second = annotate_documents(client, docs, CATEGORIES, cache=cache)
    assert first == second
    assert [s.status for s in second] == ["ok", "ok"]  # the prose answer's name, when asked for the name only
    assert len(cache) == 2  # the good answer and the name-only answer; the unparseable ones were not stored
    # first run: good once, malformed three times (the last re-ask gives its name); second run: malformed's first
    # prompt and its correction again (not stored: unusable), its name-only answer from the cache
    assert len(server.requests) == 4 + 2
