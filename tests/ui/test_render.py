"""ui.render: data and LLM text reach the page as text, never as HTML or Markdown."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from ui.chart_export import plain_text
from ui.render import md_plain, plotly_text, text_block

MD = MarkdownIt("commonmark")  # the CommonMark rules Streamlit's renderer follows (raw HTML passes through)


def test_md_plain_renders_every_markdown_construct_verbatim() -> None:
    text = "**Big** _it_ [win](http://h/t) ![px](http://h/p.png) `code` # h <b>x</b> 1. ~x~ a|b $x$"
    html = MD.render(md_plain(text))
    assert html == f"<p>{text.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')}</p>\n"


def test_text_block_keeps_line_breaks_and_stays_one_html_block() -> None:
    story = "First line with *stars*\n\n![px](http://h/p.png) after a blank line\n  \n<script>x</script>"
    block = text_block(story)
    assert "\n" not in block  # a blank line would end the HTML block
    html = MD.render(block)
    assert html.strip() == block  # passed through as raw HTML: no Markdown read inside it
    assert "<img" not in html and "<script>" not in html and "<em>" not in html
    assert re.sub(r"&#10;", "\n", block).count("\n") == story.count("\n")


def test_plotly_text_hides_plotly_rich_text_and_the_png_export_turns_it_back() -> None:
    raw = '<a href="https://h/x">click</a> <b>AT&T</b> &lt; <br> 3 > 2'
    shown = plotly_text(raw)
    assert shown == ('&lt;a href="https://h/x"&gt;click&lt;/a&gt; &lt;b&gt;AT&amp;T&lt;/b&gt; &amp;lt; &lt;br&gt; '
                     '3 &gt; 2')
    assert "<" not in shown and ">" not in shown  # no tag left for Plotly to read
    assert plain_text(shown) == raw  # the PNG export (matplotlib) shows the same text


def test_md_plain_puts_a_word_joiner_where_a_bare_url_or_address_would_become_a_link() -> None:
    """Streamlit links bare URLs and addresses (GFM autolink literals) after reading the escapes: the invisible
    U+2060 after 'http(s)' of a dotted host, 'www' of 'www.' and the '@' of an address keeps them text."""
    j = "\u2060"
    assert md_plain("see http://evil.example/a") == f"see http{j}\\://evil\\.example/a"
    assert md_plain("HTTPS://x.y") == f"HTTPS{j}\\://x\\.y"
    assert md_plain("www.evil.example") == f"www{j}\\.evil\\.example"
    assert md_plain("mail bob@evil.example") == f"mail bob@{j}evil\\.example"
    # not linked by the renderer, left as they are: no dot in the host, 'www' inside a word, a lone '@'
    assert md_plain("http://h/t awww.x @home") == "http\\://h/t awww\\.x @home"
