"""The Agreement and Export page's team sections: the annotation team and how documents are shared out, the
agreement between annotators (Cohen's kappa per pair, Fleiss' kappa and Krippendorff's alpha for all, per
category), and the documents they disagree on, with adjudication. Draws and calls
:mod:`services.workflows.agreement`; every name and label shown is data, escaped."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
import streamlit as st

from mrag_core.wording import counted
from services.annotate.agreement import Figure
from services.workflows import agreement as agw
from ui.render import md_plain
from ui.state import flash, show_flash

FLASH = "ag_flash"


def _value(figure: Figure | None) -> str:
    """A figure as shown: three decimals, or "n/a" when it does not exist."""
    return "n/a" if figure is None or figure.value is None else f"{figure.value:.3f}"


def _rests_on(name: str, figure: Figure, what: str) -> str:
    """``Cohen's κ 0.412 over 8 documents both labelled (raw agreement 75%)``, or why it does not exist."""
    raw = f", raw agreement {figure.observed:.0%}" if figure.observed is not None else ""
    if figure.value is None:
        return f"{name}: n/a, {figure.note}"
    note = f"; {figure.note}" if figure.note else ""
    return f"{name} {figure.value:.3f} over {counted(figure.n, 'document')} {what}{raw}{note}"


def team_section(store: Any, corpus: Any, by: str) -> None:
    """The team's members and progress, a form to set the team and its sharing settings (which deals the
    documents nobody has yet), Assign for new documents, and removal."""
    team = agw.team_of(store, corpus.id)
    summary = (f" ({counted(len(team.members), 'annotator')}, {team.n_shared} of {team.n_assigned} documents shared)"
               if team is not None else " (none yet)")
    with st.expander("Team and assignment" + summary, expanded=team is None, key="ag_team_open"):
        if team is not None:
            st.dataframe(pd.DataFrame(
                [{"annotator": m.name, "assigned": m.n_assigned, "labelled": m.n_labelled,
                  "left": m.n_assigned - m.n_labelled} for m in team.members],
                columns=["annotator", "assigned", "labelled", "left"],
            ), hide_index=True, width="stretch")  # fmt: skip
            st.caption(
                f"{team.n_shared} of {counted(team.n_assigned, 'assigned document')} go to {team.per_shared} "
                f"annotators each (aim: {team.overlap_percent:g} % of the corpus). Documents are dealt in a fixed "
                f"order (seed {team.seed}), each to the annotators with the fewest so far; an assignment is never "
                f"moved. Last changed by '{md_plain(team.updated_by)}', {team.updated_at:%Y-%m-%d %H:%M} UTC.")
        else:
            st.caption("Name the annotators who label this corpus, and the share of documents that several of them "
                       "label (the overlap agreement is measured on). Each annotator then types their name in the "
                       "sidebar of Annotate and Review, and labels the documents assigned to them blind: they see "
                       "their own labels and the machine suggestion, never a colleague's.")
        with st.form("ag_team_form", border=False):
            names = st.text_area("Annotators, one per line", value="\n".join(team.names) if team else "",
                                 key="ag_team_names", placeholder="alice\nbob")
            c1, c2 = st.columns(2)
            overlap = c1.number_input("Documents labelled by several annotators (%)", 0.0, 100.0,
                                      float(team.overlap_percent) if team else 20.0, 5.0, key="ag_team_overlap")
            per_shared = c2.number_input("Annotators per shared document", 2, 50, team.per_shared if team else 2,
                                         key="ag_team_per")
            saved = st.form_submit_button("Save team and assign documents", type="primary")
        if saved:
            try:
                with st.spinner("Saving the team and dealing the documents out..."):
                    result = agw.save_team(store, corpus.id, names, overlap_percent=overlap,
                                           per_shared=int(per_shared), by=by)
            except ValueError as exc:
                st.error(f"The team was not saved: {md_plain(str(exc))}")
            else:
                flash(FLASH, "success", md_plain(f"Saved the team ({', '.join(result.team.names)}). "
                                                 + result.message()))
                st.rerun()
        if team is None:
            return
        unassigned = corpus.n_documents - team.n_assigned
        if unassigned > 0 and st.button(f"Assign the {counted(unassigned, 'document')} nobody has yet",
                                        key="ag_assign"):
            with st.spinner("Dealing the documents out..."):
                done = agw.assign(store, corpus.id)
            flash(FLASH, "success", md_plain(done.message()))
            st.rerun()
        sure = st.checkbox("Remove the team and its assignments (every label stays)", key="ag_team_remove_sure")
        if st.button("Remove team", key="ag_team_remove", disabled=not sure):
            agw.remove_team(store, corpus.id)
            flash(FLASH, "success", "Removed the team; every label stays.")
            st.rerun()


def agreement_section(store: Any, corpus: Any) -> None:
    """The figures: kappa and alpha with the documents each rests on, per pair and per category."""
    include_bulk = st.checkbox("Count labels that accepted a suggestion in bulk (they are the machine's label)",
                               key="ag_iaa_bulk")
    result = agw.annotator_agreement(store, corpus.id, include_bulk=include_bulk)
    if result.n_bulk:
        st.caption(f"{counted(result.n_bulk, 'label')} that accepted a suggestion in bulk "
                   f"{'is' if result.n_bulk == 1 else 'are'} left out.")
    for note in result.notes:
        st.info(note)
    if result.notes:
        return
    cols = st.columns(4 if result.cohen is not None else 3)
    cols[0].metric("Documents compared", result.n_documents,
                   help="Documents labelled blind by two annotators or more.")
    rest = cols[1:]
    if result.cohen is not None:
        rest[0].metric("Cohen's κ", _value(result.cohen), help=_rests_on("Cohen's κ", result.cohen, "both labelled"))
        rest = rest[1:]
    rest[0].metric("Fleiss' κ", _value(result.fleiss), help=_rests_on("Fleiss' κ", result.fleiss, "compared"))
    rest[1].metric("Krippendorff's α", _value(result.alpha),
                   help=_rests_on("Krippendorff's α", result.alpha, "with two labels or more"))
    lines = ([_rests_on("Cohen's κ", result.cohen, "both labelled")] if result.cohen is not None else []) + [
        _rests_on("Fleiss' κ", result.fleiss, "compared"),
        _rests_on("Krippendorff's α", result.alpha, "with two labels or more")]
    st.caption(md_plain(". ".join(lines) + "."))
    st.markdown("**Pairs of annotators** (Cohen's κ over the documents both labelled)")
    st.dataframe(pd.DataFrame(
        [{"annotator": p.first, "with": p.second, "documents": p.figure.n, "raw agreement": p.figure.observed,
          "Cohen's κ": p.figure.value, "note": p.figure.note} for p in result.pairs],
        columns=["annotator", "with", "documents", "raw agreement", "Cohen's κ", "note"],
    ), hide_index=True, width="stretch", column_config={
        "raw agreement": st.column_config.NumberColumn(format="percent"),
        "Cohen's κ": st.column_config.NumberColumn(format="%.3f")})  # fmt: skip
    st.markdown(f"**Per category** ({result.statistic} of the category against all others)")
    st.dataframe(pd.DataFrame(
        [{"category": c.category, "labels": c.n_labels, "documents": c.figure.n, result.statistic: c.figure.value,
          "note": c.figure.note} for c in result.per_category],
        columns=["category", "labels", "documents", result.statistic, "note"],
    ), hide_index=True, width="stretch", column_config={
        result.statistic: st.column_config.NumberColumn(format="%.3f")})  # fmt: skip


def _adjudicate(document_id: int, version: int, store: Any, adjudicator: str) -> None:
    """Button callback: record the final label chosen for the document (checked against the version shown)."""
    label = st.session_state.get(f"ag_adj_label_{document_id}")
    note = st.session_state.get(f"ag_adj_note_{document_id}", "") or ""
    try:
        message = agw.adjudicate(store, document_id, label, adjudicator, expected_version=version, note=note)
    except Exception as exc:  # noqa: BLE001 - ValueError or a StoreError (a conflict): shown, nothing stored
        flash(FLASH, "error", f"Not adjudicated: {md_plain(str(exc))}")
        return
    flash(FLASH, "success", md_plain(message))


def disagreements_section(store: Any, corpus: Any, categories: list[str], adjudicator: str) -> None:
    """The documents whose annotators' labels differ, and the adjudication of one of them."""
    show_all = st.checkbox("Show adjudicated documents too", key="ag_dis_all")
    items = agw.disagreements(store, corpus.id, include_adjudicated=show_all)
    if not items:
        st.caption("No document to adjudicate: the annotators' labels agree wherever they overlap"
                   + ("." if show_all else ", or every disagreement was adjudicated."))
        return

    def judged(item: agw.Disagreement) -> str:
        adj = item.adjudication
        if adj is None:
            return ""
        since = "; an annotator changed their label since" if item.reopened else ""
        return f"{adj.category} by {adj.adjudicator}, {adj.created_at:%Y-%m-%d %H:%M} UTC{since}"

    st.dataframe(pd.DataFrame(
        [{"id": d.document_id, "title": d.title, "labels": " · ".join(f"{a}: {c}" for a, c in d.labels.items()),
          "label now": d.label or "", "adjudicated": judged(d)} for d in items],
        columns=["id", "title", "labels", "label now", "adjudicated"],
    ), hide_index=True, width="stretch")  # fmt: skip
    by_id = {d.document_id: d for d in items}
    chosen = st.selectbox("Document to adjudicate", list(by_id), key="ag_adj_doc",
                          format_func=lambda i: f"{i} · {by_id[i].title[:80] or '(untitled)'}")
    item = by_id[chosen]
    votes = Counter(item.labels.values()).most_common()
    default = item.adjudication.category if item.adjudication else votes[0][0]
    c1, c2 = st.columns(2)
    c1.selectbox("Final label", categories, index=categories.index(default) if default in categories else 0,
                 key=f"ag_adj_label_{chosen}")
    c2.text_input("Note (optional)", key=f"ag_adj_note_{chosen}")
    st.button("Adjudicate", type="primary", key="ag_adjudicate", on_click=_adjudicate,
              args=(chosen, item.version, store, adjudicator))
    st.caption(f"You adjudicate as '{md_plain(adjudicator)}' (your name in the sidebar); the final label becomes "
               "the document's label, stored with your name and the time.")


def show_messages() -> None:
    """The message the last team action left (drawn once)."""
    show_flash(FLASH)
