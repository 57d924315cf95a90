"""Spreadsheet formulas in CSV cells: which cells get a leading quote, and that the import's restore undoes it."""

from __future__ import annotations

from itertools import product

import pytest

from services.csv_cells import FORMULA_STARTS, neutralise, restore


@pytest.mark.parametrize("value, written", [
    ("=SUM(A1:A3)", "'=SUM(A1:A3)"),
    ("+1+1", "'+1+1"),
    ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"),
    ("-5 degrees", "'-5 degrees"),
    ("- a bullet", "'- a bullet"),
    ("'=already quoted", "''=already quoted"),  # one more quote, so restore gives it back as it was
    ("''@x", "'''@x"),
    # a plain number is read as that number by a spreadsheet and runs nothing: left as it is
    ("-5", "-5"),
    ("+3.25", "+3.25"),
    ("-1e-3", "-1e-3"),
    ("-.5", "-.5"),
    # nothing that starts otherwise changes
    ("Mars", "Mars"),
    ("a=b", "a=b"),
    ("'quoted text", "'quoted text"),
    (" =1", " =1"),
    ("", ""),
])
def test_formula_cells_get_one_leading_quote(value: str, written: str) -> None:
    assert neutralise(value) == written
    assert restore(written) == value


def test_a_quote_written_by_another_tool_is_taken_off_too() -> None:
    assert restore("'-5") == "-5" and restore("'=1") == "=1" and restore("'text") == "'text"


def test_restore_undoes_neutralise_for_every_short_value() -> None:
    """Every string of up to four characters over the characters that matter (the formula starts, the quote,
    digits, a sign's neighbours): the written cell never starts a formula unless it is a plain number, and
    restore gives the value back."""
    alphabet = FORMULA_STARTS + "'5.e a"
    for n in range(5):
        for chars in product(alphabet, repeat=n):
            value = "".join(chars)
            written = neutralise(value)
            assert restore(written) == value, value
            if written[:1] and written[0] in FORMULA_STARTS:
                assert written == value and float(value) == float(value), value  # a plain number, left alone
