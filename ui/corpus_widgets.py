"""Streamlit helpers of the Corpus Studio pages (previews, reviewer name, agents, embeddings)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

import db
from mrag_core.annotate import llm_identity, zero_shot_identity
from mrag_core.ingest import ImportPreview
from ui.state import get_model, get_store, llm_config

ZERO_SHOT_MODEL = "minilm"
PREVIEW_ROWS = 500


def reviewer_name() -> str:
    """The name decisions are stored under (sidebar text input shared by the pages)."""
    name = st.sidebar.text_input(
        "Your name (stored with each decision)", value=st.session_state.get("reviewer", "reviewer"),
        key="_reviewer_input", max_chars=80,
    )  # fmt: skip
    name = (name or "").strip() or "reviewer"
    st.session_state["reviewer"] = name
    return name


def known_agents() -> list[str]:
    """Agents this app creates suggestions with (zero-shot minilm, and the configured LLM)."""
    agents = [zero_shot_identity(ZERO_SHOT_MODEL)[0]]
    cfg = llm_config()
    if cfg is not None:
        agents.append(llm_identity(cfg.model)[0])
    return agents


def show_preview(preview: ImportPreview) -> None:
    """Summary line, the records table (first rows) and the issues table, row by row."""
    n_err, n_warn = len(preview.errors), len(preview.warnings)
    summary = preview.summary()
    if n_err:
        st.warning(f"{summary}. Rows with errors are left out of the import.")
    else:
        st.info(summary)
    records = pd.DataFrame(
        [
            {"title": r.title, "label": r.label or "", "characters": len(r.text),
             "part": f"{r.chunk_index + 1}/{r.chunk_count}" if r.chunk_index is not None else "",
             "source": r.source, "text": r.text[:200]}
            for r in preview.records[:PREVIEW_ROWS]
        ],
        columns=["title", "label", "characters", "part", "source", "text"],
    )  # fmt: skip
    st.markdown(f"**Documents** ({len(preview.records)}; first {min(len(preview.records), PREVIEW_ROWS)} shown)")
    st.dataframe(records, hide_index=True, width="stretch")
    counts = preview.label_counts()
    if counts:
        st.caption("Labels: " + ", ".join(f"{k or '(none)'}: {v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))))
    if preview.issues:
        st.markdown(f"**Issues** ({n_err} error{'s' if n_err != 1 else ''}, {n_warn} warning{'s' if n_warn != 1 else ''})")
        issues = pd.DataFrame(
            [{"severity": i.severity, "location": i.location, "message": i.message} for i in preview.issues],
            columns=["severity", "location", "message"],
        )
        st.dataframe(issues, hide_index=True, width="stretch")


@st.cache_resource(show_spinner="Embedding the corpus with minilm...", max_entries=4)
def corpus_embeddings(corpus_id: int, corpus_version: int) -> tuple[list[int], Any]:
    """(document ids, Embeddings) of the corpus with minilm (disk-cached; one entry per version)."""
    from mrag_core.embedding_cache import cached_embed

    store = get_store()
    docs = db.list_documents(store, corpus_id, limit=None).items
    emb, _hit = cached_embed(get_model(ZERO_SHOT_MODEL), [f"{d.title}\n{d.text}" if d.title else d.text for d in docs])
    return [d.id for d in docs], emb
