"""Annotation teams and agreement between annotators, joining the store and the statistics (no Streamlit).

- A corpus' team (:func:`save_team`) names its annotators and how its documents are shared out; :func:`assign`
  deals the documents nobody has yet (:func:`services.annotate.assignment.deal`: deterministic, only adds).
- A team member annotates *blind* (the review queue of Annotate and Review, :func:`team_member` tells the page):
  their queue holds their assigned documents; they see their own labels and the machine suggestion, never a
  colleague's; their decisions are stored ``blind`` (:func:`db.decide_label`).
- :func:`annotator_agreement` compares each annotator's latest blind label, over the documents two or more of
  them labelled: Cohen's kappa per pair, Fleiss' kappa and Krippendorff's alpha for all, per category too
  (:mod:`services.annotate.agreement`). Suggestions accepted in bulk are left out unless asked for (they are the
  machine's label, not the annotator's judgement).
- :func:`disagreements` lists the documents whose blind labels differ; :func:`adjudicate` records an adjudicator's
  final label, which becomes the document's label (who and when are stored with it).
- :func:`suggestion_agreement`: the machine suggestion against the human label, bulk acceptances counted apart.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from itertools import combinations

import db
from mrag_core.names import fold_name
from mrag_core.wording import counted
from services.annotate.agreement import (
    Figure,
    cohen,
    cohen_per_category,
    fleiss,
    fleiss_per_category,
    krippendorff_alpha,
)
from services.annotate.assignment import deal

__all__ = [
    "NAME_MAX",
    "AssignResult",
    "CategoryFigure",
    "Disagreement",
    "PairFigure",
    "TeamAgreement",
    "adjudicate",
    "annotator_agreement",
    "assign",
    "category_names",
    "clean_annotator_name",
    "disagreements",
    "own_labels",
    "parse_team_names",
    "remove_team",
    "save_team",
    "suggestion_agreement",
    "team_member",
    "team_of",
]

#: The longest annotator name accepted (the store takes 200 characters; names are shown in tables).
NAME_MAX = 80
#: Names a person may not take: they mark labels that no person gave.
RESERVED_NAMES = frozenset({fold_name(db.IMPORT_ANNOTATOR)})


def clean_annotator_name(name: str) -> str:
    """The annotator name ``name`` as stored: whitespace runs as one space, none at the ends. Raises ``ValueError``
    saying what is wrong when it is blank, longer than :data:`NAME_MAX` characters, holds a control or invisible
    character (a line break, a tab, a zero-width space...), or is a reserved name (``import``: the annotator of
    labels that came with an imported file)."""
    raw = name or ""
    if any(unicodedata.category(ch) in ("Cc", "Cf") and ch not in " \t" for ch in raw):
        raise ValueError(f"The name {raw!r} holds a control or invisible character; type it again without one.")
    cleaned = " ".join(raw.split())
    if not cleaned:
        raise ValueError("Type a name.")
    if len(cleaned) > NAME_MAX:
        raise ValueError(f"The name is {len(cleaned)} characters long; keep it to {NAME_MAX}.")
    if fold_name(cleaned) in RESERVED_NAMES:
        raise ValueError(f"{cleaned!r} is reserved for labels that came with an import; choose another name.")
    return cleaned


def parse_team_names(text: str) -> list[str]:
    """The annotator names typed as ``text``, one per line (or separated by commas), cleaned
    (:func:`clean_annotator_name`), in the order typed. Raises ``ValueError`` naming the line when a name is
    wrong, or when two names differ only in case or spacing (people would pick the wrong one)."""
    names: list[str] = []
    seen: dict[str, str] = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        for part in line.split(","):
            if not part.strip():
                continue
            try:
                name = clean_annotator_name(part)
            except ValueError as exc:
                raise ValueError(f"Line {number}: {exc}") from None
            key = fold_name(name)
            if key in seen:
                raise ValueError(f"Line {number}: {name!r} is named twice (or differs from {seen[key]!r} only in "
                                 "case or spacing).")
            seen[key] = name
            names.append(name)
    if not names:
        raise ValueError("Type at least one annotator's name.")
    return names


@dataclass(frozen=True)
class AssignResult:
    """What :func:`assign` did: ``n_new`` documents got annotators (``n_new_shared`` of them several); the team
    as it is now."""

    n_new: int
    n_new_shared: int
    team: db.TeamInfo

    def message(self) -> str:
        team = self.team
        if not self.n_new:
            return (f"Every document is assigned already ({counted(team.n_assigned, 'document')}, "
                    f"{team.n_shared} shared).")
        return (f"Assigned {counted(self.n_new, 'document')} ({self.n_new_shared} to {team.per_shared} annotators "
                f"each); the team has {counted(team.n_assigned, 'document')} now, {team.n_shared} of them shared.")


def team_of(store: db.Store, corpus_id: int) -> db.TeamInfo | None:
    """The corpus' team with each member's progress, or None."""
    return db.get_team(store, corpus_id)


def save_team(store: db.Store, corpus_id: int, names_text: str, *, overlap_percent: float, per_shared: int,
              by: str, seed: int | None = None) -> AssignResult:
    """Set the corpus' team from the typed names (:func:`parse_team_names`) and sharing settings, then deal the
    documents nobody has (:func:`assign`). Members no longer named lose their assignments (their labels stay);
    documents already assigned keep their annotators. ``seed``: None keeps the team's (0 for a new team).
    Raises ``ValueError`` or ``db.StoreError``; the team is unchanged then."""
    names = parse_team_names(names_text)
    if not 0 <= float(overlap_percent) <= 100:
        raise ValueError(f"The share of shared documents must be between 0 and 100 %, not {overlap_percent}.")
    if int(per_shared) < 2:
        raise ValueError("A shared document goes to 2 annotators or more.")
    before = db.get_team(store, corpus_id)
    seed = (before.seed if before is not None else 0) if seed is None else int(seed)
    db.save_team(store, corpus_id, names, overlap_percent=float(overlap_percent), per_shared=int(per_shared),
                 seed=seed, by=clean_annotator_name(by))
    return assign(store, corpus_id)


def remove_team(store: db.Store, corpus_id: int) -> bool:
    """Remove the corpus' team and assignments (every label stays); False when it had none."""
    return db.delete_team(store, corpus_id)


def assign(store: db.Store, corpus_id: int) -> AssignResult:
    """Deal the corpus' documents that no team member has yet (new documents, those of members who left) and
    store the assignments in one transaction. Deterministic; running it again adds nothing. Raises ``ValueError``
    when the corpus has no team."""
    team = db.get_team(store, corpus_id)
    if team is None:
        raise ValueError("This corpus has no annotation team yet.")
    plan = deal(db.document_ids(store, corpus_id), team.names, overlap=team.overlap_percent / 100.0,
                per_shared=team.per_shared, seed=team.seed, existing=db.assignment_map(store, corpus_id))
    db.add_assignments(store, corpus_id, plan)
    after = db.get_team(store, corpus_id)
    assert after is not None
    return AssignResult(len(plan), sum(len(who) > 1 for who in plan.values()), after)


def category_names(store: db.Store, corpus_id: int) -> list[str]:
    """The corpus' category names, in the store's order (the labels an adjudicator chooses from)."""
    return [c.name for c in db.list_categories(store, corpus_id)]


def team_member(store: db.Store, corpus_id: int, name: str) -> str | None:
    """The member of the corpus' team called ``name`` (up to case and spacing), as the team spells it; None when
    the corpus has no team or ``name`` is not on it."""
    team = db.get_team(store, corpus_id)
    if team is None or not name:
        return None
    key = fold_name(name)
    return next((m for m in team.names if fold_name(m) == key), None)


def own_labels(store: db.Store, corpus_id: int, annotator: str) -> dict[int, str]:
    """``{document id: category name}`` of the annotator's latest blind labels on the corpus (what they see as
    their labels; never a colleague's)."""
    return {b.document_id: b.category for b in db.blind_labels(store, corpus_id) if b.annotator == annotator}


# --------------------------------------------------------------------------- agreement


@dataclass(frozen=True)
class PairFigure:
    """Cohen's kappa of two annotators over the documents both labelled."""

    first: str
    second: str
    figure: Figure


@dataclass(frozen=True)
class CategoryFigure:
    """Agreement on one category against the rest (Cohen's kappa for two annotators, Fleiss' kappa for more);
    ``n_labels``: how many of the compared labels are this category."""

    category: str
    figure: Figure
    n_labels: int


@dataclass(frozen=True)
class TeamAgreement:
    """Agreement between the annotators who labelled the corpus blind (see :func:`annotator_agreement`).

    ``annotators``: those with labels counted; ``n_documents``: documents with labels of two or more of them;
    ``cohen``: the pair's kappa when there are exactly two annotators; ``per_category`` uses the same statistic;
    ``n_bulk``: labels left out because they accepted a suggestion in bulk (0 when counted)."""

    annotators: list[str]
    n_documents: int
    n_labels: int
    pairs: list[PairFigure]
    cohen: Figure | None
    fleiss: Figure
    alpha: Figure
    per_category: list[CategoryFigure]
    n_bulk: int = 0
    include_bulk: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def statistic(self) -> str:
        """The name of the per-category statistic."""
        return "Cohen's kappa" if self.cohen is not None else "Fleiss' kappa"


def _labels_by_document(store: db.Store, corpus_id: int, include_bulk: bool) -> tuple[dict[int, dict[str, str]], int]:
    by_doc: dict[int, dict[str, str]] = {}
    n_bulk = 0
    for label in db.blind_labels(store, corpus_id):
        if label.method == "bulk" and not include_bulk:
            n_bulk += 1
            continue
        by_doc.setdefault(label.document_id, {})[label.annotator] = label.category
    return by_doc, n_bulk


def annotator_agreement(store: db.Store, corpus_id: int, *, include_bulk: bool = False) -> TeamAgreement:
    """Agreement between the annotators' latest blind labels of the corpus' documents (every annotator who
    labelled blind, a member who left the team too). Pairs: Cohen's kappa over the documents both labelled.
    All: Fleiss' kappa (over the documents with the most common number of labels) and Krippendorff's alpha (over
    every document with two labels or more). Per category: one category against the rest, with Cohen's kappa
    for two annotators, else Fleiss'. A label that accepted a suggestion in bulk is left out unless
    ``include_bulk`` (it is the machine's label)."""
    by_doc, n_bulk = _labels_by_document(store, corpus_id, include_bulk)
    annotators = sorted({a for labels in by_doc.values() for a in labels}, key=lambda a: (fold_name(a), a))
    categories = [c.name for c in db.list_categories(store, corpus_id)]
    multi = {d: labels for d, labels in sorted(by_doc.items()) if len(labels) >= 2}
    items = [list(labels.values()) for labels in multi.values()]
    pairs = []
    for first, second in combinations(annotators, 2):
        both = [labels for labels in multi.values() if first in labels and second in labels]
        pairs.append(PairFigure(first, second, cohen([x[first] for x in both], [x[second] for x in both])))
    pair_figure = pairs[0].figure if len(annotators) == 2 else None
    if pair_figure is not None:
        first, second = annotators
        both = [labels for labels in multi.values() if first in labels and second in labels]
        per = cohen_per_category([x[first] for x in both], [x[second] for x in both], categories)
        counted_labels = [x[a] for x in both for a in (first, second)]
    else:
        per = fleiss_per_category(items, categories)
        counted_labels = [x for item in items for x in item]
    per_category = [CategoryFigure(c, per[c], sum(x == c for x in counted_labels)) for c in categories]
    notes = []
    if len(annotators) < 2:
        who = f"only {annotators[0]!r}" if annotators else "nobody"
        notes.append(f"Agreement needs two annotators who labelled blind; {who} has yet.")
    elif not multi:
        notes.append("No document has labels from two annotators yet: give some documents to several annotators "
                     "(the overlap) and let them label those.")
    return TeamAgreement(
        annotators=annotators, n_documents=len(multi), n_labels=sum(len(x) for x in by_doc.values()), pairs=pairs,
        cohen=pair_figure, fleiss=fleiss(items), alpha=krippendorff_alpha(items), per_category=per_category,
        n_bulk=n_bulk, include_bulk=include_bulk, notes=notes,
    )  # fmt: skip


# --------------------------------------------------------------------------- disagreements & adjudication


@dataclass(frozen=True)
class Disagreement:
    """A document whose annotators' blind labels differ: ``labels`` ``{annotator: category}``; ``label`` the
    document's label now; ``adjudication`` the latest one, if any; ``reopened``: an annotator changed their label
    after it."""

    document_id: int
    title: str
    version: int
    labels: dict[str, str]
    label: str | None
    adjudication: db.Adjudication | None
    reopened: bool

    @property
    def open(self) -> bool:
        """Still to adjudicate: never adjudicated, or an annotator changed their label since."""
        return self.adjudication is None or self.reopened


def disagreements(store: db.Store, corpus_id: int, *, include_adjudicated: bool = True) -> list[Disagreement]:
    """The corpus' documents whose annotators' latest blind labels differ (bulk acceptances too: the document's
    final label is at stake whatever way a label was given), by document id; without ``include_adjudicated``
    only the open ones (:attr:`Disagreement.open`)."""
    latest = db.blind_labels(store, corpus_id)
    by_doc: dict[int, list[db.BlindLabel]] = {}
    for label in latest:
        by_doc.setdefault(label.document_id, []).append(label)
    differing = {d: rows for d, rows in by_doc.items() if len({r.category_id for r in rows}) > 1}
    if not differing:
        return []
    judged = db.adjudications(store, corpus_id)
    docs = {d.id: d for d in db.get_documents(store, sorted(differing))}
    out = []
    for document_id in sorted(differing):
        if document_id not in docs:
            continue
        rows = sorted(differing[document_id], key=lambda r: (fold_name(r.annotator), r.annotator))
        adjudication = judged.get(document_id)
        reopened = adjudication is not None and any(r.decision_id > adjudication.decision_id for r in rows)
        doc = docs[document_id]
        item = Disagreement(document_id, doc.title, doc.version, {r.annotator: r.category for r in rows},
                            doc.label, adjudication, reopened)
        if include_adjudicated or item.open:
            out.append(item)
    return out


def adjudicate(store: db.Store, document_id: int, category: str, adjudicator: str, *, expected_version: int,
               note: str = "") -> str:
    """Record ``adjudicator``'s final label ``category`` (a category name of the document's corpus) for the
    document, seen at ``expected_version``; it becomes the document's label (an annotator revising their own
    label later does not undo it). Returns what was done, in plain words. Raises ``ValueError`` (name, category)
    or ``db.StoreError`` (``db.VersionConflictError`` when the document changed since it was shown)."""
    who = clean_annotator_name(adjudicator)
    doc = db.get_document(store, document_id)
    by_name = {c.name: c for c in db.list_categories(store, doc.corpus_id)}
    if category not in by_name:
        raise ValueError(f"{category!r} is not a category of this corpus.")
    db.decide_label(store, document_id, by_name[category].id, who, expected_version, note=note or "",
                    method="adjudication")
    title = f"{doc.title!r}" if doc.title else f"document {document_id}"
    return f"Adjudicated {title}: its label is {category!r} now (by {who!r})."


def suggestion_agreement(store: db.Store, corpus_id: int, *, agent: str | None = None,
                         model_version: str | None = None, include_bulk: bool = False) -> db.Agreement:
    """The machine suggestion (from ``agent`` / ``model_version`` when given) against each document's label, over
    documents that have both; documents labelled by accepting a suggestion in bulk are counted apart unless
    ``include_bulk`` (``db.agreement``)."""
    return db.agreement(store, corpus_id, agent=agent, model_version=model_version, include_bulk=include_bulk)

