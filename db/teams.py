"""Annotation teams: a corpus' named annotators, the documents assigned to each, and the labels they gave blind.

Contracts:
- A corpus has at most one team (``annotation_teams``), whose members (``team_members``) have names unique in it.
  Saving a team keeps the members still named (with their assignments), adds the new ones and removes the others
  with their assignments (their decisions stay: a decision names its annotator, it does not point at a member).
- Assignments (document -> member) are only ever added (:func:`add_assignments`, one transaction); which documents
  go to whom is the workflow's choice (:mod:`services.annotate.assignment`).
- :func:`blind_labels` reads each annotator's latest *blind* decision per document (the labels agreement between
  annotators compares); :func:`adjudications` the latest adjudication per document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, delete, func, select

from db._common import require
from db.engine import Store
from db.errors import InvalidInputError, NotFoundError
from db.models import AnnotationTeam, Assignment, Category, Corpus, Decision, Document, TeamMember, utcnow


@dataclass(frozen=True)
class MemberInfo:
    """A team member: ``n_assigned`` documents are assigned to them, ``n_labelled`` of those they labelled blind."""

    id: int
    name: str
    position: int
    n_assigned: int
    n_labelled: int


@dataclass(frozen=True)
class TeamInfo:
    """A corpus' team and how its documents are shared out (see :class:`db.models.AnnotationTeam`);
    ``n_assigned`` documents have at least one annotator, ``n_shared`` of them two or more."""

    corpus_id: int
    overlap_percent: float
    per_shared: int
    seed: int
    updated_at: datetime
    updated_by: str
    members: list[MemberInfo]
    n_assigned: int
    n_shared: int

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]


@dataclass(frozen=True)
class BlindLabel:
    """An annotator's latest blind decision on a document."""

    decision_id: int
    document_id: int
    annotator: str
    category_id: int
    category: str
    method: str
    created_at: datetime


@dataclass(frozen=True)
class Adjudication:
    """The latest adjudication of a document: the final label, who gave it and when."""

    decision_id: int
    document_id: int
    category_id: int
    category: str
    adjudicator: str
    created_at: datetime
    note: str


def _check_settings(names: Sequence[str], overlap_percent: float, per_shared: int) -> None:
    if not names:
        raise InvalidInputError("A team needs at least one annotator.")
    seen: set[str] = set()
    for name in names:
        if not name or name != name.strip() or len(name) > 200:
            raise InvalidInputError(f"Annotator name {name!r} is blank, padded or longer than 200 characters.")
        if name in seen:
            raise InvalidInputError(f"Annotator {name!r} is named twice.")
        seen.add(name)
    if not 0.0 <= float(overlap_percent) <= 100.0:
        raise InvalidInputError(f"The overlap must be between 0 and 100 percent, not {overlap_percent}.")
    if int(per_shared) < 2:
        raise InvalidInputError(f"A shared document goes to 2 annotators or more, not {per_shared}.")


def save_team(store: Store, corpus_id: int, names: Sequence[str], *, overlap_percent: float, per_shared: int,
              seed: int = 0, by: str = "") -> TeamInfo:
    """Create or change the corpus' team in one transaction: members ``names`` (in this order), the share of
    documents to give to ``per_shared`` annotators each, the dealing ``seed``. Members no longer named are removed
    with their assignments. Raises NotFoundError (corpus) or InvalidInputError (nothing changed then)."""
    names = list(names)
    _check_settings(names, overlap_percent, per_shared)
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        team = session.get(AnnotationTeam, corpus_id)
        if team is None:
            team = AnnotationTeam(corpus_id=corpus_id)
            session.add(team)
        team.overlap_percent, team.per_shared, team.seed = float(overlap_percent), int(per_shared), int(seed)
        team.updated_at, team.updated_by = utcnow(), by or ""
        session.flush()
        existing = {m.name: m for m in session.scalars(select(TeamMember).where(TeamMember.corpus_id == corpus_id))}
        for gone in set(existing) - set(names):
            session.delete(existing[gone])
        session.flush()  # the removed names are free again before new rows take them
        for position, name in enumerate(names):
            member = existing.get(name)
            if member is None:
                session.add(TeamMember(corpus_id=corpus_id, name=name, position=position, added_at=utcnow()))
            else:
                member.position = position
    info = get_team(store, corpus_id)
    assert info is not None
    return info


def delete_team(store: Store, corpus_id: int) -> bool:
    """Remove the corpus' team, its members and their assignments (decisions stay); False when it had none."""
    with store.session() as session:
        done = session.execute(delete(AnnotationTeam).where(AnnotationTeam.corpus_id == corpus_id))
        return bool(done.rowcount)  # type: ignore[attr-defined]


def get_team(store: Store, corpus_id: int) -> TeamInfo | None:
    """The corpus' team with each member's progress, or None when it has none."""
    with store.session(readonly=True) as session:
        team = session.get(AnnotationTeam, corpus_id)
        if team is None:
            return None
        members = session.scalars(select(TeamMember).where(TeamMember.corpus_id == corpus_id)
                                  .order_by(TeamMember.position, TeamMember.id)).all()
        assigned = dict(session.execute(
            select(Assignment.member_id, func.count()).join(TeamMember, TeamMember.id == Assignment.member_id)
            .where(TeamMember.corpus_id == corpus_id).group_by(Assignment.member_id)).all())
        labelled_docs = (select(Decision.document_id).where(Decision.annotator == TeamMember.name,
                                                            Decision.blind.is_(True)))
        labelled = dict(session.execute(
            select(Assignment.member_id, func.count()).join(TeamMember, TeamMember.id == Assignment.member_id)
            .where(TeamMember.corpus_id == corpus_id, Assignment.document_id.in_(labelled_docs))
            .group_by(Assignment.member_id)).all())
        per_doc = (select(Assignment.document_id, func.count().label("n"))
                   .join(TeamMember, TeamMember.id == Assignment.member_id)
                   .where(TeamMember.corpus_id == corpus_id).group_by(Assignment.document_id).subquery())
        n_assigned, n_shared = session.execute(
            select(func.count(), func.coalesce(func.sum(case((per_doc.c.n > 1, 1), else_=0)), 0))
            .select_from(per_doc)).one()
        return TeamInfo(
            corpus_id=corpus_id, overlap_percent=team.overlap_percent, per_shared=team.per_shared, seed=team.seed,
            updated_at=team.updated_at, updated_by=team.updated_by,
            members=[MemberInfo(m.id, m.name, m.position, int(assigned.get(m.id, 0)), int(labelled.get(m.id, 0)))
                     for m in members],
            n_assigned=int(n_assigned or 0), n_shared=int(n_shared or 0),
        )  # fmt: skip


def assignment_map(store: Store, corpus_id: int) -> dict[int, list[str]]:
    """``{document id: [member names, in team order]}`` of the corpus' assigned documents."""
    with store.session(readonly=True) as session:
        rows = session.execute(
            select(Assignment.document_id, TeamMember.name).join(TeamMember, TeamMember.id == Assignment.member_id)
            .where(TeamMember.corpus_id == corpus_id)
            .order_by(Assignment.document_id, TeamMember.position, TeamMember.id)).all()
    out: dict[int, list[str]] = {}
    for document_id, name in rows:
        out.setdefault(int(document_id), []).append(name)
    return out


def add_assignments(store: Store, corpus_id: int, plan: Mapping[int, Sequence[str]]) -> int:
    """Assign each document of ``plan`` to the named members, in one transaction; returns how many assignments
    were added (those that exist already are kept as they are). Raises InvalidInputError for a document of
    another corpus or a name that is not a member (nothing is added then), NotFoundError without a team."""
    if not plan:
        return 0
    with store.session() as session:
        if session.get(AnnotationTeam, corpus_id) is None:
            raise NotFoundError("Annotation team of corpus", corpus_id)
        members = dict(session.execute(select(TeamMember.name, TeamMember.id)
                                       .where(TeamMember.corpus_id == corpus_id)).all())
        # the corpus' documents and assignments whole (no IN list of the plan's ids: a big corpus would pass
        # SQLite's limit on bound parameters)
        in_corpus = set(session.scalars(select(Document.id).where(Document.corpus_id == corpus_id)))
        have = set(session.execute(select(Assignment.document_id, Assignment.member_id)
                                   .join(TeamMember, TeamMember.id == Assignment.member_id)
                                   .where(TeamMember.corpus_id == corpus_id)).tuples())
        now = utcnow()
        rows = []
        for document_id, names in plan.items():
            if int(document_id) not in in_corpus:
                raise InvalidInputError(f"Document {document_id} is not a document of corpus {corpus_id}.")
            for name in names:
                if name not in members:
                    raise InvalidInputError(f"{name!r} is not a member of the corpus' team.")
                key = (int(document_id), members[name])
                if key not in have:
                    have.add(key)
                    rows.append({"document_id": key[0], "member_id": key[1], "assigned_at": now})
        if rows:
            session.execute(Assignment.__table__.insert(), rows)
        return len(rows)


def blind_labels(store: Store, corpus_id: int) -> list[BlindLabel]:
    """Each annotator's latest blind decision on each document of the corpus (whoever made it: a member removed
    since too), ordered by document id then annotator."""
    latest = (select(func.max(Decision.id)).join(Document, Document.id == Decision.document_id)
              .where(Document.corpus_id == corpus_id, Decision.blind.is_(True))
              .group_by(Decision.document_id, Decision.annotator))
    with store.session(readonly=True) as session:
        rows = session.execute(
            select(Decision, Category.name).join(Category, Category.id == Decision.category_id)
            .where(Decision.id.in_(latest)).order_by(Decision.document_id, Decision.annotator)).all()
    return [BlindLabel(d.id, d.document_id, d.annotator, d.category_id, name, d.method, d.created_at)
            for d, name in rows]


def adjudications(store: Store, corpus_id: int) -> dict[int, Adjudication]:
    """``{document id: its latest adjudication}`` of the corpus' adjudicated documents."""
    latest = (select(func.max(Decision.id)).join(Document, Document.id == Decision.document_id)
              .where(Document.corpus_id == corpus_id, Decision.method == "adjudication")
              .group_by(Decision.document_id))
    with store.session(readonly=True) as session:
        rows = session.execute(
            select(Decision, Category.name).join(Category, Category.id == Decision.category_id)
            .where(Decision.id.in_(latest))).all()
    return {d.document_id: Adjudication(d.id, d.document_id, d.category_id, name, d.annotator, d.created_at, d.note)
            for d, name in rows}
