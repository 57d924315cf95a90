"""Reading an upload as a stream of text, so a large table is never held in memory whole.

A :class:`TextSource` opens the same file (bytes in memory, or a path on disk) as text as many times as a reader
needs (a delimiter sniffed from the start, then the rows; a table read for its preview, then again to import it),
each time a fresh stream: bz2 / gzip data is decompressed on the fly (refused past the size limit, and naming the
file when it is corrupt), and text in UTF-8 (with or without a byte-order mark) is decoded on the fly, once its
whole content has been checked to be valid UTF-8 (one pass that keeps nothing). Any other encoding (UTF-16 / UTF-32,
a legacy code page) goes through :func:`~mrag_core.textio.decode_bytes` as before: the file is decoded
whole, once, with the same guesses and warnings, and read from that text.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from mrag_core.textio import decode_bytes, looks_binary
from services.ingest.records import ImportIssue, IngestError, format_bytes

__all__ = ["BLOCK", "TableData", "TextSource", "binary_opener", "open_binary"]

#: Bytes read at a time.
BLOCK = 1 << 20
#: What a table is read from: its bytes, or the path of a file on disk.
TableData = bytes | Path
_SAMPLE = 65536
_OTHER_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def binary_opener(data: TableData) -> tuple[Callable[[], IO[bytes]], int]:
    """A function opening ``data`` as a fresh binary stream, and its size in bytes."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        buffer = bytes(data) if not isinstance(data, bytes) else data
        return (lambda: io.BytesIO(buffer)), len(buffer)
    path = Path(data)
    return (lambda: path.open("rb")), path.stat().st_size


class _Capped(io.RawIOBase):
    """The decompressed stream of ``inner``, refused (IngestError naming ``name``) once it exceeds ``cap`` bytes or
    turns out to be corrupt."""

    def __init__(self, inner: IO[bytes], name: str, kind: str, cap: int) -> None:
        self._inner, self._name, self._kind, self._cap, self._read = inner, name, kind, cap, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            chunk = self._inner.read(len(buffer))
        except (OSError, EOFError, ValueError) as exc:
            raise IngestError(f"{self._name}: looks {self._kind}-compressed but cannot be decompressed ({exc})") \
                from exc
        self._read += len(chunk)
        if self._read > self._cap:
            raise IngestError(f"{self._name}: decompresses to more than {format_bytes(self._cap)}, the upload limit")
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        self._inner.close()
        super().close()


def _decompressed(open_: Callable[[], IO[bytes]], name: str, cap: int) -> IO[bytes]:
    """``open_()``, decompressed on the fly when it starts with a bz2 or gzip signature."""
    raw = open_()
    head = raw.read(3)
    raw.seek(0)
    if head[:3] == b"BZh":
        return io.BufferedReader(_Capped(bz2.BZ2File(raw), name, "bz2", cap), BLOCK)
    if head[:2] == b"\x1f\x8b":
        return io.BufferedReader(_Capped(gzip.GzipFile(fileobj=raw), name, "gzip", cap), BLOCK)
    return raw


def open_binary(data: TableData, name: str, max_total_bytes: int) -> IO[bytes]:
    """``data`` as a binary stream, decompressed on the fly when it is bz2 or gzip data (a plain file or buffer is
    seekable, a decompressing stream is not). Raises IngestError when it is over ``max_total_bytes`` (compressed or
    not) or corrupt."""
    open_, size = binary_opener(data)
    if size > max_total_bytes:
        raise IngestError(f"{name}: the upload is {format_bytes(size)}, over the {format_bytes(max_total_bytes)} limit")
    return _decompressed(open_, name, max_total_bytes)


def _valid_utf8(stream: IO[bytes]) -> bool:
    """Whether the rest of ``stream`` is valid UTF-8 (read in blocks, nothing kept)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        while block := stream.read(BLOCK):
            decoder.decode(block)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


class TextSource:
    """An upload opened as text any number of times (:meth:`open`); ``issues`` says what was guessed about its
    encoding (as :func:`~mrag_core.textio.decode_bytes` words it). Raises IngestError (naming ``name``) when
    the file is too large, binary, or corrupt compressed data."""

    def __init__(self, data: TableData, name: str, max_total_bytes: int) -> None:
        open_binary(data, name, max_total_bytes).close()  # refused when too large
        self.name = name
        self.issues: list[ImportIssue] = []
        self._open = lambda: open_binary(data, name, max_total_bytes)
        self._text: str | None = None  # decoded whole: an encoding other than UTF-8
        with self._open() as stream:
            head = stream.read(_SAMPLE)
            if head.startswith(codecs.BOM_UTF8):
                self.encoding = "utf-8-sig"
            elif head.startswith(_OTHER_BOMS) or b"\x00" in head:  # UTF-16 / UTF-32, or binary: decode_bytes says
                self.encoding = ""
            else:
                reason = looks_binary(head)
                if reason is not None:
                    raise IngestError(f"{name}: {reason}")
                self.encoding = "utf-8"
        if self.encoding:
            with self._open() as stream:
                if not _valid_utf8(stream):
                    self.encoding = ""
        if not self.encoding:
            with self._open() as stream:
                whole = stream.read()
            text, encoding, issues = decode_bytes(whole, name)
            if text is None:
                raise IngestError(f"{name}: {issues[0].message}" if issues else f"{name}: cannot be decoded")
            self._text, self.encoding, self.issues = text, encoding, issues

    def open(self, newline: str | None = "") -> IO[str]:
        """A fresh text stream from the start (``newline`` as :func:`open`'s: ``""`` keeps line endings, for CSV)."""
        if self._text is not None:
            return io.StringIO(self._text, newline=newline)
        return io.TextIOWrapper(self._open(), encoding=self.encoding, newline=newline)

    def read(self) -> str:
        """The whole text (for formats read whole, such as JSON)."""
        if self._text is not None:
            return self._text
        with self.open() as stream:
            return stream.read()
