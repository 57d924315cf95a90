"""``ui.spinners.spinner_now``: the spinner is sent before its block runs (``st.spinner`` sends it from a timer 0.5 s
later, late again while another thread holds the interpreter), in the container the block is in, and taken away
when the block ends, also when it raises; and the model spinner of ``ui.model_cache.get_model`` is one of them.

Streamlit's AppTest leaves transient elements (spinners) out of its element tree, so the messages the page sends
are recorded where ``ui.spinners`` sends them."""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

import ui.model_cache
import ui.spinners

EVENTS: list[Any] = []
"""What happened, in order: ``("spinners", [texts], delta path)`` for each transient message the page sent (an empty
list takes the spinner away), and the names the scripts append."""


@pytest.fixture
def recorded(monkeypatch):
    EVENTS.clear()
    send = ui.spinners.enqueue_message

    def record(msg) -> None:  # noqa: ANN001 - a ForwardMsg
        if msg.delta.HasField("new_transient"):
            shown = [(e.spinner.text, e.spinner.show_time) for e in msg.delta.new_transient.elements]
            EVENTS.append(("spinners", shown, list(msg.metadata.delta_path)))
        send(msg)

    monkeypatch.setattr(ui.spinners, "enqueue_message", record)
    yield EVENTS
    EVENTS.clear()


def _spinner_page() -> None:
    import streamlit as st

    from tests.ui.test_spinners import EVENTS
    from ui.spinners import spinner_now

    st.write("first line")
    with st.container():
        st.write("in the box")
        with spinner_now("Loading **the maps**…", show_time=True):
            EVENTS.append("block")
            st.write("drawn by the block")
        EVENTS.append("after")
    try:
        with spinner_now("Failing…"):
            EVENTS.append("failing block")
            raise ValueError("boom")
    except ValueError:
        EVENTS.append("caught")
    st.write("last line")


def test_the_spinner_is_sent_before_its_block_and_taken_away_after(recorded) -> None:
    at = AppTest.from_function(_spinner_page).run(timeout=30)
    assert not at.exception
    assert [m.value for m in at.markdown] == ["first line", "in the box", "drawn by the block", "last line"]
    (_, shown, in_box), (_, gone, in_box_again) = recorded[0], recorded[2]
    assert recorded[0][0] == "spinners" and shown == [("Loading **the maps**…", True)]
    assert recorded[1] == "block"  # sent before the block ran: no 0.5 s wait
    assert recorded[2][0] == "spinners" and gone == [] and in_box_again == in_box
    assert recorded[3] == "after"
    (_, failing, top), (_, gone2, top_again) = recorded[4], recorded[6]
    assert failing == [("Failing…", False)] and recorded[5] == "failing block"
    assert gone2 == [] and top_again == top and recorded[7] == "caught"
    assert len(recorded) == 8
    # the first spinner sits inside the box (one level deeper than the second, which is in the main area)
    assert len(in_box) == len(top) + 1 and in_box[:len(top) - 1] == top[:-1]


def test_outside_a_script_run_it_only_runs_the_block() -> None:
    ran = []
    with ui.spinners.spinner_now("nobody sees this"):
        ran.append(1)
    assert ran == [1]


def _model_page() -> None:
    import streamlit as st

    from tests.ui.test_spinners import EVENTS
    from ui.model_cache import get_model

    first = get_model("tinytest", "eager")
    EVENTS.append(("got", first))
    again = get_model("tinytest", "eager")  # loaded: at once, no spinner
    EVENTS.append(("got again", again))
    st.write("done")


def test_a_model_not_loaded_yet_is_announced_before_its_load_starts(recorded, monkeypatch) -> None:
    def load(name: str, attn: str) -> str:
        EVENTS.append(("load", name, attn))
        return f"model {name}/{attn}"

    monkeypatch.setattr(ui.model_cache, "_load_model", load)
    ui.model_cache.model_pool.clear()  # a pool that loads with the recording loader
    try:
        at = AppTest.from_function(_model_page).run(timeout=30)
        assert not at.exception
        texts = [e[1] for e in recorded if e[0] == "spinners"]
        assert [e[0] for e in recorded] == ["spinners", "load", "spinners", "got", "got again"]
        assert texts[0] == [("Loading the model tinytest: the first use after a start takes a while…", True)]
        assert texts[1] == []
        assert recorded[1] == ("load", "tinytest", "eager")
        assert recorded[3] == ("got", "model tinytest/eager") and recorded[4] == ("got again", "model tinytest/eager")
    finally:
        ui.model_cache.model_pool.clear()


def _first_time_page() -> None:
    import streamlit as st

    from tests.ui.test_spinners import EVENTS
    from ui.spinners import spinner_first

    with spinner_first("maps", "Drawing the maps…"):
        EVENTS.append("drawn")
    st.button("again")


def test_spinner_first_is_sent_at_once_on_a_sessions_first_time_only(recorded) -> None:
    at = AppTest.from_function(_first_time_page).run(timeout=30)
    assert recorded == [("spinners", [("Drawing the maps…", False)], recorded[0][2]), "drawn",
                        ("spinners", [], recorded[0][2])]
    recorded.clear()
    at.button[0].click().run(timeout=30)  # the same session again: st.spinner, not shown for a quick block
    assert recorded == ["drawn"]
    again = AppTest.from_function(_first_time_page).run(timeout=30)  # another session: at once again
    assert not again.exception and [e if e == "drawn" else e[0] for e in recorded] == [
        "drawn", "spinners", "drawn", "spinners"]
