"""Home: the landing page. Loads the demo corpus on first start, says whether it has an index yet (or,
when the user deleted it, offers to restore it), links the demo steps and every page, and explains the idea."""

from __future__ import annotations

import streamlit as st

from services import storage
from services.demo.store import demo_corpus_id, demo_query_set_id, ensure_demo_corpus
from services.workflows import corpus as cw
from services.workflows import indexing
from services.workflows import queries as query_store
from ui.demo_results import draw_demo_results
from ui.page_list import PAGES, page_title
from ui.render import md_plain
from ui.state import building_note, ensure_demo, get_store, llm_config, preselect_choice

DEMO_STEPS = (
    ("pages/4_Index.py", "Index: embed the demo corpus (standard, per-head, split vectors)", None),
    ("pages/5_Compare.py", "Compare: a demo query with the most aspects comes preselected; Standard vs MRAG side by "
                           "side, with the per-head evidence", "compare_qs"),
    ("pages/9_Evaluation_Runs.py", "Evaluation Runs: score all demo queries, k = 1..32, and compare runs", "ev_qs"),
)
"""Home's "Start here" steps: (page, what it does on the demo corpus, the page's query set box or None). A step
opens its page on the demo corpus and, where it has a query set box, on the demo query set (not the corpus'
newest set, e.g. one just generated)."""

def home() -> None:
    """Draw the landing page."""
    st.title("MRAG Studio")
    st.caption("Build multi-aspect document collections; see, measure and explain how Multi-Head RAG retrieves "
               "compared with standard RAG.")

    try:
        ensure_demo()
    except storage.StoreError as exc:
        st.error(f"The database could not be prepared: {md_plain(str(exc))}")
        st.stop()

    store = get_store()
    corpora = cw.list_corpora(store)
    cols = st.columns(3)
    cols[0].metric("Corpora", len(corpora))
    cols[1].metric("Documents", sum(c.n_documents for c in corpora))
    cols[2].metric("Query sets", len(query_store.list_query_sets(store)))

    cfg = llm_config()
    if cfg is None:
        st.info("No LLM endpoint configured: pre-annotation and query generation use the offline defaults "
                "(embedding zero-shot annotator, deterministic query composer). See the README to configure "
                "an OpenAI-compatible endpoint.")
    else:
        st.success(f"LLM endpoint: {md_plain(cfg.describe())}")

    st.subheader("Start here")
    demo_id = demo_corpus_id(store)  # looked up each time: it may have been renamed or deleted since the start
    demo_runs = indexing.list_embedding_runs(store, demo_id, status="done") if demo_id is not None else []
    if demo_id is None:
        st.info("The demo corpus was deleted. Restore it to follow the steps below: 96 original articles in 12 "
                "categories and 24 multi-aspect queries, as on first start; your own corpora are not touched.")
        if st.button("Restore the demo corpus", key="home_restore_demo"):
            try:
                with st.spinner("Restoring the demo corpus..."):
                    ensure_demo_corpus(store, restore=True)
            except storage.DuplicateError as exc:
                st.error(f"Not restored: {md_plain(str(exc))} Rename that corpus first (Corpus Import, "
                         "Manage corpora).")
            except storage.StoreError as exc:
                st.error(f"Not restored: {md_plain(str(exc))}")
            else:
                ensure_demo.clear()
                st.rerun()
    elif demo_runs:
        newest = demo_runs[0]  # newest first
        st.success(f"The demo corpus has a finished index (#{newest.id}: {md_plain(newest.model_name)}, layer "
                   f"{newest.layer}): "
                   "go straight to Compare.")
    elif (building := building_note(store, demo_id)) is not None:
        st.info(f"The demo corpus has no finished index yet. {building}. Step 1 opens the Index page, where you "
                "can follow it.")
    else:
        st.info("The demo corpus has no index yet. Step 1 builds it with the shipped MiniLM model (96 documents, "
                "about 15 s on one CPU core).")
    for n, (path, label, set_box) in enumerate(DEMO_STEPS, start=1):
        # Buttons, not links: each step opens its page on the demo corpus (and the demo query set), whichever
        # corpus and set were chosen before.
        if st.button(f"{n}. {label}", key=f"home_step_{n}", type="tertiary", icon=":material/arrow_forward:",
                     disabled=demo_id is None):
            st.session_state["corpus_id"] = demo_id
            if set_box is not None and (demo_qs := demo_query_set_id(store)) is not None:
                preselect_choice(set_box, demo_qs)
            st.switch_page(path)
    if demo_id is not None:
        draw_demo_results(store)

    st.subheader("The idea")
    st.markdown(
        """
    Standard RAG embeds a text as **one vector** and retrieves its nearest neighbours. A question touching several
    unrelated topics lands *between* them and misses most. **Multi-Head RAG** takes, from the same forward pass, the
    output of **each attention head** of one layer (before the output projection): *h* separate embedding spaces.
    Each head votes for its nearest documents: the document at rank *r* (#1 the nearest) gets *s_i · 2^-(r-1)*
    votes, with *s_i* the head's importance, so the nearest gets the full *s_i*; the votes are summed.
    """
    )

    st.subheader("All pages")
    for path, what in PAGES:
        st.page_link(path, label=f"{page_title(path)}: {what}")

    st.caption(f"Database: {store.url}")
