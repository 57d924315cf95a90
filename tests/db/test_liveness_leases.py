"""Leases on work without a run row (db.liveness.take_lease ...): the refusal names the work by the name users know
it by, and says since when it runs; on a real SQLite file opened by two stores, as two processes would."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import update

import db
from db.liveness import LeaseHeldError, lease_info, work_title
from db.models import AppMarker, utcnow

OTHER = "gpu-box pid 4242 #0badc0de"  # another process, on another host
LATER = "laptop pid 77 #feedbeef"
STARTED = datetime(2026, 11, 24, 12, 0, 5)  # naive = UTC, as SQLite gives it back


@pytest.fixture
def two_stores(tmp_path: Path):
    """Two stores on one SQLite file: what two processes on one database have."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    first, second = db.open_store(url), db.open_store(url)
    yield first, second
    first.close()
    second.close()


def _set_times(store: db.Store, name: str, started: datetime, heard: datetime) -> None:
    with store.session() as session:
        session.execute(update(AppMarker).where(AppMarker.name == name).values(created_at=started, updated_at=heard))


def test_work_title_by_hand() -> None:
    assert work_title("Pre-annotation of corpus", 3, "Space mix") == "Pre-annotation of corpus 'Space mix' (#3)"
    assert work_title("Query generation for set", 7, "It's") == "Query generation for set \"It's\" (#7)"
    assert work_title("Pre-annotation of corpus", 3) == "Pre-annotation of corpus #3"
    assert work_title("Pre-annotation of corpus", 3, "") == "Pre-annotation of corpus #3"


def test_a_lease_another_process_holds_is_refused_by_name_and_start(two_stores) -> None:
    first, second = two_stores
    db.take_lease(first, "preannotate:3", OTHER, "Pre-annotation of corpus", 3, title="Space mix")
    _set_times(first, "preannotate:3", STARTED, utcnow() - timedelta(seconds=4))
    with pytest.raises(db.RunInProgressError) as caught:  # a LeaseHeldError is a RunInProgressError
        db.take_lease(second, "preannotate:3", LATER, "Pre-annotation of corpus", 3, title="Space mix")
    exc = caught.value
    assert isinstance(exc, LeaseHeldError)
    assert str(exc) == (
        "Pre-annotation of corpus 'Space mix' (#3) is already running in another process (gpu-box pid 4242; "
        "started 2026-11-24 12:00:05 UTC, last heard from 4 s ago). Stop it there or wait until it ends; once it has "
        "been silent for 30 s it counts as interrupted and can be started here.")
    assert (exc.kind, exc.run_id, exc.title, exc.owner) == ("Pre-annotation of corpus", 3, "Space mix", OTHER)
    assert exc.started_at == STARTED.replace(tzinfo=timezone.utc) and 4 <= exc.seconds_ago < 5
    assert db.lease_holder(second, "preannotate:3") == OTHER  # the refused owner wrote nothing


def test_a_lease_of_this_process_says_this_app(two_stores) -> None:
    first, second = two_stores
    mine = db.new_owner()  # another session of this app (same host and pid)
    db.take_lease(first, "querygen:5", mine, "Query generation for set", 5, title="Mixed aspects")
    _set_times(first, "querygen:5", STARTED, utcnow())
    with pytest.raises(LeaseHeldError) as caught:
        db.take_lease(second, "querygen:5", db.new_owner(), "Query generation for set", 5, title="Mixed aspects")
    assert str(caught.value) == ("Query generation for set 'Mixed aspects' (#5) is already running in this app "
                                 "(started 2026-11-24 12:00:05 UTC); wait until it ends or stop it.")


def test_an_expired_lease_is_taken_over_and_starts_anew(two_stores) -> None:
    first, second = two_stores
    db.take_lease(first, "preannotate:3", OTHER, "Pre-annotation of corpus", 3, title="Space mix")
    _set_times(first, "preannotate:3", STARTED, utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1))
    assert lease_info(second, "preannotate:3") is None  # silent too long
    before = utcnow()
    db.take_lease(second, "preannotate:3", LATER, "Pre-annotation of corpus", 3, title="Space mix")
    info = lease_info(first, "preannotate:3")
    assert info is not None and info.owner == LATER and info.process == "laptop pid 77"
    assert info.started_at >= before.replace(microsecond=0) and info.started_at.tzinfo is not None
    db.take_lease(second, "preannotate:3", LATER, "Pre-annotation of corpus", 3)  # its own again: same start
    assert lease_info(first, "preannotate:3").started_at == info.started_at
    _set_times(first, "preannotate:3", STARTED, utcnow())
    assert lease_info(first, "preannotate:3").describe() == "laptop pid 77, started 2026-11-24 12:00:05 UTC"
    assert lease_info(first, "preannotate:3").started_at == STARTED.replace(tzinfo=timezone.utc)
