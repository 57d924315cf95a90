"""The app's navigation: Home, then every page in ``pages/`` with its title, in order.

``app.py`` declares it (:func:`declare_navigation`) and runs the chosen page (:func:`run_page`). Every page starts with
:func:`page_setup`: its browser-tab title and icon, and, when Streamlit ran the page through its
``pages/``-folder mode, this navigation. Streamlit uses that mode while a ``pages/`` folder exists
and no ``st.navigation`` call has run yet in the server: a link to a page opened before the
entry point ever ran (a bookmark after a restart) runs the page without ``app.py``, and the
sidebar would list the entry point as "app" instead of "Home".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from ui.page_list import APP_NAME, PAGES, page_title

if TYPE_CHECKING:
    from streamlit.navigation.page import StreamlitPage


def declare_navigation() -> StreamlitPage:
    """Declare the app's pages (Home first, the default) and return the one the URL asks for."""
    from ui.home import home

    return st.navigation([st.Page(home, title="Home", default=True)]
                         + [st.Page(path, title=page_title(path)) for path, _ in PAGES])


def run_page(page: StreamlitPage) -> None:
    """Run the chosen page. A store error the page did not handle itself (another writer held the
    database past the busy timeout, a row someone else deleted meanwhile) ends the page with its
    message, escaped, instead of a traceback; nothing of the failed write was kept (one transaction)."""
    from services import storage
    from ui.render import md_plain

    try:
        page.run()
    except storage.StoreError as exc:
        st.error(md_plain(str(exc)))


def ran_through_pages_folder() -> bool:
    """True while Streamlit runs pages through its ``pages/``-folder mode (no ``st.navigation`` call
    has run in this server yet); the flag is Streamlit's own, cleared by ``st.navigation``."""
    from streamlit.runtime.pages_manager import PagesManager

    return bool(PagesManager.uses_pages_directory)


def page_setup(path: str, icon: str) -> None:
    """A page's first call: the tab title "<page> · MRAG Studio" (from the file name ``path``) and
    ``icon``. Under the ``pages/``-folder mode it declares the app's navigation and opens the page
    again through it, before anything is drawn: the sidebar reads "Home" from the first view on, and
    the page's first click is not lost (declaring the navigation without reopening lost it, in the
    browser test). The mode flag is Streamlit's internal ``PagesManager.uses_pages_directory``
    (streamlit is pinned in requirements.txt)."""
    if ran_through_pages_folder():
        declare_navigation()
        st.switch_page(path, query_params=st.query_params.to_dict())  # stops this run
    st.set_page_config(page_title=f"{page_title(path)} · {APP_NAME}", page_icon=icon, layout="wide")
