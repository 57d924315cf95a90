"""Compare: one query through Standard, MRAG, the recommended strategy (sentence round-robin; these three are
preselected), Split, Fusion and Fusion MRAG side by side, with ground-truth marks, RSR / CSR / weighted at k, the
per-head evidence behind the MRAG list and the per-sentence, per-view, per-head evidence behind the recommended one.
With an LLM endpoint, the LLM-assisted strategies (Multi-Query, HyDE, intent queries, each also
with MRAG voting) are extra columns, with their generated texts and token / latency cost.

Thin page: ``services.workflows.compare`` does the work; the loaded index is cached per run id.
``st.session_state["compare_query_id"]`` (set by the Evaluation Runs drill-down) preselects that
query, its query set and corpus, once; ``st.session_state["compare_drilldown"]`` (a
:class:`~services.workflows.eval_comparison.DrillDown`) also opens the run's own index with its voting, c, k and
strategies, so the numbers match the run's table.

The choices (this page's and the query picker's in ``ui.query_widgets``) are kept for the session
(``persist_state="session"``), across page switches. c and k are kept as chosen and only
shown clamped on an index with fewer documents: on a larger one the chosen value comes back.
"""

from __future__ import annotations

from ui.navigation import open_through_app

open_through_app(__file__)  # first, before the imports below (see its docstring)

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from mrag_core.llm_strategies import FAMILY_LABELS, LLMOptions, families_for, family_of
from mrag_core.milvus_backend import MilvusUnavailableError
from mrag_core.settings import DEFAULT_C, IN_PROCESS
from mrag_core.voting import VARIANTS
from services import storage
from services.workflows import corpus as cw
from services.workflows import queries as query_store
from services.workflows import stored_runs as run_store
from services.workflows.compare import (
    ALL_STRATEGY_LABELS,
    FUSED_DEPTH_NOTE,
    FUSION_STRATEGIES,
    LLM_STRATEGY_NAMES,
    MARK_SYMBOLS,
    PARTS_KEY,
    PRESELECTED_STRATEGIES,
    RECOMMENDED,
    STRATEGY_LABELS,
    SUBQUERY_SOURCES,
    Comparison,
    compare,
    embed_query_and_texts,
    resolve_expansions,
    resolve_subqueries,
    sentence_split,
)
from services.workflows.eval_comparison import DrillDown
from services.workflows.eval_results import fused_strategies
from services.workflows.indexing import (
    IndexBundle,
    query_window,
    search_backends,
    serving_backend,
    too_small_to_search,
)
from services.workflows.llm_cache import StoreLLMCache
from ui.compare_layout import (
    ALL_SIDE_BY_SIDE,
    DEFAULT_PER_ROW,
    HEADS_COLUMN,
    LAYOUTS,
    categories_line,
    evidence_columns,
    evidence_lines,
    evidence_widths,
    list_columns,
    list_rows,
    list_widths,
    score_decimals,
    titles_line,
)
from ui.navigation import page_setup
from ui.query_widgets import query_picker
from ui.reader_panel import comparison_labels, comparison_lists, reader_panel
from ui.render import TITLES_BELOW_TOOLBAR, md_plain, plotly_text, shortened
from ui.state import (
    KEEP,
    choose_number,
    finished_runs_or_stop,
    get_store,
    index_bundle,
    index_picker,
    kept_number,
    llm_config,
    open_corpus_page,
    run_model_or_stop,
)

page_setup(__file__, "🧭")
st.title("Compare")
st.caption("One query, several retrieval strategies, side by side. The query and its sub-queries are embedded "
           "in one forward pass that feeds every strategy.")


@st.cache_resource(max_entries=128, show_spinner="Embedding the query…")
def query_embeddings(run_key: str, query: str, subqueries: tuple[str, ...],
                     expansions: tuple[tuple[str, tuple[str, ...]], ...], parts: tuple[str, ...], _lm,  # noqa: ANN001
                     layer: int):
    """Query, sub-queries, every expansion text and the query's sentences (the recommended strategy's parts) in
    one forward pass (cached per run, by its storage.identity_key, and texts)."""
    return embed_query_and_texts(_lm, layer, query, subqueries, {f: list(t) for f, t in expansions}, parts)


ss = st.session_state


def consume_drilldown() -> tuple[tuple[int, int] | None, DrillDown | None]:
    """The Evaluation Runs drill-down, read once: the query as (query set id, query id), and the run's settings.
    It selects the query's corpus and the "From a query set" source; with the settings, also the run's index (the
    one it searched), exact search, its voting, c and strategies (k is set once the query is known)."""
    qid = ss.pop("compare_query_id", None)
    settings = ss.pop("compare_drilldown", None)
    if qid is None:
        return None, None
    try:
        q = query_store.get_query(get_store(), int(qid))
        qs_info = query_store.get_query_set(get_store(), q.query_set_id)
    except (storage.NotFoundError, ValueError, TypeError):
        st.warning(f"Query #{qid} from the drill-down no longer exists.")
        return None, None
    if ss.get("corpus_id") != qs_info.corpus_id:
        ss["corpus_id"] = qs_info.corpus_id
        ss.pop("_corpus_id_select", None)
    ss["compare_source"] = "From a query set"
    ss["compare_active"] = True  # show its results straight away (no LLM column is preselected)
    if isinstance(settings, DrillDown) and settings.query_id == q.id:
        ss["compare_backend"] = "torch"  # evaluation runs search exactly
        ss["compare_variant"] = settings.variant
        choose_number("compare_c", settings.c)
        if settings.strategies:
            ss["compare_strategies"] = list(settings.strategies)
        if settings.embedding_run_id is not None:
            ss["run_id"] = settings.embedding_run_id
        ss["compare_seed"] = int(settings.seed)  # the run's head importance
    else:
        settings = None
    return (qs_info.id, q.id), settings


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
    titles = [plotly_text(f"{j + 1}. {shortened(bundle.titles[d], 28)}") for j, d in enumerate(ev.docs)]
    heads = [f"h{h}" for h in range(ev.rank.shape[0])]
    full = {d: plotly_text(bundle.titles[d]) for d in ev.docs}
    hover = [[(f"head {h} · {full[d]}<br>rank {ev.rank[h, j] + 1} in this head · vote {ev.contribution[h, j]:.4f}"
               if ev.rank[h, j] >= 0 else f"head {h} · {full[d]}<br>not in this head's top {cmp.c}")
              for j, d in enumerate(ev.docs)] for h in range(len(heads))]
    text = [[str(ev.rank[h, j] + 1) if ev.rank[h, j] >= 0 else "" for j in range(len(ev.docs))]
            for h in range(len(heads))]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.82, 0.18], horizontal_spacing=0.02,
                        subplot_titles=("vote contribution (cell text = rank in the head)", "importance s_i"))
    fig.add_trace(go.Heatmap(z=ev.contribution, x=titles, y=heads, text=text, texttemplate="%{text}",
                             hovertext=hover, hoverinfo="text", colorscale="Blues", showscale=False), row=1, col=1)
    fig.add_trace(go.Bar(x=ev.importance, y=heads, orientation="h", marker_color="#3aa675",
                         hovertemplate="%{y}: s=%{x:.4f}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    # t: the subplot titles sit just above the plots, below the toolbar Plotly shows at the top right on hover
    fig.update_layout(height=max(340, 26 * len(heads) + 180), showlegend=False,
                      margin=dict(l=10, r=10, t=TITLES_BELOW_TOOLBAR, b=10))
    fig.update_xaxes(tickangle=-35, row=1, col=1)
    return fig


drilldown, drilled = consume_drilldown()
store, corpus = open_corpus_page()

runs = finished_runs_or_stop(store, corpus)
c1, c2, c3 = st.columns([3, 1, 1])
run = index_picker(store, runs, key="compare_run", container=c1,
                   target_id=drilled.embedding_run_id if drilled is not None else None)
# Widgets that the drill-down sets through session state get their defaults there too, never as an argument:
# a widget given both logs Streamlit's "created with a default value but also had its value set via the Session
# State API" warning (tests/ui/test_compare_drilldown_state.py).
offered = search_backends()
if ss.get("compare_backend") not in offered:  # the Index page's choice, else where the index is served, until one here
    try:
        backend_default = ss.get("run_backend") or (serving_backend(store, run) if offered != IN_PROCESS else "torch")
    except MilvusUnavailableError as exc:  # searching in this process still works
        st.warning(md_plain(str(exc)))
        backend_default = "torch"
    ss["compare_backend"] = backend_default if backend_default in offered else offered[0]
backend = c2.selectbox("Search backend", offered, key="compare_backend", **KEEP,
                       help="torch, faiss-flat, milvus: exact; faiss-hnsw, milvus-hnsw: approximate. milvus searches "
                            "the index's collections in Milvus (built on the Index page).")
seed = int(c3.number_input("Importance seed", 0, 1_000_000, key="compare_seed", **KEEP,  # from 0, the least
                           help="Which sampled document pairs give the head importance s_i (mean norm x mean cosine "
                                "distance). 0: the importance stored with the index; another seed samples the pairs "
                                "again, as an evaluation run with that seed does."))
if drilled is not None:
    own_index = drilled.embedding_run_id is not None and drilled.embedding_run_id == run.id
    if not own_index:
        try:
            cfg_run = run_store.get_eval_run(store, drilled.run_id).config
            searched = (f"{md_plain(str(cfg_run.get('model', '?')))} layer {cfg_run.get('layer', '?')}, "
                        f"{cfg_run.get('pooling', '?')} pooling")
        except storage.NotFoundError:
            searched = "its model and layer"
        st.warning(f"Evaluation run #{drilled.run_id} searched an index ({searched}) that no longer exists, and no "
                   f"finished index of those settings does: this page shows index #{run.id} (layer {run.layer}) "
                   "instead, so its numbers can differ from the run's. Build that index on the **Index** page to "
                   "see the run's own.")
    st.caption(f"Opened from evaluation run #{drilled.run_id}: " + ("its index, " if own_index else "")
               + f"exact search, {drilled.variant} voting, c = {drilled.c}, "
               f"k = {drilled.k if drilled.k else 'the number of aspects'}, importance seed {drilled.seed}.")
if too_small := too_small_to_search(run):
    st.info(too_small)
    st.stop()
lm = run_model_or_stop(store, run)
bundle = index_bundle(store, run, backend, seed)
index = bundle.index
if calibrated := index.calibration_lines():
    st.caption("HNSW efSearch, the smallest reaching the recall target against exact search, per view and, for "
               "the voted views, per vote on its final lists: " + "; ".join(calibrated))

# --- query -------------------------------------------------------------------------------------
picked = query_picker(store, corpus.id, key="compare", preselect=drilldown)
query_text, stored_fusion, ground_truth = picked.text, picked.fusion, picked.ground_truth
if ground_truth:
    gt_docs = cw.get_documents(store, ground_truth)
    st.caption(f"Ground truth: {len(gt_docs)} document(s), one per aspect")
    st.dataframe(pd.DataFrame({"title": [d.title for d in gt_docs], "category": [d.label or "" for d in gt_docs]}),
                 hide_index=True, key="compare_gt")

# --- controls ----------------------------------------------------------------------------------
k_max, c_max = min(50, index.n_docs), min(256, index.n_docs)
query_owner = (query_text, tuple(ground_truth))
if drilled is not None and drilled.k:  # the run's k, for this query
    choose_number("compare_k", drilled.k, query_owner)
on_k = kept_number("compare_k", 1, k_max, min(len(ground_truth) or 5, 20), query_owner)  # k follows the aspects
on_c = kept_number("compare_c", 1, c_max, DEFAULT_C)
# The strategies get a row of their own: a multiselect shows its chips on one line, so in half the row
# the fifth strategy (and any after it) was cut off at usual window widths.
ss.setdefault("compare_strategies", list(PRESELECTED_STRATEGIES))  # until chosen here or by a drill-down
strategies = st.multiselect("Strategies", list(STRATEGY_LABELS), format_func=STRATEGY_LABELS.get,
                            key="compare_strategies", **KEEP,
                            help="Standard RAG, MRAG and the recommended strategy (no LLM: each sentence of the "
                                 "query searched in the standard space and by MRAG, taken in turn, fused) are "
                                 "preselected.")
cc = st.columns(3)
k = cc[0].number_input("k (results)", 1, k_max, key="compare_k", on_change=on_k, **KEEP)
c = cc[1].number_input("c (per-head depth)", 1, c_max, key="compare_c", on_change=on_c, **KEEP,
                       help="Each head's list (MRAG) and each piece's (Split RAG) is searched to this depth; "
                            "Fusion and LLM strategies search each text to depth k. Kept as chosen, shown no "
                            "larger than the index.")
variant = cc[2].selectbox("Voting", VARIANTS, key="compare_variant", **KEEP,
                          help="importance: s_i·2^-(r-1) for rank r = 1, 2, ... (paper); decay: 2^-(r-1); distance: "
                               "1/(1-cos). Split RAG always uses 2^-(r-1) (authors' default).")

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
        format_func=ALL_STRATEGY_LABELS.get, key="compare_llm_strategies", **KEEP,
        help="Multi-Query: the LLM rewrites the question; HyDE: it writes a hypothetical answer passage; intent: "
             "it writes intent-specific statements of plausible answers. Every text is searched (+ MRAG: MRAG "
             "voting per text) and the lists are merged by RRF, 1/(60 + rank). Answers are cached in the database.")
    if llm_strategies:
        lc = st.columns(3)
        llm_options = LLMOptions(
            n_rewrites=int(lc[0].number_input("Rewrites (Multi-Query)", 1, 10, LLMOptions().n_rewrites,
                                              key="compare_llm_n", **KEEP)),
            n_answers=int(lc[1].number_input("Plausible answers (intent)", 1, 8, LLMOptions().n_answers,
                                             key="compare_llm_answers", **KEEP)),
            hyde_with_query=lc[2].checkbox("HyDE: fuse with the query", value=LLMOptions().hyde_with_query,
                                           key="compare_llm_hyde_q", **KEEP))
sub_options = ["auto", "stored", "llm", "sentences"]
sub_pref = "auto"
if any(s in FUSION_STRATEGIES for s in strategies):
    sub_pref = st.radio("Fusion sub-queries", sub_options, horizontal=True, key="compare_subsource", **KEEP,
                        format_func={"auto": "auto (stored → LLM → sentences)", "stored": "stored with the query",
                                     "llm": "ask the LLM", "sentences": "one per sentence (offline)"}.get)
    if sub_pref == "llm" and cfg is None:
        st.info("No LLM endpoint is configured: set MRAG_LLM_BASE_URL and MRAG_LLM_MODEL (or Streamlit secrets) "
                "to generate sub-queries; the offline sentence split is used meanwhile.")
        sub_pref = "sentences"

chosen = [*strategies, *llm_strategies]
if query_text and (cut := query_window(lm, query_text).note(query_text, run.model_name.split("/")[-1])):
    fused = set(strategies) & set(FUSION_STRATEGIES)
    whole = (" Fusion RAG and Fusion MRAG embed each sub-query on its own." if fused else "") + (
        f" {STRATEGY_LABELS[RECOMMENDED]} embeds each sentence on its own." if RECOMMENDED in strategies else "")
    st.warning(md_plain(cut) + whole)  # (our own words: no Markdown in them)
if st.button("Compare", type="primary", key="compare_go", disabled=not query_text or not chosen):
    st.session_state["compare_active"] = True
if not query_text:
    st.info("Type a query to compare the strategies on it.")
elif not chosen:
    st.info("Choose at least one strategy to compare.")
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
            from services.llm.client import LLMClient

            client = LLMClient(cfg)
        try:
            with st.spinner("Preparing sub-queries…"):
                cached = resolve_subqueries(query_text, stored_fusion, llm_client=client,
                                            llm_cache=StoreLLMCache(store), n=n_sub,
                                            prefer=sub_pref if sub_pref != "stored" else "stored")
        except Exception as exc:  # noqa: BLE001 - LLM or parsing trouble is shown, never hidden
            st.error(f"Sub-queries could not be generated: {md_plain(str(exc))}. Falling back to one per sentence.")
            cached = resolve_subqueries(query_text, [], prefer="sentences")
        finally:
            if client is not None:
                client.close()
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
        from services.llm.client import LLMClient

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
parts = tuple(sentence_split(query_text))
q_emb, sub_emb, exp_emb, _ = query_embeddings(storage.identity_key(run), query_text, tuple(subqueries), exp_texts,
                                              parts, lm, run.layer)
part_emb = exp_emb.get(PARTS_KEY)
result = compare(bundle, q_emb, sub_emb, strategies=[*strategies, *llm_strategies], k=int(k), c=int(c),
                 variant=variant, ground_truth=ground_truth, query=query_text, subqueries=subqueries,
                 subquery_source=sub_source, expansions={f: o for f, o in expansions.items() if o.ok},
                 expansion_embeddings={f: e for f, e in exp_emb.items() if f != PARTS_KEY}, llm_options=llm_options,
                 parts=part_emb, part_texts=parts)
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
if fused_strategies(list(result.outcomes)):
    st.caption(FUSED_DEPTH_NOTE.format(k=result.k))
items = list(result.outcomes.items())
per_row = st.segmented_control(
    "Result lists", list(LAYOUTS), format_func=LAYOUTS.get, default=DEFAULT_PER_ROW, required=True,
    key="compare_per_row", **KEEP,
    help="How many strategies' lists share a row: two leave room for the titles, categories and scores at "
         "usual widths; three fit a window of 1366 px or more (short titles); all side by side fits only a very "
         "wide window.")
per_row = DEFAULT_PER_ROW if per_row is None else per_row
for row in list_rows(len(items), per_row):
    cols = st.columns(len(row) if per_row == ALL_SIDE_BY_SIDE else per_row)
    for col, (key, outcome) in zip(cols, [items[i] for i in row]):
        with col:
            st.markdown(f"**{outcome.label}**")
            if outcome.rsr is not None:
                st.caption(f"RSR {outcome.rsr:.2f} · CSR {outcome.csr:.2f} · weighted {outcome.weighted:.2f}")
            if outcome.llm is not None:
                st.caption(f"LLM: {outcome.llm.tokens} tokens · "
                           + ("from the cache" if outcome.llm.cached else f"{outcome.llm.latency_s:.2f} s"))
            widths = list_widths(per_row, outcome.rows)
            st.dataframe(results_frame(result, key), hide_index=True, key=f"compare_list_{key}",
                         column_config=list_columns(widths, score_decimals(r.score for r in outcome.rows)))
            for line in (titles_line(outcome.rows, widths), categories_line(outcome.rows, widths)):
                if line:
                    st.caption(line, unsafe_allow_html=True)

# --- Reader panel --------------------------------------------------------------------------------
with st.expander("Reader: answer the query from two strategies' documents", expanded=False):
    reader_panel(store, query_text, comparison_lists(store, result), key="compare_reader", default_k=int(k),
                 labels=comparison_labels(result))

# --- MRAG evidence -------------------------------------------------------------------------------
if result.evidence is not None:
    ev = result.evidence
    st.subheader("Why MRAG returned these documents")
    # ranks are shown from 1 (#1 is a head's nearest document), and the nearest gets the full weight 2^0
    st.caption(f"Each head searches its own space to depth c = {result.c}; the document at rank r of head i "
               "(#1 the nearest) gets "
               f"{'s_i · 2^-(r-1)' if variant == 'importance' else '2^-(r-1)' if variant == 'decay' else '1/distance'}"
               " votes; a document's score is the sum of its votes.")
    st.plotly_chart(evidence_figure(result, bundle), key="compare_evidence")
    per_doc = pd.DataFrame({
        "rank": list(range(1, len(ev.docs) + 1)),
        "title": [bundle.titles[d] for d in ev.docs],
        "category": [bundle.labels[d] for d in ev.docs],
        "score": ev.score,
        HEADS_COLUMN: [
            ", ".join(f"h{h} (#{ev.rank[h, j] + 1}, {ev.contribution[h, j]:.3f})" for h in ev.heads_for(j))
            for j in range(len(ev.docs))],
    })
    ev_widths = evidence_widths(per_doc)
    st.dataframe(per_doc, hide_index=True, key="compare_per_doc", column_config=evidence_columns(ev_widths))
    for line in evidence_lines(per_doc, ev_widths):
        st.caption(line, unsafe_allow_html=True)
    if result.aspects:
        st.markdown("**Which aspect each head found** (ground-truth documents and categories among the head's own "
                    f"top {result.k})")
        st.dataframe(pd.DataFrame({
            "head": [f"h{a.head}" for a in result.aspects],
            "importance": [a.importance for a in result.aspects],
            "ground-truth documents (rank)": [", ".join(f"{bundle.titles[d]} (#{p + 1})" for d, p in a.gt_docs)
                                              for a in result.aspects],
            "ground-truth categories": [", ".join(a.gt_categories) for a in result.aspects],
        }), hide_index=True, key="compare_head_aspects", height="content",  # every head in view, no inner scroll
            column_config={"importance": st.column_config.NumberColumn(format="%.4f")})

# --- the recommended strategy's evidence ---------------------------------------------------------
if result.parts is not None:
    pe = result.parts
    st.subheader(f"Why the recommended strategy, {STRATEGY_LABELS[RECOMMENDED]}, returned these documents")
    st.caption(f"The query is cut into {len(pe.parts)} sentence(s) (s1, s2, ...). Each sentence searches the standard "
               f"space (top c = {result.c}) and votes over the heads (MRAG, top c). Per view, the sentences' lists "
               "are taken in turn (every sentence's first document before any sentence's second), and the two "
               "views' rankings are fused by RRF, 1/(60 + position). Ranks are shown from 1; for MRAG, the heads "
               "whose votes put the document in that sentence's list (strongest first, with their rank in the head).")
    st.dataframe(pd.DataFrame({"sentence": [f"s{i + 1}" for i in range(len(pe.parts))], "text": pe.parts}),
                 hide_index=True, key="compare_parts")
    st.dataframe(pd.DataFrame({
        "rank": list(range(1, len(pe.docs) + 1)),
        "title": [bundle.titles[d] for d in pe.docs],
        "category": [bundle.labels[d] for d in pe.docs],
        "score": pe.score,
        "Standard view": [int(r) + 1 if r >= 0 else None for r in pe.view_rank[0]],
        "MRAG view": [int(r) + 1 if r >= 0 else None for r in pe.view_rank[1]],
        "found by (sentence: view #rank (heads))": [pe.found_by(j) for j in range(len(pe.docs))],
    }), hide_index=True, key="compare_part_evidence",
        column_config={"score": st.column_config.NumberColumn(format="%.4f")})
