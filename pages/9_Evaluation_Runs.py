"""Evaluation Runs: score strategies on a query set, keep every run, view, compare and export them.

Thin page: the work is in :mod:`services.workflows.evaluation_runs`; runs live in the database.

A run works inside the script run that started it, with this session's cancel event (``_ev_cancel``): any
rerun of the page (Stop, or any other click) stops it, and the rerun waits until it has stored that it stopped
before listing it. A stopped layer sweep is offered as a sweep to resume, all its layers. The settings are kept
for the session (``persist_state="session"``), k_max as chosen (shown clamped on a smaller corpus).
"""

from __future__ import annotations

from ui.navigation import open_through_app

open_through_app(__file__)  # first, before the imports below (see its docstring)

import threading
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import plotly.express as px
import streamlit as st

from mrag_core.llm_strategies import LLMOptions
from mrag_core.settings import DEFAULT_C, DEFAULT_K_MAX, DEFAULT_MODEL, DEFAULT_W, VARIANTS, RetrievalSettings
from mrag_core.strategy_registry import RECOMMENDED
from mrag_core.strategy_registry import STRATEGIES as NAMED_STRATEGIES
from mrag_core.wording import counted
from services import storage
from services.workflows import eval_comparison, eval_costs, eval_exports, eval_results, eval_sweeps
from services.workflows import evaluation_runs as er
from services.workflows import queries as query_store
from services.workflows import run_intervals as ri
from services.workflows import stored_runs as run_store
from ui.chart_export import figure_png
from ui.navigation import page_setup
from ui.query_widgets import query_set_label
from ui.render import md_plain, text_block
from ui.run_controls import stop_button
from ui.state import KEEP, follow_default, get_model, keep_choice, kept_number, llm_config, open_corpus_page
from ui.strategy_colors import strategy_style

page_setup(__file__, "📊")
st.title("Evaluation Runs")
st.caption("Score Standard / MRAG / Split / Fusion and LLM-assisted (Multi-Query, HyDE, intent) retrieval on a query "
           "set for k = 1..k_max. Every run is stored with its configuration, seed, timings and LLM token cost; "
           "RSR = exact documents found, CSR = categories found, weighted = (w·RSR + CSR) / (w + 1).")

ss = st.session_state


def stop_this_sessions_runs() -> list[int]:
    """Stop the run this session started in an earlier script run (a Stop click, or any other rerun, while it
    works) and wait until it has stored that it stopped; returns the stopped runs' ids."""
    event = ss.get("_ev_cancel")
    if event is None or not er.active_runs():
        return []
    with st.spinner("Stopping the run after its current batch…"):
        return er.stop_runs(event)


stopped_now = stop_this_sessions_runs()
store, corpus = open_corpus_page()
query_sets = query_store.list_query_sets(store, corpus.id)
qs_names = {q.id: q.name for q in query_sets}
llm_cfg = llm_config()
BASE_STRATEGIES = [s for s, spec in NAMED_STRATEGIES.items() if not spec.llm]
LLM_STRATEGY_NAMES = [s for s, spec in NAMED_STRATEGIES.items() if spec.llm]
COST_FORMAT = {"rsr": st.column_config.NumberColumn(format="%.3f"), "csr": st.column_config.NumberColumn(format="%.3f"),
               "weighted": st.column_config.NumberColumn(format="%.3f"),
               "search_s": st.column_config.NumberColumn("search s", format="%.2f"),
               "tokens_per_query": st.column_config.NumberColumn("tokens / query", format="%.1f"),
               "spent_tokens": st.column_config.NumberColumn("tokens spent"),
               "llm_s": st.column_config.NumberColumn("LLM s", format="%.2f"),
               "llm_queries": st.column_config.NumberColumn("LLM-expanded queries"),
               eval_costs.SHARED_COLUMN: st.column_config.TextColumn("expansions shared with")}



def _html_download(fig, name: str, key: str) -> None:
    c1, c2 = st.columns(2)
    c1.download_button("Download chart (HTML)", data=lambda: fig.to_html(include_plotlyjs=True),
                       file_name=f"{name}.html", mime="text/html", key=key)
    c2.download_button("Download chart (PNG)", data=lambda: figure_png(fig), file_name=f"{name}.png",
                       mime="image/png", key=f"{key}_png")


def _progress_runner():
    bar = st.progress(0.0, text="Starting...")

    def progress(stage: str, done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 1.0, text=f"{stage}: {done}/{total}")

    return bar, progress


STOP_HELP = "stops after the current batch; saved results are kept and the run can be resumed"


def _report_runs(ids: list[int]) -> None:
    """One line per run (status and results stored) and its warning, if any; the last is viewed."""
    for rid in ids:
        info = run_store.get_eval_run(store, rid)
        status = er.status_label(info)
        if info.status == "done":
            st.success(f"Run #{rid} {status}: {info.n_results} results stored.")
        else:
            st.warning(f"Run #{rid} {status}: {info.n_results} results stored; Resume under Unfinished runs "
                       "continues it.")
        if info.timing.get("warning"):
            st.warning(f"Run #{rid}: {info.timing['warning']}.")
    if ids:
        ss["ev_view_run"] = ids[-1]


def _aspect_counts(m: eval_results.RunMetrics) -> list[int]:
    """The run's query aspect counts, smallest first."""
    return sorted(int(n) for n in m.summary["n_aspects"].unique())


def _success_figure(m: eval_results.RunMetrics, n_aspects: int):  # noqa: ANN202 - a Plotly figure
    """Success ratio (RSR and CSR) against k of the run's ``n_aspects``-aspect queries, one line per strategy."""
    curve = m.summary[m.summary["n_aspects"] == n_aspects]
    long = curve.melt(id_vars=["strategy", "k"], value_vars=["rsr", "csr"], var_name="metric", value_name="ratio")
    long["metric"] = long["metric"].map({"rsr": "exact (RSR)", "csr": "category (CSR)"})
    return px.line(long, x="k", y="ratio", color="strategy", facet_col="metric", markers=True,
                   **strategy_style(m.strategies), range_y=[0, 1.05],
                   title=f"{n_aspects}-aspect queries (n = {int(curve['n_queries'].max())})")


def _results_at_once(run_id: int) -> None:
    """Right after a run: its accuracy table and its success-against-k chart at its largest aspect count (the
    Runs tab has every view of it)."""
    m = eval_results.load_run_metrics(store, run_id)
    if m.per_query.empty:
        return
    n_max = _aspect_counts(m)[-1]
    st.markdown(f"**Results of run #{run_id}**: means at k = each query's number of aspects; success against k of "
                f"its {n_max}-aspect queries. Every view of it (other aspect counts, per-query distribution, "
                "improvement over Standard, exports) is under the Runs tab.")
    st.dataframe(ri.with_mean_intervals(eval_costs.without_unused_cost(eval_costs.accuracy_and_cost(m)), m),
                 hide_index=True,
                 key="ev_new_cost",
                 column_config=COST_FORMAT)
    st.plotly_chart(_success_figure(m, n_max), key="ev_new_curve")


def _run_label(r: storage.EvalRunInfo, escape: Callable[[str], str] = str) -> str:
    """``#id name · query set · model Llayer · status``; ``escape`` (``md_plain`` inside Markdown) is applied to
    the user's names."""
    cfg = r.config
    return (f"#{r.id} {escape(r.name or '')} · {escape(str(qs_names.get(r.query_set_id, r.query_set_id)))} · "
            f"{escape(str(cfg.get('model', '?')))} L{cfg.get('layer', '?')} · {er.status_label(r)}")


def _sweep_label(plan: eval_sweeps.SweepPlan) -> str:
    """A sweep as the Unfinished runs list names it (Markdown, names escaped): model, layers, query set, and each
    layer's state."""
    states = []
    for layer in plan.layers:
        r = plan.run_for(layer)
        states.append(f"layer {layer}: " + ("not started" if r is None else
                                            f"#{r.id} {er.status_label(r)}, {r.n_results} results"))
    first = plan.runs[0]
    return (f"Layer sweep · {md_plain(plan.model)} · layers {', '.join(str(x) for x in plan.layers)} · "
            f"{md_plain(str(qs_names.get(first.query_set_id, first.query_set_id)))} — {'; '.join(states)}")


def _resume(key: str, work: Callable[[Any, Any], list[int]]) -> None:
    """Run ``work(progress, cancel)`` (a resume) under a Stop button and a progress bar, then rerun the page,
    which reports the runs; an input error is shown instead."""
    stop_slot = stop_button(key, STOP_HELP)
    bar, progress = _progress_runner()
    cancel = ss["_ev_cancel"] = threading.Event()
    try:
        ids = work(progress, cancel)
    except eval_results.EvaluationInputError as exc:
        bar.empty()
        stop_slot.empty()
        st.error(md_plain(str(exc)))
    else:
        ss["ev_resumed"] = ids  # reported after the rerun, which lists what is left
        st.rerun()


@st.fragment(run_every=3.0)
def follow_elsewhere(run_ids: list[int]) -> None:
    """Runs another process works on (the CLI, another server on this database): their stored progress, and
    the page again once one of them has ended."""
    infos = [run_store.get_eval_run(store, rid) for rid in run_ids]
    if not all(i.live for i in infos):
        st.rerun(scope="app")
    for info in infos:
        expected = int(info.config.get("n_queries", 0)) * len(info.config.get("strategies", []))
        where = info.process
        asked = run_store.eval_stop_requested(store, info.id)
        cols = st.columns([5, 1])
        cols[0].caption(f"#{info.id} is running elsewhere ({md_plain(where)}): {info.n_results}"
                        f"{f' of {expected}' if expected else ''} results stored, last heard from "
                        f"{storage.heartbeat_age(info.heartbeat_at) or 0:.0f} s ago."
                        + (" Asked to stop: it stops after its current batch." if asked else ""))
        cols[1].button("Stop", key=f"ev_stop_elsewhere_{info.id}", disabled=asked,
                       on_click=run_store.request_eval_stop, args=(store, info.id),  # before the rerun that shows it
                       help="asks the process that runs it to stop after its current batch (within a few "
                            "seconds); its saved results are kept and the run can be resumed")


tab_run, tab_view, tab_compare, tab_sweep = st.tabs(["New run", "Runs", "Compare runs", "Layer sweep"])

# --------------------------------------------------------------------------- new run
with tab_run:
    if stopped_now:
        _report_runs(stopped_now)
    if (resumed := ss.pop("ev_resumed", None)) is not None:
        _report_runs(resumed if isinstance(resumed, list) else [resumed])
    if not query_sets:
        st.info("This corpus has no query set yet: build one on the Query Builder page.")
    else:
        c1, c2 = st.columns(2)
        qs = keep_choice("Query set", query_sets, key="ev_qs", ident=lambda q: q.id, container=c1,
                         format_func=query_set_label, **KEEP)
        model_name = c2.text_input("Model", value="minilm", key="ev_model", **KEEP,
                                   help="registry name (minilm, smollm2) or a local Hugging Face folder")
        strategies = st.multiselect("Strategies", BASE_STRATEGIES, default=["standard", "mrag"], key="ev_strats",
                                    format_func=lambda s: f"{s} (recommended)" if s == RECOMMENDED else s,
                                    help="mrag-decay / mrag-distance / split-weighted are voting variants; "
                                         f"{RECOMMENDED} (recommended, no LLM): "
                                         f"{NAMED_STRATEGIES[RECOMMENDED].label}", **KEEP)
        llm_strats = st.multiselect(
            "LLM-assisted strategies (cost tokens)", LLM_STRATEGY_NAMES, default=[], key="ev_llm_strats",
            disabled=llm_cfg is None, **KEEP,
            help="multi-query: the LLM rewrites the question; hyde: it writes a hypothetical answer passage; "
                 "intent: it writes intent-specific statements of plausible answers. Each text is searched "
                 "(-mrag: MRAG voting per text) and the lists are merged by RRF, 1/(60 + rank).")
        llm_options = LLMOptions()
        if llm_cfg is None:
            st.caption("LLM-assisted strategies need an OpenAI-compatible endpoint: set MRAG_LLM_BASE_URL and "
                       "MRAG_LLM_MODEL (or [llm] in .streamlit/secrets.toml) and reload the page.")
            llm_strats = []
        elif llm_strats:
            l1, l2, l3 = st.columns(3)
            llm_options = LLMOptions(
                n_rewrites=int(l1.number_input("Rewrites (multi-query)", 1, 10, LLMOptions().n_rewrites,
                                               key="ev_llm_n", **KEEP)),
                n_answers=int(l2.number_input("Plausible answers (intent)", 1, 8, LLMOptions().n_answers,
                                              key="ev_llm_answers", **KEEP)),
                hyde_with_query=l3.checkbox("HyDE: fuse with the query", value=LLMOptions().hyde_with_query,
                                            key="ev_llm_hyde_q", **KEEP,
                                            help="RRF of the passage's list and the original query's list"))
            st.caption(f"LLM: {md_plain(llm_cfg.describe())}. Answers are cached in the database: a rerun or a resume "
                       "costs no tokens.")
        strategies = [*strategies, *llm_strats]
        c3, c4, c5, c6, c7, c8 = st.columns(6)
        layers_text = c3.text_input("Layer(s)", value="-1", key="ev_layers", **KEEP,
                                    help="one layer, or several separated by commas for a layer sweep (-1 = last)")
        variant = c4.selectbox("MRAG variant", VARIANTS, key="ev_variant", **KEEP,
                               help="applied to plain 'mrag' (importance = s_i · 2^-rank)")
        c_depth = c5.number_input("c (per-space depth)", min_value=1, value=DEFAULT_C, step=1, key="ev_c", **KEEP)
        on_kmax = kept_number("ev_kmax", 1, max(1, corpus.n_documents), DEFAULT_K_MAX)
        k_max = c6.number_input("k_max", min_value=1, max_value=max(1, corpus.n_documents), step=1, key="ev_kmax",
                                on_change=on_kmax, **KEEP,
                                help="kept as chosen; shown no larger than the corpus' number of documents")
        w = c7.number_input("w (exact-hit weight)", min_value=0.0, value=DEFAULT_W, step=0.5, key="ev_w", **KEEP)
        seed = c8.number_input("Seed", min_value=0, value=0, step=1, key="ev_seed", **KEEP,
                               help="samples the pairs of the head importance s_i; 0 uses the importance stored "
                                    "with the index")
        if st.button("Run evaluation", type="primary", key="ev_start"):
            try:
                layers = [int(x) for x in layers_text.replace(" ", "").split(",") if x]
            except ValueError:
                layers = []
            if not layers:
                st.error("Layer(s) must be whole numbers separated by commas, e.g. -1 or 2,4,5.")
            else:
                asked = RetrievalSettings(model=model_name.strip() or DEFAULT_MODEL, layer=layers[0],
                                          strategies=tuple(strategies), c=int(c_depth), k_max=int(k_max),
                                          variant=variant, w=float(w), seed=int(seed))
                try:
                    er.validate_request(store, corpus_id=corpus.id, query_set_id=qs.id, settings=asked,
                                        llm_config=llm_cfg, llm_options=llm_options)
                    lm = get_model(asked.model)
                    for layer in layers:
                        lm.layer_index(layer)
                except eval_results.EvaluationInputError as exc:
                    st.error(md_plain(str(exc)))
                except Exception as exc:  # noqa: BLE001 - model load / layer problems, shown plainly
                    st.error(f"Cannot start: {md_plain(str(exc))}")
                else:
                    stop_slot = stop_button("ev_stop", STOP_HELP)
                    bar, progress = _progress_runner()
                    cancel = ss["_ev_cancel"] = threading.Event()  # set by the next rerun (Stop, any click)
                    kwargs = dict(corpus_id=corpus.id, query_set_id=qs.id, settings=asked, progress=progress, lm=lm,
                                  llm_config=llm_cfg, llm_options=llm_options, cancel=cancel)
                    try:
                        if len(layers) > 1:
                            ids = eval_sweeps.layer_sweep(store, layers=layers, **kwargs)
                        else:
                            ids = [er.run_evaluation(store, **kwargs)]
                    except eval_results.EvaluationInputError as exc:
                        st.error(md_plain(str(exc)))
                        ids = []
                    bar.empty()
                    stop_slot.empty()
                    _report_runs(ids)
                    if ids:  # the run's results at once, not just "Run #N done"
                        _results_at_once(ids[-1])

    open_sweeps = [p for p in eval_sweeps.sweep_plans(store, corpus.id) if not p.finished]
    in_open_sweeps = {r.id for p in open_sweeps for r in p.runs}
    unfinished = [r for r in run_store.list_eval_runs(store, corpus_id=corpus.id)
                  if r.status != "done" and r.id not in in_open_sweeps]
    active = er.active_runs()
    if unfinished or open_sweeps:
        st.subheader("Unfinished runs")
        labels = {r.id: er.status_label(r) for r in [*unfinished, *(r for p in open_sweeps for r in p.runs)]}
        if "interrupted" in labels.values():
            st.caption("interrupted: stored as running, but no process has worked on it for "
                       f"{storage.LIVE_WINDOW_S:.0f} s (the server or the command line stopped meanwhile); Resume "
                       "continues it.")
        elsewhere = sorted(rid for rid, label in labels.items() if label == "running elsewhere")
        if elsewhere:
            follow_elsewhere(elsewhere)
        for plan in open_sweeps:
            cols = st.columns([5, 1])
            cols[0].markdown(_sweep_label(plan))
            busy = any(r.id in active or r.live for r in plan.runs)
            if cols[1].button("Resume sweep", key=f"ev_resume_sweep_{plan.sweep}", disabled=busy,
                              help="resumes its unfinished layers and runs the ones not started, in order"
                                   + ("; one of its runs is running now" if busy else "")):
                target = (plan.unfinished or plan.runs)[0]
                _resume(f"ev_resume_stop_{plan.sweep}", lambda progress, cancel, _id=target.id, _m=plan.model:
                        eval_sweeps.resume_sweep(store, _id, lm=get_model(_m), progress=progress, cancel=cancel,
                                        llm_config=llm_cfg))
        for r in unfinished:
            cols = st.columns([5, 1])
            cols[0].markdown(f"{_run_label(r, md_plain)} - {r.n_results} results saved")
            if cols[1].button("Resume", key=f"ev_resume_{r.id}", disabled=r.id in active or r.live,
                              help="it is running now" if r.id in active or r.live else None):
                _resume(f"ev_resume_stop_{r.id}", lambda progress, cancel, _r=r: [er.resume_evaluation(
                    store, _r.id, lm=get_model(_r.config.get("model", "minilm")), progress=progress, cancel=cancel,
                    llm_config=llm_cfg)])

# --------------------------------------------------------------------------- runs and views
runs = run_store.list_eval_runs(store, corpus_id=corpus.id)
with tab_view:
    if not runs:
        st.info("No evaluation run for this corpus yet.")
    else:
        llm_tokens = eval_costs.runs_llm_tokens(store, [r.id for r in runs])  # each call once, not once per session
        table = pd.DataFrame([{
            "id": r.id, "name": r.name, "query set": qs_names.get(r.query_set_id, r.query_set_id),
            "model": r.config.get("model"), "layer": r.config.get("layer"),
            "index": f"#{r.embedding_run_id}" if r.embedding_run_id is not None else "",
            "strategies": ", ".join(r.config.get("strategies", [])), "c": r.config.get("c"),
            "k_max": r.config.get("k_max"), "w": r.config.get("w"), "seed": r.seed, "status": er.status_label(r),
            "results": r.n_results, "seconds": round(float(r.timing.get("total_s", 0.0)), 1),
            "LLM tokens": llm_tokens.get(r.id, 0),
            "created": r.created_at,
        } for r in runs])
        st.dataframe(table, hide_index=True, width="stretch", column_config={
            "LLM tokens": st.column_config.NumberColumn(
                help="prompt + completion tokens of the run's LLM expansions, each counted once however many of its "
                     "strategies searched it or sessions scored it (an answer from the cache at what it cost once): "
                     "the total under the run's cost table")})
        run_by_id = {r.id: r for r in runs}
        if st.session_state.get("ev_view_run") not in run_by_id:
            st.session_state.pop("ev_view_run", None)
        chosen = run_by_id[st.selectbox("Run", list(run_by_id), format_func=lambda i: _run_label(run_by_id[i]),
                                        key="ev_view_run")]
        m = eval_results.load_run_metrics(store, chosen.id)
        if m.per_query.empty:
            st.info("This run has no stored results yet.")
        else:
            if note := eval_results.edited_note(m):
                st.warning(note)
            if note := eval_results.coverage_note(m):
                st.warning(f"Run #{chosen.id} is {er.status_label(chosen)}. {note}")
            cost = ri.with_mean_intervals(eval_costs.without_unused_cost(eval_costs.accuracy_and_cost(m)), m)
            spent = "tokens" in cost.columns
            st.subheader("Accuracy and cost" if spent else "Accuracy")
            st.caption("Means over all scored queries at k = each query's number of aspects." + (
                " LLM-assisted strategies trade tokens for recall: tokens = prompt + completion tokens of their "
                "expansions (cached answers counted at what they cost once), tokens spent = sent by this run, "
                "LLM s = seconds waited for answers." if spent else " No strategy of this run used an LLM."))
            st.dataframe(cost, hide_index=True, key="ev_cost", column_config=COST_FORMAT)
            st.caption(ri.INTERVAL_NOTE)
            if spent and (total_note := eval_costs.llm_total_note(m)):  # rows may share calls: their total, each once
                st.caption(total_note)
            if chosen.timing.get("warning"):
                st.warning(chosen.timing["warning"])
            aspects = _aspect_counts(m)
            st.subheader("Success ratio vs k")
            # opens at the largest aspect count (where the strategies differ; at 1 aspect every line is near 1.0),
            # again for each run viewed
            follow_default("ev_view_n", chosen.id, aspects[-1])
            n_sel = st.selectbox("Aspect count", aspects, key="ev_view_n")
            fig = _success_figure(m, n_sel)
            st.plotly_chart(fig, key="ev_curve")
            if note := eval_results.fused_depth_note(m.strategies):
                st.caption(note)
            _html_download(fig, f"run{chosen.id}_success_n{n_sel}", "ev_curve_dl")

            st.subheader("Per-query distribution")
            k_hist = st.slider("k", 1, m.k_max, min(n_sel, m.k_max), key="ev_hist_k")
            at = m.per_query[(m.per_query["k"] == k_hist) & (m.per_query["n_aspects"] == n_sel)]
            hist = px.histogram(at, x="weighted", color="strategy", barmode="group", nbins=12,
                                **strategy_style(m.strategies),
                                title=f"Weighted success ratio per query at k = {k_hist} "
                                      f"({counted(n_sel, 'aspect')})")
            st.plotly_chart(hist, key="ev_hist")
            _html_download(hist, f"run{chosen.id}_hist_k{k_hist}", "ev_hist_dl")

            st.subheader("Relative improvement over Standard RAG")
            imp = eval_results.relative_improvement(m)
            if imp.empty:
                st.caption("Needs the 'standard' strategy and at least one other in the run.")
            else:
                imp_fig = px.bar(imp.assign(improvement_pct=imp["improvement"] * 100), x="n_aspects",
                                 y="improvement_pct", color="strategy", barmode="group",
                                 **strategy_style(m.strategies),
                                 labels={"improvement_pct": "weighted ratio vs standard (%)", "n_aspects": "aspects"},
                                 title="Relative improvement of the weighted ratio at k = aspects")
                counts = sorted(int(n) for n in imp["n_aspects"].unique())  # whole aspect counts, not 0.5 steps
                imp_fig.update_xaxes(tickmode="array", tickvals=counts, ticktext=[str(n) for n in counts])
                st.plotly_chart(imp_fig, key="ev_imp")
                _html_download(imp_fig, f"run{chosen.id}_improvement", "ev_imp_dl")
                st.dataframe(imp, hide_index=True, key="ev_imp_table", column_config={  # % as in the figure
                    "weighted": st.column_config.NumberColumn(format="%.3f"),
                    "baseline": st.column_config.NumberColumn(format="%.3f"),
                    "improvement": st.column_config.NumberColumn(format="percent")})

            if 1 in aspects:
                st.subheader("Single-aspect queries")
                st.caption("Queries whose one document is found within the top k, out of all single-aspect queries.")
                st.dataframe(eval_results.single_aspect_table(m), hide_index=True)

            st.subheader("Export")
            st.caption(f"The file names carry the run's w = {m.w:g} and k_max = {m.k_max}; the CSV repeats them (and "
                       "the run's id) in every row.")
            stem = eval_exports.export_name(m)
            e1, e2, e3, e4 = st.columns(4)
            e1.download_button("Run as JSON", data=lambda: eval_exports.authors_json(m),
                               file_name=f"{stem}.json", mime="application/json", key="ev_json",
                               help="{strategy: {aspects: {success_ratio, category_success_ratio: [k][query]}}}, "
                                    "as `bench --json` writes it")
            e2.download_button("Run as the MRAG authors' result file", data=lambda: eval_exports.authors_file_json(m),
                               file_name=f"{stem}_authors.json", mime="application/json",
                               key="ev_authors_json",
                               help="Their keys (rat, suc, category_rat, category_suc) and strategy names "
                                    "(standard-rag, split-rag, fusion-rag, ...), for their plotting code")
            e3.download_button("Run for the authors' plotter", data=lambda: eval_exports.plotter_json(m),
                               file_name=f"{stem}_plotter.json", mime="application/json", key="ev_plotter_json",
                               help="What their CLI plotter (`multirag-cli plot`) reads: strategy keys standard-rag, "
                                    "multirag, multirag-strategy-decay, ..., split-rag-strategy-weighted, "
                                    "fusion-multirag with success_ratio and category_success_ratio [k][query]")
            e4.download_button("Per-query results (CSV)", data=lambda: eval_exports.run_csv(m),
                               file_name=f"{stem}.csv", mime="text/csv", key="ev_csv")
            for note in eval_exports.plotter_notes(m):
                st.caption(f"Plotter file: {md_plain(note)}.")
        with st.expander("Delete this run"):
            running_now = chosen.id in er.active_runs() or chosen.live
            if running_now:
                st.caption("This run is running now: stop it (here, or where it runs) before deleting it.")
            if st.button(f"Delete run #{chosen.id}", key="ev_delete", disabled=running_now):
                run_store.delete_eval_run(store, chosen.id)
                st.session_state.pop("ev_view_run", None)
                st.rerun()

# --------------------------------------------------------------------------- compare
with tab_compare:
    items = [(r.id, s) for r in runs if r.n_results for s in r.config.get("strategies", [])]
    if len(items) < 2:
        st.info("Compare needs at least two (run, strategy) results in this corpus.")
    else:
        by_id = {r.id: r for r in runs}
        # Set through the session state only (a default as well made Streamlit log a warning on every rerun): the
        # first two items at first, then the session's choice without the items of deleted runs and other corpora.
        ss["ev_cmp_items"] = [tuple(it) for it in ss.get("ev_cmp_items", items[:2]) if tuple(it) in items]
        picked = st.multiselect(
            "Runs and strategies to compare (the first is the reference)", items, key="ev_cmp_items", **KEEP,
            format_func=lambda it: f"#{it[0]} {it[1]} · {qs_names.get(by_id[it[0]].query_set_id, '')} · "
                                   f"{by_id[it[0]].config.get('model')} L{by_id[it[0]].config.get('layer')}")
        c1, c2 = st.columns(2)
        metric = c1.selectbox("Metric", ["weighted", "rsr", "csr"], key="ev_cmp_metric", **KEEP)
        k_mode = c2.number_input("k (0 = number of aspects)", min_value=0, value=0, step=1, key="ev_cmp_k", **KEEP)
        if len(picked) >= 2:
            try:
                loaded = {rid: eval_results.load_run_metrics(store, rid) for rid in dict.fromkeys(r for r, _ in picked)}
                means, tests = eval_comparison.compare_runs(store, picked, metric=metric, k=int(k_mode) or None,
                                                            metrics=loaded)
                mean_ci, diff_ci = ri.compare_intervals(store, picked, metric=metric, k=int(k_mode) or None,
                                                        metrics=loaded)
            except eval_results.EvaluationInputError as exc:
                st.error(md_plain(str(exc)))
            else:
                for rid in loaded:
                    if note := eval_results.edited_note(loaded[rid]):
                        st.warning(note)
                if tests.empty or int(tests["queries"].max()) == 0:
                    st.warning("The selected runs share no scored query.")
                for note in (eval_comparison.compare_k_note(loaded, int(k_mode) or None),
                     eval_comparison.compare_w_note(loaded, metric)):
                    if note:
                        st.warning(note)
                read_at = eval_comparison.compare_k_label(loaded, int(k_mode) or None)
                st.markdown(f"**Mean {metric} per aspect count, at {read_at}**")
                st.dataframe(ri.means_table_with_intervals(eval_comparison.means_table(means, metric, picked), mean_ci),
                             key="ev_cmp_means")
                st.markdown(f"**{metric} over all paired queries, at {read_at}, next to the LLM cost**")
                overall = means[means["n_aspects"] == "all"].set_index("item")[metric]
                cost = eval_costs.items_cost(store, picked, metrics=loaded)
                cost.insert(1, metric, cost["item"].map(overall))
                st.dataframe(cost[["item", metric, "tokens_per_query", "tokens", "spent_tokens", "llm_s", "failed",
                                   eval_costs.SHARED_COLUMN]],
                             hide_index=True, key="ev_cmp_cost",
                             column_config={**COST_FORMAT, metric: st.column_config.NumberColumn(format="%.3f")})
                cmp_fig = px.bar(means[means["n_aspects"] != "all"], x="n_aspects",
                                 y=metric, color="item", barmode="group",
                                 title=f"{metric} per aspect count, at {read_at}")
                st.plotly_chart(cmp_fig, key="ev_cmp_fig")
                if note := eval_results.fused_depth_note([s for _, s in picked]):
                    st.caption(note)
                _html_download(cmp_fig, "comparison", "ev_cmp_dl")
                st.markdown("**Paired significance against the reference** (t-test and Wilcoxon p-values, "
                            "win / tie / loss per query)")
                st.caption(eval_comparison.HOLM_NOTE)
                shown = tests.assign(mean_diff=tests["mean_diff"].map(eval_comparison.signed)) if len(tests) else tests
                shown = ri.tests_with_intervals(shown, diff_ci)
                p_format = {col: "{:.4f}" for col in ("t_p", "t_p_holm", "wilcoxon_p", "wilcoxon_p_holm")}
                st.dataframe(shown.style.format(p_format, na_rep=""), hide_index=True, key="ev_cmp_tests")
                st.caption(ri.INTERVAL_NOTE)
                st.download_button("Comparison with intervals (CSV)", key="ev_cmp_csv", mime="text/csv",
                                   file_name=f"comparison_{metric}.csv",
                                   data=ri.comparison_csv(metric, read_at, mean_ci, tests, diff_ci))
                st.markdown("**Per-query drill-down**")
                pq = eval_comparison.per_query_comparison(store, picked, k=int(k_mode) or None, metrics=loaded)
                st.dataframe(pq, hide_index=True)
                if not pq.empty:
                    qid = st.selectbox("Query", pq["query_id"].tolist(), key="ev_cmp_query",
                                       format_func=lambda q: f"#{q}: {pq.set_index('query_id').loc[q, 'text'][:90]}")
                    st.markdown(text_block(pq.set_index('query_id').loc[qid, 'text']), unsafe_allow_html=True)
                    for rid, strat in picked:
                        llm = (loaded[rid].details.get((strat, int(qid))) or {}).get("llm")
                        if isinstance(llm, dict):
                            state = (f"failed ({md_plain(llm['error'])}); searched with the query text"
                                     if llm.get("error") else "from the cache" if llm.get("cached")
                                     else f"{llm.get('latency_s', 0):.2f} s")
                            tokens = llm.get("prompt_tokens", 0) + llm.get("completion_tokens", 0)
                            st.caption(f"#{rid} {strat}: {len(llm.get('texts', []))} LLM text(s), {tokens} tokens, "
                                       f"{state}")
                            if llm.get("texts"):
                                st.dataframe(pd.DataFrame({"text": llm["texts"]}), hide_index=True,
                                             key=f"ev_cmp_llm_{rid}_{strat}")
                    run_ids = list(dict.fromkeys(r for r, _ in picked))
                    open_run = run_ids[0]
                    if len(run_ids) > 1:
                        open_run = st.selectbox(
                            "Open with the index and settings of run", run_ids, key="ev_cmp_open_run",
                            format_func=lambda i: (f"#{i} · {by_id[i].config.get('model')} "
                                                   f"L{by_id[i].config.get('layer')}"))
                    if st.button("Open this query in Compare", key="ev_cmp_open",
                                 help="Compare opens on the index this run searched, with its voting, c and k"):
                        ss["compare_query_id"] = int(qid)
                        ss["compare_drilldown"] = eval_comparison.drilldown(store, picked, int(qid), run_id=open_run,
                                                               k=int(k_mode) or None)
                        target = Path(__file__).resolve().parent / "5_Compare.py"
                        if target.is_file():
                            st.switch_page("pages/5_Compare.py")
                        else:
                            st.warning("The Compare page is not available in this installation.")

# --------------------------------------------------------------------------- layer sweep
with tab_sweep:
    sweeps = eval_sweeps.sweeps(store, corpus.id)
    if not sweeps:
        st.info("No layer sweep yet: start a run with several layers (e.g. 0,2,4,-1) on the New run tab.")
    else:
        sid = st.selectbox("Sweep", list(sweeps), key="ev_sweep", **KEEP,
                           format_func=lambda s: f"{sweeps[s][0].config.get('model')} · layers "
                                                 f"{', '.join(str(r.config.get('layer')) for r in sweeps[s])} · "
                                                 f"{qs_names.get(sweeps[s][0].query_set_id, '')}")
        frame = eval_sweeps.layer_sweep_frame(store, [r.id for r in sweeps[sid]])
        if frame.empty:
            st.info("The sweep has no stored results yet.")
        else:
            sfig = px.line(frame, x="layer", y="weighted", color="strategy", markers=True,
                           **strategy_style(frame["strategy"]),
                           title="Weighted success ratio at k = aspects, by layer")
            layers = sorted(int(x) for x in frame["layer"].unique())
            sfig.update_xaxes(tickmode="array", tickvals=layers, ticktext=[str(x) for x in layers])  # whole layers
            st.plotly_chart(sfig, key="ev_sweep_fig")
            if set(frame["strategy"]) & {"standard", "split", "split-weighted", "fusion"}:
                st.caption("Standard, Split and Fusion RAG search the model's final embedding, whatever the layer: "
                           "their lines are flat by design. Only the head-based strategies (MRAG and its variants, "
                           "Fusion MRAG) change with the layer.")
            if note := eval_results.fused_depth_note(frame["strategy"].unique().tolist()):
                st.caption(note)
            _html_download(sfig, "layer_sweep", "ev_sweep_dl")
            st.dataframe(frame, hide_index=True)
