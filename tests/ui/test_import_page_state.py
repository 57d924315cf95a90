"""The Corpus Import page's widgets show what the page uses: the chosen target corpus survives an import and a
rename, the column mapping follows each uploaded file and the options survive a file swap; its messages count
skipped duplicates and escape user data. AppTest runs against a fresh store per test (``fresh_env``,
tests/ui/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import import_page, no_exceptions, page_store
from ui.render import md_plain

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")
FIXED = "Fixed size (characters, with overlap)"

pytestmark = pytest.mark.usefixtures("fresh_env")

MAPPING_CSV = (
    "id,headline,body,topic\n"
    "1,Late goal,The striker scored a late goal in the final minute,sport\n"
    "2,Pasta night,Boil the pasta and stir the tomato sauce slowly,cooking\n"
).encode()
LATIN1_CSV = (
    "headline,body\n"
    "Café opens,A new café opened its doors on the market square\n"
    "Rain again,Heavy rain is expected for the whole weekend\n"
).encode("latin-1")


_store = page_store
_no_exceptions = no_exceptions


def _page() -> AppTest:
    return import_page(IMPORT_PAGE)


def _upload(at: AppTest, name: str | None, data: bytes = b"") -> AppTest:
    """Upload one table file (``name`` None: remove the upload) and run the page."""
    at.file_uploader(key="imp_upload_table").set_value(None if name is None else (name, data, "text/csv")).run()
    _no_exceptions(at)
    return at


def _csv(*texts: str) -> bytes:
    return ("title,text\n" + "".join(f"T{i},{t}\n" for i, t in enumerate(texts))).encode()


def _preview_texts(at: AppTest) -> list[str]:
    return list(at.dataframe[0].value["text"])


def _target_corpus(store: db.Store) -> db.CorpusInfo:
    """A second corpus, listed after the demo corpus (the box's first option)."""
    target = db.create_corpus(store, "Target")
    db.add_documents(store, target.id, [{"title": "old", "text": "A document that was there before."}])
    return db.get_corpus(store, target.id)


# --------------------------------------------------------------------------- 1. the chosen corpus stays chosen


def test_existing_corpus_box_keeps_its_corpus_after_an_import() -> None:
    """The QA case: after an import changed "Target (1 doc)" to "Target (3 docs)" the box fell back to the first
    corpus, and the next import went into the demo corpus."""
    at = _page()
    store = _store()
    target = _target_corpus(store)
    demo = next(c for c in db.list_corpora(store) if c.id != target.id)
    _upload(at, "first.csv", _csv("First new text about apples.", "Second new text about pears."))
    at.radio(key="imp_target").set_value("An existing corpus").run()
    at.selectbox(key="imp_existing").set_value(next(c for c in db.list_corpora(store) if c.id == target.id)).run()
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus(store, target.id).n_documents == 3
    at.run()  # any next interaction: the box is drawn with "Target (3 docs)"
    assert at.selectbox(key="imp_existing").value.id == target.id
    _upload(at, "second.csv", _csv("Third new text about plums."))
    assert at.selectbox(key="imp_existing").value.id == target.id
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus(store, target.id).n_documents == 4
    assert db.get_corpus(store, demo.id).n_documents == demo.n_documents  # nothing went into the other corpus


def _manage_open(at: AppTest) -> AppTest:
    at.session_state["cm_open"] = True
    at.run()
    _no_exceptions(at)
    return at


def _shown(at: AppTest, key: str) -> str:
    """The text a select box shows."""
    box = at.selectbox(key=key)
    return box.options[box.index]


def _browser_sends(at: AppTest, key: str, text: str) -> AppTest:
    """Run the page with select box ``key`` sending back ``text``, as the browser does: it keeps the text it showed
    (in Chromium, after a rename the box still showed "Target (1 doc)" and sent it with the next interaction),
    where AppTest by itself sends the stored option, which Streamlit finds again whatever its text now is."""
    box = at.selectbox(key=key)
    if text not in box.options:
        box.options.append(text)  # the browser's list may be older than the page's
    box.set_value(text).run()
    _no_exceptions(at)
    return at


def test_manage_corpora_box_keeps_its_corpus_when_its_name_or_count_changes() -> None:
    """The QA case: after a rename the "Corpus to change" box switched to another corpus (its text changed)."""
    at = _manage_open(_page())
    store = _store()
    target = _target_corpus(store)
    at.run()
    at.selectbox(key="cm_corpus").set_value(target.id).run()
    assert _shown(at, "cm_corpus") == "Target (1 doc)"
    # renamed here; the browser still holds the old text and sends it with the next interaction
    at.text_input(key=f"cm_name_{target.id}").set_value("Target again")
    at.button(key=f"FormSubmitter:cm_edit_{target.id}-Save name and description").click().run()
    assert db.get_corpus(store, target.id).name == "Target again"
    _browser_sends(at, "cm_corpus", "Target (1 doc)")
    assert at.selectbox(key="cm_corpus").value == target.id
    assert _shown(at, "cm_corpus") == "Target again (1 doc)"
    # renamed elsewhere (another tab, the command line): still this corpus, and the form shows its new name (a
    # field keeping the old one would rename it back on the next save)
    db.rename_corpus(store, target.id, "Renamed target")
    _browser_sends(at, "cm_corpus", "Target again (1 doc)")
    assert at.selectbox(key="cm_corpus").value == target.id
    assert at.text_input(key=f"cm_name_{target.id}").value == "Renamed target"
    # documents imported into it on this page: its "(N docs)" changes after the box was drawn
    _upload(at, "more.csv", _csv("One more text about the harbour."))
    at.radio(key="imp_target").set_value("An existing corpus").run()
    at.selectbox(key="imp_existing").set_value(next(c for c in db.list_corpora(store) if c.id == target.id)).run()
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus(store, target.id).n_documents == 2
    _browser_sends(at, "cm_corpus", "Renamed target (1 doc)")
    assert at.selectbox(key="cm_corpus").value == target.id
    assert _shown(at, "cm_corpus") == "Renamed target (2 docs)"


# --------------------------------------------------------------------------- 2. a file swap


def test_column_mapping_follows_each_uploaded_file() -> None:
    """The QA case: Text column set to "headline" for one file; after removing it and uploading another file with
    the same columns, the box showed the new guess "body" while the preview used "headline". A new file gets its
    own guessed mapping, and the preview uses what the boxes show."""
    at = _upload(_page(), "mapping.csv", MAPPING_CSV)
    assert at.selectbox(key="imp_map_text").value == "body"
    at.selectbox(key="imp_map_text").set_value("headline").run()
    assert _preview_texts(at) == ["Late goal", "Pasta night"]
    at.radio(key="imp_chunk").set_value(FIXED).run()  # another option: the chosen mapping stays
    assert at.selectbox(key="imp_map_text").value == "headline"
    assert _preview_texts(at) == ["Late goal", "Pasta night"]

    _upload(at, None)
    assert "imp_map_text" not in [s.key for s in at.selectbox]  # no file, no mapping
    _upload(at, "latin1.csv", LATIN1_CSV)
    mapping = [at.selectbox(key=k).value for k in ("imp_map_text", "imp_map_title", "imp_map_label")]
    assert mapping == ["body", "headline", "(none)"]
    assert _preview_texts(at) == ["A new café opened its doors on the market square",
                                  "Heavy rain is expected for the whole weekend"]
    assert list(at.dataframe[0].value["title"]) == ["Café opens", "Rain again"]

    # straight from one file to another (no empty upload in between): the new file's guess too
    at.selectbox(key="imp_map_text").set_value("headline").run()
    _upload(at, "mapping.csv", MAPPING_CSV)
    assert at.selectbox(key="imp_map_text").value == "body"
    assert list(at.dataframe[0].value["label"]) == ["sport", "cooking"]
    assert _preview_texts(at)[0] == "The striker scored a late goal in the final minute"


def test_options_survive_a_file_swap_and_are_the_ones_used() -> None:
    """The QA case: with "Fixed size" and "An existing corpus" chosen, removing the file and uploading another showed
    "No chunking" and "A new corpus" while the chunk inputs and the Corpus box were drawn, and the import created a
    new corpus. The options stay drawn without a file, keep their values, and the import does what they show."""
    at = _page()
    store = _store()
    target = _target_corpus(store)
    long_text = " ".join(f"Sentence {i} of a long report on river water quality." for i in range(40))
    _upload(at, "first.csv", _csv(long_text))
    at.radio(key="imp_chunk").set_value(FIXED).run()
    at.number_input(key="imp_chunk_size").set_value(800)
    at.number_input(key="imp_chunk_overlap").set_value(0).run()
    at.radio(key="imp_target").set_value("An existing corpus").run()
    at.selectbox(key="imp_existing").set_value(next(c for c in db.list_corpora(store) if c.id == target.id)).run()

    _upload(at, None)  # no file: the options are still drawn, with their values
    assert at.radio(key="imp_chunk").value == FIXED
    assert (at.number_input(key="imp_chunk_size").value, at.number_input(key="imp_chunk_overlap").value) == (800, 0)
    assert at.radio(key="imp_target").value == "An existing corpus"
    assert at.selectbox(key="imp_existing").value.id == target.id
    assert not [t for t in at.text_input if t.key == "imp_new_name"]
    assert not [b for b in at.button if b.key == "imp_go"]

    other = " ".join(f"Line {i} of another long report on air quality in cities." for i in range(40))
    _upload(at, "second.csv", _csv(other))
    assert at.radio(key="imp_chunk").value == FIXED
    assert at.number_input(key="imp_chunk_size").value == 800
    assert at.radio(key="imp_target").value == "An existing corpus"
    assert at.selectbox(key="imp_existing").value.id == target.id
    sizes = list(at.dataframe[0].value["characters"])
    assert len(sizes) == -(-len(other) // 800) and max(sizes) <= 800  # chunked at 800, as shown
    n_corpora = len(db.list_corpora(store))
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert len(db.list_corpora(store)) == n_corpora  # no new corpus
    assert db.get_corpus(store, target.id).n_documents == 1 + len(sizes)


def test_new_corpus_name_follows_the_file_until_typed() -> None:
    at = _upload(_page(), "apples.csv", _csv("Apples grow on trees."))
    assert at.text_input(key="imp_new_name").value == "apples"
    _upload(at, None)
    _upload(at, "pears.csv", _csv("Pears grow on trees too."))
    assert at.text_input(key="imp_new_name").value == "pears"
    at.text_input(key="imp_new_name").set_value("Fruit").run()
    _upload(at, None)
    _upload(at, "plums.csv", _csv("Plums grow on trees as well."))
    assert at.text_input(key="imp_new_name").value == "Fruit"  # typed: kept
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus_by_name(_store(), "Fruit").n_documents == 1


# --------------------------------------------------------------------------- messages


def test_duplicates_are_counted_in_the_summary_and_the_success_message() -> None:
    at = _upload(_page(), "dups.csv", _csv("Same text twice.", "Another text.", "Same text twice."))
    assert at.info[0].value == "2 documents ready, 1 skipped (1 duplicate) of 3 read, 0 errors, 1 warning"
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert "Imported 2 documents into 'dups' (1 duplicate skipped)." in at.success[0].value
    # the same file into the corpus it went to: all of it skipped as duplicates, nothing to import
    at.radio(key="imp_target").set_value("An existing corpus").run()
    at.selectbox(key="imp_existing").set_value(next(c for c in db.list_corpora(_store()) if c.name == "dups")).run()
    assert at.info[0].value == "0 documents ready, 3 skipped (3 duplicates) of 3 read, 0 errors, 3 warnings"
    assert at.button(key="imp_go").disabled


def test_messages_with_user_data_are_escaped() -> None:
    at = _upload(_page(), "notes.csv", _csv("A note on *emphasis* and [links](http://example.com)."))
    name = "*Notes* [x](http://example.com) <b>"
    at.text_input(key="imp_new_name").set_value(name).run()
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert at.success[0].value.startswith(f"Imported 1 document into '{md_plain(name)}'.")
    # the preview's error (bad chunk settings) is escaped too
    at.radio(key="imp_chunk").set_value(FIXED).run()
    at.number_input(key="imp_chunk_size").set_value(100)
    at.number_input(key="imp_chunk_overlap").set_value(150).run()
    _no_exceptions(at)
    assert [e.value for e in at.error] == [
        f"A corpus called '{md_plain(name)}' exists: choose it as the target ('An existing corpus') to add to it, "
        "or pick another name.",  # the name just imported into, under its field
        "No preview: " + md_plain("The overlap must be between 0 and the chunk size minus one (99).")]
