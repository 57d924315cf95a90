"""Safe rendering of user data: everything from the corpus is HTML-escaped before display."""

from __future__ import annotations

import html
import re
from typing import Iterable


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


def md_plain(text: str) -> str:
    """``text`` with Markdown's special characters backslash-escaped, for data or LLM output inside a
    message that Streamlit renders as Markdown: it shows verbatim (no link, image, emphasis or HTML)."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$:])", r"\\\1", text or "")


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
