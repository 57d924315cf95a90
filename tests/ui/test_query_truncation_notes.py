"""QA walk-through on the demo corpus (its MiniLM index built once, directly): what an analyst comparing Standard
RAG and MRAG, or a presenter demoing them, is told about the query the model actually reads."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.support.apptest import no_exceptions  # noqa: E402
from tests.ui.conftest import module_env  # noqa: E402

PAGES = Path(__file__).resolve().parents[2] / "pages"
TIMEOUT = 120
CUT = re.compile(r"The query is (\d+) tokens long and minilm reads at most 256: its embedding is made from the first "
                 r"(\d+) of its (\d+) characters, up to \"…(.+)\"; the rest is left out\.")


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_index_db):
    """The demo corpus with a finished MiniLM index (last layer; a copy of the session's demo index); yields the
    loaded model."""
    import torch

    from mrag_core.models.loader import load_model

    with module_env(tmp_path_factory, "qa_walkthrough", start_from=demo_index_db):
        torch.set_num_threads(1)
        yield load_model("minilm", device="cpu")


def unescaped(markdown: str) -> str:
    """A message written with ui.render.md_plain, as the reader sees it."""
    return re.sub(r"\\(.)", r"\1", markdown)


def cut_warnings(at: AppTest) -> list[re.Match]:
    # the cut, without what follows it: which strategies read the rest anyway (Fusion's sub-queries, the recommended
    # strategy's sentences)
    return [m for w in at.warning
            if (m := CUT.fullmatch(re.split(r" Fusion RAG| Sentence round-robin", unescaped(w.value))[0]))]


def assert_the_cut_is_where_the_model_stops(lm, query: str, match: re.Match) -> None:
    """The numbers shown agree with the tokenizer: the query has that many tokens, the characters said to be read
    are exactly the 256 tokens MiniLM reads, and the quoted words end them."""
    n_tokens, chars_read, length, tail = int(match[1]), int(match[2]), int(match[3]), match[4]
    assert n_tokens == len(lm.tokenizer([query])["input_ids"][0]) > 256 and length == len(query)
    assert len(lm.tokenizer([query[:chars_read]])["input_ids"][0]) == 256  # [CLS] + 254 tokens + [SEP]
    assert query[:chars_read].endswith(tail) and chars_read < length


LONG = " ".join(f"Story {i}: a lighthouse keeper trades kefir grains for chess lessons with a beekeeper."
               for i in range(20))


def test_compare_says_a_query_is_cut_to_the_models_256_tokens(demo) -> None:
    """A query longer than the 256 tokens MiniLM reads loses its end before Standard RAG, MRAG or Split RAG see it,
    and the page says where (the demo's own queries, the one Compare preselects included, all fit: no warning)."""
    at = AppTest.from_file(str(PAGES / "5_Compare.py"), default_timeout=TIMEOUT).run()
    no_exceptions(at)
    assert not cut_warnings(at)
    at.radio(key="compare_source").set_value("Type a query").run()
    at.text_area(key="compare_typed").input(LONG).run()
    no_exceptions(at)
    [match] = cut_warnings(at)
    assert_the_cut_is_where_the_model_stops(demo, LONG, match)
    # the preselected recommended strategy reads every sentence: the note says so
    assert at.warning[0].value.endswith(" embeds each sentence on its own.")
    at.multiselect(key="compare_strategies").set_value(["standard", "fusion"]).run()
    assert at.warning[0].value.endswith(" Fusion RAG and Fusion MRAG embed each sub-query on its own.")
    at.multiselect(key="compare_strategies").set_value(["standard", "mrag"]).run()
    assert not at.warning[0].value.endswith("on its own.")  # no Fusion list on the page, no word about it
    at.text_area(key="compare_typed").input("Lighthouses and kefir").run()
    no_exceptions(at)
    assert not cut_warnings(at)


def test_reader_and_maps_say_the_query_is_cut(demo) -> None:
    """Reader and Maps embed the same query the same way, so they say so too (Maps drawn with PCA)."""
    at = AppTest.from_file(str(PAGES / "10_Reader.py"), default_timeout=TIMEOUT).run()
    no_exceptions(at)
    assert not cut_warnings(at)
    at.radio(key="reader_source").set_value("Type a query").run()
    at.text_area(key="reader_typed").input(LONG).run()
    no_exceptions(at)
    [match] = cut_warnings(at)
    assert_the_cut_is_where_the_model_stops(demo, LONG, match)
    at = AppTest.from_file(str(PAGES / "7_Maps.py"), default_timeout=TIMEOUT).run()
    at.radio(key="maps_qsrc").set_value("Type a query").run()
    at.text_input(key="maps_typed").input(LONG).run()
    no_exceptions(at)
    [match] = cut_warnings(at)
    assert_the_cut_is_where_the_model_stops(demo, LONG, match)


def test_compare_says_why_it_shows_nothing_for_a_blank_query_or_no_strategy(demo) -> None:
    """An empty or whitespace-only query, or no strategy chosen, greyed out the Compare button and, after an earlier
    comparison, removed its results without a word."""
    at = AppTest.from_file(str(PAGES / "5_Compare.py"), default_timeout=TIMEOUT).run()
    at.radio(key="compare_source").set_value("Type a query").run()
    for blank in ("", "  \n\t "):
        at.text_area(key="compare_typed").input(blank).run()
        no_exceptions(at)
        assert at.button(key="compare_go").disabled
        assert "Type a query to compare the strategies on it." in [i.value for i in at.info]
    at.text_area(key="compare_typed").input("Lighthouses and kefir").run()
    at.button(key="compare_go").click().run()
    assert any("heads (rank in head, vote)" in d.value.columns for d in at.dataframe)
    at.multiselect(key="compare_strategies").set_value([]).run()
    no_exceptions(at)
    assert at.button(key="compare_go").disabled and not at.dataframe
    assert "Choose at least one strategy to compare." in [i.value for i in at.info]
    at.multiselect(key="compare_strategies").set_value(["mrag"]).run()  # the results come back, no click needed
    assert any("heads (rank in head, vote)" in d.value.columns for d in at.dataframe)


def test_attention_asks_for_more_tokens_only_below_the_most_it_shows(demo) -> None:
    """A 5,000-character text at Max tokens 512 (the most the box takes) was told to 'raise *Max tokens* to see
    more'."""
    at = AppTest.from_file(str(PAGES / "6_Attention.py"), default_timeout=TIMEOUT).run()
    at.radio(key="attn_source").set_value("Type a text").run()
    text = ("Lighthouses guide ships and kefir grains ferment milk. " * 100)[:5000]
    at.text_area(key="attn_text").input(text).run()
    no_exceptions(at)
    n = len(demo.tokenizer([text])["input_ids"][0])
    assert n > 512 and [w.value for w in at.warning] == [
        f"The text has {n} tokens; only the first 96 are shown (raise *Max tokens* to see more)."]
    at.number_input(key="attn_max_tokens").set_value(512).run()
    no_exceptions(at)  # MiniLM reads 256 tokens (retrieval embeds no more): its limit, not the box's 512, cuts
    assert [w.value for w in at.warning] == [f"The text has {n} tokens; only the first 256 are shown (minilm reads at "
                                             "most 256 tokens, so a higher *Max tokens* shows no more)."]
