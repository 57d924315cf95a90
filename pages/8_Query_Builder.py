"""Query Builder: generate, write, import, review and export multi-aspect query sets.

Thin page: the work is in :mod:`services.workflows.querysets`; query sets live in the database.
"""

from __future__ import annotations

from ui.navigation import open_through_app

open_through_app(__file__)  # first, before the imports below (see its docstring)

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st

from mrag_core.wording import counted
from services import storage
from services.workflows import corpus as cw
from services.workflows import queries as query_store
from services.workflows import querysets as qw
from services.workflows import stored_runs as run_store
from ui.navigation import page_setup
from ui.query_widgets import aspect_summary
from ui.render import md_plain, text_block
from ui.run_controls import stop_button
from ui.state import flash, keep_choice, llm_config, open_corpus_page, preselect_choice, show_flash

page_setup(__file__, "🧩")
st.title("Query Builder")
st.caption("A multi-aspect query asks about several documents of different categories at once; its ground truth "
           "is those documents. Build sets here, then score them on the Evaluation Runs page.")

store, corpus = open_corpus_page()


def _text_block(text: str) -> None:
    st.markdown(text_block(text), unsafe_allow_html=True)


@contextmanager
def _client(offline: bool = False) -> Iterator[Any]:
    """The configured endpoint's LLM client for one action (closed after it), or None: the offline composer
    (``offline``, or no endpoint configured)."""
    cfg = llm_config()
    if cfg is None or offline:
        yield None
        return
    from services.llm.client import LLMClient

    with LLMClient(cfg) as client:
        yield client


def _progress():
    bar = st.progress(0.0, text="Starting...")

    def progress(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 1.0, text=f"{done}/{total} queries")

    return bar, progress


STOP_HELP = "stops the run; every stored batch is kept - resume later"


def _show_set(query_set_id: int) -> None:
    """Make the Review & export tab show query set ``query_set_id`` (a new one)."""
    preselect_choice("qb_rev_set", query_set_id)


def _set_label(qs: storage.QuerySetInfo) -> str:
    """A query set as the Review & export box shows it: ``name (N queries, source)``."""
    return f"{qs.name} ({counted(qs.n_queries, 'query', 'queries')}, {qs.source})"


def _doc_label(doc: storage.DocumentRow) -> str:
    """A ground-truth document as the page names it: ``title · category`` (titles can repeat across categories)."""
    return f"{doc.title} · {doc.label or '(unlabeled)'}"


def _query_label(row: storage.QueryRow) -> str:
    """A query as the editor's box shows it: ``#id [status] start of the text``."""
    return f"#{row.id} [{row.status}] {row.text[:80] or '(no text)'}"


def _finished(rep: qw.GenerationReport) -> None:
    """A generation run ended: rerun the page (fresh set list, no Stop button, no stale Resume row) and
    report it there."""
    st.session_state["qb_gen_report"] = rep
    _show_set(rep.query_set_id)
    st.rerun()


def _report(rep: qw.GenerationReport) -> None:
    for w in rep.warnings:
        st.warning(w)
    msg = f"{rep.ok} ok, {rep.flagged} flagged, {rep.failed} failed"
    if rep.fusion_asked:
        msg += (f"; Fusion sub-queries asked for again for {counted(rep.fusion_asked, 'story', 'stories')}, "
                f"{rep.fusion_made} now {'has' if rep.fusion_made == 1 else 'have'} them")
    if rep.cancelled:
        st.warning(f"Stopped: {msg}; still to do: {rep.left_text()} - Resume below does it.")
    elif rep.fusion_missing:
        st.success(f"Query set ready: {msg}.")
        st.warning(f"{counted(rep.fusion_missing, 'query has', 'queries have')} no Fusion sub-queries: the endpoint "
                   "failed on that request. Resume below asks for them again and keeps the stories.")
    else:
        st.success(f"Query set ready: {msg}.")


query_sets = query_store.list_query_sets(store, corpus.id)
tab_gen, tab_hand, tab_import, tab_review = st.tabs(["Generate", "Write by hand", "Import", "Review & export"])

# --------------------------------------------------------------------------- generate
with tab_gen:
    if (last_report := st.session_state.pop("qb_gen_report", None)) is not None:
        _report(last_report)
    max_n = qw.max_aspects(store, corpus.id)
    cfg = llm_config()
    offline_note = ("queries are written by the **offline composer** (deterministic extracts of each document's "
                    "most distinctive sentences, not LLM stories). The set is marked 'generated-offline'.")
    if cfg is None:
        st.info(f"No LLM endpoint configured: {offline_note}")
        use_offline = True
    else:  # as the command line's --generator llm / offline
        use_offline = st.radio("Generator", ["llm", "offline"], horizontal=True, key="qb_gen_kind",
                               format_func={"llm": "LLM", "offline": "Offline composer (no LLM)"}.get,
                               help="the offline composer costs no tokens and needs no endpoint; a set is "
                                    "resumed with the generator it was started with") == "offline"
        if use_offline:
            st.info(f"Offline: {offline_note}")
        else:
            st.success(f"Stories are written by the LLM: {md_plain(cfg.describe())}")
    if max_n == 0:
        st.info("No labelled document in this corpus: every aspect needs a category.")
    else:
        name = st.text_input("Name of the new query set", key="qb_gen_name")
        counts = st.multiselect(f"Aspect counts (at most {max_n}: one category per aspect)",
                                list(range(1, max_n + 1)), default=[n for n in (1, 2, 3) if n <= max_n],
                                key="qb_gen_counts")
        c1, c2, c3, c4 = st.columns(4)
        per_count = c1.number_input("Queries per aspect count", min_value=1, value=5, step=1, key="qb_gen_per")
        seed = c2.number_input("Seed", min_value=0, value=0, step=1, key="qb_gen_seed")
        want_fusion = c3.checkbox("Fusion sub-queries", value=True, key="qb_gen_fusion")
        n_fusion = c4.number_input("Sub-queries per query", min_value=1, value=3, step=1, key="qb_gen_nf")
        if st.button("Generate", type="primary", key="qb_gen_start"):
            stop_slot = stop_button("qb_gen_stop", STOP_HELP)
            bar, progress = _progress()
            try:
                with _client(offline=use_offline) as client:
                    rep = qw.generate_query_set(store, corpus_id=corpus.id, name=name, aspect_counts=counts,
                                                per_count=int(per_count), seed=int(seed), client=client,
                                                want_fusion=want_fusion, n_fusion=int(n_fusion), progress=progress)
            except qw.QuerySetError as exc:
                stop_slot.empty()
                bar.empty()
                st.error(md_plain(str(exc)))
            else:
                _finished(rep)
    unfinished = [(q, todo) for q in query_sets if (todo := qw.generation_todo(store, q)).missing]
    for q, todo in unfinished:
        cols = st.columns([4, 1])
        cols[0].write(f"'{md_plain(q.name)}': {todo.usable} of {todo.planned} generated"
                      + (f" ({todo.resume_text()})" if todo.resume_text() else ""))
        if cols[1].button("Resume", key=f"qb_resume_{q.id}"):
            stop_slot = stop_button(f"qb_resume_stop_{q.id}", STOP_HELP)
            bar, progress = _progress()
            try:
                # with the generator it was started with (as the command line resumes it)
                with _client(offline=str(q.params.get("generator", "")).startswith("offline")) as client:
                    rep = qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=q.id, client=client,
                                                progress=progress)
            except qw.QuerySetError as exc:
                stop_slot.empty()
                bar.empty()
                st.error(md_plain(str(exc)))
            else:
                _finished(rep)

# --------------------------------------------------------------------------- by hand
with tab_hand:
    picks: dict[int, str] = st.session_state.setdefault("qb_hand_picks", {})
    show_flash("qb_hand_flash")
    target_opts = ["(new set)"] + [q.name for q in query_sets]
    if (made := st.session_state.pop("qb_hand_made_set", None)) in target_opts:
        st.session_state["qb_hand_set"] = made  # the set just made: the next query goes there too
    target = st.selectbox("Add to query set", target_opts, key="qb_hand_set")
    new_name = st.text_input("New set name", key="qb_hand_new") if target == "(new set)" else ""
    text = st.text_area("Query text", key="qb_hand_text", height=120)
    search = st.text_input("Search the corpus for ground-truth documents", key="qb_hand_search")
    if search.strip():
        page = cw.list_documents(store, corpus.id, search=search.strip(), limit=20)
        st.caption(f"{counted(page.total, 'match', 'matches')}; showing {len(page.items)}")
        for d in page.items:
            cols = st.columns([5, 1])
            cols[0].markdown(f"**{md_plain(d.title)}** · {md_plain(d.label or '(unlabeled)')}")
            if cols[1].button("Add", key=f"qb_pick_{d.id}", disabled=d.id in picks):
                picks[d.id] = _doc_label(d)
                st.rerun()
    if picks:
        st.markdown("Ground truth: " + ", ".join(md_plain(t) for t in picks.values()))
        if st.button("Clear ground truth", key="qb_hand_clear"):
            picks.clear()
            st.rerun()
    if st.button("Add query", type="primary", key="qb_hand_add"):
        try:
            if target == "(new set)":  # the set and its query together: a query that fails makes no set
                row = qw.add_manual_query_to_new_set(store, corpus.id, new_name, text=text, ground_truth=list(picks))
            else:
                row = qw.add_manual_query(store, next(q.id for q in query_sets if q.name == target), text=text,
                                          ground_truth=list(picks))
        except (qw.QuerySetError, storage.StoreError) as exc:
            st.error(md_plain(str(exc)))
        else:
            picks.clear()
            set_name = query_store.get_query_set(store, row.query_set_id).name
            flash("qb_hand_flash", "success", f"Query #{row.id} added to '{md_plain(set_name)}' ({row.status}"
                  f"{': ' + md_plain(row.error) if row.error else ''}).")
            st.session_state["qb_hand_made_set"] = set_name
            st.rerun()  # the new set in the set lists, the picks cleared from the page

# --------------------------------------------------------------------------- import
with tab_import:
    st.caption("MRAG benchmark query files - a JSON / JSONL list (optionally .bz2 / .gz) of "
               "{\"topics\" or \"related\": [...], \"text\", \"fusion\"} - or a CSV / TSV with `text` and "
               "`topics` columns (titles separated by `|`, optional `fusion`). A topic is matched to a document "
               "title of this corpus, else to all documents of a legal / accident topic of that name. Files "
               "exported here also give each topic's category and document id, which tell documents of one title "
               "apart, and keep a flagged query flagged with its reason; a title of several documents that "
               "nothing tells apart is not guessed: its query is imported flagged.")
    upload = st.file_uploader("Query file", type=["json", "jsonl", "ndjson", "csv", "tsv", "bz2", "gz"],
                              key="qb_imp_file")
    imp_name = st.text_input("Name of the new query set", key="qb_imp_name")
    if st.button("Import", key="qb_imp_go", disabled=upload is None):
        try:
            rep = qw.import_benchmark_queries(store, corpus.id, upload.getvalue(), name=imp_name,
                                              file_name=upload.name)
        except qw.QuerySetError as exc:
            st.error(f"Nothing was imported: {md_plain(str(exc))}")
        else:
            st.success(f"Imported {counted(rep.n_queries, 'query', 'queries')} into '{md_plain(imp_name.strip())}' "
                       f"({rep.n_flagged} flagged, {counted(len(rep.skipped), 'row')} skipped).")
            if rep.notes or rep.skipped or rep.unresolved or rep.ambiguous:
                st.warning(qw.import_problems(rep) + ":")
                st.dataframe(qw.import_issues(rep), hide_index=True, width="stretch")
            _show_set(rep.query_set_id)

# --------------------------------------------------------------------------- review
with tab_review:
    show_flash("qb_flash")
    query_sets = query_store.list_query_sets(store, corpus.id)
    if not query_sets:
        st.info("No query set in this corpus yet.")
    else:
        # The box shows counts that change (a deleted query): keep_choice follows the set's id, not its text.
        qs = keep_choice("Query set", query_sets, key="qb_rev_set", ident=lambda s: s.id, format_func=_set_label)
        if qs.source == "generated-offline":
            st.caption("Written by the offline composer (no LLM).")
        frame = qw.review_frame(store, qs.id)
        counts = frame["status"].value_counts().to_dict() if len(frame) else {}
        st.write(f"{counts.get('ok', 0)} ok · {counts.get('flagged', 0)} flagged · {counts.get('failed', 0)} failed")
        if summary := aspect_summary(query_store.list_queries(store, qs.id)):
            st.write(summary)
        st.dataframe(frame, hide_index=True, width="stretch")
        st.download_button("Export as MRAG benchmark JSON", data=lambda: qw.export_benchmark_json(store, qs.id),
                           file_name=qw.export_file_name(qs.name), mime="application/json", key="qb_export")

        problems = [q for q in query_store.list_queries(store, qs.id) if q.status != "ok"]
        if problems:
            st.subheader("Flagged and failed queries")
            for q in problems[:25]:
                # keyed: stays open while messages above it come and go (an unkeyed one is rebuilt closed)
                with st.expander(f"#{q.id} · {q.status} · {md_plain(q.error[:80])}", key=f"qb_problem_open_{q.id}",
                                 on_change="rerun"):
                    _text_block(q.text or "(no text)")
                    if st.button("Regenerate", key=f"qb_regen_{q.id}"):
                        try:
                            with _client() as client:
                                # the set's own setting: a query whose Fusion request failed has none yet
                                new = qw.regenerate_query(
                                    store, q.id, client=client,
                                    want_fusion=bool(q.fusion) or bool(qs.params.get("want_fusion", False)),
                                    n_fusion=int(qs.params.get("n_fusion", 3)))
                        except qw.QuerySetError as exc:
                            st.error(md_plain(str(exc)))
                        else:
                            st.info(f"Now {new.status}{': ' + md_plain(new.error) if new.error else ''}.")

        rows = query_store.list_queries(store, qs.id)
        if not rows:
            st.info("This query set has no query yet: write one by hand or import a query file.")
        else:
            st.subheader("Edit a query")
            # The box shows the query's text and status, which Save changes: follow the query's id.
            q = keep_choice("Query", rows, key="qb_edit_q", ident=lambda r: r.id, format_func=_query_label)
            docs = cw.get_documents(store, q.ground_truth)
            new_text = st.text_area("Text", value=q.text, key=f"qb_edit_text_{q.id}")
            keep = st.multiselect("Ground truth", [d.id for d in docs], default=[d.id for d in docs],
                                  format_func=lambda i: next(_doc_label(d) for d in docs if d.id == i),
                                  key=f"qb_edit_gt_{q.id}")
            extra = st.text_input("Add a document (search)", key=f"qb_edit_search_{q.id}")
            add_ids: list[int] = []
            if extra.strip():
                found = cw.list_documents(store, corpus.id, search=extra.strip(), limit=20).items
                add_ids = st.multiselect("Documents to add", [d.id for d in found], key=f"qb_edit_add_{q.id}",
                                         format_func=lambda i: next(_doc_label(d) for d in found if d.id == i))
            c1, c2 = st.columns(2)
            if c1.button("Save", key=f"qb_edit_save_{q.id}"):
                try:
                    saved = qw.edit_query(store, q.id, text=new_text, ground_truth=list(dict.fromkeys(keep + add_ids)))
                except qw.QuerySetError as exc:
                    st.error(md_plain(str(exc)))
                else:
                    st.success(f"Saved: {saved.status}{' - ' + md_plain(saved.error) if saved.error else ''}.")
            used = query_store.runs_with_results_for(store, q.id)
            sure_q = c2.checkbox(f"Delete query #{q.id}" + (
                f": its results leave {len(used)} stored evaluation run{'s' if len(used) != 1 else ''} "
                f"(#{', #'.join(map(str, used))}), whose figures then cover the other queries only" if used else ""),
                key=f"qb_edit_del_sure_{q.id}")
            if c2.button("Delete query", key=f"qb_edit_del_{q.id}", disabled=not sure_q):
                try:
                    query_store.delete_query(store, q.id)
                except storage.NotFoundError:
                    pass  # deleted meanwhile: the rerun shows the set as it is
                flash("qb_flash", "success", f"Deleted query #{q.id}.")
                st.rerun()
        with st.expander("Delete this query set", key=f"qb_del_set_open_{qs.id}", on_change="rerun"):
            runs_on_set = run_store.list_eval_runs(store, query_set_id=qs.id)
            busy = "; ".join(qw.set_work_in_progress(store, qs.id))
            if busy:
                st.info(f"This query set cannot be deleted while {md_plain(busy)}. Stop that work or wait until it "
                        "ends.")
            sure_set = st.checkbox(
                f"Delete '{md_plain(qs.name)}' with its {qs.n_queries} quer{'y' if qs.n_queries == 1 else 'ies'} and "
                f"the {len(runs_on_set)} evaluation run{'s' if len(runs_on_set) != 1 else ''} made on it; this "
                "cannot be undone", key=f"qb_del_set_sure_{qs.id}", disabled=bool(busy))
            if st.button("Delete query set", key="qb_del_set", disabled=not sure_set or bool(busy)) and not busy:
                try:
                    query_store.delete_query_set(store, qs.id)
                except storage.NotFoundError:
                    pass
                flash("qb_flash", "success", f"Deleted query set '{md_plain(qs.name)}'.")
                st.rerun()
