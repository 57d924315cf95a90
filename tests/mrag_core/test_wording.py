"""mrag_core.wording: counts with their noun in the right number."""

from __future__ import annotations

from mrag_core.wording import counted


def test_counted_singular_for_one_plural_otherwise() -> None:
    assert counted(1, "query", "queries") == "1 query"
    assert [counted(n, "query", "queries") for n in (0, 2)] == ["0 queries", "2 queries"]
    assert (counted(1, "aspect"), counted(5, "aspect")) == ("1 aspect", "5 aspects")
