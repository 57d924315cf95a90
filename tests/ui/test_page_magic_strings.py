"""A bare string in a page script is drawn on the page: Streamlit's "magic" writes every top-level expression
statement that is a string (all but the module docstring) as Markdown. The Attention page showed "The largest *Max
tokens*: longer maps get slow to draw." under its title, an attribute docstring meant for the code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.apptest import no_exceptions
from tests.support.tiny_models import tiny_bert_folder

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([ROOT / "app.py", *(ROOT / "pages").glob("*.py")])


def stray_strings(path: Path) -> list[tuple[int, str]]:
    """(line, start of the text) of every top-level string statement of ``path`` but its module docstring."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return [(node.lineno, node.value.value[:60]) for i, node in enumerate(body)
            if i > 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)]


def test_stray_strings_finds_an_attribute_docstring(tmp_path) -> None:
    script = tmp_path / "page.py"
    script.write_text('"""Module docstring."""\nLIMIT = 5\n"""Shown on the page."""\nx = "not a statement"\n')
    assert stray_strings(script) == [(3, "Shown on the page.")]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_page_script_has_a_string_that_magic_would_draw(script: Path) -> None:
    assert stray_strings(script) == []


@pytest.mark.usefixtures("fresh_env")
def test_the_attention_page_draws_no_note_meant_for_the_code(tmp_path, monkeypatch) -> None:
    import torch

    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    lm = load_model(str(tiny_bert_folder(tmp_path / "bert", 64)), attn_implementation="eager", device="cpu")
    monkeypatch.setattr("ui.state.get_model", lambda name="minilm", attn_implementation="sdpa": lm)
    at = AppTest.from_file(str(ROOT / "pages" / "6_Attention.py"), default_timeout=60).run()
    at.radio(key="attn_source").set_value("Type a text").run()
    no_exceptions(at)
    texts = [m.value for m in at.markdown]
    assert texts and all(t.startswith("**") for t in texts), texts  # only the two heatmaps' bold titles
