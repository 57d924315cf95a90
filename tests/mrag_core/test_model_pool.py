"""mrag_core.model_pool: a model shared by every thread, loaded once whoever asks first (a page, or the start-up
warm-up in the background); a failed load reaches every waiter and is tried again later; the least recently used
model goes first. The real MiniLM is loaded by several threads at once and embeds as a model loaded alone does."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from mrag_core.model_pool import ModelPool


class Loader:
    """Counts loads per key; each load waits for ``gate`` (so a test holds it 'loading'), then returns a new object
    or raises ``fail`` once."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail: Exception | None = None
        self.lock = threading.Lock()

    def __call__(self, *key):
        with self.lock:
            self.calls.append(key)
        self.gate.wait(10)
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        return object()


def test_many_threads_asking_at_once_get_one_load():
    loader = Loader()
    loader.gate.clear()
    pool = ModelPool(loader)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(pool.get("m", "sdpa"))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    assert pool.state("m", "sdpa") == "loading" and pool.loading_for("m", "sdpa") is not None
    loader.gate.set()
    for t in threads:
        t.join(10)
    assert loader.calls == [("m", "sdpa")]
    assert len(got) == 8 and all(g is got[0] for g in got)
    assert pool.state("m", "sdpa") == "loaded" and pool.loading_for("m", "sdpa") is None


def test_warm_loads_in_the_background_and_get_waits_for_it():
    loader = Loader()
    loader.gate.clear()
    pool = ModelPool(loader)
    assert pool.state("m") == "absent"
    thread = pool.warm("m")
    assert thread is not None and pool.state("m") == "loading"
    assert pool.warm("m") is None  # already loading: no second load
    waiter: list[object] = []
    t = threading.Thread(target=lambda: waiter.append(pool.get("m")))
    t.start()
    time.sleep(0.2)
    assert waiter == []  # waits for the warm-up's load
    loader.gate.set()
    t.join(10)
    thread.join(10)
    assert loader.calls == [("m",)] and waiter == [pool.get("m")]
    assert pool.warm("m") is None  # loaded: nothing to do


def test_a_failed_load_reaches_every_waiter_and_is_tried_again():
    loader = Loader()
    loader.gate.clear()
    loader.fail = RuntimeError("no weights")
    pool = ModelPool(loader)
    errors: list[str] = []

    def ask() -> None:
        try:
            pool.get("m")
        except RuntimeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    loader.gate.set()
    for t in threads:
        t.join(10)
    assert errors == ["no weights"] * 3 and len(loader.calls) == 1
    assert pool.state("m") == "absent"
    assert pool.get("m") is not None and len(loader.calls) == 2  # asked again: loaded this time


def test_a_failed_warm_up_leaves_the_next_get_to_load():
    loader = Loader()
    loader.fail = RuntimeError("broken folder")
    pool = ModelPool(loader)
    pool.warm("m").join(10)
    assert pool.state("m") == "absent"
    assert pool.get("m") is not None and len(loader.calls) == 2


def test_at_most_max_entries_kept_least_recently_asked_first_dropped():
    loader = Loader()
    pool = ModelPool(loader, max_entries=2)
    a = pool.get("a")
    pool.get("b")
    assert pool.get("a") is a  # a asked again: b is now the least recent
    pool.get("c")
    assert [pool.state(k) for k in "abc"] == ["loaded", "absent", "loaded"]
    assert pool.get("a") is a and loader.calls == [("a",), ("b",), ("c",)]
    with pytest.raises(ValueError):
        ModelPool(loader, max_entries=0)


def test_minilm_loaded_by_threads_at_once_embeds_as_a_model_loaded_alone():
    """The real model through the pool, asked for by four threads while the warm-up loads it: one load, and its
    vectors equal those of a separately loaded model."""
    from mrag_core.extraction import embed_texts
    from mrag_core.models.loader import load_model

    loads: list[str] = []

    def loader(name: str, attn: str):
        loads.append(name)
        return load_model(name, attn_implementation=attn, device="cpu")

    pool = ModelPool(loader)
    warm = pool.warm("minilm", "sdpa")
    models: list[object] = []
    threads = [threading.Thread(target=lambda: models.append(pool.get("minilm", "sdpa"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    warm.join(120)
    assert loads == ["minilm"] and len(models) == 4 and all(m is models[0] for m in models)
    texts = ["Lighthouses guide ships past the rocks.", "Tempeh is made by fermenting soybeans."]
    shared = embed_texts(models[0], texts, kind="doc", layer=-1)
    alone = embed_texts(load_model("minilm", device="cpu"), texts, kind="doc", layer=-1)
    np.testing.assert_allclose(shared.standard, alone.standard, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(shared.heads, alone.heads, rtol=1e-5, atol=1e-6)
