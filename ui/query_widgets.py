"""The query picker shared by the Compare and Reader pages: a query from a query set, or typed."""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

import db


@dataclass
class PickedQuery:
    """What the picker chose: the text, its stored Fusion sub-queries and its ground-truth document ids
    (both empty for a typed query); ``row`` is the stored query, ``None`` when typed."""

    text: str = ""
    fusion: list[str] = field(default_factory=list)
    ground_truth: list[int] = field(default_factory=list)
    row: db.QueryRow | None = None


def aspects_label(q: db.QueryRow) -> str:
    return f"[{q.n_aspects} aspect{'s' if q.n_aspects != 1 else ''}] {q.text[:110]}"


def query_picker(store: db.Store, corpus_id: int, *, key: str,
                 preselect: tuple[int, int] | None = None) -> PickedQuery:
    """Radio "From a query set" / "Type a query" and the widgets behind it (keys start with ``key``).
    ``preselect`` = (query set id, query id) selects that query (the evaluation drill-down).
    Stops the page with a note when the corpus has no query set or the set is empty."""
    source = st.radio("Query", ["From a query set", "Type a query"], horizontal=True, key=f"{key}_source")
    if source == "Type a query":
        text = st.text_area("Query text", height=110, key=f"{key}_typed",
                            placeholder="A question touching several unrelated topics…").strip()
        return PickedQuery(text)
    sets = db.list_query_sets(store, corpus_id)
    if not sets:
        st.info("This corpus has no query set: type a query instead.")
        st.stop()
    if preselect is not None:
        st.session_state[f"{key}_qs"] = next((s for s in sets if s.id == preselect[0]), sets[0])
    qs = st.selectbox("Query set", sets, format_func=lambda s: f"{s.name} ({s.n_queries})", key=f"{key}_qs")
    queries = [q for q in db.list_queries(store, qs.id) if q.status != "failed"]
    if not queries:
        st.info("This query set is empty.")
        st.stop()
    if preselect is not None:
        picked = [q for q in queries if q.id == preselect[1]]
        if picked:
            st.session_state[f"{key}_query"] = picked[0]
    q = st.selectbox("Query", queries, key=f"{key}_query", format_func=aspects_label)
    st.text_area("Query text", q.text, height=110, disabled=True, key=f"{key}_qtext_{q.id}")
    return PickedQuery(q.text, list(q.fusion), list(q.ground_truth), q)
