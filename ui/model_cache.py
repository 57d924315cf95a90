"""The server's loaded models: one shared pool, loaded once each, warmed in the background at start-up, and the
spinner that says which model a page waits for. A light module (no torch at import): :func:`ui.navigation.run_page`
starts the warm-up first, and the model loads while the page's own libraries are imported."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import streamlit as st

from ui.render import md_plain
from ui.spinners import spinner_now

# Before torch or transformers are first imported, which the warm-up may do before any other module of the app.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: The model warmed at start-up (name, attention implementation): the one the demo's pages use.
WARM_MODEL = ("minilm", "sdpa")


def _load_model(name: str, attn_implementation: str) -> Any:
    """Load a model (registry name or local folder) for interactive use: one thread, search kernels compiled."""
    from mrag_core.device import configure_threads
    from mrag_core.kernels import warm_up
    from mrag_core.models.loader import load_model

    configure_threads(max(1, int(os.environ.get("MRAG_THREADS", "1"))))
    warm_up()  # compile / load the search kernels now, not on the first search
    return load_model(name, attn_implementation=attn_implementation)


@st.cache_resource(show_spinner=False)
def model_pool() -> Any:
    """The server's loaded models (:class:`~mrag_core.model_pool.ModelPool`, at most 3): shared by every session,
    each loaded once, whichever session or the start-up warm-up (:mod:`ui.background`) asks first."""
    from mrag_core.model_pool import ModelPool

    return ModelPool(_load_model, max_entries=3)


def model_words(name: str) -> str:
    """A model as the loading spinner names it: ``minilm (all-MiniLM-L6-v2)`` (once the registry is imported: the
    spinner does not wait for torch), or a local folder's name."""
    registry = sys.modules.get("mrag_core.models.registry")
    spec = getattr(registry, "MODEL_REGISTRY", {}).get(name)
    if spec is None:
        return name.rstrip("/").split("/")[-1] or name
    return f"{name} ({spec.description.split(' (')[0]})"


def get_model(name: str = "minilm", attn_implementation: str = "sdpa") -> Any:
    """A loaded model (registry name or local folder); one thread for interactive use. While it loads (here, or
    in the background since the start) the page shows a spinner naming it; a loaded one returns at once."""
    pool = model_pool()
    if pool.state(name, attn_implementation) == "loaded":
        return pool.get(name, attn_implementation)
    since = pool.loading_for(name, attn_implementation)
    started = f", started {since:.0f} s ago" if since is not None and since >= 1 else ""
    # at once (a load takes seconds), from this thread: st.spinner's timer thread ran late while the warm-up held
    # the interpreter, and the page said nothing for up to 1.7 s (bench/demo_waits.py)
    with spinner_now(f"Loading the model {md_plain(model_words(name))}{started}: the first use after a start "
                     "takes a while…", show_time=True):
        return pool.get(name, attn_implementation)


@st.cache_resource(show_spinner=False)
def _warmed() -> threading.Event:
    return threading.Event()


def warm_default_model() -> None:
    """Once per server: start loading :data:`WARM_MODEL` in the background (a model that fails to load is not tried
    again until a page asks for it, which shows why)."""
    done = _warmed()
    if not done.is_set():
        done.set()
        model_pool().warm(*WARM_MODEL)
