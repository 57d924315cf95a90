"""AppTest runs of the retrieval-explorer pages (Index, Compare, Attention, Maps) on the demo corpus.

One temporary database per module: the Index page's button builds the demo index once (MiniLM,
~15-30 s here), the other pages use it. Tests run in file order; the staleness test edits the
corpus and therefore comes last.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.ui.conftest import build_through_index_page, module_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "pages"
TIMEOUT = 120


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with module_env(tmp_path_factory, "explorer") as tmp:
        yield tmp


def page(name: str) -> AppTest:
    return AppTest.from_file(str(PAGES / name), default_timeout=TIMEOUT)


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def built(env):
    """Build the demo index through the Index page's button; returns the finished page. The build starts the demo
    index's UMAP maps in the background (followed in tests/ui/test_maps_page_umap.py); this module tests the pages'
    own flows, on PCA maps: that job is cancelled."""
    from ui.background import cancel_maps, maps_jobs

    at = ok(page("4_Index.py").run())
    assert "No index for these settings yet." in texts(at.info)
    at = build_through_index_page(at)
    jobs = list(maps_jobs().values())
    assert [(j.run.id, j.method, j.seed) for j in jobs] == [(1, "umap", 0)]
    assert any("Its UMAP maps are being computed in the background" in m for m in texts(at.success))
    for job in jobs:
        cancel_maps(job)
        assert job.wait(10)
    maps_jobs().clear()
    return at


def test_index_page_builds_and_shows_importance(built):
    at = built
    msgs = texts(at.success)
    assert any("Embedded 96 documents" in m for m in msgs), msgs
    assert any("Index #1 is ready: 96 documents, layer 5, pooling mean" in m for m in msgs)
    assert at.button(key="index_to_compare").label == "Query it on Compare"  # the next step, one click away
    assert len(at.get("plotly_chart")) == 1  # head importance chart
    assert [m.label for m in at.metric][:1] == ["Documents"] and at.metric[0].value == "96"


def test_index_run_is_reused_after_restart(built):
    import streamlit as st

    st.cache_resource.clear()  # a server restart: only the database remains
    at = ok(page("4_Index.py").run())
    assert any("Index #1 is ready" in m for m in texts(at.success))
    assert not at.button(key="index_force").disabled and "No index" not in " ".join(texts(at.info))


def test_index_page_gives_another_model_its_own_layer_and_pooling(built, tmp_path, monkeypatch):
    from tests.support.tiny_models import tiny_gpt2_folder

    monkeypatch.setenv("MRAG_IMPORT_ROOT", str(tmp_path))  # the server folders a browser user may have read
    at = ok(page("4_Index.py").run())
    assert (at.selectbox(key="index_layer").value, at.selectbox(key="index_pooling").value) == (5, "mean")  # MiniLM
    folder = tiny_gpt2_folder(tmp_path / "gpt2-8")
    at.selectbox(key="index_model_choice").set_value("Local folder…").run()
    ok(at.text_input(key="index_model_path").input(str(folder)).run())
    # a decoder: its last layer and last-token pooling, not MiniLM's layer 5 and mean pooling
    assert at.selectbox(key="index_layer").value == 7
    assert at.selectbox(key="index_pooling").value == "last"
    ok(at.selectbox(key="index_layer").set_value(3).run())  # a choice for this model stays on reruns
    assert at.selectbox(key="index_layer").value == 3
    ok(at.selectbox(key="index_model_choice").set_value("minilm").run())
    assert (at.selectbox(key="index_layer").value, at.selectbox(key="index_pooling").value) == (5, "mean")


def test_index_page_rejects_missing_local_folder(built, tmp_path, monkeypatch):
    monkeypatch.setenv("MRAG_IMPORT_ROOT", str(tmp_path))
    at = ok(page("4_Index.py").run())
    at.selectbox(key="index_model_choice").set_value("Local folder…").run()
    at.text_input(key="index_model_path").input(str(tmp_path / "no_such_model")).run()
    ok(at)
    assert any("does not exist" in e and r"no\_such\_model" in e for e in texts(at.error))  # escaped: shown verbatim
    empty = tmp_path / "empty"
    empty.mkdir()
    at.text_input(key="index_model_path").input(str(empty)).run()
    assert any("could not be loaded" in e and r"config\.json" in e for e in texts(at.error))


def test_index_page_builds_another_layer_with_progress(built):
    at = ok(page("4_Index.py").run())
    at.selectbox(key="index_layer").set_value(2).run()
    assert "No index for these settings yet." in texts(at.info)
    at.button(key="index_build").click().run()
    # while the background job runs the page shows a progress bar with an ETA and a Cancel button
    saw_progress = bool(at.get("progress"))
    for _ in range(200):
        if at.success:
            break
        time.sleep(0.5)
        at.run()
        saw_progress = saw_progress or bool(at.get("progress"))
    assert any("layer 2" in m for m in texts(at.success))
    assert saw_progress


FIVE = ["standard", "mrag", "split", "fusion", "fusion-mrag"]
PRESELECTED_LABELS = ["Standard RAG", "MRAG", "Sentence round-robin (Standard + MRAG per sentence)"]


def five_aspect_compare(at: AppTest, strategies: list[str] | None = FIVE) -> AppTest:
    """Compare the first 5-aspect demo query with ``strategies`` (None: the page's preselection)."""
    if strategies is not None:
        at.multiselect(key="compare_strategies").set_value(strategies)
    qsel = at.selectbox(key="compare_query")
    idx = next(i for i, o in enumerate(qsel.options) if o.startswith("[5 aspects]"))
    qsel.select_index(idx).run()
    ok(at.button(key="compare_go").click().run())
    return at


def test_index_page_follows_a_build_another_process_runs(built):
    """An index the CLI (or another server) builds on this database: the page shows its stored progress and no
    Resume or Delete for it; once that process has been silent for db.LIVE_WINDOW_S, Resume is offered."""
    from sqlalchemy import update

    import db
    from db.models import EmbeddingRun, utcnow

    store = db.open_store()
    corpus = db.list_corpora(store)[0]
    run = db.create_embedding_run(store, corpus.id, model_name="minilm", layer=3, pooling="mean", n_heads=12,
                                  head_dim=32, dim=384, owner="gpu-box pid 4242 #0badc0de")
    try:
        at = ok(page("4_Index.py").run())
        ok(at.selectbox(key="index_layer").set_value(3).run())
        # (the host name escaped for Markdown: it is shown as it is)
        assert any(m.startswith(f"Index #{run.id} is being built by another process (gpu\\-box pid 4242).")
                   for m in texts(at.info))
        assert [p.proto.text for p in at.get("progress")][0].startswith(
            f"Embedded 0 / {corpus.n_documents} documents · last heard from ")
        assert not any(b.key in ("index_build", "index_resume", "index_force") for b in at.button)
        ok(at.button(key="index_stop_elsewhere").click().run())  # asks that process, through the database
        assert db.embedding_stop_requested(store, run.id) and at.button(key="index_stop_elsewhere").disabled
        assert any(m.endswith("Asked to stop: it stops after its current batch.") for m in texts(at.info))
        assert not any(o.startswith(f"#{run.id} ") for o in at.multiselect(key="index_delete_ids").options)
        with store.session() as session:  # that process died
            session.execute(update(EmbeddingRun).where(EmbeddingRun.id == run.id)
                            .values(heartbeat_at=utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)))
        ok(at.run())
        assert f"An unfinished build (running): 0 of {corpus.n_documents} documents embedded." in texts(at.warning)
        assert not at.button(key="index_resume").disabled
        assert any(o.startswith(f"#{run.id} ") for o in at.multiselect(key="index_delete_ids").options)
    finally:
        db.delete_embedding_run(store, run.id)
        store.close()


def test_maps_and_reader_open_on_the_last_layer_and_keep_the_chosen_index(built):
    """Layer 2's index was built after layer 5's: a new session's Maps and Reader open on layer 5 (MRAG's default
    layer), not on the newest index; an index chosen there stays chosen after a visit to another page."""
    at = ok(AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run())
    for page_file, key in (("pages/7_Maps.py", "maps_run"), ("pages/10_Reader.py", "reader_run")):
        ok(at.switch_page(page_file).run())
        box = at.selectbox(key=key)
        layers = [o.split(" · ")[2] for o in box.options]
        assert layers[:2] == ["layer 2", "layer 5"]  # newest first
        assert box.value.layer == 5
        ok(box.select_index(0).run())
        assert at.selectbox(key=key).value.layer == 2
        ok(at.switch_page("pages/6_Attention.py").run())
        ok(at.switch_page(page_file).run())
        assert at.selectbox(key=key).value.layer == 2, page_file


def test_compare_page_side_by_side_with_evidence(built):
    at = ok(page("5_Compare.py").run())
    at.selectbox(key="compare_run").select_index(len(at.selectbox(key="compare_run").options) - 1).run()
    # preselected: Standard, MRAG and the recommended strategy, with its per-sentence, per-head evidence
    assert at.multiselect(key="compare_strategies").value == ["standard", "mrag", "sentence-round-robin"]
    five_aspect_compare(at, None)
    frames = [d.value for d in at.dataframe]
    assert list(next(f for f in frames if "RSR" in f.columns)["strategy"]) == PRESELECTED_LABELS
    assert any(h.value.startswith("Why the recommended strategy, Sentence round-robin") for h in at.subheader)
    sentences = next(f for f in frames if list(f.columns) == ["sentence", "text"])
    assert len(sentences) >= 2 and sentences["sentence"].tolist()[:2] == ["s1", "s2"]
    why = next(f for f in frames if "found by (sentence: view #rank (heads))" in f.columns)
    rec_list = [f for f in frames if {"rank", "mark", "title"} <= set(f.columns)][2]
    assert list(why["title"]) == list(rec_list["title"]) and len(why) == 5
    assert why["found by (sentence: view #rank (heads))"].str.match(r"^s\d+: (Standard|MRAG) #\d+").all()
    at.multiselect(key="compare_strategies").set_value(FIVE).run()
    ok(at)
    frames = [d.value for d in at.dataframe]
    gt = frames[0]
    assert list(gt.columns) == ["title", "category"] and len(gt) == 5
    metrics = next(f for f in frames if "RSR" in f.columns)
    assert list(metrics["strategy"]) == ["Standard RAG", "MRAG", "Split RAG", "Fusion RAG", "Fusion MRAG"]
    assert metrics["RSR"].between(0, 1).all() and metrics["CSR"].between(0, 1).all()
    lists = [f for f in frames if {"rank", "mark", "title", "category", "score"} <= set(f.columns)]
    assert len(lists) == 5 and all(len(f) == 5 for f in lists)  # k follows the 5 aspects
    assert set().union(*(set(f["mark"]) for f in lists)) <= {"✔ doc", "~ cat", "cat again", "✘ miss"}
    # the metrics agree with the marks: RSR = exact matches / 5
    for (_, m), f in zip(metrics.iterrows(), lists):
        assert m["RSR"] == pytest.approx((f["mark"] == "✔ doc").sum() / 5)
    per_doc = next(f for f in frames if "heads (rank in head, vote)" in f.columns)
    assert len(per_doc) == 5 and per_doc["heads (rank in head, vote)"].str.contains(r"h\d+ \(#\d+").all()
    mrag = lists[1]
    assert list(per_doc["title"]) == list(mrag["title"])
    aspects = next(f for f in frames if "ground-truth documents (rank)" in f.columns)
    assert len(aspects) == 12
    assert len(at.get("plotly_chart")) == 1  # heads x documents evidence heatmap
    subs = next(f for f in frames if "sub-query" in f.columns)
    assert len(subs) >= 2  # the demo query's stored fusion sub-queries
    assert any("stored with the query" in e.label for e in at.expander)

    # a rerun with k changed reuses the cached index and query embeddings (timed in bench/ui_rerun.py)
    at.number_input(key="compare_k").set_value(3).run()
    ok(at)
    lists = [d.value for d in at.dataframe if {"rank", "mark"} <= set(d.value.columns)]
    assert all(len(f) == 3 for f in lists)


def test_compare_page_hnsw_backend_shows_its_calibration(built):
    at = ok(page("5_Compare.py").run())
    assert not [c for c in at.caption if "HNSW efSearch" in c.value]  # exact torch: nothing calibrated
    at.selectbox(key="compare_backend").set_value("faiss-hnsw").run()
    ok(at)
    line = next(c.value for c in at.caption if "HNSW efSearch" in c.value)
    views = [part.split(":")[0] for part in line.split("final lists: ", 1)[1].split("; ")]
    assert views == ["standard", "heads", "split", "heads, importance vote", "heads, decay vote",
                     "heads, distance vote", "split, decay vote", "split, importance vote"]
    assert line.count("target 0.90") == 8
    five_aspect_compare(at)
    lists = [d.value for d in at.dataframe if {"rank", "mark"} <= set(d.value.columns)]
    assert len(lists) == 5 and all(len(f) == 5 for f in lists)


def test_compare_page_typed_query_uses_sentence_fallback(built):
    at = ok(page("5_Compare.py").run())
    at.radio(key="compare_source").set_value("Type a query").run()
    at.text_area(key="compare_typed").input("How do lighthouses work? What is tempeh made of?").run()
    at.multiselect(key="compare_strategies").set_value(FIVE)
    ok(at.button(key="compare_go").click().run())
    exp = [e.label for e in at.expander]
    assert any("offline fallback: one sub-query per sentence" in e for e in exp), exp
    subs = next(d.value for d in at.dataframe if "sub-query" in d.value.columns)
    assert list(subs["sub-query"]) == ["How do lighthouses work?", "What is tempeh made of?"]
    lists = [d.value for d in at.dataframe if {"rank", "title", "score"} <= set(d.value.columns)
             and "heads (rank in head, vote)" not in d.value.columns]
    assert len(lists) == 5 and all("mark" not in f.columns for f in lists)  # no ground truth, no marks


def test_compare_page_llm_hint_without_endpoint(built):
    at = ok(page("5_Compare.py").run())
    assert "Multi-Query RAG" not in at.multiselect(key="compare_strategies").options
    assert any("need an OpenAI-compatible endpoint" in c and "MRAG_LLM_BASE_URL" in c for c in texts(at.caption))
    assert not [m for m in at.multiselect if m.key == "compare_llm_strategies"]


def test_compare_page_llm_strategies_with_texts_and_cost(built, monkeypatch):
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    def answer(prompt: str) -> Reply:
        if "diverse search queries" in prompt:
            return Reply.ok("1. <b>lighthouse</b> history\n2. **cheese** making", prompt_tokens=40, completion_tokens=9)
        if "encyclopedia" in prompt:
            return Reply.ok("A lighthouse guides ships <script>x</script> and cheese ripens in caves.",
                            prompt_tokens=30, completion_tokens=14)
        return Reply.ok("1.\n2.", prompt_tokens=20, completion_tokens=2)  # unusable intent answer

    with FakeOpenAIServer(by_content(answer)) as server:
        server.set_env(monkeypatch)
        at = ok(page("5_Compare.py").run())
        at.multiselect(key="compare_strategies").set_value(["standard", "mrag"])
        at.multiselect(key="compare_llm_strategies").set_value(
            ["multi-query", "multi-query-mrag", "hyde", "hyde-mrag", "intent", "intent-mrag"]).run()
        at.number_input(key="compare_llm_n").set_value(2)
        five_aspect_compare(at, None)  # the strategies chosen above
        assert len(server.requests) == 3  # one per family, shared by the plain and the +MRAG strategy
        errors = texts(at.error)
        assert len(errors) == 1 and errors[0].startswith("Intent statements: unusable LLM answer")
        metrics = next(d.value for d in at.dataframe if "RSR" in d.value.columns)
        assert list(metrics["strategy"]) == ["Standard RAG", "MRAG", "Multi-Query RAG", "Multi-Query MRAG", "HyDE",
                                             "HyDE + MRAG"]
        assert metrics["LLM tokens"].tolist()[2:] == [49, 49, 44, 44]
        assert metrics["LLM tokens"].isna().tolist()[:2] == [True, True]
        lists = [d.value for d in at.dataframe if {"rank", "mark", "title"} <= set(d.value.columns)]
        assert len(lists) == 6 and all(len(f) == 5 for f in lists)
        labels = [e.label for e in at.expander]
        assert any(lb.startswith("Multi-query rewrites (2) — 49 tokens (40 prompt + 9 completion)") for lb in labels)
        assert any(lb.startswith("HyDE passage (1) — 44 tokens") for lb in labels)
        # the generated texts are shown as plain text (a dataframe cell), markup included verbatim (the list parser
        # takes ** out of a rewrite: expansion.common.parse_list)
        rewrites, passage = [d.value for d in at.dataframe if list(d.value.columns) == ["text"]]  # family order
        assert rewrites["text"].tolist() == ["<b>lighthouse</b> history", "cheese making"]
        assert passage["text"].tolist() == ["A lighthouse guides ships <script>x</script> and cheese ripens in caves."]
        assert any(c.startswith("LLM: 49 tokens") for c in texts(at.caption))
        # a rerun (k changed) sends nothing for the families that succeeded
        at.number_input(key="compare_k").set_value(3).run()
        ok(at)
        assert len(server.requests) == 4  # only the unusable intent answer is asked again


def test_compare_page_says_when_the_llm_gave_fewer_sub_queries(built, monkeypatch):
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    def answer(prompt: str) -> Reply:
        assert "Write exactly 3 short" in prompt  # no ground truth: at least 3
        return Reply.ok("How do lighthouses and tempeh work together")  # one line, not three

    with FakeOpenAIServer(by_content(answer)) as server:
        server.set_env(monkeypatch)
        at = ok(page("5_Compare.py").run())
        at.radio(key="compare_source").set_value("Type a query").run()
        at.text_area(key="compare_typed").input("How do lighthouses work? What is tempeh made of?").run()
        at.multiselect(key="compare_strategies").set_value(["fusion"]).run()
        at.radio(key="compare_subsource").set_value("llm").run()
        ok(at.button(key="compare_go").click().run())
        assert len(server.requests) == 1
    sub = next(e for e in at.expander if e.label.startswith("Fusion sub-queries"))
    assert sub.label == "Fusion sub-queries (1 of 3 asked for) — generated by the configured LLM"
    assert sub.proto.expanded
    assert next(d.value for d in at.dataframe if "sub-query" in d.value.columns)["sub-query"].tolist() == [
        "How do lighthouses and tempeh work together"]


def test_compare_page_preselects_drilldown_query(built):
    import db

    store = db.open_store()
    corpus = db.list_corpora(store)[0]
    qs = db.list_query_sets(store, corpus.id)[0]
    target = [q for q in db.list_queries(store, qs.id) if q.n_aspects == 3][-1]
    store.close()
    at = page("5_Compare.py")
    at.session_state["compare_query_id"] = target.id
    ok(at.run())
    assert at.radio(key="compare_source").value == "From a query set"
    assert at.selectbox(key="compare_qs").value.id == qs.id
    assert at.selectbox(key="compare_query").value.id == target.id
    assert "compare_query_id" not in at.session_state  # read once
    metrics = next(d.value for d in at.dataframe if "RSR" in d.value.columns)  # results shown straight away
    assert list(metrics["strategy"]) == PRESELECTED_LABELS
    lists = [d.value for d in at.dataframe if {"rank", "mark", "title"} <= set(d.value.columns)]
    assert all(len(f) == 3 for f in lists)  # k follows its 3 aspects
    # the choice stays on the next rerun
    at.number_input(key="compare_c").set_value(16).run()
    assert at.selectbox(key="compare_query").value.id == target.id


def test_compare_page_filters_queries_by_aspects_and_drilldown_resets_it(built):
    import db

    store = db.open_store()
    corpus = db.list_corpora(store)[0]
    qs = db.list_query_sets(store, corpus.id)[0]
    queries = db.list_queries(store, qs.id)
    store.close()
    n_six = sum(q.n_aspects == 6 for q in queries)
    assert 0 < n_six < len(queries)
    at = ok(page("5_Compare.py").run())
    aspects = at.selectbox(key="compare_aspects")
    assert aspects.value == "all" and len(at.selectbox(key="compare_query").options) == len(queries)
    assert aspects.options[0] == f"all ({len(queries)})" and f"6 ({n_six})" in aspects.options
    ok(aspects.select(6).run())
    qsel = at.selectbox(key="compare_query")
    assert len(qsel.options) == n_six and all(o.startswith("[6 aspects]") for o in qsel.options)
    assert qsel.value.n_aspects == 6  # the earlier choice is not among them: the first one is shown
    lists = [d.value for d in at.dataframe if list(d.value.columns) == ["title", "category"]]
    assert len(lists[0]) == 6  # its ground truth
    # a drill-down to a 2-aspect query shows it: the filter goes back to all
    target = next(q for q in queries if q.n_aspects == 2)
    at.session_state["compare_query_id"] = target.id
    ok(at.run())
    assert at.selectbox(key="compare_aspects").value == "all"
    assert at.selectbox(key="compare_query").value.id == target.id


def app() -> AppTest:
    """The whole app (``app.py``'s navigation), to switch pages as the sidebar does."""
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)


def result_rows(at: AppTest) -> list[list[str]]:
    """Compare's result lists as laid out: per row of columns that holds lists, each column's strategy label
    (an empty string for a column left empty)."""
    rows: list[list[str]] = []

    def walk(block) -> None:  # noqa: ANN001 - an AppTest block
        kids = list(getattr(block, "children", {}).values())
        if kids and all(getattr(k, "type", None) == "column" for k in kids):
            labels = [next((m.value.strip("*") for m in col.markdown), "")
                      if any({"rank", "title", "score"} <= set(d.value.columns) for d in col.dataframe) else ""
                      for col in kids]
            if any(labels):
                rows.append(labels)
            return
        for kid in kids:
            walk(kid)

    walk(at.main)
    return rows


def test_compare_page_lists_two_strategies_per_row_by_default(built):
    """Five lists side by side left 6-10 characters of title at usual widths: two to a row by default (the last
    row keeps two columns, so every list has the same width), the title column wide; all side by side on demand."""
    at = ok(page("5_Compare.py").run())
    five_aspect_compare(at)
    assert result_rows(at) == [["Standard RAG", "MRAG"], ["Split RAG", "Fusion RAG"], ["Fusion MRAG", ""]]
    lists = [d for d in at.dataframe if {"rank", "mark", "title"} <= set(d.value.columns)]
    widths = [{name: c.get("width") for name, c in json.loads(d.proto.columns).items() if c.get("width")}
              for d in lists]
    # every column in view where two lists share a 1280 px window (about 400 px each)
    assert len(lists) == 5 and all(set(w) == {"rank", "mark", "title", "category", "score"} for w in widths)
    assert all(sum(w.values()) <= 400 and w["title"] >= 160 for w in widths)
    ok(at.segmented_control(key="compare_per_row").set_value(3).run())
    assert result_rows(at) == [["Standard RAG", "MRAG", "Split RAG"], ["Fusion RAG", "Fusion MRAG", ""]]
    ok(at.segmented_control(key="compare_per_row").set_value(0).run())  # all side by side
    assert result_rows(at) == [["Standard RAG", "MRAG", "Split RAG", "Fusion RAG", "Fusion MRAG"]]


def test_compare_page_explains_the_fusion_depth(built):
    at = ok(page("5_Compare.py").run())
    five_aspect_compare(at)
    (note,) = [c for c in texts(at.caption) if "Reciprocal Rank Fusion" in c]
    k = at.number_input(key="compare_k").value
    assert f"to depth k = {k}" in note and "as an evaluation run scores them at k" in note
    at.multiselect(key="compare_strategies").set_value(["standard", "mrag"]).run()
    assert not [c for c in texts(at.caption) if "Reciprocal Rank Fusion" in c]  # no Fusion column, no note


def test_compare_choices_survive_a_visit_to_another_page(built):
    """Aspects, query, voting, c and strategies (and a typed query) are kept when the user looks at another page
    and comes back; Streamlit dropped the values of widgets not drawn, so everything was back to its default."""
    at = ok(app().run())
    ok(at.switch_page("pages/5_Compare.py").run())
    ok(at.selectbox(key="compare_aspects").select(3).run())
    query = at.selectbox(key="compare_query").select_index(1).run().selectbox(key="compare_query").value
    at.selectbox(key="compare_variant").set_value("decay")
    at.number_input(key="compare_c").set_value(8)
    ok(at.multiselect(key="compare_strategies").set_value(["standard", "mrag"]).run())
    ok(at.switch_page("pages/6_Attention.py").run())
    ok(at.switch_page("pages/5_Compare.py").run())
    assert at.selectbox(key="compare_aspects").value == 3 and at.selectbox(key="compare_query").value.id == query.id
    assert at.selectbox(key="compare_variant").value == "decay" and at.number_input(key="compare_c").value == 8
    assert at.multiselect(key="compare_strategies").value == ["standard", "mrag"]
    at.radio(key="compare_source").set_value("Type a query").run()
    ok(at.text_area(key="compare_typed").input("How do lighthouses work? What is tempeh?").run())
    ok(at.switch_page("pages/4_Index.py").run())
    ok(at.switch_page("pages/5_Compare.py").run())
    assert at.radio(key="compare_source").value == "Type a query"
    assert at.text_area(key="compare_typed").value == "How do lighthouses work? What is tempeh?"
    ok(at.radio(key="compare_source").set_value("From a query set").run())  # the stored query is still chosen
    assert at.selectbox(key="compare_aspects").value == 3 and at.selectbox(key="compare_query").value.id == query.id


def test_compare_keeps_the_chosen_c_and_k_for_a_larger_index(built):
    """On a 3-document index c and k are shown as 3; back on the demo (96 documents) the chosen c = 32 and k = 8
    return (the clamped 3 used to stay, and MRAG's results changed silently)."""
    import db
    from mrag_core.models.loader import load_model
    from services.workflows.indexing import build_embedding_run

    store = db.open_store()
    tiny = db.create_corpus(store, "Zz three documents")  # sorts after the demo: the other tests' default stays
    db.add_documents(store, tiny.id, [{"title": f"doc {i}", "text": text, "label": label} for i, (text, label) in
                                      enumerate([("Lava flows from the volcano.", "geology"),
                                                 ("Tempeh is fermented soybeans.", "food"),
                                                 ("A lighthouse guides ships.", "sea")])])
    build_embedding_run(store, tiny.id, load_model("minilm"), layer=-1)
    store.close()
    at = ok(page("5_Compare.py").run())
    at.radio(key="compare_source").set_value("Type a query").run()
    ok(at.text_area(key="compare_typed").input("volcano lava and soybeans").run())
    assert (at.number_input(key="compare_c").value, at.number_input(key="compare_k").value) == (32, 5)
    ok(at.number_input(key="compare_k").set_value(8).run())
    corpora = at.selectbox(key="_corpus_id_select")
    demo_index = next(i for i, o in enumerate(corpora.options) if o.startswith("MRAG Studio demo"))
    ok(corpora.select_index(next(i for i, o in enumerate(corpora.options) if o.startswith("Zz three"))).run())
    assert (at.number_input(key="compare_c").value, at.number_input(key="compare_k").value) == (3, 3)
    ok(at.selectbox(key="_corpus_id_select").select_index(demo_index).run())
    assert (at.number_input(key="compare_c").value, at.number_input(key="compare_k").value) == (32, 8)
    ok(at.button(key="compare_go").click().run())
    assert all(len(d.value) == 8 for d in at.dataframe if {"rank", "title", "score"} <= set(d.value.columns)
               and "heads (rank in head, vote)" not in d.value.columns)


def test_compare_page_opens_a_drilldown_on_the_runs_index_and_settings(built):
    """The Evaluation Runs drill-down names the run's index and settings: Compare opens on that index (not the
    newest), with exact search, the run's voting, c and k, and the chosen items' strategies."""
    import db
    from services.workflows.eval_comparison import DrillDown

    store = db.open_store()
    corpus = db.list_corpora(store)[0]
    indexes = db.list_embedding_runs(store, corpus.id, status="done")  # newest first
    older = indexes[-1]
    qs = db.list_query_sets(store, corpus.id)[0]
    target = next(q for q in db.list_queries(store, qs.id) if q.n_aspects == 3)
    store.close()
    assert len(indexes) >= 2 and older.layer != indexes[0].layer
    at = page("5_Compare.py")
    at.session_state["compare_backend"] = "faiss-hnsw"  # chosen before: the run searched exactly
    at.session_state["compare_query_id"] = target.id
    at.session_state["compare_drilldown"] = DrillDown(run_id=7, query_id=target.id, embedding_run_id=older.id,
                                                      variant="decay", c=16, k=4, strategies=["standard", "mrag"],
                                                      seed=3)
    ok(at.run())
    assert at.selectbox(key="compare_run").value.id == older.id
    assert at.selectbox(key="compare_backend").value == "torch" and at.selectbox(key="compare_variant").value == "decay"
    assert (at.number_input(key="compare_c").value, at.number_input(key="compare_k").value) == (16, 4)
    assert at.multiselect(key="compare_strategies").value == ["standard", "mrag"]
    assert at.selectbox(key="compare_query").value.id == target.id
    assert "Opened from evaluation run #7: its index, exact search, decay voting, c = 16, k = 4, importance seed 3." \
        in texts(at.caption)
    assert at.number_input(key="compare_seed").value == 3  # the run's head importance, not the stored seed 0
    lists = [d.value for d in at.dataframe if {"rank", "mark", "title"} <= set(d.value.columns)]
    assert len(lists) == 2 and all(len(f) == 4 for f in lists)
    ok(at.number_input(key="compare_k").set_value(2).run())  # read once: the user's choices rule afterwards
    assert at.selectbox(key="compare_run").value.id == older.id and at.number_input(key="compare_k").value == 2


def test_compare_importance_seed_samples_the_head_importance_again(built):
    """Compare's Importance seed: 0 searches with the importance stored with the index; another seed with s_i of
    pairs sampled again with that seed, what an evaluation run with that seed uses."""
    import numpy as np

    import db
    from mrag_core.importance import head_importance
    from services.workflows.indexing import load_run_embeddings
    from ui.state import index_bundle

    store = db.open_store()
    run = next(r for r in db.list_embedding_runs(store, db.list_corpora(store)[0].id, status="done") if r.layer == 5)
    _, emb = load_run_embeddings(store, run.id)
    stored = np.asarray(run.importance["score"])
    np.testing.assert_allclose(index_bundle(store, run, "torch").index.head_importance.score, stored)
    seeded = index_bundle(store, run, "torch", seed=5).index.head_importance.score
    np.testing.assert_allclose(seeded, head_importance(emb.heads, pairs_per_doc=16, seed=5).score)
    assert not np.allclose(seeded, stored)
    store.close()
    at = ok(page("5_Compare.py").run())
    assert at.number_input(key="compare_seed").value == 0
    ok(at.number_input(key="compare_seed").set_value(5).run())  # the page searches with that index
    assert at.number_input(key="compare_seed").value == 5


def test_a_drilldown_whose_index_is_gone_says_which_index_it_shows_instead(built):
    """A run's index deleted (and none of its model, layer and pooling left): Compare said 'no longer exists'
    and, below, 'Opened from evaluation run #N: its index', on another layer's index. It now names the run's
    settings and the index shown, links to the Index page, and no longer calls that index the run's."""
    import db
    from services.workflows.eval_comparison import DrillDown

    store = db.open_store()
    corpus = db.list_corpora(store)[0]
    qs = db.list_query_sets(store, corpus.id)[0]
    target = next(q for q in db.list_queries(store, qs.id) if q.n_aspects == 2)
    ev = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id,
                            config={"model": "minilm", "layer": 1, "pooling": "mean", "strategies": ["mrag"]})
    store.close()
    at = page("5_Compare.py")
    at.session_state["compare_query_id"] = target.id
    at.session_state["compare_drilldown"] = DrillDown(run_id=ev.id, query_id=target.id, embedding_run_id=None,
                                                      variant="importance", c=8, k=None, strategies=["mrag"], seed=0)
    ok(at.run())
    shown = at.selectbox(key="compare_run").value
    assert (f"Evaluation run #{ev.id} searched an index (minilm layer 1, mean pooling) that no longer exists, and "
            f"no finished index of those settings does: this page shows index #{shown.id} (layer {shown.layer}) "
            "instead") in " ".join(texts(at.warning))
    (caption,) = [c for c in texts(at.caption) if c.startswith(f"Opened from evaluation run #{ev.id}")]
    assert caption.startswith(f"Opened from evaluation run #{ev.id}: exact search, importance voting, c = 8")


def test_compare_page_keeps_its_index_until_the_index_page_names_another(built):
    """The index choice is kept for the session; it moves only when the Index page (or a drill-down) names another
    index in ``run_id`` (a build there is what Compare shows next, as before the choice was kept)."""
    at = ok(page("5_Compare.py").run())
    runs = at.selectbox(key="compare_run")
    newest, oldest = runs.options[0], runs.options[-1]
    ok(runs.select_index(len(runs.options) - 1).run())
    ok(at.run())
    assert at.selectbox(key="compare_run").value.id == int(oldest.split(" ")[0][1:])
    at.session_state["run_id"] = int(newest.split(" ")[0][1:])  # the Index page showed (or built) the newest
    ok(at.run())
    assert at.selectbox(key="compare_run").value.id == int(newest.split(" ")[0][1:])
    ok(at.selectbox(key="compare_run").select_index(len(runs.options) - 1).run())
    ok(at.run())  # run_id unchanged: the user's choice stays
    assert at.selectbox(key="compare_run").value.id == int(oldest.split(" ")[0][1:])


def test_attention_page(built):
    at = ok(page("6_Attention.py").run())
    charts = at.get("plotly_chart")
    assert len(charts) == 2
    assert any("only the first 96 are shown" in w for w in texts(at.warning))  # demo docs are long
    at.radio(key="attn_source").set_value("Type a text").run()
    ok(at)
    assert not at.warning and any("12 heads" in c for c in texts(at.caption))
    # a stored query, picked as on Compare: set, number of aspects, query
    at.radio(key="attn_source").set_value("A query").run()
    ok(at.selectbox(key="attn_aspects").select(2).run())
    qsel = at.selectbox(key="attn_query")
    assert qsel.options and all(o.startswith("[2 aspects]") for o in qsel.options)
    assert len(at.get("plotly_chart")) == 2


def test_attention_choices_survive_a_visit_to_another_page(built):
    at = ok(app().run())
    ok(at.switch_page("pages/6_Attention.py").run())
    at.selectbox(key="attn_layer").set_value(2)
    at.number_input(key="attn_max_tokens").set_value(32)
    ok(at.radio(key="attn_source").set_value("A query").run())
    ok(at.selectbox(key="attn_aspects").select(2).run())
    query = at.selectbox(key="attn_query").select_index(1).run().selectbox(key="attn_query").value
    ok(at.slider(key="attn_head").set_value(7).run())
    ok(at.switch_page("pages/5_Compare.py").run())
    ok(at.switch_page("pages/6_Attention.py").run())
    assert (at.selectbox(key="attn_layer").value, at.number_input(key="attn_max_tokens").value) == (2, 32)
    assert at.radio(key="attn_source").value == "A query" and at.slider(key="attn_head").value == 7
    assert at.selectbox(key="attn_aspects").value == 2 and at.selectbox(key="attn_query").value.id == query.id
    ok(at.radio(key="attn_source").set_value("Type a text").run())
    ok(at.text_area(key="attn_text").input("Copper wires and tidal pools.").run())
    ok(at.switch_page("pages/4_Index.py").run())
    ok(at.switch_page("pages/6_Attention.py").run())
    assert at.text_area(key="attn_text").value == "Copper wires and tidal pools."


def test_index_page_keeps_its_settings_and_the_running_build_in_view(built, monkeypatch):
    """Layer 4 chosen and its build running, a visit to Compare: back on Index, layer 4 and the build's progress
    and Cancel are shown (the layer was back at 5, and the build out of view). With other settings chosen, the
    running build is named with a button that shows it."""
    import threading

    from services.workflows import indexing
    from ui.state import build_jobs, get_model, get_store

    release = threading.Event()
    real_embed = indexing.embed_texts

    def held(*args, **kwargs):  # noqa: ANN002, ANN003 - the build waits here until the test is done with it
        release.wait(120)
        return real_embed(*args, **kwargs)

    monkeypatch.setattr(indexing, "embed_texts", held)
    at = ok(app().run())
    ok(at.switch_page("pages/4_Index.py").run())
    ok(at.selectbox(key="index_layer").set_value(4).run())
    assert "No index for these settings yet." in texts(at.info)
    # what Build index starts (AppTest loses a click in its multipage runs: see test_evaluation_page_flows)
    corpus_id = at.session_state["corpus_id"]
    key = (corpus_id, "minilm", 4, "mean")
    build_jobs()[key] = indexing.BuildJob(get_store(), corpus_id, get_model("minilm"), layer=4, pooling="mean",
                                          batch_size=32).start()
    try:
        ok(at.switch_page("pages/5_Compare.py").run())
        ok(at.switch_page("pages/4_Index.py").run())
        assert at.selectbox(key="index_layer").value == 4
        assert at.get("progress") and [b.key for b in at.button if b.key == "index_cancel"] == ["index_cancel"]
        # another layer chosen: the running build is named, and Show it brings it back (the page alone: a click)
        idx = page("4_Index.py")
        idx.session_state["corpus_id"] = corpus_id
        ok(idx.run())
        ok(idx.selectbox(key="index_layer").set_value(3).run())
        assert any(i.startswith("An index of minilm layer 4 (mean pooling) is being built for this corpus: ")
                   for i in texts(idx.info))
        ok(idx.button(key="index_show_minilm_4_mean").click().run())
        assert idx.selectbox(key="index_layer").value == 4 and idx.get("progress")
    finally:
        release.set()
        assert build_jobs()[key].wait(300)
        build_jobs().pop(key, None)


def test_maps_page_places_query_and_stores_maps(built):
    import db

    at = ok(page("7_Maps.py").run())
    table = at.dataframe[-1].value
    assert len(table) == 96 and set(table.columns) >= {"title", "category", "retrieved", "ground truth"}
    store = db.open_store()
    run_id = int(at.selectbox(key="maps_run").value.id)
    assert at.selectbox(key="maps_method").value == "pca"  # its UMAP maps are not all stored
    pca = [p for p in db.list_projections(store, run_id) if p.method == "pca"]
    assert {p.space for p in pca} == {"standard", *(f"head:{h}" for h in range(12))}
    at.radio(key="maps_qsrc").set_value("From a query set").run()
    at.selectbox(key="maps_aspects").select(3).run()
    qsel = at.selectbox(key="maps_query")
    assert qsel.options and all(o.startswith("[3 aspects]") for o in qsel.options)
    ok(at)
    table = at.dataframe[-1].value
    assert table["ground truth"].sum() == 3 and table["retrieved"].sum() == 3
    assert any("MRAG at k=3" in c for c in texts(at.caption))
    assert len([p for p in db.list_projections(store, run_id) if p.method == "pca"]) == 13  # reused, not recomputed
    store.close()


def test_maps_page_says_when_a_query_cannot_be_placed_on_maps_stored_without_their_model(built, monkeypatch):
    """Maps whose fitted model was too large for the database (MySQL's max_allowed_packet) are drawn, and
    a placed query says on which maps it is missing (the limit is lowered here to make every model too large)."""
    import db

    monkeypatch.setattr(db.Store, "largest_value_bytes", lambda self: 100)
    at = ok(page("7_Maps.py").run())
    at.number_input(key="maps_seed").set_value(11).run()  # maps not computed yet for this seed: fitted now
    ok(at)
    assert not any("not placed" in t for t in texts(at.info))  # nothing to say before a query is placed
    at.radio(key="maps_qsrc").set_value("Type a query").run()
    at.text_input(key="maps_typed").input("volcano eruption lava").run()
    ok(at)
    assert any(t.startswith("The query is not placed on 13 of 13 maps (standard, head:0, head:1, head:2, head:3, …)")
               and "max_allowed_packet" in t for t in texts(at.info))
    assert len(at.dataframe[-1].value) == 96  # the maps and their table are still drawn
    # the database takes the models again (max_allowed_packet raised): the button refits the 13 maps with them
    monkeypatch.undo()
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    run_id = at.selectbox(key="maps_run").value.id
    assert not any(p.has_model for p in db.list_projections(store, run_id) if p.seed == 11)
    assert at.button(key="maps_refit").label == "Refit 13 maps with their models"
    ok(at.button(key="maps_refit").click().run())
    assert not any("not placed" in t for t in texts(at.info)) and not [b for b in at.button if b.key == "maps_refit"]
    after = [p for p in db.list_projections(store, run_id) if p.seed == 11]
    assert len(after) == 13 and all(p.has_model for p in after)
    store.close()


def test_maps_page_umap_computed_in_the_background_with_cancel_only_while_computing(built):
    """Choosing UMAP asks before computing; Compute starts a background job (a child process) for this index and
    seed, shown with its progress and a Cancel button; Cancel stops it within a second, and the page asks again,
    without a Cancel button (it used to stay on the page after the last map)."""
    import db
    from ui.background import maps_job, maps_jobs

    at = ok(page("7_Maps.py").run())
    ok(at.number_input(key="maps_seed").set_value(3).run())
    at.selectbox(key="maps_method").set_value("umap").run()
    ok(at)
    assert any("13 of 13 UMAP maps are not computed yet" in t for t in texts(at.info))
    assert not [b for b in at.button if b.key == "maps_cancel"]
    run = at.selectbox(key="maps_run").value
    ok(at.button(key="maps_compute").click().run())
    job = maps_job(run, "umap", 3)
    try:
        assert job is not None and not job.finished
        (bar,) = at.get("progress")
        assert f"UMAP maps of index #{run.id} are being computed in the background:" in bar.proto.text
        assert [b.key for b in at.button if b.key == "maps_cancel"] == ["maps_cancel"]
        ok(at.button(key="maps_cancel").click().run())
        assert job.wait(2.0) and job.outcome.status == "cancelled"
        ok(at.run())
        assert any("UMAP maps are not computed yet" in t for t in texts(at.info))
        assert not [b for b in at.button if b.key == "maps_cancel"] and not at.get("progress")
        store = db.open_store()
        stored = [p for p in db.list_projections(store, run.id) if p.method == "umap" and p.seed == 3]
        assert all(db.load_projection(store, p.id).coords.shape == (96, 2) for p in stored)  # kept, each whole
        store.close()
    finally:
        job.cancel()
        maps_jobs().clear()


def test_maps_page_umap_job_belongs_to_one_index_not_its_id(built):
    """A UMAP job of a deleted index whose id SQLite handed to a newer one is not the newer one's: the page asks
    before computing; a job of this index itself is shown as computing."""
    from dataclasses import replace

    import db
    from services.workflows.maps import MapsJob
    from ui.background import maps_jobs

    at = ok(page("7_Maps.py").run())
    run = at.selectbox(key="maps_run").value
    ok(at.number_input(key="maps_seed").set_value(7).run())
    at.selectbox(key="maps_method").set_value("umap").run()
    store = db.open_store()
    try:
        earlier = replace(run, created_at=run.created_at - timedelta(hours=1))
        maps_jobs()[(db.identity_key(earlier), "umap", 7)] = MapsJob(store, earlier, "umap", 7)  # not started
        ok(at.run())
        assert any("13 of 13 UMAP maps are not computed yet" in t for t in texts(at.info)) and not at.get("progress")
        maps_jobs()[(db.identity_key(run), "umap", 7)] = MapsJob(store, run, "umap", 7)
        ok(at.run())
        assert "being computed in the background: 0 of 13 stored" in at.get("progress")[0].proto.text
    finally:
        maps_jobs().clear()
        store.close()


def test_stale_index_is_reported_and_updated_embedding_only_the_edited_document(built):
    import db

    store = db.open_store()
    corpus = db.list_corpora(store)[0]
    doc = db.list_documents(store, corpus.id, limit=1).items[0]
    db.update_document(store, doc.id, text=doc.text + " An added sentence about copper.")
    store.close()
    at = ok(page("4_Index.py").run())
    assert any("is stale" in w for w in texts(at.warning))
    assert "Updating embeds 1 new or edited document; the 95 unchanged ones keep their vectors from index #1." in (
        texts(at.caption))
    cmp = ok(page("5_Compare.py").run())
    assert any("is stale" in w for w in texts(cmp.warning))
    assert "#1 · minilm · layer 5 · mean pooling · 96 docs · stale" in cmp.selectbox(key="compare_run").options
    # The warning's button opens the Index page on that index's settings, whatever was chosen there before.
    # (A page run alone by AppTest cannot switch pages: the attempt is the exception, after the choices were set.)
    cmp.session_state["index_layer"] = 2
    cmp.session_state["_index_layer_default_for"] = "minilm"
    runs = cmp.selectbox(key="compare_run")  # the module's other tests built other indexes before
    ok(runs.select_index(next(i for i, o in enumerate(runs.options) if o.startswith("#1 "))).run())
    cmp.button(key="stale_update_1").click().run()
    assert [e.value for e in cmp.exception] and "`pages/4_Index.py`" in cmp.exception[0].value
    assert (cmp.session_state["index_model_choice"], cmp.session_state["index_layer"]) == ("minilm", 5)
    idx = page("4_Index.py")
    for k in ("corpus_id", "index_model_choice", "index_layer", "index_pooling", "_index_layer_default_for",
              "_index_pooling_default_for"):
        idx.session_state[k] = cmp.session_state[k]
    ok(idx.run())
    assert idx.selectbox(key="index_layer").value == 5 and idx.selectbox(key="index_pooling").value == "mean"
    assert any("Index #1 is stale" in w for w in texts(idx.warning))
    assert [b.key for b in idx.button if b.key == "index_rebuild"] == ["index_rebuild"]
    # Update: only the edited document is embedded, and Compare has a current index again.
    at.button(key="index_rebuild").click().run()
    for _ in range(200):
        if ok(at).success:
            break
        time.sleep(0.5)
        at.run()
    message = texts(at.success)[0]
    assert ("Embedded 1 document in" in message
            and "; 95 unchanged documents kept their vectors from an earlier index." in message)
    # the updated index is the demo's: its UMAP maps are computed in the background too (cancelled here)
    assert message.endswith("Its UMAP maps are being computed in the background: Maps opens on them when they are "
                            "done.")
    from ui.background import cancel_maps, maps_jobs

    for job in list(maps_jobs().values()):
        cancel_maps(job)
    cmp = ok(page("5_Compare.py").run())
    assert not any("is stale" in w for w in texts(cmp.warning))
    labels = cmp.selectbox(key="compare_run").options
    assert not labels[0].endswith("stale")  # the new index, first
    assert "#1 · minilm · layer 5 · mean pooling · 96 docs · stale" in labels  # still there to pick


def stored_table(at: AppTest):
    """The Index page's table of stored indexes."""
    (table,) = [d.value for d in at.dataframe if {"index", "state", "size MB"} <= set(d.value.columns)]
    return table


def test_index_page_lists_stored_indexes_and_deletes_one(built):
    import db

    at = ok(page("4_Index.py").run())
    table = stored_table(at)
    listed = dict(zip(table["index"], table["state"]))
    assert listed["#1"] == "superseded" and "current" in listed.values()  # #1 was updated into a newer index
    assert set(table["size MB"]) and (table["documents"] > 0).all() and set(table["precision"]) == {"float32"}
    ok(at.multiselect(key="index_delete_ids").set_value([1]).run())
    assert at.button(key="index_delete_go").disabled  # not before the confirmation
    ok(at.checkbox(key="index_delete_sure").check().run())
    ok(at.button(key="index_delete_go").click().run())
    assert any(m.startswith("Deleted 1 index (") for m in texts(at.success))
    assert "#1" not in stored_table(at)["index"].tolist()
    store = db.open_store()
    assert 1 not in [r.id for r in db.list_embedding_runs(store)]
    store.close()
