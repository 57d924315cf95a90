"""MRAG Studio: the entry point. Run with ``streamlit run app.py``.

Declares the navigation (Home, then every page in ``pages/`` with its title, in order) and runs the
chosen page. Home is :func:`ui.home.home`; this file stays thin.
"""

from __future__ import annotations

import streamlit as st

from ui.home import PAGES, home, page_title

st.set_page_config(page_title="MRAG Studio", page_icon="🧭", layout="wide")
st.navigation([st.Page(home, title="Home", default=True)]
              + [st.Page(path, title=page_title(path)) for path, _ in PAGES]).run()
