"""MRAG Studio: the entry point. Run with ``streamlit run app.py``.

Declares the navigation (Home, then every page in ``pages/`` with its title, in order) and runs the
chosen page (:mod:`ui.navigation`). Home is :func:`ui.home.home`; this file stays thin.
"""

from __future__ import annotations

import streamlit as st

from ui.navigation import APP_NAME, declare_navigation, run_page

st.set_page_config(page_title=APP_NAME, page_icon="🧭", layout="wide")
run_page(declare_navigation())
