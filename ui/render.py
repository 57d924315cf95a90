"""Safe rendering of user data: everything from the corpus is HTML-escaped before display."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

TITLES_BELOW_TOOLBAR = 64
"""Top margin (px) of a Plotly figure with subplot titles: Plotly draws its toolbar (modebar, about 28 px high) in
the figure's top right corner while the pointer is over the chart, and a subplot title sits in the 20 px just above
its plot; at a 40 px margin the toolbar covered the title of the top-right plot (Compare's "importance s_i",
Maps' fourth head)."""


def escape(text: str) -> str:
    """HTML-escape ``text`` (quotes too): no raw HTML from data ever reaches the page."""
    return html.escape(text or "", quote=True)


def plotly_text(text: str) -> str:
    """``text`` for a Plotly label (tick, legend, hover, cell text): Plotly reads its strings as rich text
    (``<a href>``, ``<b>``, ``<i>``, ``<br>`` and the entities ``&lt; &gt; &amp;``), so ``<``, ``>`` and ``&``
    are written as entities and the label shows verbatim. (The PNG export turns them back:
    :func:`ui.chart_export.plain_text`.)"""
    return html.escape(text or "", quote=False)


WORD_JOINER = "\u2060"
"""An invisible character of no width that never breaks a line (U+2060), put inside what would become a link."""

_AUTOLINK = re.compile(r"(?i)(?<![^\W_])(?:https?(?=://[-\w]*\.)|www(?=\.))|(?<=[-.\w+])@(?=[-\w]+\.[-\w])")
"""Where GitHub-flavoured Markdown makes a link of plain text: ``http://`` or ``https://`` before a host name with a
dot, ``www.``, and ``name@host.domain``; the match is the protocol, the ``www`` or the ``@``."""


def md_plain(text: str) -> str:
    """``text`` with Markdown's special characters backslash-escaped, for data or LLM output inside a
    message that Streamlit renders as Markdown: it shows verbatim (no link, image, emphasis or HTML).

    Streamlit's renderer also links plain URLs and e-mail addresses (GFM autolink literals), and it finds them in
    the text after the escapes are read, so a backslash cannot stop them: a word joiner (:data:`WORD_JOINER`,
    invisible) follows each ``http``/``https`` of a URL, ``www`` of ``www.`` and ``@`` of an address instead
    (``http://evil.example`` shows as it is written, as text)."""
    unlinked = _AUTOLINK.sub(lambda m: m.group(0) + WORD_JOINER, text or "")
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$:])", r"\\\1", unlinked)


def text_block(text: str) -> str:
    """``text`` as one HTML ``<div>`` that keeps its line breaks, for ``st.markdown(...,
    unsafe_allow_html=True)``: escaped, and with each line break written ``&#10;`` so the block has no
    blank line (a blank line would end the HTML block and let the rest be read as Markdown)."""
    return f"<div style='white-space: pre-wrap'>{escape(text).replace(chr(10), '&#10;')}</div>"


def highlight(text: str, keywords: Iterable[str], *, tag: str = "mark") -> str:
    """Escape ``text``, then wrap case-insensitive matches of ``keywords`` in ``<mark>``.

    Keywords are escaped and regex-quoted, so neither data nor keywords can inject markup.
    """
    safe = escape(text)
    words = sorted({escape(k.strip()) for k in keywords if k and k.strip()}, key=len, reverse=True)
    if not words:
        return safe
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    return pattern.sub(lambda m: f"<{tag}>{m.group(0)}</{tag}>", safe)


def paragraphs(text: str) -> str:
    """Escaped text with blank-line paragraphs turned into ``<p>`` blocks."""
    return "".join(f"<p>{escape(p)}</p>" for p in re.split(r"\n\s*\n", text or "") if p.strip())


CELL_PADDING_PX = 17
"""Horizontal padding (px) of a cell of ``st.dataframe``: 8.5 px either side of its text."""

CHAR_PX = 7.5
"""A generous mean width (px) of one character of ``st.dataframe``'s 14 px font (Source Sans): lower-case text
averages about 6.5 px, so a text this estimate finds fitting does fit."""


def fits_in_cell(text: str, width_px: int) -> bool:
    """Whether a one-line table cell ``width_px`` wide shows ``text`` whole (no cut, no fade):
    ``len(text) * CHAR_PX <= width_px - CELL_PADDING_PX``. E.g. 90 px holds 9 characters."""
    return len(text) * CHAR_PX <= width_px - CELL_PADDING_PX


def ranks_by_name(ranked: Iterable[tuple[int, str]]) -> list[tuple[str, list[int]]]:
    """The distinct non-blank names of ``(rank, name)`` pairs, in order of first appearance, each with its ranks
    in the given order: ``[(1, "a"), (2, "b"), (3, "a")]`` gives ``[("a", [1, 3]), ("b", [2])]``."""
    groups: dict[str, list[int]] = {}
    for rank, name in ranked:
        if name and name.strip():
            groups.setdefault(name, []).append(rank)
    return list(groups.items())


def full_names_html(heading: str, groups: Iterable[tuple[str, list[int]]]) -> str:
    """One HTML block naming each of ``groups`` (:func:`ranks_by_name`) in full after its ranks, for
    ``st.caption(..., unsafe_allow_html=True)`` under a table whose narrow column cuts the names:
    ``<div ...>Categories: <b ...>#1, #3</b>&nbsp;<span ...>a</span> · ...</div>``. Names are escaped; the block
    wraps inside its column, between words and, for a name without spaces, anywhere in it, never inside a group
    of ranks nor between the ranks and the name's first word, and keeps a gap to what follows (the next row's
    list heading)."""
    parts = [f"<b style='white-space: nowrap'>{', '.join(f'#{r}' for r in ranks)}</b>&nbsp;"
             f"<span class='full-name'>{escape(name)}</span>"
             for name, ranks in groups]
    return (f"<div class='full-names' style='overflow-wrap: anywhere; margin-bottom: 0.75rem'>{escape(heading)}: "
            + " · ".join(parts) + "</div>")


def shortened(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit - 1`` and "…", so a cut label says
    that it is cut: ``shortened("abcdef", 4) == "abc…"``."""
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + "…"
