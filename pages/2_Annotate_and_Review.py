"""Annotate and Review, the second of the three corpus pages (after Corpus Import): machine pre-annotation, the
review queue (one document at a time), bulk acceptance of suggestions, and labelling similar documents together."""

from __future__ import annotations

import re
import time
from typing import Any

import pandas as pd
import streamlit as st

from mrag_core.names import fold_name
from mrag_core.wording import counted
from services import storage
from services.workflows import agreement as agw
from services.workflows import annotation as aw
from services.workflows import corpus as cw
from services.workflows import preannotation_report as pr
from services.workflows import review
from services.workflows.llm_cache import StoreLLMCache
from ui.corpus_widgets import ZERO_SHOT_MODEL, agent_picker, corpus_embeddings, reviewer_name
from ui.navigation import page_setup
from ui.render import highlight, md_plain
from ui.state import (
    KEEP,
    corpus_picker,
    follow_default,
    get_model,
    llm_config,
    open_store_page,
    preannotation_lock,
    show_flash,
)
from ui.state import flash as state_flash

page_setup(__file__, "🏷️")
st.title("Annotate and Review")

store = open_store_page()
reviewer = reviewer_name()
corpus = corpus_picker()
if corpus is None:
    st.stop()
categories = cw.list_categories(store, corpus.id)
cat_by_name = {c.name: c for c in categories}
ANY = "(any)"
team = agw.team_of(store, corpus.id)
member = agw.team_member(store, corpus.id, reviewer)  # labels blind: sees only their own labels

view = st.radio("View", ["Pre-annotate", "Review queue", "Bulk accept", "Find similar"], horizontal=True,
                key="ar_view")


def flash(kind: str, message: str) -> None:
    """Show a message on the next run (callbacks and reruns)."""
    state_flash("ar_flash", kind, message)


def categories_form(expanded: bool) -> None:
    """An expander to add categories to the corpus, typed one per line (``name`` or ``name: description``); the
    zero-shot annotator compares each document with the name and description, the LLM is shown both. Nothing is
    added when a line is wrong (the message names it); the typed text stays for correcting."""
    nonce = st.session_state.get("ar_cat_nonce", 0)  # a new (empty) field after each addition
    title = "Add categories" + (f" (this corpus has {len(categories)})" if categories else "")
    with st.expander(title, expanded=expanded), st.form(f"ar_add_categories_{nonce}", border=False):
        text = st.text_area("Categories, one per line: a name, or name: description", key=f"ar_new_cats_{nonce}",
                            placeholder="sport: football, matches, goals, athletes\ncooking: recipes, food, baking")
        if not st.form_submit_button("Add categories"):
            return
    try:
        added = aw.add_categories(store, corpus.id, text)
    except (ValueError, storage.StoreError) as exc:
        st.error(f"No category was added: {md_plain(str(exc))}")
        return
    st.session_state["ar_cat_nonce"] = nonce + 1
    flash("success", f"Added {counted(len(added), 'category', 'categories')} to '{md_plain(corpus.name)}': "
                     f"{', '.join(md_plain(c.name) for c in added)}.")
    st.rerun()


def case_clashes() -> list[tuple[str, str]]:
    """Pairs of the corpus' categories that differ only in case or spacing (pre-annotation refuses them)."""
    first: dict[str, str] = {}
    pairs = []
    for c in categories:
        folded = fold_name(c.name)
        if folded in first:
            pairs.append((first[folded], c.name))
        first.setdefault(folded, c.name)
    return pairs


def manage_categories() -> None:
    """An expander to rename, merge or delete one of the corpus' categories (``aw.rename_category`` /
    ``aw.delete_category``, each one transaction). It shows what the category labels; a rename onto another
    category's name (equal up to case and spacing too) offers a merge instead; a deletion of a category that
    labels documents needs a box ticked, or a category to move its labels to. The counts shown are checked when a
    button is pressed: when labels changed meanwhile nothing is changed and the page says so."""
    clashes = case_clashes()
    if clashes:
        pairs = "; ".join(f"'{md_plain(a)}' and '{md_plain(b)}'" for a, b in clashes)
        st.warning(f"Categories that differ only in case or spacing: {pairs}. Pre-annotation cannot tell them apart: "
                   "merge them below (rename one to the other's name).")
    nonce = st.session_state.get("ar_cat_nonce", 0)
    seen = st.session_state.get("ar_cat_seen")  # (category id, labels version) of the counts last shown
    with st.expander("Rename, merge or delete a category", expanded=bool(clashes)):
        default = next((i for i, c in enumerate(categories) if c.name in {b for _, b in clashes}), 0)
        name = st.selectbox("Category", [c.name for c in categories], index=default, key=f"ar_cat_pick_{nonce}")
        usage = cw.category_usage(store, cat_by_name[name].id)
        st.session_state["ar_cat_seen"] = (usage.category.id, usage.labels_version)
        expected = seen[1] if seen is not None and seen[0] == usage.category.id else usage.labels_version
        in_use = bool(usage.n_labelled or usage.n_decisions or usage.n_suggestions)
        st.caption(md_plain(aw.usage_summary(usage) + "."))
        new_name = st.text_input("New name", key=f"ar_cat_new_{nonce}")
        into = None
        if new_name.strip():
            try:
                into = aw.merge_target(store, corpus.id, name, new_name)
            except ValueError:
                into = None
        if into is not None:
            st.warning(md_plain(f"The corpus has a category {into.name!r} already: the two can only be merged. "
                                + aw.merge_impact(usage, into)))
            rename = st.button(f"Merge '{md_plain(name)}' into '{md_plain(into.name)}'", key="ar_cat_merge",
                               type="primary")
        else:
            rename = st.button("Rename", key="ar_cat_rename", disabled=not new_name.strip())
        others = [c.name for c in categories if c.name != name]
        move_to = st.selectbox("When deleting it, its labels", [None, *others], key=f"ar_cat_move_{nonce}",
                               format_func=lambda o: "are deleted with it" if o is None else f"move to '{o}'")
        confirmed = True
        if in_use and move_to is None:
            st.caption(md_plain(aw.delete_impact(usage)))
            lose = "loses" if usage.n_labelled == 1 else "lose"
            confirmed = st.checkbox(f"Delete its labels: {counted(usage.n_labelled, 'document')} {lose} "
                                    f"'{md_plain(name)}'", key=f"ar_cat_confirm_{nonce}")
        delete = st.button(f"Delete '{md_plain(name)}'", key="ar_cat_delete", disabled=not confirmed)
    if not (rename or delete):
        return
    try:
        if rename:
            message = aw.rename_category(store, corpus.id, name, new_name, merge=into is not None,
                                         expected_labels_version=expected)
        else:
            message = aw.delete_category(store, corpus.id, name, move_to=move_to, confirm=confirmed,
                                         expected_labels_version=expected)
    except (ValueError, storage.StoreError) as exc:
        st.error(f"Nothing was changed: {md_plain(str(exc))}")
        return
    st.session_state["ar_cat_nonce"] = nonce + 1
    flash("success", md_plain(message))
    st.rerun()


show_flash("ar_flash")
if not categories:
    st.info("This corpus has no categories yet. Add them below (or import documents with a label column), then "
            "pre-annotate and review its documents.")
    categories_form(expanded=True)
    if view != "Find similar":
        st.stop()
elif view == "Pre-annotate":
    categories_form(expanded=False)
    manage_categories()


# --------------------------------------------------------------------------- pre-annotation
def make_annotator(use_llm: bool) -> aw.Annotator:
    if use_llm:
        from services.llm.client import LLMClient

        cfg = llm_config()
        assert cfg is not None
        return aw.LLMAnnotator(LLMClient(cfg), cache=StoreLLMCache(store))
    from mrag_core.extraction import embed_texts

    lm = get_model(ZERO_SHOT_MODEL)
    return aw.ZeroShotAnnotator(lambda texts: embed_texts(lm, texts).standard, ZERO_SHOT_MODEL)


def identity(use_llm: bool) -> tuple[str, str]:
    from services.annotate import llm_identity, zero_shot_identity

    cfg = llm_config()
    return llm_identity(cfg.model) if use_llm and cfg is not None else zero_shot_identity(ZERO_SHOT_MODEL)


def stopped_note(summaries: list[aw.PreannotateSummary]) -> str:
    """What a stopped run stored by the last of its ``summaries``, its stopped batch included (`` Before it stopped
    it stored 5 suggestions and 1 failed...``), or ``""`` when it has none (it stopped before it had its to-do
    list)."""
    if not summaries:
        return ""
    last = summaries[-1]
    return (f" Before it stopped it stored {counted(last.ok, 'suggestion')} and {last.failed} failed (every "
            "document the progress bar counted, the stopped batch's too).")


def preannotate_view() -> None:
    cfg = llm_config()
    use_llm = False
    if cfg is not None:
        choice = st.radio("Annotator", [f"LLM: {md_plain(cfg.describe())}", f"Offline zero-shot ({ZERO_SHOT_MODEL})"],
                          key="pa_annotator")
        use_llm = choice.startswith("LLM")
    else:
        st.info(f"No LLM endpoint configured: using the offline zero-shot annotator ({ZERO_SHOT_MODEL} embedding "
                "similarity to each category's name and description).")
    lock = preannotation_lock(corpus.id)
    stopped = st.session_state.pop("pa_running", False)  # this session's last run was stopped before it ended
    so_far: list[aw.PreannotateSummary] = st.session_state.pop("pa_stored", [])  # what that run stored, in turn
    if stopped:  # Streamlit starts this rerun while the stopped run still annotates and stores its batch
        with st.spinner("Waiting for the stopped run to store its current batch..."):
            if lock.acquire(timeout=600):
                lock.release()
    agent, version = identity(use_llm)
    undecided = review.undecided_documents(store, corpus.id)
    undecided_only = False
    if 0 < undecided < corpus.n_documents:  # some documents have a label decision (imported or human), some not
        undecided_only = st.radio(
            "Documents", [True, False], key="pa_undecided", horizontal=True, **KEEP,
            format_func=lambda only: (f"Only those without a label decision ({undecided})" if only else
                                      f"All {corpus.n_documents} (e.g. to compare the annotator with the labels "
                                      "on the Agreement and Export page)"))
    pool = undecided if undecided_only else corpus.n_documents
    todo = review.documents_without_suggestion(store, corpus.id, agent, version, undecided_only=undecided_only)
    st.write(f"**{len(todo)}** of {counted(pool, 'document')} still {'needs' if len(todo) == 1 else 'need'} a "
             f"suggestion from `{agent}` (`{version}`). Suggestions are proposals: they become labels only when you "
             "accept them.")
    batch_size = st.number_input("Batch size (stored after each batch)", 1, 512, 32, key="pa_batch", **KEEP)
    c1, c2 = st.columns(2)
    # Resume once this annotator has stored anything here, failed suggestions too (the stop message says Resume)
    tried = any((a.agent, a.model_version) == (agent, version) for a in review.suggestion_agents(store, corpus.id))
    label = ("Start pre-annotation" if len(todo) == pool and not tried else f"Resume ({len(todo)} left)" if todo
             else "All documents have a suggestion")
    start = c1.button(label, type="primary", disabled=not todo, key="pa_start")
    cancelled = c2.button("Cancel", key="pa_cancel", help="Stops the running pre-annotation at the next document "
                          "it finishes; every document it counted as annotated is kept.")
    if stopped:
        how = "cancelled" if cancelled else "interrupted (the page reran)"
        st.warning(f"Pre-annotation {how}; every finished batch is kept.{stopped_note(so_far)} Press Resume "
                   "to continue.")
    if use_llm and not start:
        offer_fallback(agent, version, lock)
    if not start:
        return
    if not lock.acquire(blocking=False):
        st.warning("This corpus is being pre-annotated in another tab or session; wait until that run ends.")
        return
    try:
        st.session_state["pa_running"] = True  # cleared when the run ends; still set if the page stops it
        # the run's summaries as it stores: appended to without touching st.session_state, which raises again while
        # Streamlit stops the run
        tally: list[aw.PreannotateSummary] = []
        st.session_state["pa_stored"] = tally
        bar = st.progress(0.0, text="Preparing the annotator...")
        state = st.empty()  # the requests in flight: redrawn at least every 0.1 s, where a Cancel stops the run
        started = time.monotonic()

        def progress(done: int, total: int) -> None:
            bar.progress(done / total if total else 1.0, text=f"{done} / {total} documents annotated")

        def activity(now: Any) -> None:
            state.caption(f"{md_plain(now.describe())} · {time.monotonic() - started:.0f} s")

        annotator = make_annotator(use_llm)
        try:
            summary = aw.preannotate(store, corpus.id, annotator, batch_size=int(batch_size),
                                     progress=progress, undecided_only=undecided_only,
                                     on_summary=tally.append, activity=activity if use_llm else None)
        except storage.RunInProgressError as exc:  # another process (mrag-studio annotate) holds the corpus
            st.session_state.pop("pa_running", None)
            st.error(f"Not started: {md_plain(str(exc))}")  # (Markdown: the corpus name is data)
            return
        except (ValueError, storage.StoreError) as exc:
            st.session_state.pop("pa_running", None)
            st.error(f"Pre-annotation stopped: {md_plain(str(exc))}")
            return
        finally:
            if isinstance(annotator, aw.LLMAnnotator):
                annotator.close()
        st.session_state.pop("pa_running", None)
        st.session_state.pop("pa_stored", None)
    finally:
        lock.release()  # also when the page stops the run (Streamlit raises inside the progress callback)
    if summary.cancelled:  # not this page's Cancel (that reruns the page): the endpoint failed for every request
        # the cause of the failure that stopped it, with what to do: the error its stopped documents store
        cause = pr.stop_text(summary, llm_config() if use_llm else None)
        then = "press Resume when that is done" if cause else "fix the endpoint, then press Resume"
        cause = cause or ((summary.errors[-1].rstrip(". ") if summary.errors else "the endpoint stopped answering")
                          + ".")
        flash("warning", f"Pre-annotation stopped: {md_plain(cause)} {counted(summary.ok, 'suggestion')} stored, "
                         f"{counted(summary.remaining, 'document')} left: {then}.")
    else:
        failures = f" Failed: {pr.failures_text(summary)}." if summary.failed else ""
        flash("success", f"Pre-annotation finished: {counted(summary.ok, 'suggestion')}, {summary.failed} failed "
                         f"({counted(summary.already_done, 'document')} already had one).{md_plain(failures)}")
    if summary.errors:
        st.session_state["pa_errors"] = summary.errors
    st.session_state["pa_notes"] = summary.notes
    st.rerun()


def offer_fallback(agent: str, version: str, lock: Any) -> None:
    """Offer the offline zero-shot suggestion for the documents the LLM failed on (none ok from it yet), stored
    marked as a fallback (the review queue says so)."""
    failed = pr.failed_by(store, corpus.id, agent, version, fallback=pr.fallback_identity(ZERO_SHOT_MODEL))
    if not failed:
        return
    st.info(pr.fallback_offer(len(failed)))
    if not st.button(f"Suggest offline for {counted(len(failed), 'document')}", key="pa_fallback"):
        return
    if not lock.acquire(blocking=False):
        st.warning("This corpus is being pre-annotated in another tab or session; wait until that run ends.")
        return
    try:
        with st.spinner(f"Loading {ZERO_SHOT_MODEL} and comparing each document with the categories..."):
            done = pr.zero_shot_fallback(store, corpus.id, agent, version, make_annotator(False))
    except (ValueError, storage.StoreError) as exc:
        st.error(f"Nothing was stored: {md_plain(str(exc))}")
        return
    finally:
        lock.release()
    flash("success", f"Offline suggestions for the {counted(done.todo, 'document')} the LLM failed on: "
                     f"{counted(done.ok, 'suggestion')} stored, {done.failed} failed. The review queue marks them "
                     "as an offline fallback.")
    st.rerun()


# --------------------------------------------------------------------------- review queue
def save_decision(doc_id: int, mode: str, shown_suggestion: tuple[int, int] | None) -> None:
    """Form callback: accept / save the chosen label / skip, then move to the next document.

    ``shown_suggestion`` is the (suggestion id, category id) the reviewer saw, if any."""
    queue: list[int] = st.session_state.get("rv_queue", [])
    seen: dict[int, int] = st.session_state.setdefault("rv_seen", {})
    if mode == "skip":
        st.session_state["rv_doc"] = aw.next_in_queue(queue, doc_id)
        return
    doc = cw.get_document(store, doc_id)
    if mode == "accept":
        if shown_suggestion is None:
            flash("error", "This document has no suggestion to accept; choose a label instead.")
            return
        category_id = shown_suggestion[1]
    else:
        chosen = st.session_state.get(f"rv_label_{doc_id}")
        if chosen not in cat_by_name:
            flash("error", "Choose a label first.")
            return
        category_id = cat_by_name[chosen].id
    suggestion_id = shown_suggestion[0] if shown_suggestion is not None and shown_suggestion[1] == category_id else None
    name = next(c.name for c in categories if c.id == category_id)
    try:
        review.decide_label(store, doc_id, category_id, member or st.session_state.get("reviewer", "reviewer"),
                            expected_version=seen.get(doc_id, doc.version), suggestion_id=suggestion_id,
                            note=st.session_state.get(f"rv_note_{doc_id}", "") or "", blind=member is not None)
    except storage.VersionConflictError as exc:
        st.session_state["rv_conflict"] = doc_id
        flash("error", f"Not saved: {md_plain(str(exc))} Your label was not applied; nothing was overwritten.")
        return
    seen.pop(doc_id, None)
    st.session_state.pop("rv_conflict", None)
    flash("success", f"Saved '{md_plain(name)}' for '{md_plain(doc.title) or doc_id}'.")
    st.session_state["rv_doc"] = aw.next_in_queue(queue, doc_id)


def edit_document(doc_id: int) -> None:
    """Form callback: save the edited title and text, checked against the version the reviewer saw."""
    seen: dict[int, int] = st.session_state.setdefault("rv_seen", {})
    title = st.session_state.get(f"rv_edit_title_{doc_id}", "")
    text = st.session_state.get(f"rv_edit_text_{doc_id}", "")
    before = cw.get_document(store, doc_id)
    try:
        row = cw.update_document(store, doc_id, title=title.strip(), text=text,
                                 expected_version=seen.get(doc_id, before.version),
                                 editor=st.session_state.get("reviewer", "reviewer"))
    except storage.VersionConflictError as exc:
        st.session_state["rv_conflict"] = doc_id
        flash("error", f"Not saved: {md_plain(str(exc))}")
        return
    except (storage.InvalidInputError, storage.DuplicateError) as exc:
        flash("error", f"Not saved: {md_plain(str(exc))}")
        return
    seen[doc_id] = row.version
    if row.text != before.text:
        flash("success", f"Saved the new text of '{md_plain(row.title) or doc_id}'. The corpus' indexes are stale "
                         "now: update them on the Index page (only this document is embedded again).")
    elif row.title != before.title:
        flash("success", f"Renamed to '{md_plain(row.title)}'.")
    else:
        flash("info", "Nothing changed.")


def delete_document(doc_id: int) -> None:
    """Button callback: delete the document (checked against the version the reviewer saw), then the next one."""
    queue: list[int] = st.session_state.get("rv_queue", [])
    seen: dict[int, int] = st.session_state.setdefault("rv_seen", {})
    try:
        gone = cw.delete_document(store, doc_id, expected_version=seen.get(doc_id))
    except storage.VersionConflictError as exc:
        st.session_state["rv_conflict"] = doc_id
        flash("error", f"Not deleted: {md_plain(str(exc))}")
        return
    except storage.NotFoundError:
        flash("info", "This document was already deleted.")
        return
    seen.pop(doc_id, None)
    n = len(gone.flagged_queries)
    flagged = (f" {n} quer{'y' if n == 1 else 'ies'} that had it as ground truth {'is' if n == 1 else 'are'} flagged "
               "for review on the Query Builder page." if n else "")
    flash("success", f"Deleted '{md_plain(gone.title) or doc_id}'.{flagged}")
    st.session_state["rv_doc"] = aw.next_in_queue(queue, doc_id)


def edit_or_delete(doc: storage.DocumentRow) -> None:
    """The review queue's expander to correct a document's title and text, or delete it."""
    # Keyed: stays open when a message above it comes or goes (an unkeyed expander is rebuilt closed).
    with st.expander("Edit or delete this document", key=f"rv_edit_open_{doc.id}", on_change="rerun"):
        with st.form(key=f"rv_edit_{doc.id}", border=False):
            st.text_input("Title", doc.title, key=f"rv_edit_title_{doc.id}")
            st.text_area("Text", doc.text, height=260, key=f"rv_edit_text_{doc.id}")
            st.form_submit_button("Save changes", on_click=edit_document, args=(doc.id,))
        queries = cw.ground_truth_queries(store, doc.id)
        impact = (f"; it is ground truth of {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}, which lose it "
                  "and are flagged" if queries else "")
        sure = st.checkbox(f"Delete this document with its labels and vectors{impact}. This cannot be undone.",
                           key=f"rv_delete_sure_{doc.id}")
        st.button("Delete document", key=f"rv_delete_{doc.id}", disabled=not sure, on_click=delete_document,
                  args=(doc.id,))


def reload_document(doc_id: int) -> None:
    st.session_state.setdefault("rv_seen", {}).pop(doc_id, None)
    st.session_state.pop("rv_conflict", None)


def filters(prefix: str) -> dict[str, Any]:
    """Review filters (category, agent, confidence, disagreement, unreviewed) as review_queue kwargs."""
    c1, c2, c3 = st.columns(3)
    cat = c1.selectbox("Category", [ANY, *cat_by_name], key=f"{prefix}_cat", **KEEP)
    agent = agent_picker(store, corpus.id, key=f"{prefix}_agent", container=c2)
    low = c3.checkbox("Only confidence below", key=f"{prefix}_low", **KEEP)
    threshold = c3.slider("Confidence threshold", 0.0, 1.0, 0.6, 0.05, key=f"{prefix}_thr", disabled=not low, **KEEP)
    c4, c5 = st.columns(2)
    yours = " your label" if member is not None else " decision"
    disagreement = c4.checkbox(f"Only where suggestion and{yours} disagree", key=f"{prefix}_dis", **KEEP)
    unreviewed = c5.checkbox("Only documents without" + (" your label" if member is not None else " a human decision"),
                             key=f"{prefix}_unrev", **KEEP)
    return {
        "category_id": cat_by_name[cat].id if cat != ANY else None,
        "agent": agent[0] if agent is not None else None,
        "model_version": agent[1] if agent is not None else None,
        "max_score": float(threshold) if low else None,
        "disagreement": disagreement,
        "unreviewed": unreviewed,
        "annotator": member,
    }


def team_note() -> None:
    """Says how this corpus' team works for the person named in the sidebar: blind, on their documents, or (not
    on the team) on the shared labels."""
    if team is None:
        return
    if member is not None:
        mine = next(m for m in team.members if m.name == member)
        st.info(f"Blind annotation: you are '{md_plain(member)}', on this corpus' team. The queue holds the "
                f"{counted(mine.n_assigned, 'document')} assigned to you ({mine.n_labelled} labelled); you see "
                "your own labels and the machine suggestion, never a colleague's.")
    else:
        names = ", ".join(f"'{md_plain(n)}'" for n in team.names)
        st.caption(f"This corpus is labelled by a team ({names}): its members type their name in the sidebar to "
                   f"label their documents blind. As '{md_plain(reviewer)}' you see and change the documents' "
                   "shared labels.")


def review_view() -> None:
    team_note()
    kwargs = filters("rv")
    queue = review.review_queue(store, corpus.id, **kwargs)
    st.session_state["rv_queue"] = queue
    if not queue:
        st.info("No document matches these filters.")
        return
    current = st.session_state.get("rv_doc")
    if current not in queue:  # first run, or the document left the queue: the next one after it
        later = [i for i in queue if isinstance(current, int) and i > current]
        current = later[0] if later else queue[0]
        st.session_state["rv_doc"] = current
    item = aw.review_item(store, current, agent=kwargs["agent"], model_version=kwargs["model_version"],
                          annotator=member)
    doc = item.document
    seen = st.session_state.setdefault("rv_seen", {})
    seen.setdefault(doc.id, doc.version)
    st.caption(f"Document {queue.index(doc.id) + 1} of {len(queue)} in the queue · id {doc.id} · "
               f"version {seen[doc.id]}")
    st.subheader(md_plain(doc.title) or f"Document {doc.id}", anchor=False)
    if doc.chunk_label is not None:
        st.caption(f"{doc.chunk_label[0].upper()}{doc.chunk_label[1:]} (source: {md_plain(doc.source)})")
    left, right = st.columns([3, 2])
    with right:
        if member is not None:
            st.markdown(f"**Your label:** {md_plain(item.decision.category) if item.decision else 'none yet'}")
        elif item.decision is not None:
            st.markdown(f"**Current label:** {md_plain(item.decision.category)} (decided by "
                        f"{md_plain(item.decision.annotator)})")
        else:
            st.markdown("**Current label:** none (not reviewed)")
        sug = item.suggestion
        if sug is None:
            st.caption("No machine suggestion yet (run pre-annotation).")
        elif sug.status == "ok":
            conf = f"{sug.score:.0%}" if sug.score is not None else "unknown"
            source = pr.suggestion_source(sug.agent, sug.model_version)
            st.markdown(f"**Suggestion:** {md_plain(sug.category)} · confidence {conf} · by {md_plain(sug.agent)} "
                        f"({md_plain(source)})")
            if sug.reason:
                st.caption(f"Reason: {md_plain(sug.reason)}")  # the LLM's words, shown verbatim
        else:
            st.warning(f"The last suggestion failed ({md_plain(sug.agent)}): {md_plain(sug.error)}")
        # A human decision stands until someone changes it (Save & Next must not quietly replace it with the
        # machine's suggestion; Accept suggestion does that on purpose); without one, the suggestion.
        default = (item.decision.category if item.decision is not None else None) or (
            sug.category if sug is not None and sug.category else None)
        names = list(cat_by_name)
        with st.form(key=f"rv_form_{doc.id}", border=True):
            st.selectbox("Label", names, index=names.index(default) if default in names else 0,
                         key=f"rv_label_{doc.id}")
            st.text_input("Note (optional; Enter saves)", key=f"rv_note_{doc.id}")
            shown = (sug.id, sug.category_id) if sug is not None and sug.category_id is not None else None
            buttons = st.container(horizontal=True)  # content-width buttons, wrapped when narrow
            buttons.form_submit_button("Save & Next", type="primary", on_click=save_decision,
                                       args=(doc.id, "save", shown), shortcut="Alt+N")
            buttons.form_submit_button("Accept suggestion", on_click=save_decision, args=(doc.id, "accept", shown),
                                  disabled=shown is None, shortcut="Alt+A")
            buttons.form_submit_button("Skip", on_click=save_decision, args=(doc.id, "skip", shown), shortcut="Alt+S")
            st.caption("Keys: Alt+N save & next · Alt+A accept the suggestion · Alt+S skip · Tab moves between "
                       "fields, arrow keys pick a label")
        if st.session_state.get("rv_conflict") == doc.id:
            st.button("Reload this document", key="rv_reload", on_click=reload_document, args=(doc.id,))
    with left:
        paragraphs = [p for p in re.split(r"\n\s*\n", doc.text) if p.strip()]  # no blank line left inside one
        html = "".join(f"<p>{highlight(p, item.keywords)}</p>" for p in paragraphs)
        with st.container(height=420):
            st.markdown(html, unsafe_allow_html=True)  # escaped by ui.render.highlight
        if "<mark>" in html:  # the words come from the suggested category, else from the current label's
            whose = "the suggested category" if sug is not None and sug.category_id is not None else "the current label"
            st.caption(f"Highlighted: words of {whose}'s name and description.")
        edit_or_delete(doc)


# --------------------------------------------------------------------------- bulk
def bulk_view() -> None:
    team_note()
    c1, c2, c3 = st.columns(3)
    agent = agent_picker(store, corpus.id, key="bk_agent", container=c1)
    agent_name, agent_version = agent if agent is not None else (None, None)
    only_unreviewed = c2.checkbox("Only documents without" + (" your label" if member else " a human decision"),
                                  value=True, key="bk_unrev", **KEEP)
    pretick = c3.slider("Pre-tick rows with confidence at least", 0.0, 1.01, 1.01, 0.05, key="bk_pretick",
                        help="1.01 = tick nothing", **KEEP)
    ids = review.review_queue(store, corpus.id, agent=agent_name, model_version=agent_version,
                              unreviewed=only_unreviewed, annotator=member)
    if not ids:
        st.info("No document matches.")
        return
    page_size = 50
    n_pages = (len(ids) + page_size - 1) // page_size
    page = int(st.number_input(f"Page (of {n_pages})", 1, n_pages, 1, key="bk_page"))
    rows = aw.bulk_rows(store, ids[(page - 1) * page_size : page * page_size], agent=agent_name,
                        model_version=agent_version, annotator=member)
    frame = pd.DataFrame([
        {"accept": r.score is not None and r.score >= pretick, "id": r.document_id, "title": r.title,
         ("your label" if member else "current label"): r.label or "", "label from": r.label_source or "",
         "suggestion": r.suggestion or "",
         "confidence": r.score}
        for r in rows
    ])  # fmt: skip
    nonce = st.session_state.get("bk_nonce", 0)
    edited = st.data_editor(
        frame, key=f"bulk_editor_{page}_{nonce}", hide_index=True, width="stretch",
        disabled=[c for c in frame.columns if c != "accept"],
        column_config={"accept": st.column_config.CheckboxColumn("accept", help="Accept this suggestion"),
                       "confidence": st.column_config.ProgressColumn("confidence", min_value=0.0, max_value=1.0,
                                                                     format="percent")},
    )  # fmt: skip
    chosen = [r for r, tick in zip(rows, edited["accept"].tolist()) if tick and r.suggestion_id is not None]
    if st.button(f"Accept selected ({len(chosen)})", type="primary", disabled=not chosen, key="bk_accept"):
        try:
            result = aw.accept_rows(store, chosen, member or reviewer, blind=member is not None)
        except storage.StoreError as exc:
            st.error(f"Nothing was accepted: {md_plain(str(exc))}")
            return
        msg = f"Accepted {len(result.new_versions)} suggestion{'s' if len(result.new_versions) != 1 else ''}."
        if result.conflicts:
            msg += (f" {len(result.conflicts)} document(s) were changed by someone else meanwhile and were left "
                    "unchanged: " + ", ".join(str(c.document_id) for c in result.conflicts) + ".")
            flash("warning", msg)
        else:
            flash("success", msg)
        st.session_state["bk_nonce"] = nonce + 1
        st.rerun()


# --------------------------------------------------------------------------- find similar
def similar_view() -> None:
    docs = cw.list_documents(store, corpus.id, limit=None).items
    if not docs:
        st.info("This corpus has no documents.")
        return
    ids = [d.id for d in docs]
    current = st.session_state.get("rv_doc")
    # a team member sees their own labels only
    shown = agw.own_labels(store, corpus.id, member) if member else {d.id: d.label for d in docs}
    doc = st.selectbox("Document", docs, index=ids.index(current) if current in ids else 0, key="fs_doc",
                       format_func=lambda d: f"{d.id} · {d.title[:80]} [{shown.get(d.id) or 'unlabelled'}]")
    if not st.toggle(f"Embed the corpus with {ZERO_SHOT_MODEL} (cached on disk)", key="fs_on"):
        st.caption("Turn on to compute the embeddings (a few seconds the first time).")
        return
    fresh = cw.get_corpus(store, corpus.id)
    emb_ids, emb = corpus_embeddings(fresh.id, fresh.version, storage.identity_key(fresh))
    spaces: list[Any] = ["standard", *range(emb.n_heads)]
    c1, c2 = st.columns(2)
    space = c1.selectbox("Space", spaces, key="fs_space",
                         format_func=lambda s: "standard (sentence embedding)" if s == "standard" else f"head {s}")
    k = c2.slider("Neighbours", 1, 30, 10, key="fs_k")
    try:
        near = aw.nearest_documents(aw.space_vectors(emb.standard, emb.heads, space), emb_ids, doc.id, k)
    except ValueError as exc:
        st.error(md_plain(str(exc)))
        return
    by_id = {d.id: d for d in docs}
    st.dataframe(pd.DataFrame([
        {"rank": n.rank, "id": n.document_id, "title": by_id[n.document_id].title,
         ("your label" if member else "label"): shown.get(n.document_id) or "", "similarity": round(n.score, 3)}
        for n in near
    ]), hide_index=True, width="stretch")  # fmt: skip
    if cat_by_name:  # the chosen document's label is the one to give its neighbours, until another is picked
        follow_default("fs_label", doc.id, doc.label if doc.label in cat_by_name else next(iter(cat_by_name)))
    with st.form("fs_form"):
        picked = st.multiselect("Documents to label", [doc.id, *[n.document_id for n in near]], default=[doc.id],
                                format_func=lambda i: f"{i} · {by_id[i].title[:60]}", key="fs_pick")
        label = st.selectbox("Label", list(cat_by_name), key="fs_label")
        submitted = st.form_submit_button("Apply label to selected", type="primary", disabled=not cat_by_name)
    if not cat_by_name:
        st.caption("Add categories above to label these documents.")
    if submitted and label in cat_by_name:
        if not picked:
            st.error("Select at least one document.")
            return
        result = aw.apply_label(store, picked, cat_by_name[label].id, member or reviewer,
                                versions={i: by_id[i].version for i in picked}, blind=member is not None)
        msg = f"Labelled {len(result.new_versions)} document(s) '{md_plain(label)}'."
        if result.conflicts:
            msg += f" {len(result.conflicts)} changed meanwhile and were left unchanged."
        flash("warning" if result.conflicts else "success", msg)
        st.rerun()


if view == "Pre-annotate":
    preannotate_view()
    for note in st.session_state.pop("pa_notes", []):
        st.info(md_plain(note))
    for err in st.session_state.pop("pa_errors", []):
        st.caption(f"Failed: {md_plain(err)}")
elif view == "Review queue":
    review_view()
elif view == "Bulk accept":
    bulk_view()
else:
    similar_view()
