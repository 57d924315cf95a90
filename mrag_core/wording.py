"""Plain-English helpers for messages that carry counts."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` with the noun in the right number: ``counted(1, "query", "queries")`` is ``"1 query"``,
    ``counted(3, "aspect")`` is ``"3 aspects"`` (``plural`` defaults to ``singular + "s"``)."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
