"""Compare: one query through Standard, MRAG, Split, Fusion and Fusion MRAG side by side, with
ground-truth marks, RSR / CSR / weighted at k, and the per-head evidence behind the MRAG list.
With an LLM endpoint, the LLM-assisted strategies (Multi-Query, HyDE, intent queries, each also
with MRAG voting) are extra columns, with their generated texts and token / latency cost.

Thin page: ``mrag_core.workflows.compare`` does the work; the loaded index is cached per run id.
``st.session_state["compare_query_id"]`` (set by the Evaluation Runs drill-down) preselects that
query, its query set and corpus, once.
"""

from __future__ import annotations


import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

import db
from mrag_core.backends import BACKENDS
from mrag_core.llm_strategies import FAMILY_LABELS, LLMOptions, families_for, family_of
from mrag_core.voting import VARIANTS
from mrag_core.workflows.compare import (
    ALL_STRATEGY_LABELS,
    FUSION_STRATEGIES,
    LLM_STRATEGY_NAMES,
    MARK_SYMBOLS,
    STRATEGY_LABELS,
    SUBQUERY_SOURCES,
    Comparison,
    compare,
    embed_query_and_texts,
    resolve_expansions,
    resolve_subqueries,
)
from mrag_core.workflows.indexing import IndexBundle
from mrag_core.workflows.llm_cache import StoreLLMCache
from ui.navigation import page_setup
from ui.query_widgets import query_picker
from ui.reader_panel import comparison_labels, comparison_lists, reader_panel
from ui.render import md_plain, plotly_text
from ui.state import (clamp_state, finished_runs_or_stop, follow_default, get_store, index_bundle, index_labeler,
                      llm_config, open_corpus_page, run_model_or_stop)

page_setup(__file__, "🧭")
st.title("Compare")
st.caption("One query, several retrieval strategies, side by side. The query and its sub-queries are embedded "
           "in one forward pass that feeds every strategy.")


@st.cache_resource(max_entries=128)
def query_embeddings(run_key: str, query: str, subqueries: tuple[str, ...],
                     expansions: tuple[tuple[str, tuple[str, ...]], ...], _lm, layer: int):  # noqa: ANN001
    """Query, sub-queries and every expansion text in one forward pass (cached per run, by its
    db.identity_key, and texts)."""
    return embed_query_and_texts(_lm, layer, query, subqueries, {f: list(t) for f, t in expansions})


def consume_drilldown() -> tuple[int, int] | None:
    """The Evaluation Runs drill-down's query as (query set id, query id), read once; it also
    selects that query's corpus and the "From a query set" source."""
    qid = st.session_state.pop("compare_query_id", None)
    if qid is None:
        return None
    try:
        q = db.get_query(get_store(), int(qid))
        qs_info = db.get_query_set(get_store(), q.query_set_id)
    except (db.NotFoundError, ValueError, TypeError):
        st.warning(f"Query #{qid} from the drill-down no longer exists.")
        return None
    if st.session_state.get("corpus_id") != qs_info.corpus_id:
        st.session_state["corpus_id"] = qs_info.corpus_id
        st.session_state.pop("_corpus_id_select", None)
    st.session_state["compare_source"] = "From a query set"
    st.session_state["compare_active"] = True  # show its results straight away (no LLM column is preselected)
    return qs_info.id, q.id


def expansion_label(fam: str, outcome) -> str:  # noqa: ANN001 - ExpansionOutcome
    cost = (f"{outcome.tokens} tokens ({outcome.prompt_tokens} prompt + {outcome.completion_tokens} completion)"
            + (", from the cache" if outcome.cached else f", {outcome.latency_s:.2f} s"))
    return f"{FAMILY_LABELS[fam]} ({len(outcome.texts)}) — {cost}"





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
    titles = [plotly_text(f"{j + 1}. {bundle.titles[d][:28]}") for j, d in enumerate(ev.docs)]
    heads = [f"h{h}" for h in range(ev.rank.shape[0])]
    full = {d: plotly_text(bundle.titles[d]) for d in ev.docs}
    hover = [[(f"head {h} · {full[d]}<br>rank {ev.rank[h, j] + 1} in this head · vote {ev.contribution[h, j]:.4f}"
               if ev.rank[h, j] >= 0 else f"head {h} · {full[d]}<br>not in this head's top {cmp.c}")
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


drilldown = consume_drilldown()
store, corpus = open_corpus_page()

runs = finished_runs_or_stop(store, corpus)
run_ids = [r.id for r in runs]
wanted = st.session_state.get("run_id")
c1, c2 = st.columns([3, 1])
run = c1.selectbox("Index (embedding run)", runs, index=run_ids.index(wanted) if wanted in run_ids else 0,
                   format_func=index_labeler(store, runs), key="compare_run")
backend_default = st.session_state.get("run_backend", "torch")
backend = c2.selectbox("Search backend", BACKENDS, index=BACKENDS.index(backend_default), key="compare_backend")
lm = run_model_or_stop(store, run)
bundle = index_bundle(store, run, backend)
index = bundle.index
if calibrated := index.calibration_lines():
    st.caption("HNSW efSearch, the smallest reaching the recall target against exact search, per view and, for "
               "the voted views, per vote on its final lists: " + "; ".join(calibrated))

# --- query -------------------------------------------------------------------------------------
picked = query_picker(store, corpus.id, key="compare", preselect=drilldown)
query_text, stored_fusion, ground_truth = picked.text, picked.fusion, picked.ground_truth
if ground_truth:
    gt_docs = db.get_documents(store, ground_truth)
    st.caption(f"Ground truth: {len(gt_docs)} document(s), one per aspect")
    st.dataframe(pd.DataFrame({"title": [d.title for d in gt_docs], "category": [d.label or "" for d in gt_docs]}),
                 hide_index=True, key="compare_gt")

# --- controls ----------------------------------------------------------------------------------
k_max, c_max = min(50, index.n_docs), min(256, index.n_docs)
follow_default("compare_k", (query_text, tuple(ground_truth)), min(len(ground_truth) or 5, 20))  # k follows the aspects
clamp_state("compare_k", 1, k_max)  # a small index
clamp_state("compare_c", 1, c_max)
cc = st.columns([3, 1, 1, 1])
strategies = cc[0].multiselect("Strategies", list(STRATEGY_LABELS), default=list(STRATEGY_LABELS),
                               format_func=STRATEGY_LABELS.get, key="compare_strategies")
k = cc[1].number_input("k (results)", 1, k_max, key="compare_k")
c = cc[2].number_input("c (per-head depth)", 1, c_max, min(32, c_max), key="compare_c")
variant = cc[3].selectbox("Voting", VARIANTS, key="compare_variant",
                          help="importance: s_i·2^-rank (paper); decay: 2^-rank; distance: 1/(1-cos). "
                               "Split RAG always uses 2^-rank (authors' default).")

cfg = llm_config()
llm_strategies: list[str] = []
llm_options = LLMOptions()
if cfg is None:
    st.caption("LLM-assisted strategies (Multi-Query, HyDE, intent queries, each also with MRAG voting) need an "
               "OpenAI-compatible endpoint: set MRAG_LLM_BASE_URL and MRAG_LLM_MODEL (or [llm] in "
               ".streamlit/secrets.toml) and reload the page.")
else:
    llm_strategies = st.multiselect(
        "LLM-assisted strategies (cost tokens)", list(LLM_STRATEGY_NAMES), default=[],
        format_func=ALL_STRATEGY_LABELS.get, key="compare_llm_strategies",
        help="Multi-Query: the LLM rewrites the question; HyDE: it writes a hypothetical answer passage; intent: "
             "it writes intent-specific statements of plausible answers. Every text is searched (+ MRAG: MRAG "
             "voting per text) and the lists are merged by RRF, 1/(60 + rank). Answers are cached in the database.")
    if llm_strategies:
        lc = st.columns(3)
        llm_options = LLMOptions(
            n_rewrites=int(lc[0].number_input("Rewrites (Multi-Query)", 1, 10, LLMOptions().n_rewrites,
                                              key="compare_llm_n")),
            n_answers=int(lc[1].number_input("Plausible answers (intent)", 1, 8, LLMOptions().n_answers,
                                             key="compare_llm_answers")),
            hyde_with_query=lc[2].checkbox("HyDE: fuse with the query", value=LLMOptions().hyde_with_query,
                                           key="compare_llm_hyde_q"))
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

chosen = [*strategies, *llm_strategies]
if st.button("Compare", type="primary", key="compare_go", disabled=not query_text or not chosen):
    st.session_state["compare_active"] = True
if not st.session_state.get("compare_active") or not query_text or not chosen:
    st.stop()

# --- run -----------------------------------------------------------------------------------------
subqueries: list[str] = []
n_sub = max(len(ground_truth), 3)  # sub-queries asked of the LLM: one per aspect, at least 3
sub_source = ""
if any(s in FUSION_STRATEGIES for s in strategies):
    cache_key = ("subq", query_text, tuple(stored_fusion), sub_pref, n_sub)
    cached = st.session_state.get("compare_subq_cache", {}).get(cache_key)
    if cached is None:
        client = None
        if cfg is not None and sub_pref in ("auto", "llm") and not (sub_pref == "auto" and stored_fusion):
            from mrag_core.llm.client import LLMClient

            client = LLMClient(cfg)
        try:
            with st.spinner("Preparing sub-queries…"):
                cached = resolve_subqueries(query_text, stored_fusion, llm_client=client, llm_cache=StoreLLMCache(store),
                                            n=n_sub, prefer=sub_pref if sub_pref != "stored" else "stored")
        except Exception as exc:  # noqa: BLE001 - LLM or parsing trouble is shown, never hidden
            st.error(f"Sub-queries could not be generated: {md_plain(str(exc))}. Falling back to one per sentence.")
            cached = resolve_subqueries(query_text, [], prefer="sentences")
        st.session_state.setdefault("compare_subq_cache", {})[cache_key] = cached
    subqueries, sub_source = cached
    if sub_pref == "stored" and sub_source != "stored":
        st.info("This query has no stored sub-queries; using one per sentence.")

expansions = {}
families = families_for(llm_strategies)
if families:
    assert cfg is not None
    exp_key = ("exp", query_text, tuple(families), llm_options, cfg.model, cfg.base_url)
    expansions = st.session_state.get("compare_exp_cache", {}).get(exp_key)
    if expansions is None:
        from mrag_core.llm.client import LLMClient

        with st.spinner("Asking the LLM for the expansions…"), LLMClient(cfg) as client:
            expansions = resolve_expansions(client, query_text, families, llm_cache=StoreLLMCache(store),
                                            options=llm_options)
        if all(o.ok for o in expansions.values()):  # failures are asked again on the next run
            st.session_state.setdefault("compare_exp_cache", {})[exp_key] = expansions
    for fam, outcome in expansions.items():
        if not outcome.ok:
            st.error(f"{FAMILY_LABELS[fam]}: {md_plain(outcome.error or 'failed')}. Its strategies are left out.")
    llm_strategies = [s for s in llm_strategies if expansions[family_of(s)].ok]
exp_texts = tuple((f, o.texts) for f, o in expansions.items() if o.ok)
q_emb, sub_emb, exp_emb, _ = query_embeddings(db.identity_key(run), query_text, tuple(subqueries), exp_texts, lm,
                                              run.layer)
result = compare(bundle, q_emb, sub_emb, strategies=[*strategies, *llm_strategies], k=int(k), c=int(c),
                 variant=variant, ground_truth=ground_truth, query=query_text, subqueries=subqueries,
                 subquery_source=sub_source, expansions={f: o for f, o in expansions.items() if o.ok},
                 expansion_embeddings=exp_emb, llm_options=llm_options)
if not result.outcomes:
    st.stop()

if subqueries:
    fewer = sub_source == "llm" and len(subqueries) < n_sub
    count = f"{len(subqueries)} of {n_sub} asked for" if fewer else str(len(subqueries))
    with st.expander(f"Fusion sub-queries ({count}) — {SUBQUERY_SOURCES[sub_source]}",
                     expanded=sub_source == "sentences" or fewer):
        st.dataframe(pd.DataFrame({"sub-query": subqueries}), hide_index=True, key="compare_subs")
for fam, outcome in result.expansions.items():
    with st.expander(expansion_label(fam, outcome)):
        # a dataframe shows the LLM's text as plain text (nothing in it is rendered as Markdown or HTML)
        st.dataframe(pd.DataFrame({"text": list(outcome.texts)}), hide_index=True, key=f"compare_exp_{fam}")

st.subheader(f"Top {result.k}")
if result.ground_truth_rows:
    metrics = pd.DataFrame({
        "strategy": [o.label for o in result.outcomes.values()],
        "RSR": [o.rsr for o in result.outcomes.values()],
        "CSR": [o.csr for o in result.outcomes.values()],
        "weighted (2·RSR+CSR)/3": [o.weighted for o in result.outcomes.values()],
        "search ms": [1000 * o.seconds for o in result.outcomes.values()],
        **({"LLM tokens": [o.llm.tokens if o.llm else None for o in result.outcomes.values()],
            "LLM s": [o.llm.latency_s if o.llm else None for o in result.outcomes.values()]}
           if result.expansions else {}),
    })
    st.dataframe(metrics, hide_index=True, key="compare_metrics",
                 column_config={"RSR": st.column_config.NumberColumn(format="%.2f"),
                                "CSR": st.column_config.NumberColumn(format="%.2f"),
                                "weighted (2·RSR+CSR)/3": st.column_config.NumberColumn(format="%.2f"),
                                "search ms": st.column_config.NumberColumn(format="%.1f"),
                                "LLM s": st.column_config.NumberColumn(format="%.2f")})
    st.caption("Marks: **✔ doc** ground-truth document · **~ cat** another document of a ground-truth category · "
               "**cat again** a category already matched above · **✘ miss** neither")
PER_ROW = 5
items = list(result.outcomes.items())
for start in range(0, len(items), PER_ROW):
    cols = st.columns(min(PER_ROW, len(items)))
    for col, (key, outcome) in zip(cols, items[start:start + PER_ROW]):
        with col:
            st.markdown(f"**{outcome.label}**")
            if outcome.rsr is not None:
                st.caption(f"RSR {outcome.rsr:.2f} · CSR {outcome.csr:.2f} · weighted {outcome.weighted:.2f}")
            if outcome.llm is not None:
                st.caption(f"LLM: {outcome.llm.tokens} tokens · "
                           + ("from the cache" if outcome.llm.cached else f"{outcome.llm.latency_s:.2f} s"))
            st.dataframe(results_frame(result, key), hide_index=True, key=f"compare_list_{key}",
                         column_config={"score": st.column_config.NumberColumn(format="%.3f", width=50),
                                        "rank": st.column_config.NumberColumn("#", width=28),
                                        "mark": st.column_config.TextColumn(width=70),
                                        "title": st.column_config.TextColumn(width="medium")})

# --- Reader panel --------------------------------------------------------------------------------
with st.expander("Reader: answer the query from two strategies' documents", expanded=False):
    reader_panel(store, query_text, comparison_lists(store, result), key="compare_reader", default_k=int(k),
                 labels=comparison_labels(result))

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
