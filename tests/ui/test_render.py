"""ui.render: data and LLM text reach the page as text, never as HTML or Markdown."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from ui.render import md_plain, text_block

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
