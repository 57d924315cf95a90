"""ui.state's widget-default helpers, in Streamlit's real rerun flow (AppTest.from_function)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _k_input(clamp: bool) -> None:
    """A k input whose bound ``hi`` can shrink (another index), with or without clamp_state."""
    import streamlit as st

    from ui.state import clamp_state

    hi = st.session_state.get("hi", 50)
    if clamp:
        clamp_state("k", 1, hi)
    st.number_input("k", 1, hi, key="k")


def _shrink_after_choosing(clamp: bool, chosen: int, hi: int) -> int:
    at = AppTest.from_function(_k_input, args=(clamp,)).run()
    at.number_input(key="k").set_value(chosen).run()
    at.session_state["hi"] = hi
    at.run()
    assert not at.exception
    return at.number_input(key="k").value


def test_clamp_state_keeps_a_value_within_new_bounds() -> None:
    assert _shrink_after_choosing(clamp=False, chosen=20, hi=4) == 1  # what Streamlit does by itself
    assert _shrink_after_choosing(clamp=True, chosen=20, hi=4) == 4
    assert _shrink_after_choosing(clamp=True, chosen=3, hi=4) == 3  # a value within bounds is kept


def _layer_select() -> None:
    """A layer select whose options and default follow the model, as on the Index page."""
    import streamlit as st

    from ui.state import follow_default

    n_layers = st.session_state.get("n_layers", 6)
    follow_default("layer", ("model", n_layers), n_layers - 1)
    st.selectbox("Layer", list(range(n_layers)), key="layer")


def test_follow_default_resets_only_when_its_owner_changes() -> None:
    at = AppTest.from_function(_layer_select).run()
    assert at.selectbox(key="layer").value == 5
    at.selectbox(key="layer").set_value(2).run()
    at.run()
    assert at.selectbox(key="layer").value == 2  # the user's choice stays on reruns
    at.session_state["n_layers"] = 30  # another model
    at.run()
    assert at.selectbox(key="layer").value == 29  # its own default, not layer 2 carried over


def test_index_page_choices_select_a_registry_model_or_a_local_folder() -> None:
    from types import SimpleNamespace

    from ui.state import LOCAL_MODEL, index_page_choices

    shipped = SimpleNamespace(model_name="minilm", model_path="/site/minilm", layer=3, pooling="first")
    assert index_page_choices(shipped) == {
        "index_model_choice": "minilm", "index_layer": 3, "index_pooling": "first",
        "_index_layer_default_for": "minilm", "_index_pooling_default_for": "minilm"}
    local = SimpleNamespace(model_name="my-qwen", model_path="/models/qwen", layer=27, pooling="last")
    choices = index_page_choices(local)
    assert (choices["index_model_choice"], choices["index_model_path"]) == (LOCAL_MODEL, "/models/qwen")
    assert (choices["index_layer"], choices["_index_layer_default_for"]) == (27, "my-qwen")
