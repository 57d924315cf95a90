"""The navigation's page list and titles, and every page's first call (``page_setup``), which
declares the navigation when Streamlit runs a page without the entry point (see the browser test)."""

from __future__ import annotations

import ast
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.page_list import PAGES, page_title

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
        if isinstance(first, ast.Expr) and getattr(first.value.func, "id", None) == "open_through_app":
            first = runs[1]  # a model-backed page reopens itself through the app before its imports
        assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Call), path
        assert isinstance(first.value.func, ast.Name) and first.value.func.id == "page_setup", path
        assert isinstance(first.value.args[0], ast.Name) and first.value.args[0].id == "__file__", path


def _page_failing_with(kind: str) -> None:
    """A page that draws a line, then fails with a store error (or another one), run by ``run_page``."""
    import streamlit as st

    import db
    from ui.navigation import run_page

    class Page:
        title = "Failing"

        def run(self) -> None:
            st.write("drawn before the failure")
            if kind == "busy":
                raise db.BusyError("another writer held the database for 10 s; nothing was written, try again")
            if kind == "gone":
                raise db.NotFoundError("Corpus", "<b>News</b>")
            raise RuntimeError("a bug")

    run_page(Page())


def test_run_page_shows_a_store_error_as_a_message() -> None:
    at = AppTest.from_function(_page_failing_with, args=("busy",), default_timeout=60).run()
    assert not at.exception
    assert at.markdown[0].value == "drawn before the failure"
    assert [e.value for e in at.error] == [
        r"another writer held the database for 10 s; nothing was written, try again"]
    at = AppTest.from_function(_page_failing_with, args=("gone",), default_timeout=60).run()
    assert not at.exception
    assert at.error[0].value == r"Corpus '\<b\>News\</b\>' does not exist \(it may have been deleted\)\."


def test_run_page_lets_other_errors_through() -> None:
    at = AppTest.from_function(_page_failing_with, args=("bug",), default_timeout=60).run()
    assert at.exception and "a bug" in at.exception[0].value and not at.error



def _page_drawing(text: str) -> None:
    from ui.navigation import run_page

    class Page:
        title = "Drawn"

        def run(self) -> None:
            import streamlit as st

            st.markdown(text)
            if text == "fail":
                raise RuntimeError("a bug")

    run_page(Page())


def test_a_sessions_first_page_run_takes_its_chart_preload_away_when_it_ends() -> None:
    """The empty chart that makes the browser fetch its chart code (ui/chart_preload.py) is asked for on the
    session's first run only, and no chart is left in the sidebar or the page after any run, even a failed one."""
    from ui.chart_preload import PRELOADED, empty_figure

    at = AppTest.from_function(_page_drawing, args=("hello",), default_timeout=60)
    assert PRELOADED not in at.session_state
    at.run()
    assert not at.exception and at.session_state[PRELOADED] is True
    assert at.get("plotly_chart") == [] and at.sidebar.get("plotly_chart") == []
    assert at.markdown[0].value == "hello"
    at.run()
    assert at.get("plotly_chart") == [] and at.sidebar.get("plotly_chart") == []
    failed = AppTest.from_function(_page_drawing, args=("fail",), default_timeout=60).run()
    assert failed.exception and failed.sidebar.get("plotly_chart") == []
    figure = empty_figure()
    assert (figure.layout.height, figure.layout.xaxis.visible, figure.layout.yaxis.visible, len(figure.data)) == (
        10, False, False, 0)
