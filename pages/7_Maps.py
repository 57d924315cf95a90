"""Maps: the documents in the standard space and in every head space (small multiples), coloured by
category, with a query placed by the fitted transform and its retrieved / missed documents marked.

Thin page: ``mrag_core.projection`` fits (PCA or UMAP) once per run and space and stores the maps. UMAP maps are
computed in the background (``services.workflows.maps``, a child process: its first fit compiles code for about
half a minute), the demo index's as soon as it is built: the page opens on UMAP when an index's UMAP maps are all
stored, else on PCA, saying while they are being computed, with their progress and Cancel.
Select points (box or lasso) to filter the document table.
"""

from __future__ import annotations

from ui.navigation import open_through_app

open_through_app(__file__)  # first, before the imports below (see its docstring)

import pandas as pd
import streamlit as st

from mrag_core.models.loader import ModelLoadError
from mrag_core.projection import METHODS, SpaceMap, place_query, space_names
from services.maps import ensure_maps, forget_maps_without_model
from services.workflows.compare import STRATEGY_LABELS, compare, embed_query
from services.workflows.indexing import model_for_run, query_window
from services.workflows.maps import index_identity, maps_progress, missing_maps
from ui.background import cancel_maps, maps_job, start_maps
from ui.maps_figure import maps_figure
from ui.navigation import page_setup
from ui.query_widgets import stored_query_picker
from ui.render import md_plain
from ui.spinners import spinner_first
from ui.state import (
    KEEP,
    finished_runs_or_stop,
    follow_default,
    get_model,
    index_bundle,
    index_picker,
    model_unavailable_message,
    open_corpus_page,
    stale_index_warning,
)

page_setup(__file__, "🧭")
st.title("Maps")
st.caption("Each head is its own embedding space. The same documents arrange differently in each: a head that "
           "separates the categories of a query's aspects helps MRAG find them.")

MAP_STRATEGIES = ("standard", "mrag", "split")


def doc_id_of(point: dict) -> int | None:
    cd = point.get("customdata")
    if isinstance(cd, (list, tuple)):
        cd = cd[0] if cd else None
    try:
        return int(cd) if cd is not None else None
    except (TypeError, ValueError):
        return None


def unplaced_note(maps: dict[str, SpaceMap], unplaced: list[str], method: str) -> str:
    """Why the query is not placed on the maps ``unplaced``: models too large for the database, or stored by an
    older version as pickles (never loaded: a pickle can run code), each said with what to do."""
    def listed(spaces: list[str]) -> str:
        return f"{len(spaces)} of {len(maps)} maps ({', '.join(spaces[:5])}{', …' if len(spaces) > 5 else ''})"

    too_large = [s for s in unplaced if maps[s].missing_model == "too_large"]
    refit = [s for s in unplaced if s not in too_large]
    notes = []
    if too_large:
        notes.append(f"The query is not placed on {listed(too_large)}: their fitted {method.upper()} models were "
                     "larger than this database takes in one value, so they were not stored (on MySQL / MariaDB: "
                     "max_allowed_packet). Once the database takes larger values, refit them.")
    if refit:
        notes.append(f"The query is not placed on {listed(refit)}: their fitted {method.upper()} models were stored "
                     "by an older version of MRAG Studio in a format that is no longer loaded (a Python pickle, "
                     "which could run code). Refit them to place queries.")
    return " ".join(notes)


@st.fragment(run_every=1.0)
def computing_panel(job, method: str) -> None:  # noqa: ANN001 - a MapsJob
    """The background UMAP job of the shown index: its progress, and Cancel; the whole page again once it ends."""
    if job.finished:
        st.rerun(scope="app")
    done, total = job.progress()
    meanwhile = (" PCA maps are shown meanwhile; the page switches to UMAP when they are done." if method == "pca"
                 else "")
    st.progress(done / total if total else 0.0,
                text=f"UMAP maps of index #{job.run.id} are being computed in the background: {done} of {total} "
                     f"stored (the first one takes longest: UMAP compiles its code).{meanwhile}")
    if st.button("Cancel", key="maps_cancel", help="stops computing them; the maps already stored are kept"):
        cancel_maps(job)
        st.rerun(scope="app")


store, corpus = open_corpus_page()
runs = finished_runs_or_stop(store, corpus)
c1, c2, c3 = st.columns([3, 1, 1])
run = index_picker(store, runs, key="maps_run", container=c1)
seed_now = int(st.session_state.get("maps_seed", 0))
umap_done, n_spaces = maps_progress(store, run, "umap", seed_now)
# Maps opens on UMAP once an index's UMAP maps are all stored (the demo's are computed when it is built), else on
# PCA; a choice made for this index stays until its UMAP maps become complete.
follow_default("maps_method", (index_identity(run), seed_now, umap_done == n_spaces),
               "umap" if umap_done == n_spaces else "pca")
method = c2.selectbox("Method", METHODS, key="maps_method", **KEEP,
                      format_func={"pca": "PCA (fast)", "umap": "UMAP"}.get)
seed = int(c3.number_input("Seed", 0, 10_000, 0, key="maps_seed", **KEEP))
stale_index_warning(store, run)

if run.n_saved < 3:
    st.info(f"A map needs at least three documents; this index has {run.n_saved}. Add documents on the "
            "Corpus Import page and update the index.")
    st.stop()
names = space_names(run.n_heads)
umap_job = maps_job(run, "umap", seed)
if umap_job is not None and not umap_job.finished and (method == "umap" or umap_done < n_spaces):
    computing_panel(umap_job, method)
    if method == "umap":
        st.stop()
elif umap_job is not None and umap_job.outcome is not None and umap_job.outcome.status == "failed":
    st.error(f"Computing the UMAP maps failed: {md_plain(umap_job.outcome.error)}")
elif umap_job is not None and umap_job.outcome is not None and umap_job.outcome.status == "elsewhere" and \
        umap_done < n_spaces:
    st.info(f"{md_plain(umap_job.outcome.error)} {umap_done} of {n_spaces} UMAP maps are stored so far; reload the "
            "page to see more.")
todo = missing_maps(store, run, method, seed)
if todo and method == "umap":
    st.info(f"{len(todo)} of {len(names)} UMAP maps are not computed yet for this index. They are computed once, in "
            "the background, and stored; the first takes about a minute (UMAP compiles its code).")
    if st.button("Compute UMAP maps", type="primary", key="maps_compute"):
        start_maps(store, run, "umap", seed)
        st.rerun()
    st.stop()
if todo:
    bar = st.progress(0.0, text=f"Computing {len(todo)} {method.upper()} maps (stored per space)…")
    maps = ensure_maps(store, run.id, method, seed=seed,
                       progress=lambda d, t: bar.progress(d / t, text=f"Map {d} / {t}"))
    bar.empty()
    bundle = index_bundle(store, run)
else:
    with spinner_first("maps_load", f"Loading the {len(names)} {method.upper()} maps…"):
        maps = ensure_maps(store, run.id, method, seed=seed)
        bundle = index_bundle(store, run)

# --- optional query ------------------------------------------------------------------------------
query_text = ""
ground_truth: list[int] = []
with st.expander("Place a query on the maps", expanded=True):
    src = st.radio("Query", ["None", "From a query set", "Type a query"], horizontal=True, key="maps_qsrc",
                   **KEEP)
    if src == "From a query set":
        q = stored_query_picker(store, corpus.id, key="maps", stop=False)  # the maps are drawn without one
        if q is not None:
            query_text, ground_truth = q.text, list(q.ground_truth)
    elif src == "Type a query":
        query_text = st.text_input("Query text", key="maps_typed", **KEEP).strip()
    follow_default("maps_k", (query_text, tuple(ground_truth)), max(1, min(len(ground_truth) or 5, 50)))
    s1, s2 = st.columns(2)
    strategy = s1.selectbox("Highlight the documents retrieved by", MAP_STRATEGIES, format_func=STRATEGY_LABELS.get,
                            index=1, key="maps_strategy", **KEEP)
    k = int(s2.number_input("k", 1, 50, key="maps_k", **KEEP))

query_xy: dict = {}
retrieved: set[int] = set()
if query_text:
    try:
        lm = model_for_run(get_model(run.model_name), run)
    except (ModelLoadError, ValueError) as exc:
        st.error(md_plain(model_unavailable_message(run, exc)))
        st.stop()
    if cut := query_window(lm, query_text).note(query_text, run.model_name.split("/")[-1]):
        st.warning(md_plain(cut))
    q_emb, sub_emb, _ = embed_query(lm, run.layer, query_text)
    query_xy = place_query(maps, q_emb)
    unplaced = [space for space in maps if space not in query_xy]
    if unplaced:
        st.info(unplaced_note(maps, unplaced, method))
        if st.button(f"Refit {len(unplaced)} map{'s' if len(unplaced) != 1 else ''} with their models",
                     key="maps_refit"):
            forget_maps_without_model(store, run.id, method, seed=seed, spaces=unplaced)
            if method == "umap":  # computed in the background, without asking again
                start_maps(store, run, "umap", seed)
            st.rerun()
    res = compare(bundle, q_emb, sub_emb, strategies=(strategy,), k=k, ground_truth=ground_truth)
    retrieved = {r.doc_id for r in res.outcomes[strategy].rows}
    o = res.outcomes[strategy]
    if o.rsr is not None:
        st.caption(f"{o.label} at k={res.k}: RSR {o.rsr:.2f} · CSR {o.csr:.2f} · weighted {o.weighted:.2f} — "
                   "black rings: retrieved; red ×: ground truth it missed; ★: the query")

with spinner_first("maps_draw", f"Drawing the {len(maps)} maps…"):  # gone once the chart is sent
    fig = maps_figure(maps, bundle.doc_ids, bundle.titles, bundle.labels, bundle.index.head_importance.score,
                      query_xy, retrieved, set(ground_truth))
    event = st.plotly_chart(fig, key="maps_chart", on_select="rerun", selection_mode=("points", "box", "lasso"))

selected: list[int] = []
try:
    points = event.selection.points if event is not None else []
except AttributeError:
    points = []
for p in points or []:
    d = doc_id_of(p)
    if d is not None and d not in selected:
        selected.append(d)

table = pd.DataFrame({"id": bundle.doc_ids, "title": bundle.titles, "category": bundle.labels})
table["retrieved"] = table["id"].isin(retrieved)
table["ground truth"] = table["id"].isin(ground_truth)
if selected:
    st.markdown(f"**{len(selected)} selected document(s)** (clear the selection by double-clicking the map)")
    table = table[table["id"].isin(selected)]
else:
    st.caption("Select points on the maps (box or lasso) to filter this table.")
st.dataframe(table, hide_index=True, key="maps_table")
