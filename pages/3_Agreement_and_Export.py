"""Agreement and Export, the third of the three corpus pages (after Annotate and Review): how often the machine
suggestions agree with human decisions (per category and as a confusion matrix; suggestions accepted in bulk counted
apart), the annotation team and the agreement between its annotators (kappa, alpha, the documents they disagree on,
adjudication), and export of the curated corpus (JSONL, CSV, Parquet, MRAG benchmark JSON)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from services.export import EXPORT_FORMATS, file_stem
from services.workflows import agreement as agw
from services.workflows import annotation as aw
from services.workflows import corpus as cw
from ui import team_agreement as ta
from ui.corpus_widgets import agent_picker, reviewer_name
from ui.navigation import page_setup
from ui.render import md_plain, plotly_text
from ui.state import open_corpus_page

page_setup(__file__, "📊")
st.title("Agreement and Export")

store, corpus = open_corpus_page()
adjudicator = reviewer_name()
ta.show_messages()

# --------------------------------------------------------------------------- agreement
st.subheader("Suggestion vs human decision")
agent = agent_picker(store, corpus.id, key="ag_agent")
agreement = agw.suggestion_agreement(store, corpus.id, agent=agent[0] if agent else None,
                                     model_version=agent[1] if agent else None)
if agreement.n_bulk:
    st.caption(f"{agreement.n_bulk} document{'s' if agreement.n_bulk != 1 else ''} labelled by accepting the "
               "suggestion in bulk (unseen) are counted apart: they agree with it by construction, and would inflate "
               "the figure.")
if agreement.n == 0:
    st.info("Nothing to compare yet: agreement needs documents that have both a machine suggestion and a human "
            "decision (labels that came with the import count as decisions; suggestions accepted in bulk do not). "
            "Run pre-annotation first.")
else:
    m1, m2, m3 = st.columns(3)
    m1.metric("Documents compared", agreement.n)
    m2.metric("Agreement", f"{agreement.accuracy:.1%}" if agreement.accuracy is not None else "n/a")
    m3.metric("Bulk-accepted (apart)", agreement.n_bulk,
              help="Documents whose label accepted the suggestion in bulk, without review: not compared.")
    per_cat = pd.DataFrame(
        [{"category (decided)": c.category, "documents": c.n, "suggestion agreed": c.n_agree,
          "accuracy": c.accuracy} for c in agreement.per_category.values()],
    )  # fmt: skip
    st.dataframe(per_cat, hide_index=True, width="stretch", column_config={
        "accuracy": st.column_config.ProgressColumn("accuracy", min_value=0.0, max_value=1.0, format="percent")})
    names, matrix = aw.confusion_table(agreement)
    shown = [plotly_text(n) for n in names]  # category names verbatim on the axes and in the hover
    fig = go.Figure(go.Heatmap(z=matrix, x=shown, y=shown, colorscale="Blues", text=matrix, texttemplate="%{text}",
                               hovertemplate="suggested %{y}<br>decided %{x}: %{z}<extra></extra>"))
    fig.update_layout(xaxis_title="human decision", yaxis_title="machine suggestion", height=160 + 28 * len(names),
                      yaxis_autorange="reversed", margin=dict(l=10, r=10, t=30, b=10))
    st.plotly_chart(fig, width="stretch")
    with st.expander("Confusion matrix as a table"):
        st.dataframe(pd.DataFrame(matrix, index=[f"suggested: {n}" for n in names], columns=names), width="stretch")

# --------------------------------------------------------------------------- agreement between annotators
st.subheader("Agreement between annotators")
ta.team_section(store, corpus, adjudicator)
ta.agreement_section(store, corpus)
st.markdown("**Disagreements**")
ta.disagreements_section(store, corpus, agw.category_names(store, corpus.id), adjudicator)

# --------------------------------------------------------------------------- export
st.subheader("Export")
st.caption("Each document gets its human label (decisions, including labels that came with the import); "
           "documents nobody has decided on can fall back to their machine suggestion, marked "
           "label_source = \"suggestion\".")
c1, c2 = st.columns(2)
fmt = c1.selectbox("Format", list(EXPORT_FORMATS), format_func=lambda f: EXPORT_FORMATS[f].name, key="ex_fmt")
include = c2.checkbox("Fall back to machine suggestions for undecided documents", value=True, key="ex_sugg")
skip_unlabelled = fmt == "benchmark" and c2.checkbox(
    "Leave unlabelled documents out (the benchmark format needs a label for each)", key="ex_skip")
export_key = (corpus.id, corpus.version, corpus.labels_version, fmt, include, skip_unlabelled)
if st.button("Prepare export", key="ex_prepare"):
    try:
        data = cw.export_documents(store, corpus.id, fmt, include_suggestions=include,
                                   unlabeled="skip" if skip_unlabelled else "error")
    except cw.ExportError as exc:
        st.session_state.pop("ex_data", None)
        st.error(f"Cannot export: {md_plain(str(exc))}.")
    else:
        st.session_state["ex_data"] = (export_key, data)
prepared = st.session_state.get("ex_data")
if prepared is not None and prepared[0] == export_key:  # stale once the options or the labels change
    safe = file_stem(corpus.name, "corpus")
    spec = EXPORT_FORMATS[fmt]
    st.download_button(f"Download {spec.name} ({len(prepared[1]):,} bytes)", prepared[1],
                       file_name=f"{safe}{spec.extension}", mime=spec.mime, key="ex_download")
