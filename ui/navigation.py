"""The app's navigation: Home, then every page in ``pages/`` with its title, in order.

``app.py`` declares it (:func:`declare_navigation`) and runs the chosen page (:func:`run_page`). Every page starts with
:func:`page_setup`: its browser-tab title and icon, and, when Streamlit ran the page through its
``pages/``-folder mode, this navigation. Streamlit uses that mode while a ``pages/`` folder exists
and no ``st.navigation`` call has run yet in the server: a link to a page opened before the
entry point ever ran (a bookmark after a restart) runs the page without ``app.py``, and the
sidebar would list the entry point as "app" instead of "Home".
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import streamlit as st

from ui.page_list import APP_NAME, PAGES, page_title
from ui.spinners import spinner_first

if TYPE_CHECKING:
    from streamlit.navigation.page import StreamlitPage


def home() -> None:
    """Home (:func:`ui.home.home`), imported when it is shown: its module imports the store, which a page's first
    run should not wait for before it can say what it is opening."""
    from ui.home import home as draw  # the landing page's own module imports PAGES from here

    draw()


def declare_navigation() -> StreamlitPage:
    """Declare the app's pages (Home first, the default) and return the one the URL asks for."""
    return st.navigation([st.Page(home, title="Home", default=True)]
                         + [st.Page(path, title=page_title(path)) for path, _ in PAGES])


_opening = threading.local()
"""The spinner :func:`run_page` shows while the page's script starts (this thread's script run), until
:func:`page_setup` (the page's first call, once its imports are done) or the page's end closes it."""


def _close_opening() -> None:
    spinner: Any = getattr(_opening, "spinner", None)
    _opening.spinner = None
    if spinner is not None:
        spinner.__exit__(None, None, None)


def run_page(page: StreamlitPage) -> None:
    """Run the chosen page, after starting the server's background work: the default model loaded (once per server,
    :func:`ui.model_cache.warm_default_model`), the demo index's UMAP maps (:mod:`ui.background`).
    A page's first run imports its libraries (torch, Plotly) before it draws anything: a spinner saying which page
    opens shows meanwhile, instead of a blank main area.

    A store error the page did not handle itself (another writer held the database past the busy timeout, a row
    someone else deleted meanwhile) ends the page with its message, escaped, instead of a traceback; nothing of the
    failed write was kept (one transaction)."""
    _close_opening()
    # at once on the session's first run of the page (its imports, on a server's first run: seconds); on later runs
    # after 0.5 s, as st.spinner
    _opening.spinner = spinner_first(f"open:{page.title}", f"Opening {page.title}…")
    _opening.spinner.__enter__()
    try:
        from ui.model_cache import warm_default_model

        warm_default_model()  # first: the model loads while the rest is imported
        from services import storage
        from ui.background import start_background_work
        from ui.render import md_plain

        start_background_work()  # the demo index's UMAP maps, when wanted
        from ui.chart_preload import preloading_charts

        with preloading_charts():  # the browser fetches its chart code meanwhile
            try:
                page.run()
            except storage.StoreError as exc:
                st.error(md_plain(str(exc)))
    finally:
        _close_opening()


def ran_through_pages_folder() -> bool:
    """True while Streamlit runs pages through its ``pages/``-folder mode (no ``st.navigation`` call
    has run in this server yet); the flag is Streamlit's own, cleared by ``st.navigation``."""
    from streamlit.runtime.pages_manager import PagesManager

    return bool(PagesManager.uses_pages_directory)


def open_through_app(path: str) -> None:
    """A page's first line, before its own imports: under the ``pages/``-folder mode (a link to a page opened
    before the entry point ever ran in this server, see :func:`page_setup`) declare the app's navigation and open
    the page again through it, at once. The page's imports (torch, Plotly: seconds on a server's first run) then
    run inside :func:`run_page`, under its spinner, instead of before anything can be drawn."""
    if ran_through_pages_folder():
        declare_navigation()
        st.switch_page(path, query_params=st.query_params.to_dict())  # stops this run


def page_setup(path: str, icon: str) -> None:
    """A page's first call after its imports: the tab title "<page> · MRAG Studio" (from the file name ``path``) and
    ``icon``. Under the ``pages/``-folder mode it declares the app's navigation and opens the page
    again through it, before anything is drawn: the sidebar reads "Home" from the first view on, and
    the page's first click is not lost (declaring the navigation without reopening lost it, in the
    browser test). The mode flag is Streamlit's internal ``PagesManager.uses_pages_directory``
    (streamlit is pinned in requirements.txt)."""
    _close_opening()  # the page's imports are done: it draws from here on
    if ran_through_pages_folder():
        declare_navigation()
        st.switch_page(path, query_params=st.query_params.to_dict())  # stops this run
    st.set_page_config(page_title=f"{page_title(path)} · {APP_NAME}", page_icon=icon, layout="wide")
