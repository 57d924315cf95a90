"""JSON Lines: one JSON value per line, blank lines skipped. Each reader words its own errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def json_lines(text: str) -> Iterator[tuple[int, Any, json.JSONDecodeError | None]]:
    """Every non-blank line of ``text`` as ``(line number from 1, value, None)``, or
    ``(line number, None, the decode error)`` when the line is not valid JSON."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield lineno, None, exc
