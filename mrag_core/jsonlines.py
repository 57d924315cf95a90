"""JSON read from users' files: :func:`loads` (one document) and :func:`json_lines` (JSON Lines: one JSON value per
line, blank lines skipped). Each reader words its own errors.

Python's parser recurses once per array or object it enters, so a file of ``[`` x 100000 (or one field nested that
deep) ends in a ``RecursionError``, not a ``json.JSONDecodeError``: it escaped every reader's "invalid JSON" handling
as a traceback. :func:`loads` raises it as a ``json.JSONDecodeError`` located at the bracket where the nesting
passes :data:`MAX_SHOWN_DEPTH`, so every reader reports it like any other unreadable JSON, with its line and column.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_SHOWN_DEPTH", "JSONTooDeep", "json_lines", "loads"]

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


def loads(text: str) -> Any:
    """``json.loads(text)``; JSON nested too deeply for the parser raises :class:`JSONTooDeep` (a
    ``json.JSONDecodeError``: message ``"arrays or objects nested more than 500 levels deep"``, ``lineno`` and
    ``colno`` of the bracket that passes that depth) instead of ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        pass  # the parser's frames are unwound here, so locating the bracket has the whole stack again
    at, level = _too_deep_at(text)
    how_deep = f"more than {MAX_SHOWN_DEPTH}" if level > MAX_SHOWN_DEPTH else str(level)
    raise JSONTooDeep(f"arrays or objects nested {how_deep} levels deep", text, at)


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
