"""The Corpus Import page's "Manage corpora": every stored corpus with what it holds; rename, re-describe or delete one.

Deleting asks for a confirmation that names what goes with the corpus (query sets, indexes and their
vectors, evaluation runs) and is refused while an index build or a pre-annotation of it runs in this
server. Names are user text: in labels and messages they are escaped (``ui.render.md_plain``).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from services import storage
from services.workflows import corpus as cw
from services.workflows.corpus import describe_footprint
from ui.render import md_plain
from ui.state import corpus_busy, corpus_label, flash, follow_default, forget_choice, keep_choice, show_flash

FLASH_KEY = "cm_flash"


def _forget(corpus_id: int) -> None:
    """Drop the session's choices that point at a deleted corpus (the pages fall back to the first corpus)."""
    if st.session_state.get("corpus_id") == corpus_id:
        for key in ("corpus_id", "run_id", "_corpus_id_select"):
            st.session_state.pop(key, None)
    forget_choice("cm_corpus")


def manage_corpora(store: storage.Store) -> None:
    """Draw the corpora table, the rename form and the guarded delete."""
    show_flash(FLASH_KEY)
    corpora = cw.list_corpora(store)
    if not corpora:
        st.caption("No corpus yet.")
        return
    feet = cw.corpus_footprints(store)
    st.dataframe(pd.DataFrame([{
        "corpus": c.name, "documents": c.n_documents, "categories": c.n_categories,
        "query sets": feet[c.id].n_query_sets, "queries": feet[c.id].n_queries, "indexes": feet[c.id].n_indexes,
        "vectors MB": round(feet[c.id].vector_bytes / 1e6, 1), "evaluations": feet[c.id].n_eval_runs,
        "updated": c.updated_at,
    } for c in corpora]), hide_index=True, key="cm_table")

    by_id = {c.id: c for c in corpora}
    ids = list(by_id)
    shared = st.session_state.get("corpus_id")  # the corpus the other pages have selected: the first choice
    # kept by id: a rename or an import changes the shown text, and Streamlit would fall back to the first corpus
    chosen_id = keep_choice("Corpus to change", ids, key="cm_corpus", ident=lambda i: i,
                            format_func=lambda i: corpus_label(by_id[i]),
                            index=ids.index(shared) if shared in by_id else 0)
    corpus = by_id[chosen_id]

    # the fields follow the stored name and description when they change elsewhere (another tab, the CLI): a
    # field still holding the old name would rename the corpus back on the next save
    follow_default(f"cm_name_{corpus.id}", corpus.name, corpus.name)
    follow_default(f"cm_desc_{corpus.id}", corpus.description, corpus.description)
    with st.form(f"cm_edit_{corpus.id}"):
        name = st.text_input("Name", max_chars=200, key=f"cm_name_{corpus.id}")
        description = st.text_area("Description", key=f"cm_desc_{corpus.id}")
        if st.form_submit_button("Save name and description"):
            try:
                renamed = cw.rename_corpus(store, corpus.id, name, description=description)
            except (storage.DuplicateError, storage.InvalidInputError, storage.NotFoundError) as exc:
                st.error(f"Not saved: {md_plain(str(exc))}")
            else:
                flash(FLASH_KEY, "success", f"Saved corpus '{md_plain(renamed.name)}'.")
                st.rerun()

    what = describe_footprint(corpus, feet[corpus.id])
    busy = corpus_busy(corpus.id)
    if busy:
        st.info(f"This corpus cannot be deleted while {busy}.")
    sure = st.checkbox(f"Delete '{md_plain(corpus.name)}' and everything it holds: {what}. This cannot be undone.",
                       key=f"cm_delete_sure_{corpus.id}", disabled=bool(busy))
    if st.button("Delete corpus", key=f"cm_delete_{corpus.id}", disabled=not sure or bool(busy)):
        try:
            cw.delete_corpus(store, corpus.id)
        except storage.NotFoundError:
            flash(FLASH_KEY, "info", f"Corpus '{md_plain(corpus.name)}' was already deleted.")
        else:
            from services.workflows.milvus_sync import drop_orphans

            left = drop_orphans(store)  # its indexes' Milvus collections (None: dropped, or no Milvus)
            flash(FLASH_KEY, "success", f"Deleted corpus '{md_plain(corpus.name)}': {what}."
                  + (f" {md_plain(left)}" if left else ""))
        _forget(corpus.id)
        st.rerun()
