"""JSON read from users' files: :func:`loads` (one document), :func:`json_lines` (JSON Lines: one JSON value per
line, blank lines skipped), and :func:`json_shape` with :func:`array_items` (a document whose list is read one item
at a time: a large JSON array is never held as Python objects whole). Each reader words its own errors.

Python's parser recurses once per array or object it enters, so a file of ``[`` x 100000 (or one field nested that
deep) ends in a ``RecursionError``, not a ``json.JSONDecodeError``: it escaped every reader's "invalid JSON" handling
as a traceback. :func:`loads` raises it as a ``json.JSONDecodeError`` located at the bracket where the nesting
passes :data:`MAX_SHOWN_DEPTH`, so every reader reports it like any other unreadable JSON, with its line and column.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

__all__ = ["MAX_SHOWN_DEPTH", "JSONShape", "JSONTooDeep", "array_items", "json_lines", "json_shape", "loads"]

#: The depth a too-deeply nested document is said to pass (Python's parser gives up somewhere under 1000 levels,
#: less when called from deep in the stack; no table, query or benchmark file nests more than a few levels).
MAX_SHOWN_DEPTH = 500

class JSONTooDeep(json.JSONDecodeError):
    """JSON nested deeper than the parser can follow (a ``json.JSONDecodeError``, so readers report it as such)."""


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)  # a string (skipped whole) or a bracket


def _too_deep_at(text: str, depth: int = MAX_SHOWN_DEPTH) -> tuple[int, int]:
    """``(offset, level)`` of the bracket in ``text`` that opens array or object level ``depth + 1``, or of the one
    that opens its deepest level when the text never gets that deep."""
    level, deepest, deepest_at = 0, 0, 0
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token in "[{":
            level += 1
            if level > deepest:
                deepest, deepest_at = level, m.start()
                if level > depth:
                    break
        elif token in "]}":
            level -= 1
    return deepest_at, deepest


def _too_deep(text: str) -> JSONTooDeep:
    at, level = _too_deep_at(text)
    how_deep = f"more than {MAX_SHOWN_DEPTH}" if level > MAX_SHOWN_DEPTH else str(level)
    return JSONTooDeep(f"arrays or objects nested {how_deep} levels deep", text, at)


def loads(text: str) -> Any:
    """``json.loads(text)``; JSON nested too deeply for the parser raises :class:`JSONTooDeep` (a
    ``json.JSONDecodeError``: message ``"arrays or objects nested more than 500 levels deep"``, ``lineno`` and
    ``colno`` of the bracket that passes that depth) instead of ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        pass  # the parser's frames are unwound here, so locating the bracket has the whole stack again
    raise _too_deep(text)


def json_lines(text: str) -> Iterator[tuple[int, Any, json.JSONDecodeError | None]]:
    """Every non-blank line of ``text`` as ``(line number from 1, value, None)``, or
    ``(line number, None, the decode error)`` when the line is not valid JSON (nested too deeply included: see
    :func:`loads`)."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, loads(line), None
        except json.JSONDecodeError as exc:
            yield lineno, None, exc



_WS = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as Python's decoder skips it
_DECODER = json.JSONDecoder()
CHUNK = 1 << 18
_LOOKAHEAD = 32  # a value read this near the buffer's end is read again with more: "1" of "1e-5", "0" of "0.5"
"""Characters read at a time by the streamed readers (an item longer than what is buffered makes them read more)."""


class _Located(json.JSONDecodeError):
    """A decode error found in a buffered part of a stream, located in the whole document."""

    def __init__(self, msg: str, pos: int, lineno: int, colno: int) -> None:
        ValueError.__init__(self, f"{msg}: line {lineno} column {colno} (char {pos})")
        self.msg, self.doc, self.pos, self.lineno, self.colno = msg, "", pos, lineno, colno


class _Reader:
    """A JSON document read from a text stream through a buffer that holds what is being decoded, not the whole
    document: the part before the current item is dropped as the reader moves on. Errors are located in the whole
    document (offset, line, column), as ``json.loads`` locates them."""

    def __init__(self, opener: Callable[[], IO[str]], chunk: int = CHUNK) -> None:
        self.opener, self.chunk = opener, max(1, chunk)
        self.stream = opener()
        self.buf, self.pos, self.base = "", 0, 0
        self.eof = False
        self.lines, self.line_start = 0, 0  # newlines before ``base``; offset after the last of them

    def close(self) -> None:
        self.stream.close()

    def more(self) -> bool:
        """Read more into the buffer (as much again as the part being decoded: long items cost no quadratic
        time); False at the end of the stream."""
        if self.eof:
            return False
        part = self.stream.read(max(self.chunk, len(self.buf) - self.pos))
        if not part:
            self.eof = True
            return False
        self.buf += part
        return True

    def drop(self) -> None:
        """Forget the buffer before the cursor (at an item's boundary), once it is larger than a chunk."""
        if self.pos <= self.chunk:
            return
        gone = self.buf[:self.pos]
        newlines = gone.count("\n")
        if newlines:
            self.lines += newlines
            self.line_start = self.base + gone.rindex("\n") + 1
        self.base += self.pos
        self.buf, self.pos = self.buf[self.pos:], 0

    def skip(self, n: int) -> None:
        """Move the cursor ``n`` characters on (to an offset found by an earlier reading)."""
        while True:
            have = len(self.buf) - self.pos
            if have >= n:
                self.pos += n
                return
            n -= have
            self.pos = len(self.buf)
            self.drop()
            if not self.more():
                return

    def ws(self) -> None:
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or not self.more():
                return

    def peek(self) -> str:
        while self.pos >= len(self.buf) and self.more():
            pass
        return self.buf[self.pos:self.pos + 1]

    def offset(self) -> int:
        return self.base + self.pos

    def error(self, msg: str, at: int | None = None) -> json.JSONDecodeError:
        at = self.pos if at is None else at
        before = self.buf.count("\n", 0, at)
        lineno = self.lines + before + 1
        colno = at - self.buf.rindex("\n", 0, at) if before else self.base + at - self.line_start + 1
        return _Located(msg, self.base + at, lineno, colno)

    def too_deep(self) -> json.JSONDecodeError:
        """Nested too deeply: located by reading the document whole (only on this error)."""
        with self.opener() as stream:
            return _too_deep(stream.read())

    def _decoded(self, decode: Callable[[], tuple[Any, int]]) -> Any:
        while True:
            try:
                value, end = decode()
            except json.JSONDecodeError as exc:
                if self.more():  # it may only be cut off by the buffer's end
                    continue
                raise self.error(exc.msg, exc.pos) from None
            except RecursionError:
                raise self.too_deep() from None
            if len(self.buf) - end < _LOOKAHEAD and self.more():  # a number may go on in what comes next
                continue
            self.pos = end
            return value

    def value(self) -> Any:
        """The value at the cursor, the cursor after it."""
        return self._decoded(lambda: _DECODER.raw_decode(self.buf, self.pos))

    def key(self) -> str:
        """The string at the cursor (its ``"``), the cursor after it."""
        return self._decoded(lambda: json.decoder.scanstring(self.buf, self.pos + 1))  # type: ignore[attr-defined]

    def opened(self, close: str) -> bool:
        """Past the ``[`` or ``{`` at the cursor: False when the array or object is empty (the cursor after its
        ``close``), True with the cursor on its first member."""
        self.pos += 1
        self.ws()
        if self.peek() == close:
            self.pos += 1
            return False
        return True

    def next_member(self, close: str) -> bool:
        """After a member: False at the ``close`` (the cursor after it), True past a ``,`` (the cursor on the next
        member); anything else is Python's "Expecting ',' delimiter"."""
        self.ws()
        nxt = self.peek()
        if nxt == close:
            self.pos += 1
            return False
        if nxt != ",":
            raise self.error("Expecting ',' delimiter")
        self.pos += 1
        self.ws()
        return True


def _items(r: _Reader) -> Iterator[Any]:
    """The values of the array whose ``[`` is at the cursor, one at a time; the cursor ends after its ``]``.
    Errors are ``json.JSONDecodeError`` at the places and with the messages of Python's own parser."""
    more = r.opened("]")
    while more:
        r.drop()
        yield r.value()
        more = r.next_member("]")


@dataclass
class JSONShape:
    """What :func:`json_shape` found: the top value's ``kind`` (``list``, ``object``, or the Python type name of any
    other value, as ``type(value).__name__``), an object's ``keys`` in order, and the arrays it may be read from:
    ``lists[None]`` for a top-level array, ``lists[key]`` for the array under ``key`` (the last one, as
    ``json.loads`` keeps it), each ``(offset of its "[", what the caller's ``gather`` gathered)``."""

    kind: str
    keys: list[str] = field(default_factory=list)
    lists: dict[str | None, tuple[int, Any]] = field(default_factory=dict)


def json_shape(opener: Callable[[], IO[str]], list_keys: Sequence[str] = (),
               gather: Callable[[], Callable[[Any], None]] | None = None, chunk: int = CHUNK) -> JSONShape:
    """Check that the text ``opener()`` streams is one JSON document, as ``json.loads`` would (the same errors, at
    the same line and column; nested too deeply: :class:`JSONTooDeep`), holding a buffer and one array item at a
    time, not the document: a top-level array, or an object's arrays under ``list_keys``, are walked item by item;
    anything else is decoded whole. For each such array, ``gather()`` makes a function that sees its items (e.g.
    to collect their fields); its result is kept in :attr:`JSONShape.lists`. Read the array's items with
    :func:`array_items`."""
    r = _Reader(opener, chunk)
    try:
        r.peek()
        if r.buf.startswith("\ufeff"):
            raise r.error("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0)

        def walk() -> tuple[int, Any]:
            start = r.offset()
            seen = gather() if gather is not None else None
            for item in _items(r):
                if seen is not None:
                    seen(item)
            return start, seen

        r.ws()
        first = r.peek()
        if first == "[":
            shape = JSONShape("list")
            shape.lists[None] = walk()
        elif first == "{":
            shape = JSONShape("object")
            _object(r, list_keys, walk, shape)
        else:
            shape = JSONShape(type(r.value()).__name__)
        r.ws()
        if r.peek() != "":
            raise r.error("Extra data")
        return shape
    finally:
        r.close()


def _object(r: _Reader, list_keys: Sequence[str], walk: Callable[[], tuple[int, Any]], shape: JSONShape) -> None:
    """Walk the object whose ``{`` is at the cursor into ``shape``; the cursor ends after its ``}``."""
    keys: dict[str, None] = {}
    more = r.opened("}")
    while more:
        if r.peek() != '"':
            raise r.error("Expecting property name enclosed in double quotes")
        key = r.key()
        keys.setdefault(key, None)
        r.ws()
        if r.peek() != ":":
            raise r.error("Expecting ':' delimiter")
        r.pos += 1
        r.ws()
        r.drop()
        if key in list_keys and r.peek() == "[":
            shape.lists[key] = walk()
        else:
            r.value()
            shape.lists.pop(key, None)  # a later value of the key replaces an earlier array, as in json.loads
        more = r.next_member("}")
    shape.keys = list(keys)


def array_items(opener: Callable[[], IO[str]], start: int, chunk: int = CHUNK) -> Iterator[Any]:
    """The items of the array whose ``[`` is at offset ``start`` of the text ``opener()`` streams (an offset from
    :func:`json_shape`, which checked the document), one at a time."""
    r = _Reader(opener, chunk)
    try:
        r.skip(start)
        r.peek()
        yield from _items(r)
    finally:
        r.close()
