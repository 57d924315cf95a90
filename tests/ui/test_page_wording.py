"""Wording that said something it did not mean: "1 of 1 documents still need" on Annotate & Review (counts agree
with their nouns, via ``mrag_core.wording.counted``); Home's vote weight "s_i · 2^-rank" without saying where ranks
start (Compare: "the document at rank r (#1 the nearest) gets s_i · 2^-(r-1)"); the Attention page's "Layer 5 of 6"
for the last of layers 0..5. AppTest runs against a fresh store per test (``fresh_env``, tests/ui/conftest.py); the
expected texts are written out by hand."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
REVIEW_PAGE = str(ROOT / "pages" / "2_Annotate_and_Review.py")
ATTENTION_PAGE = str(ROOT / "pages" / "6_Attention.py")

pytestmark = pytest.mark.usefixtures("fresh_env")


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_preannotate_counts_one_document_and_one_suggestion_in_the_singular() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.create_corpus(store, "One")
    db.add_categories(store, corpus.id, [{"name": "sport", "description": "football, matches, goals"},
                                         {"name": "cooking", "description": "recipes, food, baking"}])
    db.add_documents(store, corpus.id, [{"title": "Final", "text": "The football team won the final with two goals."}])
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    _ok(at.run())
    _ok(at.radio(key="ar_view").set_value("Pre-annotate").run())
    said = [m.value for m in at.markdown if "still need" in m.value]
    assert len(said) == 1 and said[0].startswith("**1** of 1 document still needs a suggestion from `zero-shot")
    _ok(at.button(key="pa_start").click().run())
    assert [s.value for s in at.success][0].startswith(
        "Pre-annotation finished: 1 suggestion, 0 failed (0 documents already had one).")
    store.close()


def test_home_says_where_the_ranks_of_the_vote_weight_start() -> None:
    at = _ok(AppTest.from_file(APP, default_timeout=60).run())
    idea = [m.value for m in at.markdown if "Each head votes" in m.value]
    assert len(idea) == 1
    said = " ".join(idea[0].split())
    assert ("the document at rank *r* (#1 the nearest) gets *s_i · 2^-(r-1)* votes, with *s_i* the head's importance, "
            "so the nearest gets the full *s_i*") in said
    assert "2^-rank" not in said


def test_attention_names_the_layer_counted_from_0() -> None:
    at = AppTest.from_file(ATTENTION_PAGE, default_timeout=60)
    _ok(at.run())
    _ok(at.radio(key="attn_source").set_value("Type a text").run())
    assert at.selectbox(key="attn_layer").options == ["0", "1", "2", "3", "4", "5"]  # minilm: 6 layers

    def layer_caption() -> str:
        return next(c.value for c in at.caption if c.value.startswith("Layer "))

    assert re.fullmatch(r"Layer 5 \(the last of 6, counted from 0\) · 12 heads · \d+ tokens", layer_caption())
    _ok(at.selectbox(key="attn_layer").set_value(0).run())
    assert layer_caption().startswith("Layer 0 (the first of 6, counted from 0) · 12 heads · ")
    _ok(at.selectbox(key="attn_layer").set_value(2).run())
    assert layer_caption().startswith("Layer 2 (the 3rd of 6, counted from 0) · 12 heads · ")
    assert at.selectbox(key="attn_layer").help == "Counted from 0: 0 is the first layer, 5 the last."
