"""The browser's chart code, fetched while a session's first page is still working.

Streamlit's browser side loads its Plotly code only when a page first draws a chart. On a busy server that took
seconds after the page had finished (bench/demo_waits.py: Maps 12.9 s, Attention 5.9 s of grey chart placeholders
with no text). :func:`preloading_charts` draws one tiny empty, transparent Plotly chart at the foot of the sidebar
on a session's first page run, so the browser fetches and compiles that code while the server is still importing
and loading models, and takes the chart away when the run ends: the page's own charts are then drawn at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st

#: The session flag: the chart code was asked for once in this browser tab.
PRELOADED = "_chart_code_preloaded"


def empty_figure() -> Any:
    """A 10-pixel Plotly figure with nothing on it: no trace, no axes, no background."""
    import plotly.graph_objects as go

    hidden = {"visible": False, "fixedrange": True}
    return go.Figure(layout={"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}, "xaxis": hidden,
                             "yaxis": hidden, "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)",
                             "showlegend": False})


@contextmanager
def preloading_charts() -> Iterator[None]:
    """Around a page run: on the session's first, the empty chart is shown in the sidebar meanwhile, and removed
    when the run ends (however it ends). Later runs draw nothing."""
    if st.session_state.get(PRELOADED):
        yield
        return
    st.session_state[PRELOADED] = True
    slot = st.sidebar.empty()
    slot.plotly_chart(empty_figure(), config={"displayModeBar": False, "staticPlot": True})
    try:
        yield
    finally:
        slot.empty()
