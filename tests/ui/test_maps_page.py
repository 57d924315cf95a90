"""AppTest of the Maps page on indexes too small for a map (no traceback, a plain message)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import db

MAPS_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "7_Maps.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _tiny_index(n_docs: int) -> int:
    """A corpus of ``n_docs`` documents with a finished index of random vectors; the corpus id."""
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.create_corpus(store, "Tiny")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"text {i}", "label": "a"}
                                              for i in range(n_docs)]).document_ids
    run = db.create_embedding_run(store, corpus.id, model_name="minilm", layer=5, pooling="mean", n_heads=2,
                                  head_dim=2, dim=4)
    rng = np.random.default_rng(0)
    db.save_vectors(store, run.id, ids, rng.normal(size=(n_docs, 4)), rng.normal(size=(n_docs, 2, 2)))
    db.finish_embedding_run(store, run.id)
    store.close()
    return corpus.id


def test_maps_page_says_a_map_needs_three_documents() -> None:
    at = AppTest.from_file(MAPS_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = _tiny_index(2)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [i.value for i in at.info] == ["A map needs at least three documents; this index has 2. Add documents on "
                                          "the Corpus Import page and update the index."]
    assert not at.get("plotly_chart")


def test_maps_page_draws_three_documents() -> None:
    at = AppTest.from_file(MAPS_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = _tiny_index(3)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 1 and len(at.dataframe[-1].value) == 3


def _tiny_model_index(folder: Path, n_docs: int) -> tuple[int, list[int]]:
    """A corpus of ``n_docs`` documents indexed with the tiny GPT-2 in ``folder`` (a real build), and a query set
    of one query whose ground truth is its first two documents; (corpus id, document ids)."""
    from mrag_core.models.loader import load_model
    from services.workflows.indexing import build_embedding_run

    words = ["the cat sat", "lighthouse tempeh", "the lighthouse", "cat tempeh sat", "sat the cat"]
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.create_corpus(store, "Tiny")
    ids = list(db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": words[i % len(words)], "label": "a"}
                                                   for i in range(n_docs)]).document_ids)
    build_embedding_run(store, corpus.id, load_model(str(folder), device="cpu"), layer=-1)
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [{"text": "the cat", "ground_truth": ids[:2]}])
    store.close()
    return corpus.id, ids


def test_maps_caption_gives_the_k_used_when_the_index_has_fewer_documents(tmp_path) -> None:
    """k 10 on an index of 4 documents retrieves all 4: the caption says k=4, as many as are ringed."""
    from tests.support.tiny_models import tiny_gpt2_folder

    corpus_id, _ = _tiny_model_index(tiny_gpt2_folder(tmp_path / "gpt2", n_layer=2), 4)
    at = AppTest.from_file(MAPS_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="maps_qsrc").set_value("From a query set").run()
    assert at.number_input(key="maps_k").value == 2  # the query's ground truth
    at.number_input(key="maps_k").set_value(10).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption if " at k=" in c.value]
    assert len(captions) == 1 and captions[0].startswith("MRAG at k=4: RSR "), captions
    assert at.dataframe[-1].value["retrieved"].sum() == 4


def test_maps_page_with_the_models_folder_gone_says_to_restore_it_or_build_another(tmp_path) -> None:
    """The maps are drawn from stored vectors; placing a query needs the model, whose folder was deleted."""
    import shutil

    from tests.support.tiny_models import tiny_gpt2_folder
    from ui.render import md_plain

    folder = tiny_gpt2_folder(tmp_path / "gpt2_model", n_layer=2)
    corpus_id, _ = _tiny_model_index(folder, 4)
    shutil.rmtree(folder)
    at = AppTest.from_file(MAPS_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="maps_qsrc").set_value("Type a query").run()
    at.text_input(key="maps_typed").input("the cat").run()
    assert not at.exception, [e.value for e in at.exception]
    path = folder.resolve()
    said = (f"The index's model could not be loaded: unknown model '{path}': not a registry name (minilm, smollm2) "
            f"and not an existing folder. Restore the model folder at {path} (the index keeps its vectors, not the "
            "model), or build an index with another model on the Index page.")
    assert [e.value for e in at.error] == [md_plain(said)]
    assert r"gpt2\_model" in at.error[0].value
    assert not at.get("plotly_chart")  # the page stopped


def test_a_map_whose_model_an_older_version_pickled_is_drawn_never_unpickled_and_refitted(tmp_path) -> None:
    """A stored map whose model is a pickle (as older versions stored them, or as a hostile writer to a shared
    database plants them): the page draws the map, never loads the pickle, says why the query is not placed, and
    the refit button stores the map again with a model that places the query."""
    import pickle

    from mrag_core.projection import PICKLE_TAG, space_names
    from tests.support.tiny_models import tiny_gpt2_folder

    class Planted:
        def __reduce__(self):
            return (open, (str(tmp_path / "pwned"), "w"))

    corpus_id, ids = _tiny_model_index(tiny_gpt2_folder(tmp_path / "gpt2", n_layer=2), 4)
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    run = db.list_embedding_runs(store, corpus_id)[0]
    for space in space_names(run.n_heads):
        db.save_projection(store, run.id, space, "pca", np.zeros((4, 2), np.float32), ids, seed=0,
                           model_blob=PICKLE_TAG + pickle.dumps(Planted()))
    store.close()
    at = AppTest.from_file(MAPS_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="maps_qsrc").set_value("Type a query").run()
    at.text_input(key="maps_typed").input("the cat").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not (tmp_path / "pwned").exists()
    n = len(space_names(run.n_heads))
    notes = [i.value for i in at.info if "not placed" in i.value]
    assert len(notes) == 1 and notes[0].startswith(f"The query is not placed on {n} of {n} maps (standard, head:0")
    assert "older version of MRAG Studio" in notes[0] and "Refit them" in notes[0]
    at.button(key="maps_refit").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [i.value for i in at.info if "not placed" in i.value]
    assert not (tmp_path / "pwned").exists()
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    blobs = [db.load_projection(store, p.id).model_blob for p in db.list_projections(store, run.id)]
    store.close()
    assert len(blobs) == n and all(b.startswith(b"mrag-studio-reducer-npz-v2\n") for b in blobs)
