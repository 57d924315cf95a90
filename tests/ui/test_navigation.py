"""The navigation's page list and titles, and every page's first call (``page_setup``), which
declares the navigation when Streamlit runs a page without the entry point (see the browser test)."""

from __future__ import annotations

import ast
from pathlib import Path

from ui.navigation import PAGES, page_title

ROOT = Path(__file__).resolve().parents[2]


def test_pages_list_every_page_file_in_order() -> None:
    files = sorted((ROOT / "pages").glob("*.py"), key=lambda p: int(p.name.split("_", 1)[0]))
    assert [path for path, _ in PAGES] == [f"pages/{p.name}" for p in files]


def test_page_titles_follow_streamlit_file_names() -> None:
    assert page_title("pages/4_Index.py") == "Index"
    assert page_title("pages/10_Reader.py") == "Reader"
    assert page_title("/srv/app/pages/3_Agreement_and_Export.py") == "Agreement and Export"


def test_every_page_starts_with_page_setup() -> None:
    for path, _ in PAGES:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        runs = [node for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom))
                and any(isinstance(n, ast.Call) for n in ast.walk(node))]  # statements that call anything
        first = runs[0]
        assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Call), path
        assert isinstance(first.value.func, ast.Name) and first.value.func.id == "page_setup", path
        assert isinstance(first.value.args[0], ast.Name) and first.value.args[0].id == "__file__", path
