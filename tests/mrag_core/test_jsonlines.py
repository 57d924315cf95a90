"""JSON Lines: blank lines skipped, line numbers kept, a bad line reported without stopping the rest; JSON nested too
deeply for the parser is a decode error located at its bracket, not a RecursionError."""

from __future__ import annotations

import json

import pytest

from mrag_core.jsonlines import JSONTooDeep, json_lines, loads


def test_values_line_numbers_and_errors() -> None:
    out = list(json_lines('{"a": 1}\n\n   \n[2, 3]\n{bad\n"x"'))
    assert [(n, v) for n, v, e in out if e is None] == [(1, {"a": 1}), (4, [2, 3]), (6, "x")]
    (lineno, value, err), = [o for o in out if o[2] is not None]
    assert (lineno, value) == (5, None)
    assert err.msg.startswith("Expecting property name")


def test_empty_text_yields_nothing() -> None:
    assert list(json_lines("")) == [] and list(json_lines("\n \n")) == []


def test_json_nested_too_deeply_is_a_decode_error_at_the_bracket_passing_500_levels() -> None:
    # '"[[["' is a string (its brackets do not count); the object on line 2 is level 2, its list's 499th "[" level 501
    text = '["[[[",\n {"a": ' + "[" * 100_000 + "]" * 100_000 + "}]"
    with pytest.raises(JSONTooDeep) as exc:
        loads(text)
    assert isinstance(exc.value, json.JSONDecodeError)
    assert (exc.value.lineno, exc.value.colno) == (2, 7 + 499)
    assert exc.value.msg == "arrays or objects nested more than 500 levels deep"
    value = loads("[" * 400 + "]" * 400)  # deep, but readable: read
    for _ in range(399):
        (value,) = value
    assert value == []


def test_a_jsonl_line_nested_too_deeply_is_an_error_of_that_line_only() -> None:
    out = list(json_lines('{"a": 1}\n' + '{"a": ' * 50_000 + "\n[2]"))
    assert [(n, v) for n, v, e in out if e is None] == [(1, {"a": 1}), (3, [2])]
    ((lineno, value, err),) = [o for o in out if o[2] is not None]
    # each '{"a": ' is 6 characters: the 501st starts at column 6 * 500 + 1
    assert (lineno, value, err.colno, err.msg) == (2, None, 3001, "arrays or objects nested more than 500 levels deep")
