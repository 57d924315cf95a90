"""MRAG Studio: landing page. Loads the demo corpus on first start and explains the idea.

Run with ``streamlit run app.py``. Pages live in ``pages/``; this file stays thin.
"""

from __future__ import annotations

import streamlit as st

import db
from ui.state import ensure_demo, get_store, llm_config

st.set_page_config(page_title="MRAG Studio", page_icon="🧭", layout="wide")

st.title("MRAG Studio")
st.caption("Build multi-aspect document collections; see, measure and explain how Multi-Head RAG retrieves "
           "compared with standard RAG.")

try:
    status = ensure_demo()
except db.StoreError as exc:
    st.error(f"The database could not be prepared: {exc}")
    st.stop()

store = get_store()
corpora = db.list_corpora(store)
cols = st.columns(3)
cols[0].metric("Corpora", len(corpora))
cols[1].metric("Documents", sum(c.n_documents for c in corpora))
cols[2].metric("Query sets", len(db.list_query_sets(store)))

cfg = llm_config()
if cfg is None:
    st.info("No LLM endpoint configured: pre-annotation and query generation use the offline defaults "
            "(embedding zero-shot annotator, deterministic query composer). See the README to configure "
            "an OpenAI-compatible endpoint.")
else:
    st.success(f"LLM endpoint: {cfg.describe()}")

st.subheader("The idea")
st.markdown(
    """
Standard RAG embeds a text as **one vector** and retrieves its nearest neighbours. A question touching several
unrelated topics lands *between* them and misses most. **Multi-Head RAG** takes, from the same forward pass, the
output of **each attention head** of one layer (before the output projection): *h* separate embedding spaces.
Each head votes for its nearest documents (weight *s_i · 2^-rank*, with *s_i* the head's importance) and the
votes are summed.

* **Corpus Import / Annotate & Review / Agreement & Export**: import, pre-annotate, correct labels, export.
* **Index**: embed a corpus (standard, per-head, split) and see head importance.
* **Compare**: Standard vs MRAG vs Split vs Fusion side by side, with per-head evidence.
"""
)
st.caption(f"Database: {store.url_display if hasattr(store, 'url_display') else 'default SQLite file'}")
