"""``mrag_core.jsonlines.json_shape`` / ``array_items``: a JSON document read through a small buffer, one array item at
a time, agrees with ``json.loads`` on the whole text: the same verdict, the same error (message, line, column,
offset) for broken documents, the same items, keys and arrays for good ones, whatever the buffer's size."""

from __future__ import annotations

import io
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrag_core.jsonlines import JSONTooDeep, array_items, json_shape, loads

KEYS = ("documents", "rows")

scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=8)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=12)
rows = st.lists(st.dictionaries(st.sampled_from(["title", "text", "label", "x"]), values, max_size=4) | values,
                max_size=6)
documents = (rows
             | st.dictionaries(st.sampled_from([*KEYS, "meta", "name"]), rows | values, max_size=4)
             | scalars)


def _opener(text: str):  # noqa: ANN202
    return lambda: io.StringIO(text, newline="")


def _expected(text: str):  # noqa: ANN202
    """What json.loads says of ``text``: ("error", msg, lineno, colno, pos) or ("ok", kind, keys, {key: items})."""
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        return ("error", exc.msg, exc.lineno, exc.colno, exc.pos)
    if isinstance(value, list):
        return ("ok", "list", [], {None: value})
    if isinstance(value, dict):
        return ("ok", "object", list(value), {k: value[k] for k in KEYS if isinstance(value.get(k), list)})
    return ("ok", type(value).__name__, [], {})


def _streamed(text: str, chunk: int):  # noqa: ANN202
    try:
        shape = json_shape(_opener(text), KEYS, lambda: [].append, chunk=chunk)
    except json.JSONDecodeError as exc:
        return ("error", exc.msg, exc.lineno, exc.colno, exc.pos)
    lists = {}
    for key, (start, seen) in shape.lists.items():
        items = list(array_items(_opener(text), start, chunk=chunk))
        assert items == seen.__self__  # the second reading gives what the first one saw
        lists[key] = items
    return ("ok", shape.kind, shape.keys, lists)


def _mutated(text: str, rnd: random.Random) -> str:
    """``text`` broken (or not) at one place: a character deleted or inserted, or the text cut short."""
    if not text:
        return text
    at = rnd.randrange(len(text) + 1)
    how = rnd.choice(["delete", "insert", "cut"])
    if how == "delete":
        return text[:at] + text[at + 1:]
    if how == "insert":
        return text[:at] + rnd.choice('[]{},:"\\ x1\n') + text[at:]
    return text[:at]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, indent=st.sampled_from([None, 1, 2]), crlf=st.booleans(), chunk=st.integers(1, 40),
       seed=st.integers(0, 2**16), mutate=st.booleans())
def test_the_streamed_reading_agrees_with_json_loads(doc, indent, crlf, chunk, seed, mutate) -> None:  # noqa: ANN001
    text = json.dumps(doc, indent=indent)
    if crlf:
        text = text.replace("\n", "\r\n")
    text = f"  {text}\n"
    if mutate:
        text = _mutated(text, random.Random(seed))
    assert _streamed(text, chunk) == _expected(text)


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
@pytest.mark.parametrize(("text", "message"), [
    ('[{"a": 1}, {"b": 2}] [3]', "Extra data"),
    ('[{"a": 1}\n {"b": 2}]', "Expecting ',' delimiter"),
    ('{"documents": [1, 2,]}', "Expecting value"),
    ('{"documents": [1] "rows": []}', "Expecting ',' delimiter"),
    ('{"documents" [1]}', "Expecting ':' delimiter"),
    ('{"documents": [1],}', "Expecting property name enclosed in double quotes"),
    ('[1, 23', "Expecting ',' delimiter"),
    ('[1, "never closed]', "Unterminated string starting at"),
    ("\ufeff[1]", "Unexpected UTF-8 BOM (decode using utf-8-sig)"),
])
def test_broken_documents_are_refused_where_json_loads_refuses_them(text, message, chunk) -> None:  # noqa: ANN001
    expected = _expected(text)
    assert expected[:2] == ("error", message)
    assert _streamed(text, chunk) == expected


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_nesting_too_deep_inside_an_item_is_located_as_loads_locates_it(chunk) -> None:  # noqa: ANN001
    text = '[{"a": 1},\n {"b": ' + "[" * 100_000 + "]" * 100_000 + "}]"
    with pytest.raises(JSONTooDeep) as whole:
        loads(text)
    with pytest.raises(JSONTooDeep) as streamed:
        json_shape(_opener(text), KEYS, chunk=chunk)
    assert (streamed.value.msg, streamed.value.lineno, streamed.value.colno) == \
        (whole.value.msg, whole.value.lineno, whole.value.colno)


def test_numbers_and_literals_cut_by_the_buffer_are_read_whole() -> None:
    text = "[12345678, true, null, -0.5e-7, 98765]"
    assert list(array_items(_opener(text), 0, chunk=2)) == [12345678, True, None, -0.5e-7, 98765]


def test_the_last_array_under_a_repeated_key_is_the_one_read() -> None:
    text = '{"documents": [1], "x": {"documents": [9]}, "documents": [2, 3], "rows": [4], "rows": 5}'
    shape = json_shape(_opener(text), KEYS, chunk=4)
    assert shape.kind == "object" and shape.keys == ["documents", "x", "rows"]
    assert set(shape.lists) == {"documents"}  # rows: its last value is no array
    assert list(array_items(_opener(text), shape.lists["documents"][0], chunk=4)) == [2, 3]
