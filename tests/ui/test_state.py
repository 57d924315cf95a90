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


def _counted_select(keep: bool) -> None:
    """Corpora shown as "name (n docs)", whose counts change between runs (an import), chosen with or without
    keep_choice; writes the chosen corpus' name."""
    from types import SimpleNamespace

    import streamlit as st

    from ui.state import keep_choice

    counts = st.session_state.get("counts", {"A": 1, "B": 2, "C": 3})
    corpora = [SimpleNamespace(name=name, n=n) for name, n in counts.items()]  # fresh objects each run, as from the db
    label = lambda c: f"{c.name} ({c.n} docs)"  # noqa: E731
    if keep:
        chosen = keep_choice("Corpus", corpora, key="corpus", ident=lambda c: c.name, format_func=label)
    else:
        chosen = st.selectbox("Corpus", corpora, key="corpus", format_func=label)
    st.write(f"chosen {chosen.name}")


def _after_import(keep: bool, counts: dict[str, int]) -> str:
    at = AppTest.from_function(_counted_select, args=(keep,)).run()
    at.selectbox(key="corpus").select_index(1).run()
    assert at.markdown[0].value == "chosen B"
    at.session_state["counts"] = counts
    at.run()
    assert not at.exception
    return at.markdown[0].value


def test_keep_choice_follows_the_item_when_its_text_changes() -> None:
    assert _after_import(False, {"A": 1, "B": 3, "C": 3}) == "chosen A"  # what Streamlit does by itself
    assert _after_import(True, {"A": 1, "B": 3, "C": 3}) == "chosen B"
    assert _after_import(True, {"Z": 0, "A": 1, "B": 2, "C": 3}) == "chosen B"  # a new item before it
    assert _after_import(True, {"A": 1, "C": 3}) == "chosen A"  # the chosen one is gone: the first


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


def _finished_run(store, corpus_id: int, doc_ids: list[int], model_name: str):  # noqa: ANN001, ANN202
    """A finished index of random vectors (4 dims, 2 heads x 2) over ``doc_ids``."""
    import numpy as np

    import db

    rng = np.random.default_rng(len(doc_ids))
    run = db.create_embedding_run(store, corpus_id, model_name=model_name, layer=0, pooling="mean",
                                  n_heads=2, head_dim=2, dim=4)
    db.save_vectors(store, run.id, doc_ids, rng.normal(size=(len(doc_ids), 4)), rng.normal(size=(len(doc_ids), 2, 2)))
    db.finish_embedding_run(store, run.id, status="done")
    return db.get_embedding_run(store, run.id)


def test_index_bundle_shows_current_labels_and_titles_and_never_a_deleted_runs_index(fresh_env) -> None:
    import db
    from ui.state import get_store, index_bundle

    store = get_store()
    corpus = db.create_corpus(store, "C")
    ids = list(db.add_documents(store, corpus.id, [
        {"title": f"T{i}", "text": f"text {i}", "label": "a" if i < 2 else "b"} for i in range(4)]).document_ids)
    first = _finished_run(store, corpus.id, ids, "m1")
    bundle = index_bundle(store, first)
    assert (bundle.doc_ids, bundle.labels, bundle.titles) == (ids, ["a", "a", "b", "b"], ["T0", "T1", "T2", "T3"])
    assert index_bundle(store, first).index is bundle.index  # the search index is kept

    doc = db.get_document(store, ids[0])
    db.decide_label(
        store, ids[0], db.add_categories(store, corpus.id, ["b"])[0].id, "ann", expected_version=doc.version
    )
    db.update_document(store, ids[3], title="Renamed")
    again = index_bundle(store, first)
    assert again.index is bundle.index  # labels and titles changed, the vectors did not
    assert (again.labels, again.titles) == (["b", "a", "b", "b"], ["T0", "T1", "T2", "Renamed"])

    db.delete_embedding_run(store, first.id)
    second = _finished_run(store, corpus.id, ids[:3], "m2")
    assert second.id == first.id  # SQLite hands the deleted run's id to the next one
    fresh = index_bundle(store, second)
    assert fresh.index is not bundle.index and fresh.doc_ids == ids[:3] and fresh.index.n_docs == 3


def test_index_label_names_the_settings_and_a_precision_other_than_float32(fresh_env) -> None:
    import dataclasses

    import db
    from ui.state import get_store, index_label

    store = get_store()
    corpus = db.create_corpus(store, "C")
    docs = [{"title": "T", "text": f"text {i}"} for i in range(3)]
    ids = list(db.add_documents(store, corpus.id, docs).document_ids)
    run = _finished_run(store, corpus.id, ids, "org/m1")
    assert run.id == 1 and index_label(run) == "#1 · m1 · layer 0 · mean pooling · 3 docs"
    half = dataclasses.replace(run, precision="float16")
    assert index_label(half, stale=True) == "#1 · m1 · layer 0 · mean pooling · float16 · 3 docs · stale"


def _corpus_picker_page() -> None:
    from ui.state import corpus_picker

    corpus_picker()


def test_corpus_picker_without_a_corpus_names_the_import_page_in_the_sidebar(fresh_env) -> None:
    from ui.page_list import PAGES, page_title

    at = AppTest.from_function(_corpus_picker_page, default_timeout=60).run()  # fresh_env: an empty database
    assert not at.exception, [e.value for e in at.exception]
    assert [i.value for i in at.info] == ["No corpus yet: import one on the Corpus Import page."]
    assert "Corpus Import" in [page_title(path) for path, _ in PAGES]


def _run_model_page(run_id: int) -> None:
    import streamlit as st

    import db
    from ui.state import get_store, run_model_or_stop

    store = get_store()
    run_model_or_stop(store, db.get_embedding_run(store, run_id))
    st.write("model loaded")


def test_an_index_whose_model_folder_is_gone_says_to_restore_it_or_build_another(fresh_env, tmp_path) -> None:
    import db
    from ui.render import md_plain
    from ui.state import get_store

    folder = tmp_path / "my_model"  # never created: a folder deleted or moved since the build
    store = get_store()
    corpus = db.create_corpus(store, "C")
    run = db.create_embedding_run(store, corpus.id, model_name=str(folder), model_path=str(folder), layer=1,
                                  pooling="last", n_heads=2, head_dim=8, dim=16)
    at = AppTest.from_function(_run_model_page, args=(run.id,), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    said = (f"The index's model could not be loaded: unknown model '{folder}': not a registry name (minilm, smollm2) "
            f"and not an existing folder. Restore the model folder at {folder} (the index keeps its vectors, not the "
            "model), or build an index with another model on the Index page.")
    assert [e.value for e in at.error] == [md_plain(said)]
    assert r"my\_model" in at.error[0].value  # the path is shown escaped, as typed
    assert not at.markdown  # the page stopped
