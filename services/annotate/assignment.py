"""Dealing a corpus' documents out to a team of annotators, with a share of them given to several (the overlap that
agreement between annotators is measured on). Pure: the caller stores the result.

:func:`deal` is deterministic (the same documents, team, settings, seed and earlier assignments give the same
result) and resumable (it assigns only documents nobody has yet, and never moves an assignment made before):

1. The unassigned documents are taken in the order of ``sha256("<seed>:<document id>")`` (a shuffle that a new
   document does not change for the others).
2. ``round(overlap x all documents)`` documents in all should be shared; the first of the unassigned ones make up
   what the earlier assignments lack (none when they have enough already). A shared document goes to
   ``per_shared`` annotators (at most the team's size), every other one to one.
3. Shared documents first, then the others, each goes to the annotators with the fewest documents so far (earlier
   assignments counted); among equals, for a shared document, those who share fewest documents with the ones
   already chosen for it (so every pair of annotators gets some overlap to compare), then in the order of the team
   turned round by the document's hash (its first 8 hex digits modulo the team's size), so ties do not always go
   to the first names.
Starting from nothing, annotators' loads then differ by at most one.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence

__all__ = ["deal", "shared_target"]


def _key(*parts: object) -> str:
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def shared_target(n_documents: int, overlap: float) -> int:
    """How many of ``n_documents`` should be shared at ``overlap`` (a share between 0 and 1), rounded half up."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"the overlap must be a share between 0 and 1, not {overlap}.")
    return int(n_documents * overlap + 0.5)


def deal(document_ids: Sequence[int], annotators: Sequence[str], *, overlap: float, per_shared: int = 2,
         seed: int = 0, existing: Mapping[int, Sequence[str]] | None = None) -> dict[int, list[str]]:
    """``{document id: [annotators]}`` for the documents of ``document_ids`` that ``existing`` (earlier assignments,
    ``{document id: [annotators]}``) gives to no current annotator; see the module for the rule. ``overlap`` is a
    share between 0 and 1; ``per_shared`` >= 2. With one annotator nothing is shared."""
    names = list(annotators)
    if not names:
        raise ValueError("there is no annotator to deal the documents to.")
    if len(set(names)) != len(names):
        raise ValueError("an annotator is named twice.")
    if per_shared < 2:
        raise ValueError(f"a shared document goes to 2 annotators or more, not {per_shared}.")
    team = set(names)
    earlier = {int(d): [a for a in who if a in team] for d, who in (existing or {}).items()}
    docs = sorted({int(d) for d in document_ids})
    order = {d: _key(seed, d) for d in docs if not earlier.get(d)}
    todo = sorted(order, key=order.__getitem__)
    width = min(per_shared, len(names))
    n_shared = 0
    if width >= 2:
        have = sum(1 for d in docs if len(earlier.get(d, ())) >= 2)
        n_shared = min(len(todo), max(0, shared_target(len(docs), overlap) - have))
    load: Counter[str] = Counter({a: 0 for a in names})
    together: Counter[tuple[str, str]] = Counter()
    for d in docs:
        who = earlier.get(d, [])
        load.update(who)
        together.update((x, y) for x in who for y in who if x != y)
    out: dict[int, list[str]] = {}
    for index, document_id in enumerate(todo):
        turn = int(order[document_id][:8], 16) % len(names)
        rank = {a: (i - turn) % len(names) for i, a in enumerate(names)}
        chosen: list[str] = []
        for _ in range(width if index < n_shared else 1):
            pick = min((a for a in names if a not in chosen),
                       key=lambda a: (load[a], sum(together[(a, c)] for c in chosen), rank[a]))
            chosen.append(pick)
        for a in chosen:
            load[a] += 1
            together.update((a, c) for c in chosen if c != a)
        out[document_id] = sorted(chosen, key=names.index)
    return out
