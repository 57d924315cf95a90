"""Claims and heartbeats of embedding and evaluation runs (db.liveness), on every backend."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import update

import db
from db import Store
from db.liveness import heartbeat_age, is_live
from db.models import EmbeddingRun, EvalRun, utcnow

OTHER = "gpu-box pid 4242 #0badc0de"  # another process, on another host
MINE = "laptop pid 77 #feedbeef"
NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)


def test_is_live_by_hand() -> None:
    assert is_live("running", NOW - timedelta(seconds=10), NOW)
    assert is_live("running", NOW - timedelta(seconds=30), NOW)  # the window's edge counts
    assert not is_live("running", NOW - timedelta(seconds=30.5), NOW)
    assert not is_live("running", None, NOW)  # never claimed: a run stored before revision 0007
    assert not is_live("cancelled", NOW, NOW) and not is_live("done", NOW, NOW)
    assert is_live("running", NOW + timedelta(seconds=5), NOW)  # a clock ahead of ours: fresh, not dead
    assert is_live("running", (NOW - timedelta(seconds=10)).replace(tzinfo=None), NOW)  # naive = UTC
    assert is_live("running", NOW - timedelta(seconds=50), NOW, window=60)
    assert heartbeat_age(NOW - timedelta(seconds=12), NOW) == 12.0 and heartbeat_age(None, NOW) is None


def test_new_owner_names_this_process_and_differs_per_claim() -> None:
    a, b = db.new_owner(), db.new_owner()
    assert a.startswith(f"{socket.gethostname()} pid {os.getpid()} #") and a != b


def _make(store: Store, kind: str, owner: str = "") -> int:
    corpus = db.create_corpus(store, f"C {kind}")
    docs = db.add_documents(store, corpus.id, [{"title": "a", "text": "x"}]).document_ids
    if kind == "index":
        return db.create_embedding_run(store, corpus.id, model_name="m", layer=-1, pooling="last", n_heads=2,
                                       head_dim=4, dim=8, owner=owner).id
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [{"text": "q", "ground_truth": docs}])
    return db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, owner=owner).id


def _get(store: Store, kind: str, run_id: int):
    return db.get_embedding_run(store, run_id) if kind == "index" else db.get_eval_run(store, run_id)


def _claim(store: Store, kind: str, run_id: int, owner: str):
    return (db.claim_embedding_run if kind == "index" else db.claim_eval_run)(store, run_id, owner)


def _beat(store: Store, kind: str, run_id: int, owner: str) -> bool:
    return (db.beat_embedding_run if kind == "index" else db.beat_eval_run)(store, run_id, owner)


def _finish(store: Store, kind: str, run_id: int, owner: str | None):
    if kind == "index":
        return db.finish_embedding_run(store, run_id, status="cancelled", owner=owner)
    return db.finish_eval_run(store, run_id, status="cancelled", owner=owner)


def _age(store: Store, kind: str, run_id: int, seconds: float) -> None:
    """Make the run's last heartbeat ``seconds`` old, as if its process had been silent that long."""
    model = EmbeddingRun if kind == "index" else EvalRun
    with store.session() as session:
        session.execute(update(model).where(model.id == run_id)
                        .values(heartbeat_at=utcnow() - timedelta(seconds=seconds)))


@pytest.mark.parametrize("kind", ["index", "evaluation"])
def test_a_live_claim_keeps_others_out_until_it_falls_silent(store: Store, kind: str) -> None:
    run_id = _make(store, kind, owner=OTHER)
    info = _get(store, kind, run_id)
    assert info.owner == OTHER and info.live and info.status == "running"
    assert 0 <= db.heartbeat_age(info.heartbeat_at) < 10

    with pytest.raises(db.RunInProgressError, match=r"running in another process \(gpu-box pid 4242;") as caught:
        _claim(store, kind, run_id, MINE)
    assert caught.value.run_id == run_id and caught.value.owner == OTHER
    assert _get(store, kind, run_id).owner == OTHER  # the refused claim wrote nothing
    assert _claim(store, kind, run_id, OTHER).owner == OTHER  # its own claim again: allowed
    assert _beat(store, kind, run_id, OTHER) and not _beat(store, kind, run_id, MINE)

    _age(store, kind, run_id, db.LIVE_WINDOW_S + 5)  # OTHER's process died (or slept)
    assert not _get(store, kind, run_id).live
    claimed = _claim(store, kind, run_id, MINE)
    assert claimed.owner == MINE and claimed.live and claimed.status == "running"

    # OTHER wakes up: its beats and its final status no longer touch the run
    assert not _beat(store, kind, run_id, OTHER)
    after = _finish(store, kind, run_id, OTHER)
    assert after.status == "running" and after.owner == MINE and after.finished_at is None
    assert _beat(store, kind, run_id, MINE)
    done = _finish(store, kind, run_id, MINE)
    assert done.status == "cancelled" and not done.live and done.finished_at is not None
    assert _beat(store, kind, run_id, MINE)  # its owner finished it: not lost (nothing written)
    assert not _beat(store, kind, run_id, OTHER)
    assert _claim(store, kind, run_id, OTHER).owner == OTHER  # and anyone may resume it


@pytest.mark.parametrize("kind", ["index", "evaluation"])
def test_runs_without_an_owner_behave_as_before(store: Store, kind: str) -> None:
    run_id = _make(store, kind)
    info = _get(store, kind, run_id)
    assert info.owner == "" and info.heartbeat_at is None and not info.live and info.status == "running"
    assert _finish(store, kind, run_id, None).status == "cancelled"  # callers that never claim


def test_the_message_for_this_process_says_this_app(sqlite_store: Store) -> None:
    run_id = _make(sqlite_store, "evaluation", owner=db.new_owner())
    with pytest.raises(db.RunInProgressError, match=f"Evaluation run {run_id} is already running in this app"):
        db.claim_eval_run(sqlite_store, run_id, db.new_owner())


def _request_stop(store: Store, kind: str, run_id: int) -> bool:
    return (db.request_embedding_stop if kind == "index" else db.request_eval_stop)(store, run_id)


def _stop_requested(store: Store, kind: str, run_id: int) -> bool:
    return (db.embedding_stop_requested if kind == "index" else db.eval_stop_requested)(store, run_id)


@pytest.mark.parametrize("kind", ["index", "evaluation"])
def test_a_stop_request_reaches_the_next_heartbeat_and_is_forgotten_after(store: Store, kind: str) -> None:
    run_id = _make(store, kind, owner=OTHER)
    assert _beat(store, kind, run_id, OTHER) and not _stop_requested(store, kind, run_id)
    assert _request_stop(store, kind, run_id) and _stop_requested(store, kind, run_id)
    assert _request_stop(store, kind, run_id)  # asked twice: still one request
    assert not _beat(store, kind, run_id, OTHER)  # its process learns it at the next beat ...
    done = _finish(store, kind, run_id, OTHER)  # ... and stores that it stopped
    assert done.status == "cancelled" and not _stop_requested(store, kind, run_id)
    assert not _request_stop(store, kind, run_id)  # not running: nothing to stop
    assert not _stop_requested(store, kind, run_id)
    assert _claim(store, kind, run_id, MINE).live and _beat(store, kind, run_id, MINE)  # a resume runs on


@pytest.mark.parametrize("kind", ["index", "evaluation"])
def test_a_stop_asked_of_an_earlier_claim_does_not_stop_the_next(store: Store, kind: str) -> None:
    run_id = _make(store, kind, owner=OTHER)
    assert _request_stop(store, kind, run_id)
    _age(store, kind, run_id, db.LIVE_WINDOW_S + 5)  # that process died before it saw the request
    assert _claim(store, kind, run_id, MINE).owner == MINE
    assert not _stop_requested(store, kind, run_id) and _beat(store, kind, run_id, MINE)


@pytest.mark.parametrize("kind", ["index", "evaluation"])
def test_a_run_finished_inside_its_heartbeat_block_does_not_cancel(sqlite_store: Store, kind: str) -> None:
    """The run stores its final status inside the heartbeat's block; a beat between that and the block's end
    reported the run lost and set its cancel event, which a layer sweep's next run (or the evaluation whose index
    build it was) still checks: that run then stopped before its first batch, though nobody asked."""
    import threading
    import time

    from services.heartbeat import Heartbeat

    run_id = _make(sqlite_store, kind, owner=MINE)
    cancel = threading.Event()
    with Heartbeat(lambda: _beat(sqlite_store, kind, run_id, MINE), every=0.02, on_lost=cancel.set) as hb:
        _finish(sqlite_store, kind, run_id, MINE)
        time.sleep(0.2)  # beats after the final status, before the block ends
    assert not cancel.is_set() and not hb.lost.is_set()
