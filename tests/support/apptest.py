"""AppTest steps shared by the page tests."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def confirm_and_click(at: AppTest, sure_key: str, button_key: str) -> str:
    """A guarded action: button ``button_key`` is disabled until checkbox ``sure_key`` is ticked; tick it, check the
    button is enabled, click it. Returns the checkbox's label (what the page said would happen)."""
    assert at.button(key=button_key).disabled, f"{button_key} is enabled before {sure_key} is ticked"
    sure = at.checkbox(key=sure_key)
    label = sure.label
    sure.check().run()
    assert not at.button(key=button_key).disabled
    at.button(key=button_key).click().run()
    return label
