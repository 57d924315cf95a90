"""A spinner shown at once, for a wait known to be long.

``st.spinner`` shows its message 0.5 s after its block starts (so that quick work does not flicker), and from a timer
thread: while another thread of the server holds the interpreter (the model warmed at start-up loads its weights),
that thread ran late and a page sat up to 1.7 s after its title with nothing said (Attention's model load, measured
in ``bench/demo_waits.py``). :func:`spinner_now` sends the same spinner before its block starts, from the page's own
thread, and takes it away when the block ends. Use it where the wait is known to take seconds (a model that is not
loaded yet); :func:`spinner_first` where it is long the first time a session does it (a figure of many maps) and
quick after; keep ``st.spinner`` where the work is often quick.

It draws Streamlit's own spinner element (a transient, as ``st.spinner`` does: it takes no place among the page's
elements) through the same internals ``st.spinner`` uses; Streamlit is pinned in requirements.txt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import streamlit as st
from streamlit.elements.lib.layout_utils import create_layout_config
from streamlit.errors import NoSessionContext
from streamlit.proto.Element_pb2 import Element
from streamlit.runtime.scriptrunner import enqueue_message
from streamlit.string_util import clean_text


@contextlib.contextmanager
def spinner_now(text: str, *, show_time: bool = False) -> Iterator[None]:
    """Show a spinner with ``text`` (Markdown, as ``st.spinner``'s) in the current container now, run the block,
    and take the spinner away when the block ends, however it ends. Outside a script run it only runs the block."""
    element = Element()
    element.spinner.text = clean_text(text)
    element.spinner.show_time = show_time
    try:
        # in the container a ``with`` block made current, laid out as st.spinner's
        create, clear = st._main._transient(element, create_layout_config(width="content", allow_content_width=True))
    except NoSessionContext:
        yield
        return
    enqueue_message(create())
    try:
        yield
    finally:
        enqueue_message(clear())


def spinner_first(key: str, text: str, *, show_time: bool = False) -> contextlib.AbstractContextManager[None]:
    """:func:`spinner_now` the first time this session reaches ``key`` (a page's first draw: cold caches, a server's
    first figure), ``st.spinner`` after that, where the same work is quick and a spinner sent at once would flash at
    every click."""
    seen = f"_spinner_seen_{key}"
    if st.session_state.get(seen):
        return st.spinner(text, show_time=show_time)
    st.session_state[seen] = True
    return spinner_now(text, show_time=show_time)
