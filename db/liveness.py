"""Which process runs an embedding or evaluation run: claims and heartbeats (pure helpers + row updates).

A process that starts or resumes a run *claims* it: in one write transaction it checks that no other
process runs it now, then stores itself as the run's ``owner`` (:func:`new_owner`: ``host pid N #token``)
with ``heartbeat_at = now``. While it works, it *beats* (stores ``heartbeat_at = now`` again) every
:data:`BEAT_EVERY_S` seconds from a background thread (:class:`services.heartbeat.Heartbeat`); a beat
changes the row only while the run is still ``running`` and still its own.

A run is *live* when its status is ``running`` and its heartbeat is at most :data:`LIVE_WINDOW_S` seconds
old (:func:`is_live`). A ``running`` run that is not live was interrupted: its process ended without
storing a final status (a server restart, a killed CLI, a closed laptop) and anyone may resume it. A
claim of a live run by another owner raises :class:`~db.errors.RunInProgressError`, so the app and a
CLI beside it on the same database never work on one run at once.

The two run tables share the ``owner`` and ``heartbeat_at`` columns; the functions here take the mapped
class. Work without a run row of its own (a pre-annotation of a corpus) takes a *lease* instead: an
``app_markers`` row named for the work, holding the owner, its ``updated_at`` the heartbeat
(:func:`take_lease`, :func:`beat_lease`, :func:`release_lease`, :func:`lease_holder`, :func:`lease_info`); a
refused lease raises :class:`LeaseHeldError`, naming the work by the name users know it by and since when it runs.
A change that would break leased work (deleting a category a pre-annotation stores suggestions under) checks the
lease inside its own write transaction (:class:`LeaseRef`, :func:`refuse_while_leased`).
No Streamlit here.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from db.engine import Store
from db.errors import LIVE_WINDOW_S, RunInProgressError, StoreError, process_of, this_process
from db.models import AppMarker, EmbeddingRun, EvalRun, utcnow

#: How often a working process stores its heartbeat (a sixth of :data:`LIVE_WINDOW_S`).
BEAT_EVERY_S = LIVE_WINDOW_S / 6

__all__ = ["BEAT_EVERY_S", "LIVE_WINDOW_S", "LeaseHeldError", "LeaseInfo", "LeaseRef", "beat_lease", "heartbeat_age",
           "is_live", "lease_holder", "lease_info", "new_owner", "process_gone", "process_of", "refuse_while_leased",
           "release_lease", "take_lease", "work_title"]


def new_owner() -> str:
    """A name for one claim: ``host pid N #token`` (the token tells two claims of one process apart; its
    process: :func:`~db.errors.process_of`)."""
    return f"{this_process()} #{uuid.uuid4().hex[:8]}"


def process_gone(owner: str) -> bool:
    """Whether the process an owner ``host pid N #token`` names has surely ended: it ran on this host and no
    process N runs here now. False whenever that cannot be told (another host, an owner of another shape, a
    process N of another user, or this very process), so a live process is never taken for a dead one; its
    heartbeat still expires after :data:`LIVE_WINDOW_S`. (A process N started since then gives False too.)"""
    host, _, rest = process_of(owner).rpartition(" pid ")
    if host != socket.gethostname() or not rest.isdigit():
        return False
    pid = int(rest)
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: a process of another user runs with that id
        return False
    return False


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def heartbeat_age(heartbeat_at: datetime | None, now: datetime | None = None) -> float | None:
    """Seconds since ``heartbeat_at`` (``None`` without one); naive datetimes are UTC. A heartbeat stored
    by a host whose clock runs ahead gives a negative age, which counts as fresh."""
    if heartbeat_at is None:
        return None
    return ((now or utcnow()) - _aware(heartbeat_at)).total_seconds()


def is_live(status: str, heartbeat_at: datetime | None, now: datetime | None = None,
            window: float = LIVE_WINDOW_S) -> bool:
    """Whether a run runs in some process now: ``status == "running"`` and a heartbeat at most ``window``
    seconds old."""
    age = heartbeat_age(heartbeat_at, now)
    return status == "running" and age is not None and age <= window


class LiveRun:
    """What a run's info (``db.EvalRunInfo``, ``db.EmbeddingRunInfo``) tells from its ``status``, ``owner`` and
    ``heartbeat_at``: whether some process runs it now, and which process last claimed it."""

    status: str
    owner: str
    heartbeat_at: datetime | None

    @property
    def live(self) -> bool:
        """Runs in some process now (``running`` with a recent heartbeat, :func:`is_live`)."""
        return is_live(self.status, self.heartbeat_at)

    @property
    def process(self) -> str:
        """The process that last claimed it (``host pid N``; ``another process`` when none did)."""
        return process_of(self.owner)


def claim_row(session: Session, run: EmbeddingRun | EvalRun, kind: str, owner: str,
              window: float = LIVE_WINDOW_S) -> None:
    """Inside a write transaction: make ``owner`` the process that runs ``run`` (status ``running``, fresh
    heartbeat, ``finished_at`` cleared). Raises :class:`RunInProgressError` when another owner's heartbeat
    on it is live; claiming one's own live run again is allowed."""
    now = utcnow()
    if run.owner != owner and is_live(run.status, run.heartbeat_at, now, window):
        raise RunInProgressError(kind, run.id, run.owner, heartbeat_age(run.heartbeat_at, now) or 0.0)
    run.status = "running"
    run.owner = owner
    run.heartbeat_at = now
    run.finished_at = None
    clear_stop_row(session, type(run), run.id)  # a stop asked of an earlier claim is not this one's


def stop_marker(model: type[EmbeddingRun] | type[EvalRun], run_id: int) -> str:
    """The ``app_markers`` name of a stop request for run ``run_id`` (:func:`request_stop_row`)."""
    return f"stop:{'index' if model is EmbeddingRun else 'eval'}:{int(run_id)}"


def request_stop_row(session: Session, model: type[EmbeddingRun] | type[EvalRun], run_id: int) -> bool:
    """Inside a write transaction: ask the process that runs ``run_id`` (whichever it is) to stop it after its
    current batch: a stop marker its next heartbeat finds (:func:`beat_row` then reports the run lost, and the
    run stores ``cancelled``, resumable). Returns whether the run is live (else there is nothing to stop)."""
    run = session.get(model, run_id)
    if run is None or not is_live(run.status, run.heartbeat_at):
        return False
    name = stop_marker(model, run_id)
    if session.get(AppMarker, name) is None:
        session.add(AppMarker(name=name, value=run.owner, created_at=utcnow(), updated_at=utcnow()))
    return True


def stop_requested_row(session: Session, model: type[EmbeddingRun] | type[EvalRun], run_id: int) -> bool:
    """Whether a stop of run ``run_id`` was asked and not yet carried out."""
    return session.get(AppMarker, stop_marker(model, run_id)) is not None


def clear_stop_row(session: Session, model: type[EmbeddingRun] | type[EvalRun], run_id: int) -> None:
    """Inside a write transaction: forget a stop request of run ``run_id`` (it was claimed anew, or finished)."""
    session.execute(delete(AppMarker).where(AppMarker.name == stop_marker(model, run_id)))


def beat_row(session: Session, model: type[EmbeddingRun] | type[EvalRun], run_id: int, owner: str) -> bool:
    """Inside a write transaction: store a fresh heartbeat on run ``run_id`` if it is still ``running`` and
    still ``owner``'s and nobody asked it to stop; returns whether the run is still this owner's to work on or to
    finish (``False``: deleted, claimed by another process after this one fell silent, or a stop was requested:
    the caller stops after its batch; ``True`` without a write for a run this owner has finished)."""
    if stop_requested_row(session, model, run_id):
        return False
    result = session.execute(
        update(model)
        .where(model.id == run_id, model.owner == owner, model.status == "running")
        .values(heartbeat_at=utcnow())
    )
    if result.rowcount:
        return True
    # Not updated. A run that its owner has just finished (its final status stored a moment before the heartbeat
    # stops) is not lost: reporting it would set the run's cancel event, which a layer sweep's next run, or the
    # evaluation whose index build this was, still checks.
    run = session.get(model, run_id)
    return run is not None and run.owner == owner and run.status != "running"


def beat(store: Store, model: type[EmbeddingRun] | type[EvalRun], run_id: int, owner: str) -> bool:
    """:func:`beat_row` in a transaction of its own (what a :class:`~services.heartbeat.Heartbeat` calls)."""
    with store.session() as session:
        return beat_row(session, model, run_id, owner)


def request_stop(store: Store, model: type[EmbeddingRun] | type[EvalRun], run_id: int) -> bool:
    """:func:`request_stop_row` in a transaction of its own."""
    with store.session() as session:
        return request_stop_row(session, model, run_id)


def stop_requested(store: Store, model: type[EmbeddingRun] | type[EvalRun], run_id: int) -> bool:
    """:func:`stop_requested_row` in a read-only transaction of its own."""
    with store.session(readonly=True) as session:
        return stop_requested_row(session, model, run_id)


def owns(run: EmbeddingRun | EvalRun, owner: str | None) -> bool:
    """Whether a final status from ``owner`` may be stored on ``run``: always without an owner (callers that
    do not claim), else only while ``run`` is ``owner``'s."""
    return owner is None or run.owner == owner


# --------------------------------------------------------------------------- leases on work without a run row


def work_title(kind: str, key: int, title: str | None = None) -> str:
    """The work a lease guards, in words: ``Pre-annotation of corpus 'Space mix' (#3)`` with a ``title`` (the name
    users know the corpus or query set by), ``Pre-annotation of corpus #3`` without one."""
    return f"{kind} {title!r} (#{int(key)})" if title else f"{kind} #{int(key)}"


def _utc_text(moment: datetime) -> str:
    return f"{_aware(moment):%Y-%m-%d %H:%M:%S} UTC"


class LeaseHeldError(RunInProgressError):
    """Another process (or another session of this app) does the leased work now (:func:`take_lease`).

    Besides :class:`~db.errors.RunInProgressError`'s ``kind``, ``run_id`` (the key), ``owner`` and ``seconds_ago``:
    ``title`` (the name of the corpus or query set, or ``None``) and ``started_at`` (when the holder took the lease,
    UTC). The message names the work by :func:`work_title`; a page renders it escaped (names are data).
    """

    def __init__(self, kind: str, key: int, owner: str, seconds_ago: float, *, title: str | None = None,
                 started_at: datetime | None = None) -> None:
        self.kind, self.run_id, self.owner, self.seconds_ago = kind, key, owner, seconds_ago
        self.title, self.started_at = title, started_at
        what = work_title(kind, key, title)
        since = _utc_text(started_at) if started_at is not None else None
        where = process_of(owner)
        if where == this_process():
            StoreError.__init__(self, f"{what} is already running in this app{f' (started {since})' if since else ''}; "
                                      "wait until it ends or stop it.")
            return
        StoreError.__init__(
            self,
            f"{what} is already running in another process ({where if owner else 'owner unknown'}; "
            f"{f'started {since}, ' if since else ''}last heard from {seconds_ago:.0f} s ago). Stop it there or wait "
            f"until it ends; once it has been silent for {LIVE_WINDOW_S:.0f} s it counts as interrupted and can be "
            "started here.")


def take_lease(store: Store, name: str, owner: str, kind: str, key: int, window: float = LIVE_WINDOW_S, *,
               title: str | None = None) -> None:
    """Make ``owner`` the process doing the work called ``name`` (e.g. ``preannotate:3``; an ``app_markers`` row
    whose value is the owner, whose ``created_at`` is when it took the lease and whose ``updated_at`` is its
    heartbeat), for work that has no run row of its own. Raises :class:`LeaseHeldError` (``kind``, ``key`` and
    ``title`` name the work in its message, :func:`work_title`) while another owner's lease on it is live; an
    expired lease (its process silent for ``window`` seconds) is taken over, starting anew."""
    with store.session() as session:
        row = session.get(AppMarker, name)
        now = utcnow()
        if row is None:
            session.add(AppMarker(name=name, value=owner, created_at=now, updated_at=now))
            return
        age = heartbeat_age(row.updated_at, now)
        if row.value and row.value != owner and age is not None and age <= window:
            raise LeaseHeldError(kind, key, row.value, age, title=title, started_at=row.created_at)
        if row.value != owner:
            row.created_at = now
        row.value = owner
        row.updated_at = now


@dataclass(frozen=True)
class LeaseRef:
    """A lease by name (e.g. ``preannotate:3``) with the words for the work it guards (``kind``, ``key``, ``title``
    as :func:`take_lease` takes them): what a change that would break that work checks inside its own write
    transaction (:func:`refuse_while_leased`)."""

    name: str
    kind: str
    key: int
    title: str | None = None


def refuse_while_leased(session: Session, lease: LeaseRef, window: float = LIVE_WINDOW_S) -> None:
    """Raise :class:`LeaseHeldError` when ``lease`` is live (its holder beat within ``window`` seconds), read in
    ``session``. Called inside a write transaction, it is race-free against :func:`take_lease`: write transactions
    run one at a time on every backend (:meth:`Store.session`), so either the lease was taken first and the change
    is refused, or the change commits first and the work, which reads what it needs after taking its lease, sees
    it."""
    row = session.get(AppMarker, lease.name)
    if row is None or not row.value:
        return
    age = heartbeat_age(row.updated_at)
    if age is not None and age <= window:
        raise LeaseHeldError(lease.kind, lease.key, row.value, age, title=lease.title, started_at=row.created_at)


def beat_lease(store: Store, name: str, owner: str) -> bool:
    """Store a fresh heartbeat on lease ``name`` while it is ``owner``'s; returns whether it was."""
    with store.session() as session:
        result = session.execute(update(AppMarker).where(AppMarker.name == name, AppMarker.value == owner)
                                 .values(updated_at=utcnow()))
        return bool(result.rowcount)


def release_lease(store: Store, name: str, owner: str) -> None:
    """Give lease ``name`` back (only ``owner``'s own: one taken over meanwhile stays with its new owner)."""
    with store.session() as session:
        session.execute(delete(AppMarker).where(AppMarker.name == name, AppMarker.value == owner))


@dataclass(frozen=True)
class LeaseInfo:
    """A live lease: its ``owner`` (``host pid N #token``), when it was taken (``started_at``) and last beaten
    (``heartbeat_at``), both UTC."""

    owner: str
    started_at: datetime
    heartbeat_at: datetime

    @property
    def process(self) -> str:
        """The process that holds it (``host pid N``)."""
        return process_of(self.owner)

    def describe(self) -> str:
        """``host pid N, started 2026-11-24 12:00:00 UTC``: who holds it and since when."""
        return f"{self.process}, started {_utc_text(self.started_at)}"


def lease_info(store: Store, name: str, window: float = LIVE_WINDOW_S) -> LeaseInfo | None:
    """The live lease ``name``, or ``None`` (none, or expired: silent for more than ``window`` seconds)."""
    with store.session(readonly=True) as session:
        row = session.get(AppMarker, name)
        if row is None or not row.value:
            return None
        age = heartbeat_age(row.updated_at)
        if age is None or age > window:
            return None
        return LeaseInfo(row.value, _aware(row.created_at), _aware(row.updated_at))


def lease_holder(store: Store, name: str, window: float = LIVE_WINDOW_S) -> str | None:
    """The owner of the live lease ``name``, or ``None`` (none, or expired)."""
    info = lease_info(store, name, window)
    return info.owner if info is not None else None
