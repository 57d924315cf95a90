"""Query pickers: a stored query (query set, number of aspects, query) on Compare, Reader, Maps and
Attention; on Compare and Reader also a typed one."""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from mrag_core.wording import counted
from services import storage
from services.workflows import queries as query_store
from ui.state import KEEP, keep_choice, preselect_choice


@dataclass
class PickedQuery:
    """What the picker chose: the text, its stored Fusion sub-queries and its ground-truth document ids
    (both empty for a typed query); ``row`` is the stored query, ``None`` when typed."""

    text: str = ""
    fusion: list[str] = field(default_factory=list)
    ground_truth: list[int] = field(default_factory=list)
    row: storage.QueryRow | None = None


def aspects_label(q: storage.QueryRow) -> str:
    """A query as the picker shows it: ``[2 aspects] start of its text``."""
    return f"[{counted(q.n_aspects, 'aspect')}] {q.text[:110]}"


def query_set_label(qs: storage.QuerySetInfo) -> str:
    """A query set as the picker shows it: ``name (N queries)``."""
    return f"{qs.name} ({counted(qs.n_queries, 'query', 'queries')})"


ALL_ASPECTS = "all"
NO_QUERY_SET = "This corpus has no query set yet: build one on the Query Builder page, or type the text instead."


def aspect_counts(queries: list[storage.QueryRow]) -> dict[int, int]:
    """How many of ``queries`` have each number of aspects, by increasing number of aspects."""
    counts: dict[int, int] = {}
    for q in queries:
        counts[q.n_aspects] = counts.get(q.n_aspects, 0) + 1
    return dict(sorted(counts.items()))


def aspect_summary(queries: list[storage.QueryRow]) -> str:
    """How many usable (not failed) queries each number of aspects has, in one line for the Query Builder's review:
    ``By number of aspects: 1 query with 1 aspect · 2 queries with 3 aspects (1 failed query not counted)``;
    empty for no query."""
    usable = [q for q in queries if q.status != "failed"]
    failed = len(queries) - len(usable)
    if not queries:
        return ""
    parts = [f"{counted(m, 'query', 'queries')} with {counted(n, 'aspect')}" for n, m in aspect_counts(usable).items()]
    return ("By number of aspects: " + (" · ".join(parts) or "no usable query")
            + (f" ({counted(failed, 'failed query', 'failed queries')} not counted)" if failed else ""))


def most_aspects_index(queries: list[storage.QueryRow]) -> int:
    """Position of the first query with the most aspects (0 for an empty list): the picker's default, since a
    query touching many topics is where Standard RAG and MRAG differ."""
    return max(range(len(queries)), key=lambda i: (queries[i].n_aspects, -i), default=0)


def _filter_by_aspects(col, queries: list[storage.QueryRow], *, key: str, reset: bool) -> list[storage.QueryRow]:
    """An "Aspects" select in ``col`` (all, or one number of aspects of the set) and the queries it keeps.
    ``reset``: back to all (a drill-down must find its query). A choice the current set lacks falls back to
    all; one whose count changed (a query added) stays (:func:`ui.state.keep_choice`)."""
    counts = aspect_counts(queries)
    options = [ALL_ASPECTS, *counts]
    if reset:
        preselect_choice(key, ALL_ASPECTS)
    wanted = keep_choice("Aspects", options, key=key, ident=lambda n: n, container=col, disabled=len(counts) < 2,
                         **KEEP,
                         format_func=lambda n: f"all ({len(queries)})" if n == ALL_ASPECTS else f"{n} ({counts[n]})",
                         help="Show only the queries with this number of aspects (ground-truth documents).")
    return queries if wanted == ALL_ASPECTS else [q for q in queries if q.n_aspects == wanted]


def stored_query_picker(store: storage.Store, corpus_id: int, *, key: str, preselect: tuple[int, int] | None = None,
                        stop: bool = True) -> storage.QueryRow | None:
    """The query set, an "Aspects" filter and the query (keys ``{key}_qs``, ``{key}_aspects``,
    ``{key}_query``); returns the chosen query. ``preselect`` = (query set id, query id) selects that
    query (the evaluation drill-down), the filter back on all; otherwise the first query with the most
    aspects is selected until the user picks one. Without a query set, or with an empty
    set, a note says so and the page stops there (``stop=False``: returns ``None`` instead).

    The boxes show counts and texts that change (a query added or edited elsewhere); each follows its item's
    identity (:func:`ui.state.keep_choice`), so a rerun never silently moves to another set or query."""
    sets = query_store.list_query_sets(store, corpus_id)
    if not sets:
        return _nothing_to_pick(NO_QUERY_SET, stop)
    if preselect is not None:
        preselect_choice(f"{key}_qs", preselect[0])
    set_col, aspects_col = st.columns([3, 1])
    qs = keep_choice("Query set", sets, key=f"{key}_qs", ident=lambda s: s.id, format_func=query_set_label,
                     container=set_col, **KEEP)
    queries = [q for q in query_store.list_queries(store, qs.id) if q.status != "failed" and q.text.strip()]
    if not queries:
        return _nothing_to_pick("This query set has no query with a text.", stop)
    queries = _filter_by_aspects(aspects_col, queries, key=f"{key}_aspects", reset=preselect is not None)
    qkey = f"{key}_query"
    if preselect is not None and any(q.id == preselect[1] for q in queries):
        preselect_choice(qkey, preselect[1])
    # a query not among these (another set or filter): start again from the default
    return keep_choice("Query", queries, key=qkey, ident=lambda q: q.id, format_func=aspects_label,
                       index=most_aspects_index(queries), **KEEP)


def _nothing_to_pick(message: str, stop: bool) -> None:
    st.info(message)
    if stop:
        st.stop()
    return None


def query_picker(store: storage.Store, corpus_id: int, *, key: str,
                 preselect: tuple[int, int] | None = None) -> PickedQuery:
    """Radio "From a query set" / "Type a query" and the widgets behind it (keys start with ``key``): for a
    stored query, :func:`stored_query_picker` (which stops the page when there is nothing to pick) and the
    query's text."""
    source = st.radio("Query", ["From a query set", "Type a query"], horizontal=True, key=f"{key}_source", **KEEP)
    if source == "Type a query":
        text = st.text_area("Query text", height=110, key=f"{key}_typed", **KEEP,
                            placeholder="A question touching several unrelated topics…").strip()
        return PickedQuery(text)
    q = stored_query_picker(store, corpus_id, key=key, preselect=preselect)
    st.text_area("Query text", q.text, height=110, disabled=True, key=f"{key}_qtext_{q.id}")
    return PickedQuery(q.text, list(q.fusion), list(q.ground_truth), q)
