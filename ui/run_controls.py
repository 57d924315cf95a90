"""Controls shared by the pages that run long work in the script itself (query generation, evaluation)."""

from __future__ import annotations

from typing import Any

import streamlit as st


def stop_button(key: str, help: str) -> Any:
    """A Stop button shown while a run works; returns its ``st.empty`` slot, to be emptied when the run ends.

    Any click reruns the page, and Streamlit stops the running script at its next progress update; what the
    run stored before that is kept, and the page offers Resume."""
    slot = st.empty()
    slot.button("Stop", key=key, help=help)
    return slot
