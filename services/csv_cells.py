"""Spreadsheet formulas in CSV cells: neutralised on export, restored on import (OWASP "CSV injection").

A spreadsheet opening a CSV runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula (and some
treat a leading tab or carriage return the same way), so a document title such as ``=HYPERLINK(...)`` or
``-2+3+cmd|' /C calc'!A0`` would run on the reader's machine. :func:`neutralise` writes such a cell with one
single quote in front, which spreadsheets show as text; :func:`restore` takes that quote off again, so a corpus
exported as CSV and imported back has the same titles, texts and labels.

The rule, exactly:

* a cell that starts with any number of ``'`` followed by one of ``= + - @ TAB CR`` gets one more ``'`` in front
  (``"=1+1"`` -> ``"'=1+1"``; ``"'=x"`` -> ``"''=x"``, so a value that already had a quote comes back as it was);
* except a plain number (``-5``, ``+3.25``, ``-1e-3``: optional sign, digits, optional decimals and exponent),
  which a spreadsheet reads as that number and which runs nothing: ``"-5"`` stays ``"-5"``, while
  ``"-5 degrees"`` becomes ``"'-5 degrees"``;
* :func:`restore` removes one ``'`` from a cell that starts with one or more ``'`` followed by one of those
  characters, and leaves every other cell alone, so ``restore(neutralise(v)) == v`` for every ``v``.

The import applies :func:`restore` to every CSV cell, whoever wrote the file: a cell that starts with ``'=``
(or ``'+``, ``'-``, ``'@``) is taken for a neutralised formula, as other tools that follow OWASP write them.
"""

from __future__ import annotations

import re

__all__ = ["FORMULA_STARTS", "neutralise", "restore"]

FORMULA_STARTS = "=+-@\t\r"
"""The first characters that make a spreadsheet read a cell as a formula."""

_NEEDS_QUOTE = re.compile(r"'*[=+\-@\t\r]")
_QUOTED = re.compile(r"'+[=+\-@\t\r]")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def neutralise(value: str) -> str:
    """``value`` as a CSV cell that no spreadsheet runs as a formula (see the module docstring)."""
    if _NEEDS_QUOTE.match(value) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def restore(value: str) -> str:
    """The value :func:`neutralise` was given for the cell ``value``: one leading ``'`` fewer when it precedes
    quotes and a formula character, else ``value`` itself."""
    return value[1:] if _QUOTED.match(value) else value
