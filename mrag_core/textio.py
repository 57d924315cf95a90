"""Reading uploaded text, for the engine's benchmark readers and the services' imports alike: turning bytes into
text (:func:`decode_bytes`), the CSV check for a quoted field never closed (:func:`check_csv_quotes`,
:func:`check_record_quotes`), and the located problems they report (:class:`ImportIssue`, :class:`IngestError`).

Turning uploaded bytes into text, saying which encoding was used and what was guessed.

Order of attempts: a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE); strict UTF-8;
BOM-less UTF-16 (detected from the pattern of NUL bytes in ASCII-heavy text, with a warning);
a CJK encoding (Shift_JIS, EUC-JP, GB18030, Big5, EUC-KR) when charset-normalizer finds the bytes read as one
of them and not as Windows-1252 (with a warning naming it); then Windows-1252 and finally Latin-1, each with a
warning naming the fallback. Binary data (known binary signatures such as PDF or ZIP, NUL bytes, many control
characters) gives an error instead of mojibake.

Shift_JIS text was read as Windows-1252 or Latin-1 mojibake (``東京`` as ``“Œ‹ž``) with only the fallback's
warning. A text's bytes seldom settle its encoding alone, so the guess is taken only where it is safe:

* charset-normalizer compares just Windows-1252 and the CJK encodings (the whole list of code pages guesses
  ``cp1250`` for French and turns ``crème`` into ``crčme``);
* a CJK reading counts only when Windows-1252 reads the bytes with too much mess to be text (charset-normalizer
  drops it): Western text whose accented letters happen to pair up as CJK characters stays Windows-1252;
* a reading with half-width katakana or private-use characters is refused: they are what Latin-1 symbols
  (``£``, ``½``) become in Shift_JIS, and are rare in real Japanese text.

A few bytes of capitals (``ÀÉÈÊ``) can still pass for two Korean syllables, and a short Chinese text can be taken
for Korean: every guess comes with a warning naming the encoding it read.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CJK_ENCODINGS",
    "ImportIssue",
    "IngestError",
    "Severity",
    "check_csv_quotes",
    "check_record_quotes",
    "cjk_encoding",
    "decode_bytes",
    "looks_binary",
]

Severity = Literal["error", "warning"]


class IngestError(ValueError):
    """A whole upload cannot be read (e.g. not JSON at all). Message is user-facing."""


@dataclass(frozen=True)
class ImportIssue:
    """A problem found while reading: ``source`` is the file it is in (``"data.csv"``; a member of an archive
    as ``member_source`` of the import names it, ``"notes.zip:physics/a.md"``), ``location`` where in that file
    (``"row 7"``, ``"line 3"``; empty for the whole file). An issue of no one file (``"upload"``) has only a
    ``location``; one found after reading (limits, duplicates, labels) is located at its record's ``source``.

    ``error`` means the row/file was not imported; ``warning`` means it was imported but
    something was guessed or dropped.
    """

    location: str
    message: str
    severity: Severity = "error"
    source: str = ""

    @classmethod
    def of_file(cls, source: str, message: str, severity: Severity = "error") -> ImportIssue:
        """An issue about the whole file ``source`` (no location inside it)."""
        return cls("", message, severity, source)

    @property
    def where(self) -> str:
        """The file and the place in it, as shown to the user: ``"data.csv row 7"``, ``"notes.zip:a.md"``,
        ``"data.csv"`` (the whole file), ``"row 7"`` (no file named)."""
        return " ".join(part for part in (self.source, self.location) if part)

    def __str__(self) -> str:
        return f"{self.severity.upper()} {self.where}: {self.message}"


_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "a PDF document; export its text first"),
    (b"PK\x03\x04", "a ZIP archive (or an Office document); upload it as a ZIP of .txt/.md files"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bz2 archive"),
    (b"\x7fELF", "a program"),
    (b"PAR1", "a Parquet file"),
    (b"\xd0\xcf\x11\xe0", "an old Office document; save it as plain text first"),
)

_CONTROL_OK = {0x09, 0x0A, 0x0C, 0x0D}

#: CJK encodings told apart from Windows-1252 (Python codec: name shown). cp932 is Windows' Shift_JIS (a superset),
#: cp949 Windows' EUC-KR.
CJK_ENCODINGS: dict[str, str] = {
    "cp932": "Shift_JIS (cp932)", "euc_jp": "EUC-JP", "gb18030": "GB18030 (GBK)", "big5": "Big5",
    "cp949": "EUC-KR (cp949)",
}
_NOT_CJK_TEXT = re.compile("[\uff61-\uff9f\ue000-\uf8ff]")  # half-width katakana, private use


def _utf16_without_bom(data: bytes) -> str | None:
    """``"utf-16-le"``/``"utf-16-be"`` when ``data`` looks like BOM-less UTF-16 text."""
    if len(data) < 4 or len(data) % 2:
        return None
    even, odd = data[0::2], data[1::2]
    n = len(even)
    nul_even, nul_odd = even.count(0) / n, odd.count(0) / n
    if nul_odd > 0.6 and nul_even < 0.05:
        return "utf-16-le"
    if nul_even > 0.6 and nul_odd < 0.05:
        return "utf-16-be"
    return None


def looks_binary(data: bytes) -> str | None:
    """A reason why ``data`` is not text (e.g. ``"a PDF document..."``), or None if it may be."""
    for sig, what in _SIGNATURES:
        if data.startswith(sig):
            return f"this is {what}, not a text file"
    sample = data[:65536]
    if b"\x00" in sample:
        return "the file contains NUL bytes: it looks binary, not text"
    if sample:
        ctrl = sum(1 for b in sample if b < 0x20 and b not in _CONTROL_OK)
        if ctrl / len(sample) > 0.05:
            return "the file contains many control characters: it looks binary, not text"
    return None


def cjk_encoding(data: bytes) -> str | None:
    """The CJK encoding (a key of :data:`CJK_ENCODINGS`) that ``data`` (not UTF-8) is written in, or None when it
    is not one or it cannot be told (see the module's notes)."""
    from charset_normalizer import from_bytes

    matches = from_bytes(data, cp_isolation=["cp1252", *CJK_ENCODINGS])
    best = matches.best()
    if best is None or best.encoding not in CJK_ENCODINGS or any(m.encoding == "cp1252" for m in matches):
        return None
    try:
        text = data.decode(best.encoding)
    except UnicodeDecodeError:  # charset-normalizer reads a large file by samples
        return None
    return None if _NOT_CJK_TEXT.search(text) else best.encoding


def decode_bytes(data: bytes, name: str) -> tuple[str | None, str, list[ImportIssue]]:
    """Decode an uploaded file.

    Returns ``(text, encoding, issues)``. On success ``text`` is a str and ``encoding`` the
    codec used (``"utf-8"``, ``"utf-8-sig"``, ``"utf-16-le"``, ``"cp932"``, ``"cp1252"``, ``"latin-1"``...);
    ``issues`` holds a warning (located at ``name``) when the encoding was a guess. When the
    data is binary, ``text`` is ``None``, ``encoding`` is ``""`` and ``issues`` holds one
    error explaining why. The BOM is never part of ``text``.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(codec.removesuffix("-sig")), codec, []
            except UnicodeDecodeError as exc:
                return None, "", [
                    ImportIssue(name, f"starts with a {codec} byte-order mark but is not valid {codec} "
                                      f"(byte {exc.start + len(bom)})", "error")
                ]
    guessed16 = _utf16_without_bom(data)
    if guessed16 is not None:
        try:
            text = data.decode(guessed16)
        except UnicodeDecodeError:
            pass
        else:
            return text, guessed16, [
                ImportIssue(name, f"no byte-order mark; read as {guessed16.upper()} (guessed)", "warning")
            ]
    reason = looks_binary(data)
    if reason is not None:
        return None, "", [ImportIssue(name, reason, "error")]
    try:
        return data.decode("utf-8"), "utf-8", []
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    cjk = cjk_encoding(data)
    if cjk is not None:
        return data.decode(cjk), cjk, [
            ImportIssue(name, f"not valid UTF-8 (first bad byte at offset {first_bad}); read as "
                              f"{CJK_ENCODINGS[cjk]}, detected from its bytes. Check the text, or save the file as "
                              "UTF-8", "warning")
        ]
    for codec, label in (("cp1252", "Windows-1252 (cp1252)"), ("latin-1", "Latin-1 (ISO-8859-1)")):
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        return text, codec, [
            ImportIssue(
                name,
                f"not valid UTF-8 (first bad byte at offset {first_bad}); read as {label}. "
                "Check accented characters, or save the file as UTF-8",
                "warning",
            )
        ]
    raise AssertionError("latin-1 decodes every byte string")  # pragma: no cover


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_UNCLOSED = 'a quoted field is never closed (a " without its closing ")'


def _counted_lines(text: str, read: list[int]) -> Iterator[str]:
    """The lines of ``text`` as :class:`csv.reader` reads them (a line break of any kind ends one); ``read[0]`` is
    kept at the number of characters handed out, where the reader's next record starts in ``text``."""
    offset = 0
    for line in io.StringIO(text, newline=""):
        offset += len(line)
        read[0] = offset
        yield line


_QUOTED = re.compile(r'"[^"]*+(?:""[^"]*+)*+"')  # a quoted value up to its closing quote ("" inside)


def _unclosed_quote(raw: str, delimiter: str) -> tuple[int, int | None] | None:
    """The quote that opens a value of the CSV record ``raw`` (its text as :class:`csv.reader` read it, quotes
    doubled inside quoted values) and is never properly closed: ``(its offset, None)`` when the value runs to
    the end of ``raw``, ``(its offset, offset of the quote taken as its closing one)`` when the value spans
    lines and that quote is followed by more text rather than a delimiter or the end of the line (a stray quote
    that swallowed the lines up to the next quote, which the lenient reader took as the closing one). None when
    every quoted value closes. Follows the reader: a quote opens a value only as its first character, and is
    plain text anywhere else in an unquoted value."""
    value_end = re.compile(f"[{re.escape(delimiter)}\r\n]")

    def end_of_value(i: int) -> int:
        m = value_end.search(raw, i)
        return m.start() if m else len(raw)

    i, n = 0, len(raw)
    while i < n:
        if raw[i] == '"':
            quoted = _QUOTED.match(raw, i)
            if quoted is None:
                return i, None
            closing = quoted.end() - 1
            after, i = closing + 1, end_of_value(closing + 1)
            if raw[after:i].strip() and _LINE_BREAK.search(raw, quoted.start(), closing):
                return quoted.start(), closing
        else:
            i = end_of_value(i)
        if i >= n or raw[i] != delimiter:
            return None  # the end of the record
        i += 1
    return None


def check_record_quotes(raw: str, first_line: int, delimiter: str, name: str) -> None:
    """Raise :class:`IngestError` naming the line where a quoted field of the record ``raw`` (read from line
    ``first_line`` on) starts when it is never closed (see :func:`_unclosed_quote`)."""
    found = _unclosed_quote(raw, delimiter)
    if found is None:
        return
    opening, closing = found

    def line_of(offset: int) -> int:
        return first_line + sum(1 for _ in _LINE_BREAK.finditer(raw, 0, offset))

    what = "the rest of the file would be read as one value" if closing is None else \
        f'the text from there to the " on line {line_of(closing)} would be read as one value'
    raise IngestError(f"{name}: line {line_of(opening)}: {_UNCLOSED}: {what}")


def check_csv_quotes(text: str, delimiter: str, name: str) -> None:
    """Raise :class:`IngestError` for the first record of the CSV ``text`` with a quoted field that is never
    closed, naming its line (what the document import's table reader checks as it reads; for other CSV readers,
    e.g. query tables). A record the csv module cannot read at all is left to the caller's reader."""
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    read = [0]
    reader = csv.reader(_counted_lines(text, read), delimiter=delimiter)
    last_start, last_line = 0, 1
    while True:
        start_line, start = reader.line_num + 1, read[0]
        try:
            next(reader)
        except StopIteration:
            break
        except csv.Error:
            return
        last_start, last_line = start, start_line
        if reader.line_num > start_line:
            check_record_quotes(text[start:read[0]], start_line, delimiter, name)
    check_record_quotes(text[last_start:], last_line, delimiter, name)
