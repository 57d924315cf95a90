"""Streamlit helpers of the corpus pages, Corpus Import, Annotate and Review and Agreement and Export (previews,
reviewer name, agent picker, embeddings)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from services import storage
from services.workflows import corpus as cw
from services.workflows import review
from services.workflows.import_stream import ImportReport
from ui.render import md_plain
from ui.state import get_model, get_store

ZERO_SHOT_MODEL = "minilm"
PREVIEW_ROWS = 500


def reviewer_name() -> str:
    """The name decisions are stored under (sidebar text input shared by the pages), checked by
    ``clean_annotator_name``: a wrong one is named in the sidebar and the last good name (else ``reviewer``) is
    kept. An annotator on a corpus' team types their name here to annotate it blind."""
    from services.workflows.agreement import NAME_MAX, clean_annotator_name

    kept = st.session_state.get("reviewer", "reviewer")
    typed = st.sidebar.text_input(
        "Your name (stored with each decision)", value=kept, key="_reviewer_input", max_chars=NAME_MAX,
        help="Annotators on a corpus' team type their name to label their documents blind.",
    )  # fmt: skip
    if not (typed or "").strip():
        name = "reviewer"
    else:
        try:
            name = clean_annotator_name(typed)
        except ValueError as exc:
            st.sidebar.error(f"{md_plain(str(exc))} Decisions are stored under '{md_plain(kept)}' meanwhile.")
            name = kept
    st.session_state["reviewer"] = name
    return name


AgentKey = tuple[str, str]


def agent_label(agent: AgentKey | None, counts: dict[AgentKey, storage.AgentInfo]) -> str:
    """``"zero-shot:minilm · v1 (12 suggestions, 1 failed)"``; ``"(any)"`` for None."""
    if agent is None:
        return "(any)"
    name, version = agent
    info = counts.get(agent)
    text = f"{name} · {version}" if version else name
    if info is not None:
        n = info.n_suggestions
        failed = f", {info.n_failed} failed" if info.n_failed else ""
        text += f" ({n} suggestion{'s' if n != 1 else ''}{failed})"
    return text


def agent_picker(store: storage.Store, corpus_id: int, *, key: str, container: Any = None,
                 label: str = "Suggestion agent") -> AgentKey | None:
    """Selectbox over the (agent, model version) pairs that made suggestions on this corpus
    (``review.suggestion_agents``: one GROUP BY, no scan of the suggestions); None means any agent."""
    agents = review.suggestion_agents(store, corpus_id)
    counts = {(a.agent, a.model_version): a for a in agents}
    options: list[AgentKey | None] = [None, *counts]
    return (container or st).selectbox(label, options, key=key, format_func=lambda a: agent_label(a, counts))


def show_preview(preview: ImportReport) -> None:
    """Summary line, the records table (first rows) and the issues table, row by row, each issue located by its file
    and the row or line in it (``ImportIssue.where``). The report counts every record and issue but keeps only the
    first of each (``services.workflows.import_stream``): the tables say how many they show."""
    n_err, n_warn = preview.n_errors, preview.n_warnings
    summary = preview.summary()
    if n_err:
        st.warning(f"{summary}. Rows and files with errors are left out of the import.")
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
    st.markdown(f"**Documents** ({preview.n_records}; first {min(preview.n_records, PREVIEW_ROWS)} shown)")
    st.dataframe(records, hide_index=True, width="stretch")
    counts = preview.label_counts()
    if counts:
        # labels are data: escaped, so a label such as "![x](http://...)" shows verbatim (no image is fetched)
        st.caption("Labels: " + ", ".join(f"{md_plain(k) if k else '(none)'}: {v}"
                                          for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))))
    if preview.issues:
        shown = "" if len(preview.issues) == preview.n_issues else f"; first {len(preview.issues)} shown"
        st.markdown(f"**Issues** ({n_err} error{'s' if n_err != 1 else ''}, "
                    f"{n_warn} warning{'s' if n_warn != 1 else ''}{shown})")
        issues = pd.DataFrame(
            # where = the file (the archive's name first for a member of one) and the row or line: several files
            # read at once can be told apart; shown as plain text (a dataframe renders no Markdown or HTML)
            [{"severity": i.severity, "location": i.where, "message": i.message} for i in preview.issues],
            columns=["severity", "location", "message"],
        )
        st.dataframe(issues, hide_index=True, width="stretch")


@st.cache_resource(show_spinner="Embedding the corpus with minilm...", max_entries=4)
def corpus_embeddings(corpus_id: int, corpus_version: int, identity: str) -> tuple[list[int], Any]:
    """(document ids, Embeddings) of the corpus with minilm (disk-cached; one entry per version; ``identity``,
    :func:`storage.identity_key`, because SQLite gives a deleted corpus' id to the next one)."""
    from mrag_core.embedding_cache import cached_embed

    store = get_store()
    docs = cw.list_documents(store, corpus_id, limit=None).items
    emb, _hit = cached_embed(get_model(ZERO_SHOT_MODEL), [f"{d.title}\n{d.text}" if d.title else d.text for d in docs])
    return [d.id for d in docs], emb
