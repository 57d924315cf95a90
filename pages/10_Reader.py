"""Reader: one query's top-k documents from two strategies go to an LLM with the multi-aspect reader
prompt; the two answers (Standard and MRAG first; the recommended strategy, named by its label, among the
choices) are shown side by side with the distinct facts each contains.

Thin page: retrieval is ``services.workflows.compare`` (every strategy at up to 20 results; the
panel sends the top k), the reading is ``ui.reader_panel``.
"""

from __future__ import annotations

from ui.navigation import open_through_app

open_through_app(__file__)  # first, before the imports below (see its docstring)

import streamlit as st

from services import storage
from services.workflows.compare import (
    PARTS_KEY,
    STRATEGY_LABELS,
    SUBQUERY_SOURCES,
    compare,
    embed_query_and_texts,
    resolve_subqueries,
    sentence_split,
)
from services.workflows.indexing import query_window, too_small_to_search
from ui.navigation import page_setup
from ui.query_widgets import query_picker
from ui.reader_panel import comparison_labels, comparison_lists, reader_panel
from ui.render import md_plain
from ui.state import finished_runs_or_stop, index_bundle, index_picker, open_corpus_page, run_model_or_stop

K_MAX = 20

page_setup(__file__, "📖")
st.title("Reader")
st.caption("Retrieval is only half of RAG: send the top-k documents of Standard RAG and of MRAG to an LLM "
           "and compare what the answers contain.")


@st.cache_resource(max_entries=128, show_spinner="Embedding the query…")
def query_embeddings(run_key: str, query: str, subqueries: tuple[str, ...], parts: tuple[str, ...], _lm,  # noqa: ANN001
                     layer: int):
    """Query, sub-queries and the query's sentences (the recommended strategy's parts) in one forward pass
    (cached per run, by its storage.identity_key, and texts)."""
    q, subs, groups, _ = embed_query_and_texts(_lm, layer, query, subqueries, parts=parts)
    return q, subs, groups.get(PARTS_KEY)


store, corpus = open_corpus_page()
runs = finished_runs_or_stop(store, corpus)
run = index_picker(store, runs, key="reader_run")
if too_small := too_small_to_search(run):
    st.info(too_small)
    st.stop()
lm = run_model_or_stop(store, run)
bundle = index_bundle(store, run)

# --- query -------------------------------------------------------------------------------------
picked = query_picker(store, corpus.id, key="reader")
query_text, stored_fusion, ground_truth = picked.text, picked.fusion, picked.ground_truth
if not query_text:
    st.info("Type a query (or pick one from a query set) to read its retrieved documents.")
    st.stop()

if cut := query_window(lm, query_text).note(query_text, run.model_name.split("/")[-1]):
    st.warning(md_plain(cut))

# --- retrieval (every strategy; Fusion uses the stored sub-queries or one per sentence) ----------
subqueries, sub_source = resolve_subqueries(query_text, stored_fusion, prefer="stored")
parts = tuple(sentence_split(query_text))
q_emb, sub_emb, part_emb = query_embeddings(storage.identity_key(run), query_text, tuple(subqueries), parts, lm,
                                            run.layer)
result = compare(bundle, q_emb, sub_emb, strategies=list(STRATEGY_LABELS), k=min(K_MAX, bundle.index.n_docs),
                 ground_truth=ground_truth, query=query_text, subqueries=subqueries, subquery_source=sub_source,
                 parts=part_emb, part_texts=parts)
st.caption(f"Fusion sub-queries: {len(subqueries)}, {SUBQUERY_SOURCES[sub_source]}."
           + (f" Ground truth: {len(ground_truth)} document(s), one per aspect." if ground_truth else ""))

reader_panel(store, query_text, comparison_lists(store, result), key="reader",
             default_k=max(1, min(len(ground_truth) or 5, K_MAX)), labels=comparison_labels(result))
