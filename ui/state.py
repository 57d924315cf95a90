"""Cached resources and session state shared by every page (store, models, LLM config).

Pages stay thin: they call these to get the store and a loaded model, then call the core.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Sequence
from typing import Any, Callable, TypeVar

import streamlit as st

from mrag_core.wording import counted
from services import storage
from services.demo.store import DemoStatus, ensure_demo_corpus
from services.llm.config import LLMConfig
from services.workflows import corpus as cw
from services.workflows import indexing
from ui.model_cache import get_model, model_pool  # noqa: F401 - the pages' model access, re-exported
from ui.render import md_plain

T = TypeVar("T")

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def default_mark(key: str) -> str:
    """The session key where :func:`follow_default` keeps what widget ``key``'s default was set for."""
    return f"_{key}_default_for"


def follow_default(key: str, owner: Any, value: Any) -> None:
    """Set widget ``key`` to ``value`` whenever ``owner`` (what its default depends on) changes.

    Streamlit keeps a keyed widget's value when its options change, so a value chosen for one model
    or query (layer 5 of MiniLM, k = 3 for a 3-aspect query) would silently carry over to the next.
    Call this before drawing the widget, and draw it without a default of its own (no ``index=`` /
    ``value=``): the value set here is the default. ``owner`` must be comparable with ``!=``.
    """
    mark = default_mark(key)
    if st.session_state.get(mark) != owner or key not in st.session_state:
        st.session_state[mark] = owner
        st.session_state[key] = value


def flash(key: str, kind: str, message: str) -> None:
    """Keep a message for the next run of the page under session ``key`` (from a callback, or before
    ``st.rerun``); ``kind``: ``success``, ``info``, ``warning`` or ``error``. :func:`show_flash` draws it once."""
    st.session_state[key] = (kind, message)


def show_flash(key: str) -> bool:
    """Draw and forget the message :func:`flash` kept under ``key``; True when there was one."""
    kept = st.session_state.pop(key, None)
    if kept is None:
        return False
    getattr(st, kept[0])(kept[1])
    return True


KEEP = {"persist_state": "session"}
"""Widget keyword arguments that keep a keyed widget's value for the whole session, across page switches (Streamlit
drops the value of a widget that a run does not draw, e.g. while another page is shown)."""


def corpus_label(c: storage.CorpusInfo) -> str:
    """A corpus as the select boxes show it: ``name (N docs)``."""
    return f"{c.name} ({counted(c.n_documents, 'doc')})"


def _ident_key(key: str) -> str:
    """Where :func:`keep_choice` keeps the identity of box ``key``'s chosen item."""
    return f"_{key}_ident"


def keep_choice(label: str, options: Sequence[T], *, key: str, ident: Callable[[T], Hashable],
                format_func: Callable[[T], str], container: Any = None, **kwargs: Any) -> T | None:
    """A select box whose choice follows the chosen item (``ident(option)``, e.g. its database id), not the text
    it is shown with.

    Streamlit identifies a select box's value by the option's displayed text: once that text changes (a corpus'
    "(12 docs)" after an import, a query's text after an edit) the widget would fall back to its first option, so
    the next action would silently go to another corpus or query. The box's item is, in order: the one the box
    holds (the user's pick, or the last run's item, whatever its text now), else the one kept in the session
    (``_<key>_ident``: the last choice, or :func:`preselect_choice`'s), else ``index`` (default 0). That item, as
    the current options have it, is set as the box's value before the box is drawn, so that the browser shows it
    too: a value the script chose (a set just generated) with ``index=`` alone was used by the page while the box
    went on showing the old item, and picking the shown-but-unused item then did nothing."""
    remember = _ident_key(key)
    idents = [ident(o) for o in options]
    default = kwargs.pop("index", 0)
    wanted: Hashable | None = None
    if key in st.session_state:
        try:
            wanted = ident(st.session_state[key])
        except Exception:  # noqa: BLE001 - a value that is not an item (a text Streamlit could not match)
            wanted = None
    if wanted not in idents:
        wanted = st.session_state.get(remember)
    index = idents.index(wanted) if wanted in idents else default
    if options and index is not None:
        st.session_state[key] = options[index]
    else:  # no item (no options, or index=None): the box's own stale value would clash with index
        st.session_state.pop(key, None)
        kwargs["index"] = index
    chosen = (container or st).selectbox(label, options, key=key, format_func=format_func, **kwargs)
    st.session_state[remember] = ident(chosen) if chosen is not None else None
    return chosen


def preselect_choice(key: str, ident: Hashable) -> None:
    """Make the :func:`keep_choice` box ``key`` choose the item whose identity is ``ident`` on this run
    (a drill-down, a set just made); call before the box is drawn. Sets the identity keep_choice remembers
    (``_<key>_ident``) and drops the box's own value, which would otherwise win while its text is still shown."""
    st.session_state[_ident_key(key)] = ident
    st.session_state.pop(key, None)


def _wanted_key(key: str) -> str:
    """Where :func:`kept_number` keeps number input ``key``'s chosen value (before clamping)."""
    return f"_{key}_wanted"


def choose_number(key: str, value: int, owner: Any = None) -> None:
    """Make :func:`kept_number` input ``key`` take ``value`` as the user's choice for ``owner`` (a drill-down's
    run settings); call before :func:`kept_number`."""
    st.session_state[default_mark(key)] = owner
    st.session_state[_wanted_key(key)] = value


def kept_number(key: str, low: int, high: int, default: int, owner: Any = None) -> Callable[[], None]:
    """Before drawing number input ``key``: show the user's choice (``default`` until there is one, and again
    whenever ``owner`` changes) clamped to ``[low, high]``. The choice itself is kept aside (``_<key>_wanted``), so
    c = 32 shown as 3 on a 3-document index is 32 again on a larger one. Returns the input's ``on_change``, which
    records a new choice."""
    wanted = _wanted_key(key)
    if wanted not in st.session_state or st.session_state.get(default_mark(key)) != owner:
        st.session_state[default_mark(key)] = owner
        st.session_state[wanted] = default
    st.session_state[key] = max(low, min(int(st.session_state[wanted]), high))
    return lambda: st.session_state.__setitem__(wanted, st.session_state[key])


def forget_choice(key: str) -> None:
    """Drop what :func:`keep_choice` box ``key`` chose (its item was deleted): it starts again from its default."""
    st.session_state.pop(_ident_key(key), None)
    st.session_state.pop(key, None)


def clamp_state(key: str, low: int, high: int) -> None:
    """Keep number input ``key``'s value within ``[low, high]``; call before drawing it. Streamlit resets a
    value outside the input's bounds to the minimum, so k = 5 on an index of 4 documents (or k = 20 kept
    from a larger index) would silently become 1."""
    if key in st.session_state:
        st.session_state[key] = max(low, min(int(st.session_state[key]), high))


@st.cache_resource(show_spinner="Opening the database...")
def get_store() -> storage.Store:
    """The app's store: ``$MRAG_DATABASE_URL`` or the default SQLite file (migrated to head)."""
    return storage.open_store()


@st.cache_resource(show_spinner="Loading the demo corpus...")
def ensure_demo() -> DemoStatus:
    """Load the shipped demo corpus into the store once (idempotent)."""
    return ensure_demo_corpus(get_store())


@st.cache_resource(show_spinner=False)
def build_jobs() -> dict[tuple, Any]:
    """Index build jobs (``BuildJob``) of this server process, keyed by (corpus id, model, layer, pooling)."""
    return {}


@st.cache_resource
def preannotation_lock(corpus_id: int) -> threading.Lock:
    """Held while a corpus is pre-annotated, by whichever session runs it: one run per corpus at a
    time, and a run that the page stopped (a rerun starts while it finishes its batch) is waited for."""
    return threading.Lock()


def corpus_busy(corpus_id: int) -> str | None:
    """Why the corpus must not be deleted now (an index build or a pre-annotation of it runs in this server, or
    any process's heartbeat says it builds an index, runs an evaluation or pre-annotates it), or None; Markdown,
    escaped."""
    if any(key[0] == corpus_id and not job.finished for key, job in build_jobs().items()):
        return "an index of it is being built"
    if preannotation_lock(corpus_id).locked():
        return "it is being pre-annotated"
    from services.workflows.corpus import work_in_progress

    elsewhere = work_in_progress(get_store(), corpus_id)  # e.g. mrag-studio index / eval / annotate
    return md_plain("; ".join(elsewhere)) if elsewhere else None  # (Markdown: process names are data)


def _secrets() -> Any:
    try:
        return st.secrets
    except Exception:  # noqa: BLE001 - no secrets file is fine
        return None


def llm_config() -> LLMConfig | None:
    """The OpenAI-compatible endpoint from Streamlit secrets or the environment, or None (offline)."""
    try:
        return LLMConfig.from_env(secrets=_secrets())
    except ValueError as exc:
        st.warning(f"LLM endpoint settings ignored: {md_plain(str(exc))}")  # (Markdown: values from the settings)
        return None


def corpus_picker(key: str = "corpus_id", label: str = "Corpus") -> storage.CorpusInfo | None:
    """A select box of corpora; the choice is shared across pages via ``st.session_state[key]``."""
    corpora = cw.list_corpora(get_store())
    if not corpora:
        st.info("No corpus yet: import one on the Corpus Import page.")
        return None
    ids = [c.id for c in corpora]
    current = st.session_state.get(key)
    index = ids.index(current) if current in ids else 0
    chosen = st.selectbox(label, corpora, index=index, format_func=corpus_label, key=f"_{key}_select")
    st.session_state[key] = chosen.id
    return cw.get_corpus(get_store(), chosen.id)  # fresh counts and versions, never a stale option object


def open_store_page() -> storage.Store:
    """Every page's start: the store with the demo corpus loaded, or a clear error and stop."""
    try:
        ensure_demo()
    except storage.StoreError as exc:
        st.error(f"The database could not be prepared: {md_plain(str(exc))}")
        st.stop()
    return get_store()


def open_corpus_page() -> tuple[storage.Store, storage.CorpusInfo]:
    """:func:`open_store_page` plus the shared corpus choice (stops when there is no corpus)."""
    store = open_store_page()
    corpus = corpus_picker()
    if corpus is None:
        st.stop()
    return store, corpus


def building_note(store: storage.Store, corpus_id: int) -> str | None:
    """What is being built for a corpus without a finished index: its builds that some process runs now
    (``running`` with a fresh heartbeat), with how far each got, e.g. ``index #3 (minilm, layer 5) is being
    built: 40 of 96 documents embedded``; None when nothing is."""
    live = [r for r in indexing.list_embedding_runs(store, corpus_id, status="running") if r.live]
    if not live:
        return None
    parts = [f"#{r.id} ({md_plain(r.model_name.split('/')[-1])}, layer {r.layer}): {r.n_saved} of "
             f"{counted(r.n_docs, 'document')} embedded" for r in live]
    return f"{'An index is' if len(live) == 1 else 'Indexes are'} being built, {'; '.join(parts)}"


def finished_runs_or_stop(store: storage.Store, corpus: storage.CorpusInfo) -> list[storage.EmbeddingRunInfo]:
    """The corpus' finished embedding runs; with none, a link to the Index page and stop (saying so when a
    build is under way, see :func:`building_note`)."""
    runs = indexing.list_embedding_runs(store, corpus.id, status="done")
    if not runs:
        building = building_note(store, corpus.id)
        if building:
            st.info(f"This corpus has no finished index yet. {building}. Follow it on the **Index** page and "
                    "come back here when it has finished.")
        else:
            st.info("This corpus has no finished index yet: build one on the **Index** page first.")
        st.page_link("pages/4_Index.py", label="Go to Index", icon="🗂️")
        st.stop()
    return runs


def index_label(run: storage.EmbeddingRunInfo, stale: bool = False) -> str:
    """An index (embedding run) as the pickers name it: ``#2 · minilm · layer 5 · mean pooling · 1251 docs``,
    with ``· float16`` for a run not in float32 and ``· stale`` when the corpus changed since it was built."""
    precision = "" if run.precision == "float32" else f" · {run.precision}"
    return (f"#{run.id} · {run.model_name.split('/')[-1]} · layer {run.layer} · {run.pooling} pooling{precision} · "
            f"{run.n_saved} docs" + (" · stale" if stale else ""))


def index_labeler(store: storage.Store, runs: list[storage.EmbeddingRunInfo]
                  ) -> Callable[[storage.EmbeddingRunInfo], str]:
    """A ``format_func`` for a picker of ``runs``: :func:`index_label`, staleness looked up once."""
    stale = {r.id for r in runs if indexing.is_stale(store, r)}
    return lambda run: index_label(run, run.id in stale)


def index_picker(store: storage.Store, runs: list[storage.EmbeddingRunInfo], *, key: str, container: Any = None,
                 target_id: int | None = None) -> storage.EmbeddingRunInfo:
    """The "Index (embedding run)" box of Compare, Maps and Reader (``runs``: the corpus' finished indexes).

    Kept for the session by the index's identity (:func:`keep_choice`); it moves to the index the Index page
    last showed (``run_id``) when that changes, and to ``target_id`` when given (a drill-down's index). With
    neither, it opens on :func:`~services.workflows.indexing.preferred_index` (the deepest layer of the newest
    model's current indexes), not on whichever index was built last."""
    from services.workflows.indexing import preferred_index

    by_id = {r.id: r for r in runs}
    shared = st.session_state.get("run_id")
    target = None
    if st.session_state.get(default_mark(key)) != shared:
        st.session_state[default_mark(key)] = shared
        target = by_id.get(shared)
    if target_id in by_id:
        target = by_id[target_id]
    if target is not None:
        preselect_choice(key, storage.identity_key(target))
    stale = {r.id for r in runs if indexing.is_stale(store, r)}
    default = preferred_index(runs, stale)
    return keep_choice("Index (embedding run)", runs, key=key, ident=storage.identity_key,
                       format_func=lambda run: index_label(run, run.id in stale), container=container,
                       index=runs.index(default), **KEEP)


LOCAL_MODEL = "Local folder…"  # the Index page's model choice for a folder path


def index_page_choices(run: storage.EmbeddingRunInfo) -> dict[str, Any]:
    """The Index page's widget values that select ``run``'s settings: model (a registry name, or a local
    folder by path), layer and pooling, plus the marks :func:`follow_default` compares, so the page keeps
    them rather than resetting layer and pooling to the model's defaults."""
    from mrag_core.models.registry import MODEL_REGISTRY

    local = run.model_name not in MODEL_REGISTRY
    choices: dict[str, Any] = {"index_model_choice": LOCAL_MODEL if local else run.model_name,
                               "index_layer": run.layer, "index_pooling": run.pooling,
                               default_mark("index_layer"): run.model_name,
                               default_mark("index_pooling"): run.model_name}
    if local:
        choices["index_model_path"] = run.model_path or run.model_name
    return choices


def open_index_page_for(run: storage.EmbeddingRunInfo) -> None:
    """Go to the Index page with ``run``'s corpus and settings selected (there: its state and Update)."""
    st.session_state["corpus_id"] = run.corpus_id
    st.session_state.update(index_page_choices(run))
    st.switch_page("pages/4_Index.py")


def stale_index_warning(store: storage.Store, run: storage.EmbeddingRunInfo) -> None:
    """When the corpus changed since ``run`` was built: a warning, and a button to the Index page on its settings."""
    if indexing.is_stale(store, run):
        st.warning(f"Index #{run.id} is stale: the corpus changed since it was built. Update it on the Index page "
                   "(only new or edited documents are embedded).")
        if st.button(f"Update index #{run.id} on the Index page", key=f"stale_update_{run.id}"):
            open_index_page_for(run)


def model_unavailable_message(run: storage.EmbeddingRunInfo, exc: Exception) -> str:
    """Plain text (escape it for Markdown) for an index whose model ``exc`` says could not be loaded: the reason,
    then what to do: restore the model folder at the path the index was built from (``run.model_path``, else its
    model name), or build an index with another model on the Index page."""
    reason = str(exc).strip().rstrip(".")
    folder = run.model_path or run.model_name
    return (f"The index's model could not be loaded: {reason}. Restore the model folder at {folder} (the index keeps "
            "its vectors, not the model), or build an index with another model on the Index page.")


def run_model_or_stop(store: storage.Store, run: storage.EmbeddingRunInfo) -> Any:
    """The loaded model of an index (embedding run) for embedding queries; warns when the index is
    stale, and stops the page with the reason when the model cannot be loaded."""
    from mrag_core.models.loader import ModelLoadError
    from services.workflows.indexing import model_for_run

    stale_index_warning(store, run)
    try:
        return model_for_run(get_model(run.model_name), run)
    except (ModelLoadError, ValueError) as exc:
        st.error(md_plain(model_unavailable_message(run, exc)))
        st.stop()


@st.cache_resource(show_spinner="Loading the index…", max_entries=4)
def _run_index(run_id: int, identity: str, backend: str, seed: int = 0) -> tuple[list[int], Any]:
    """A finished run's ``(document ids, CorpusIndex)``: its vectors never change, so it is kept; ``identity``
    (:func:`storage.identity_key`) is in the key because SQLite gives a deleted run's id to the next one. ``seed`` 0:
    the head importance stored with the run; another: its pairs sampled again with that seed (as an evaluation run
    with that seed does)."""
    from services.workflows.indexing import load_run_index

    return load_run_index(get_store(), run_id, backend, seed)


@st.cache_resource(max_entries=8, show_spinner="Loading the documents' labels and titles…")
def _document_facts(run_id: int, identity: str, backend: str, corpus_state: tuple[int, int, str]
                    ) -> tuple[list[str], list[str]]:
    """Labels and titles of a run's documents; ``corpus_state`` (version, labels version, updated_at) changes
    with any label, title or text change, so a relabelled document shows its new category."""
    from services.workflows.indexing import document_facts

    return document_facts(get_store(), _run_index(run_id, identity, backend)[0])


def index_bundle(store: storage.Store, run: storage.EmbeddingRunInfo, backend: str | None = None, seed: int = 0) -> Any:
    """The :class:`~services.workflows.indexing.IndexBundle` of a finished run for Compare, Reader and Maps:
    the search index cached per run, backend (None: :func:`~services.workflows.indexing.serving_backend`, Milvus
    where its collections are ready) and head-importance ``seed`` (0: the importance stored with the run), the
    documents' labels and titles as they are now. A Milvus that cannot be used, or collections not ready, stop
    the page with the reason."""
    from mrag_core.milvus_backend import MilvusNotReadyError, MilvusUnavailableError
    from services.workflows.indexing import IndexBundle, serving_backend

    identity = storage.identity_key(run)
    corpus = cw.get_corpus(store, run.corpus_id)
    try:
        backend = backend or serving_backend(store, run)
        ids, index = _run_index(run.id, identity, backend, int(seed))
    except (MilvusUnavailableError, MilvusNotReadyError) as exc:
        st.error(md_plain(str(exc)))
        st.stop()
    labels, titles = _document_facts(run.id, identity, backend,
                                     (corpus.version, corpus.labels_version, corpus.updated_at.isoformat()))
    return IndexBundle(index, ids, labels, titles)
