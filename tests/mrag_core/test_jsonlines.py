"""JSON Lines: blank lines skipped, line numbers kept, a bad line reported without stopping the rest."""

from __future__ import annotations

from mrag_core.jsonlines import json_lines


def test_values_line_numbers_and_errors() -> None:
    out = list(json_lines('{"a": 1}\n\n   \n[2, 3]\n{bad\n"x"'))
    assert [(n, v) for n, v, e in out if e is None] == [(1, {"a": 1}), (4, [2, 3]), (6, "x")]
    (lineno, value, err), = [o for o in out if o[2] is not None]
    assert (lineno, value) == (5, None)
    assert err.msg.startswith("Expecting property name")


def test_empty_text_yields_nothing() -> None:
    assert list(json_lines("")) == [] and list(json_lines("\n \n")) == []
