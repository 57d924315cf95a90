"""The one key by which names are compared: category names and labels (:func:`fold_name`), and, with ``_`` read as a
space, document titles and topic names in query files.

Two names with the same key look the same to a reader, so they are one category: pre-annotation refuses categories
whose keys clash, an import spells a label as the first label of its key, and a query's topic finds a title of its
key. The key merges what a reader cannot see or does not read as a difference:

* compatibility forms (Unicode NFKC): full-width ``ＰＨＹＳＩＣＳ``, the ligature ``ﬁ``, a no-break space;
* invisible characters: format characters (Unicode category Cf: zero-width space, joiners, direction marks, soft
  hyphen, byte-order mark, tags) and the other default-ignorable ones (variation selectors, the combining grapheme
  joiner, Hangul fillers), so ``phys\\u200bics`` is ``physics``;
* spacing: runs of whitespace are one space, none at either end;
* case (Unicode case folding: ``Straße`` is ``strasse``).
"""

from __future__ import annotations

import unicodedata

__all__ = ["drop_invisible", "fold_name", "fold_topic", "is_invisible"]

# Default-ignorable code points outside category Cf (Unicode's DerivedCoreProperties: Default_Ignorable_Code_Point).
_IGNORABLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong / jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors (U+180E is Cf)
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # half-width Hangul filler
    (0xE0100, 0xE01EF),  # variation selectors supplement
)


def is_invisible(ch: str) -> bool:
    """Whether the character ``ch`` draws nothing: a format character (category Cf) or another default-ignorable
    one."""
    if unicodedata.category(ch) == "Cf":
        return True
    code = ord(ch)
    return any(low <= code <= high for low, high in _IGNORABLE_RANGES)


def drop_invisible(text: str) -> str:
    """``text`` without its invisible characters (:func:`is_invisible`)."""
    return "".join(ch for ch in text if not is_invisible(ch))


def fold_name(name: str) -> str:
    """The comparison key of a category name or label: NFKC, invisible characters dropped, whitespace runs as one
    space (none at the ends), case folded. ``'Physics'``, ``' physics '``, ``'PHYSICS'``, ``'phys\\u200bics'`` and
    ``'ｐｈｙｓｉｃｓ'`` all fold to ``'physics'``; names that fold alike cannot be told apart."""
    visible = drop_invisible(unicodedata.normalize("NFKC", name))
    return " ".join(unicodedata.normalize("NFKC", visible.casefold()).split())


def fold_topic(name: str) -> str:
    """The loose comparison key of a document title or a topic name in a query file: :func:`fold_name` with ``_``
    read as a space (the legal / accident layout names a topic ``contract_breach``, a query may say ``contract
    breach``)."""
    return " ".join(fold_name(name).replace("_", " ").split())
