"""Compare: one query through Standard, MRAG, Split, Fusion and Fusion MRAG side by side, with
ground-truth marks, RSR / CSR / weighted at k, and the per-head evidence behind the MRAG list.

Thin page: ``mrag_core.workflows.compare`` does the work; the loaded index is cached per run id.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

import db
from mrag_core.backends import BACKENDS
from mrag_core.models.loader import ModelLoadError
from mrag_core.voting import VARIANTS
from mrag_core.workflows.compare import (
    FUSION_STRATEGIES,
    MARK_SYMBOLS,
    STRATEGY_LABELS,
    SUBQUERY_SOURCES,
    Comparison,
    StoreLLMCache,
    compare,
    embed_query,
    resolve_subqueries,
)
from mrag_core.workflows.indexing import IndexBundle, load_corpus_index, model_for_run
from ui.state import finished_runs_or_stop, get_model, get_store, llm_config, open_corpus_page

st.set_page_config(page_title="Compare · MRAG Studio", page_icon="🧭", layout="wide")
st.title("Compare")
st.caption("One query, several retrieval strategies, side by side. The query and its sub-queries are embedded "
           "in one forward pass that feeds every strategy.")


@st.cache_resource(show_spinner="Loading the index…", max_entries=4)
def get_bundle(run_id: int, backend: str) -> IndexBundle:
    """A finished run's search index (immutable once done, so the run id is a safe key)."""
    return load_corpus_index(get_store(), run_id, backend)


@st.cache_resource(max_entries=128)
def query_embeddings(run_id: int, query: str, subqueries: tuple[str, ...], _lm, layer: int):  # noqa: ANN001
    return embed_query(_lm, layer, query, subqueries)


def run_label(r: db.EmbeddingRunInfo) -> str:
    return f"#{r.id} · {r.model_name.split('/')[-1]} · layer {r.layer} · {r.pooling} pooling · {r.n_saved} docs"


def results_frame(cmp: Comparison, key: str) -> pd.DataFrame:
    rows = cmp.outcomes[key].rows
    data = {"rank": [r.rank for r in rows], "title": [r.title for r in rows],
            "category": [r.category for r in rows], "score": [r.score for r in rows]}
    if cmp.ground_truth_rows:
        data = {"rank": data["rank"], "mark": [MARK_SYMBOLS[r.mark] for r in rows],
                **{k: v for k, v in data.items() if k != "rank"}}
    return pd.DataFrame(data)


def evidence_figure(cmp: Comparison, bundle: IndexBundle) -> go.Figure:
    ev = cmp.evidence
    assert ev is not None
    titles = [f"{j + 1}. {bundle.titles[d][:28]}" for j, d in enumerate(ev.docs)]
    heads = [f"h{h}" for h in range(ev.rank.shape[0])]
    hover = [[(f"head {h} · {bundle.titles[d]}<br>rank {ev.rank[h, j] + 1} in this head · vote {ev.contribution[h, j]:.4f}"
               if ev.rank[h, j] >= 0 else f"head {h} · {bundle.titles[d]}<br>not in this head's top {cmp.c}")
              for j, d in enumerate(ev.docs)] for h in range(len(heads))]
    text = [[str(ev.rank[h, j] + 1) if ev.rank[h, j] >= 0 else "" for j in range(len(ev.docs))] for h in range(len(heads))]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.82, 0.18], horizontal_spacing=0.02,
                        subplot_titles=("vote contribution (cell text = rank in the head)", "importance s_i"))
    fig.add_trace(go.Heatmap(z=ev.contribution, x=titles, y=heads, text=text, texttemplate="%{text}",
                             hovertext=hover, hoverinfo="text", colorscale="Blues", showscale=False), row=1, col=1)
    fig.add_trace(go.Bar(x=ev.importance, y=heads, orientation="h", marker_color="#3aa675",
                         hovertemplate="%{y}: s=%{x:.4f}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=max(320, 26 * len(heads) + 160), showlegend=False, margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(tickangle=-35, row=1, col=1)
    return fig


store, corpus = open_corpus_page()

runs = finished_runs_or_stop(store, corpus)
run_ids = [r.id for r in runs]
wanted = st.session_state.get("run_id")
c1, c2 = st.columns([3, 1])
run = c1.selectbox("Index (embedding run)", runs, index=run_ids.index(wanted) if wanted in run_ids else 0,
                   format_func=run_label, key="compare_run")
backend_default = st.session_state.get("run_backend", "torch")
backend = c2.selectbox("Search backend", BACKENDS, index=BACKENDS.index(backend_default), key="compare_backend")
if db.is_stale(store, run):
    st.warning(f"Index #{run.id} is stale: the corpus changed since it was built. Rebuild it on the Index page.")

try:
    lm = model_for_run(get_model(run.model_name), run)
except (ModelLoadError, ValueError) as exc:
    st.error(f"The index's model could not be loaded: {exc}")
    st.stop()
bundle = get_bundle(run.id, backend)
index = bundle.index

# --- query -------------------------------------------------------------------------------------
stored_fusion: list[str] = []
ground_truth: list[int] = []
source = st.radio("Query", ["From a query set", "Type a query"], horizontal=True, key="compare_source")
if source == "From a query set":
    sets = db.list_query_sets(store, corpus.id)
    if not sets:
        st.info("This corpus has no query set: type a query instead.")
        st.stop()
    qs = st.selectbox("Query set", sets, format_func=lambda s: f"{s.name} ({s.n_queries})", key="compare_qs")
    queries = [q for q in db.list_queries(store, qs.id) if q.status != "failed"]
    if not queries:
        st.info("This query set is empty.")
        st.stop()
    q = st.selectbox("Query", queries, key="compare_query",
                     format_func=lambda q: f"[{q.n_aspects} aspect{'s' if q.n_aspects != 1 else ''}] {q.text[:110]}")
    query_text = q.text
    stored_fusion = list(q.fusion)
    ground_truth = list(q.ground_truth)
    st.text_area("Query text", query_text, height=110, disabled=True, key=f"compare_qtext_{q.id}")
    if ground_truth:
        gt_docs = db.get_documents(store, ground_truth)
        st.caption(f"Ground truth: {len(gt_docs)} document(s), one per aspect")
        st.dataframe(pd.DataFrame({"title": [d.title for d in gt_docs], "category": [d.label or "" for d in gt_docs]}),
                     hide_index=True, key="compare_gt")
else:
    query_text = st.text_area("Query text", height=110, key="compare_typed",
                              placeholder="A question touching several unrelated topics…").strip()

# --- controls ----------------------------------------------------------------------------------
default_k = max(1, min(len(ground_truth) or 5, 20))
query_key = (query_text, tuple(ground_truth))
if st.session_state.get("_compare_last_query") != query_key or "compare_k" not in st.session_state:
    st.session_state["_compare_last_query"] = query_key
    st.session_state["compare_k"] = default_k  # k follows the number of aspects of a newly picked query
cc = st.columns([3, 1, 1, 1])
strategies = cc[0].multiselect("Strategies", list(STRATEGY_LABELS), default=list(STRATEGY_LABELS),
                               format_func=STRATEGY_LABELS.get, key="compare_strategies")
k = cc[1].number_input("k (results)", 1, min(50, index.n_docs), key="compare_k")
c = cc[2].number_input("c (per-head depth)", 1, min(256, index.n_docs), min(32, index.n_docs), key="compare_c")
variant = cc[3].selectbox("Voting", VARIANTS, key="compare_variant",
                          help="importance: s_i·2^-rank (paper); decay: 2^-rank; distance: 1/(1-cos). "
                               "Split RAG always uses 2^-rank (authors' default).")

cfg = llm_config()
sub_options = ["auto", "stored", "llm", "sentences"]
sub_pref = "auto"
if any(s in FUSION_STRATEGIES for s in strategies):
    sub_pref = st.radio("Fusion sub-queries", sub_options, horizontal=True, key="compare_subsource",
                        format_func={"auto": "auto (stored → LLM → sentences)", "stored": "stored with the query",
                                     "llm": "ask the LLM", "sentences": "one per sentence (offline)"}.get)
    if sub_pref == "llm" and cfg is None:
        st.info("No LLM endpoint is configured: set MRAG_LLM_BASE_URL and MRAG_LLM_MODEL (or Streamlit secrets) "
                "to generate sub-queries; the offline sentence split is used meanwhile.")
        sub_pref = "sentences"

if st.button("Compare", type="primary", key="compare_go", disabled=not query_text or not strategies):
    st.session_state["compare_active"] = True
if not st.session_state.get("compare_active") or not query_text or not strategies:
    st.stop()

# --- run -----------------------------------------------------------------------------------------
subqueries: list[str] = []
sub_source = ""
if any(s in FUSION_STRATEGIES for s in strategies):
    cache_key = ("subq", query_text, tuple(stored_fusion), sub_pref, max(len(ground_truth), 3))
    cached = st.session_state.get("compare_subq_cache", {}).get(cache_key)
    if cached is None:
        client = None
        if cfg is not None and sub_pref in ("auto", "llm") and not (sub_pref == "auto" and stored_fusion):
            from mrag_core.llm.client import LLMClient

            client = LLMClient(cfg)
        try:
            with st.spinner("Preparing sub-queries…"):
                cached = resolve_subqueries(query_text, stored_fusion, llm_client=client, llm_cache=StoreLLMCache(store),
                                            n=max(len(ground_truth), 3), prefer=sub_pref if sub_pref != "stored" else "stored")
        except Exception as exc:  # noqa: BLE001 - LLM or parsing trouble is shown, never hidden
            st.error(f"Sub-queries could not be generated: {exc}. Falling back to one per sentence.")
            cached = resolve_subqueries(query_text, [], prefer="sentences")
        st.session_state.setdefault("compare_subq_cache", {})[cache_key] = cached
    subqueries, sub_source = cached
    if sub_pref == "stored" and sub_source != "stored":
        st.info("This query has no stored sub-queries; using one per sentence.")

q_emb, sub_emb, _ = query_embeddings(run.id, query_text, tuple(subqueries), lm, run.layer)
result = compare(bundle, q_emb, sub_emb, strategies=strategies, k=int(k), c=int(c), variant=variant,
                 ground_truth=ground_truth, query=query_text, subqueries=subqueries, subquery_source=sub_source)

if subqueries:
    with st.expander(f"Fusion sub-queries ({len(subqueries)}) — {SUBQUERY_SOURCES[sub_source]}",
                     expanded=sub_source == "sentences"):
        st.dataframe(pd.DataFrame({"sub-query": subqueries}), hide_index=True, key="compare_subs")

st.subheader(f"Top {result.k}")
if result.ground_truth_rows:
    metrics = pd.DataFrame({
        "strategy": [o.label for o in result.outcomes.values()],
        "RSR": [o.rsr for o in result.outcomes.values()],
        "CSR": [o.csr for o in result.outcomes.values()],
        "weighted (2·RSR+CSR)/3": [o.weighted for o in result.outcomes.values()],
        "search ms": [1000 * o.seconds for o in result.outcomes.values()],
    })
    st.dataframe(metrics, hide_index=True, key="compare_metrics",
                 column_config={"RSR": st.column_config.NumberColumn(format="%.2f"),
                                "CSR": st.column_config.NumberColumn(format="%.2f"),
                                "weighted (2·RSR+CSR)/3": st.column_config.NumberColumn(format="%.2f"),
                                "search ms": st.column_config.NumberColumn(format="%.1f")})
    st.caption("Marks: **✔ doc** ground-truth document · **~ cat** another document of a ground-truth category · "
               "**cat again** a category already matched above · **✘ miss** neither")
cols = st.columns(len(result.outcomes))
for col, (key, outcome) in zip(cols, result.outcomes.items()):
    with col:
        st.markdown(f"**{outcome.label}**")
        if outcome.rsr is not None:
            st.caption(f"RSR {outcome.rsr:.2f} · CSR {outcome.csr:.2f} · weighted {outcome.weighted:.2f}")
        st.dataframe(results_frame(result, key), hide_index=True, key=f"compare_list_{key}",
                     column_config={"score": st.column_config.NumberColumn(format="%.3f", width=50),
                                    "rank": st.column_config.NumberColumn("#", width=28),
                                    "mark": st.column_config.TextColumn(width=70),
                                    "title": st.column_config.TextColumn(width="medium")})

# --- MRAG evidence -------------------------------------------------------------------------------
if result.evidence is not None:
    ev = result.evidence
    st.subheader("Why MRAG returned these documents")
    st.caption(f"Each head searches its own space to depth c = {result.c}; the document at rank p of head i gets "
               f"{'s_i · 2^-p' if variant == 'importance' else '2^-p' if variant == 'decay' else '1/distance'} votes; "
               "a document's score is the sum of its votes.")
    st.plotly_chart(evidence_figure(result, bundle), key="compare_evidence")
    per_doc = pd.DataFrame({
        "rank": list(range(1, len(ev.docs) + 1)),
        "title": [bundle.titles[d] for d in ev.docs],
        "category": [bundle.labels[d] for d in ev.docs],
        "score": ev.score,
        "heads (rank in head, vote)": [
            ", ".join(f"h{h} (#{ev.rank[h, j] + 1}, {ev.contribution[h, j]:.3f})" for h in ev.heads_for(j))
            for j in range(len(ev.docs))],
    })
    st.dataframe(per_doc, hide_index=True, key="compare_per_doc",
                 column_config={"score": st.column_config.NumberColumn(format="%.4f")})
    if result.aspects:
        st.markdown("**Which aspect each head found** (ground-truth documents and categories among the head's own "
                    f"top {result.k})")
        st.dataframe(pd.DataFrame({
            "head": [f"h{a.head}" for a in result.aspects],
            "importance": [a.importance for a in result.aspects],
            "ground-truth documents (rank)": [", ".join(f"{bundle.titles[d]} (#{p + 1})" for d, p in a.gt_docs)
                                              for a in result.aspects],
            "ground-truth categories": [", ".join(a.gt_categories) for a in result.aspects],
        }), hide_index=True, key="compare_aspects",
            column_config={"importance": st.column_config.NumberColumn(format="%.4f")})
