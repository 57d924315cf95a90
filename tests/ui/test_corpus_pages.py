"""AppTest runs of the corpus pages (Corpus Import, Annotate and Review, Agreement and Export), a fresh store per
test."""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import confirm_and_click
from tests.ui.conftest import ON_EVERY_BACKEND

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")
REVIEW_PAGE = str(ROOT / "pages" / "2_Annotate_and_Review.py")
AGREEMENT_PAGE = str(ROOT / "pages" / "3_Agreement_and_Export.py")

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _store() -> db.Store:
    """The store the page under test uses (``MRAG_DATABASE_URL``, set by ``fresh_env``)."""
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def _no_exceptions(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


# --------------------------------------------------------------------------- import page

CSV = (
    "title,text,topic\n"
    "Goal,The striker scored a late goal,sport\n"
    "Pasta,Boil the pasta and stir the sauce,cooking\n"
    "Blank,,sport\n"
    "Dup,The striker scored a late goal,sport\n"
)


@ON_EVERY_BACKEND
def test_import_csv_upload_preview_then_commit() -> None:
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    _no_exceptions(at)
    at.file_uploader(key="imp_upload_table").set_value(("news.csv", CSV.encode(), "text/csv")).run()
    _no_exceptions(at)
    # the mapping was guessed from the column names
    assert at.selectbox(key="imp_map_text").value == "text"
    assert at.selectbox(key="imp_map_label").value == "topic"
    # the preview lists the records and the issues row by row; nothing written yet
    records, issues = at.dataframe[0].value, at.dataframe[1].value
    assert list(records["title"]) == ["Goal", "Pasta"]
    assert ("error", "news.csv row 3") in set(zip(issues["severity"], issues["location"]))
    assert any("same text" in m for m in issues["message"])
    button = at.button(key="imp_go")
    assert button.label == "Import 2 documents"
    store = _store()
    assert [c.name for c in db.list_corpora(store)] == ["MRAG Studio demo"]

    at.text_input(key="imp_new_name").set_value("News").run()
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert "Imported 2 documents into 'News'" in at.success[0].value
    corpus = db.get_corpus_by_name(store, "News")
    assert corpus.n_documents == 2
    assert {lab.category for lab in db.effective_labels(store, corpus.id).values()} == {"sport", "cooking"}
    assert at.session_state["corpus_id"] == corpus.id


def test_import_pasted_jsonl_into_existing_corpus_with_dedupe() -> None:
    store = _store()
    target = db.create_corpus(store, "Target")
    db.add_documents(store, target.id, [{"title": "old", "text": "already here"}])
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.text_area(key="imp_paste").set_value('{"text": "already here"}\n{"text": "brand new", "title": "N"}\nnot json\n')
    at.selectbox(key="imp_paste_fmt").set_value("jsonl")
    at.run()
    _no_exceptions(at)
    at.radio(key="imp_target").set_value("An existing corpus").run()
    at.selectbox(key="imp_existing").set_value(next(c for c in db.list_corpora(store) if c.name == "Target")).run()
    _no_exceptions(at)
    issues = at.dataframe[1].value
    assert ("error", "pasted.jsonl line 3") in set(zip(issues["severity"], issues["location"]))
    assert any("already in the collection" in m for m in issues["message"])
    assert at.button(key="imp_go").label == "Import 1 document"
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert [d.title for d in db.list_documents(store, target.id).items] == ["old", "N"]


def test_import_zip_with_folder_labels_and_name_clash() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("notes/physics/a.txt", "Atoms are small.")
        zf.writestr("notes/history/b.md", "# Rome\n\nRome was not built in a day.")
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.radio(key="imp_kind").set_value("zip").run()
    at.file_uploader(key="imp_upload_zip").set_value(("notes.zip", buf.getvalue(), "application/zip")).run()
    _no_exceptions(at)
    records = at.dataframe[0].value
    assert sorted(zip(records["title"], records["label"])) == [("Rome", "history"), ("a", "physics")]
    at.text_input(key="imp_new_name").set_value("MRAG Studio demo").run()
    # said under the name field at once, and Import is disabled (tests/ui/test_import_page_checks.py)
    assert at.error and "exists: choose it as the target" in at.error[0].value and at.button(key="imp_go").disabled
    store = _store()
    assert db.get_corpus_by_name(store, "MRAG Studio demo").n_documents == 96
    at.checkbox(key="imp_folder_label").uncheck()
    at.text_input(key="imp_new_name").set_value("Notes").run()
    assert set(at.dataframe[0].value["label"]) == {""}
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus_by_name(store, "Notes").n_documents == 2


def test_import_unreadable_file_shows_error() -> None:
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.file_uploader(key="imp_upload_table").set_value(("bad.json", b"{oops", "application/json")).run()
    _no_exceptions(at)
    assert at.error and "cannot be read" in at.error[0].value
    assert not at.button  # no import button


def test_import_bad_chunk_settings_show_error() -> None:
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.file_uploader(key="imp_upload_table").set_value(("news.csv", CSV.encode(), "text/csv")).run()
    at.radio(key="imp_chunk").set_value("Paragraphs (merged to at least N characters)").run()
    at.number_input(key="imp_chunk_min").set_value(5000)
    at.number_input(key="imp_chunk_max").set_value(1000).run()
    _no_exceptions(at)
    assert any("minimum chunk size" in e.value for e in at.error)


WIKI_ARTICLES = ROOT.parent / "shared" / "data" / "mrag-wikipedia-v1" / "wikipedia_articles_v1.json.bz2"


def _topic_layout(root: Path) -> Path:
    """A small legal layout: two good topic files, one malformed one, and a query file (ignored)."""
    legal = root / "legal"
    (legal / "contract").mkdir(parents=True)
    (legal / "tort").mkdir()
    (legal / "queries").mkdir()
    (legal / "contract" / "contract_breach.json").write_text(json.dumps(
        ["A breach of contract happens when a party fails to perform.", "Damages for breach compensate the loss."]))
    (legal / "tort" / "tort_negligence.json").write_text(json.dumps(
        {"documents": [{"title": "Duty of care", "text": "Negligence needs a duty of care that was breached."}]}))
    (legal / "tort" / "tort_nuisance.json").write_text(json.dumps({"nothing": 1}))
    (legal / "queries" / "queries.json").write_text(json.dumps([{"text": "q", "related": ["breach"]}]))
    return legal


def _zip_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(folder.rglob("*.json")):
            zf.write(p, p.relative_to(folder.parent).as_posix())
    return buf.getvalue()


def _check_topic_preview(at: AppTest, archive: str = "") -> None:
    """The preview of the topic layout; the malformed file is named in ``archive`` when read from one."""
    records, issues = at.dataframe[0].value, at.dataframe[1].value
    assert list(zip(records["title"], records["label"])) == [
        ("breach #1", "contract"), ("breach #2", "contract"), ("Duty of care", "tort")]
    assert list(records["source"])[0].endswith("topic breach")
    # the malformed topic file is reported on its own row; the other files still import
    assert [(sev, loc) for sev, loc in zip(issues["severity"], issues["location"])] == [
        ("error", f"{archive}legal/tort/tort_nuisance.json")]
    assert "expected a list of documents" in issues["message"][0]
    assert at.button(key="imp_go").label == "Import 3 documents"


def test_import_topic_layout_from_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legal = _topic_layout(tmp_path / "data")
    monkeypatch.setenv("MRAG_IMPORT_ROOT", str(tmp_path))  # the folders the app may read (tests/ui/test_import_root)
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.radio(key="imp_kind").set_value("topics").run()
    at.radio(key="imp_topic_from").set_value("A folder on the machine running the app").run()
    _no_exceptions(at)
    assert any("folder path" in i.value for i in at.info) and not at.button
    at.text_input(key="imp_topic_path").set_value(str(tmp_path / "data")).run()
    _no_exceptions(at)
    _check_topic_preview(at)
    assert at.text_input(key="imp_new_name").value == "data"
    at.text_input(key="imp_topic_path").set_value(str(tmp_path / "data" / "missing")).run()
    _no_exceptions(at)
    assert "not found" in at.dataframe[1].value["message"][0] and at.button(key="imp_go").disabled
    at.text_input(key="imp_topic_path").set_value(str(tmp_path / "data")).run()
    store = _store()
    assert [c.name for c in db.list_corpora(store)] == ["MRAG Studio demo"]  # nothing written by the preview
    at.text_input(key="imp_new_name").set_value("Legal").run()
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert "Imported 3 documents into 'Legal'" in at.success[0].value
    corpus = db.get_corpus_by_name(store, "Legal")
    labels = db.effective_labels(store, corpus.id)
    docs = db.list_documents(store, corpus.id).items
    assert [(d.title, labels[d.id].category, labels[d.id].source) for d in docs] == [
        ("breach #1", "contract", "decision"), ("breach #2", "contract", "decision"),
        ("Duty of care", "tort", "decision")]
    assert legal.exists()


def test_import_topic_layout_zip_upload(tmp_path: Path) -> None:
    data = _zip_folder(_topic_layout(tmp_path))
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.radio(key="imp_kind").set_value("topics").run()
    assert at.radio(key="imp_topic_from").value == "Upload a ZIP"
    at.file_uploader(key="imp_upload_topics").set_value(("legal.zip", data, "application/zip")).run()
    _no_exceptions(at)
    _check_topic_preview(at, "legal.zip:")
    assert at.text_input(key="imp_new_name").value == "legal"
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    store = _store()
    corpus = db.get_corpus_by_name(store, "legal")
    assert corpus.n_documents == 3 and corpus.n_categories == 2


def test_import_real_wikipedia_articles_bz2() -> None:
    if not WIKI_ARTICLES.exists():
        pytest.skip(f"shared MRAG Wikipedia benchmark not present at {WIKI_ARTICLES}")
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.radio(key="imp_kind").set_value("wikipedia").run()
    at.file_uploader(key="imp_upload_wikipedia").set_value(
        (WIKI_ARTICLES.name, WIKI_ARTICLES.read_bytes(), "application/x-bzip2")).run()
    _no_exceptions(at)
    assert len(at.dataframe[0].value) == 500  # the first PREVIEW_ROWS of 1250
    assert len(at.dataframe) == 1  # no issues table: every article is fine
    assert at.button(key="imp_go").label == "Import 1250 documents"
    at.text_input(key="imp_new_name").set_value("Wikipedia").run()
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    store = _store()
    corpus = db.get_corpus_by_name(store, "Wikipedia")
    assert (corpus.n_documents, corpus.n_categories) == (1250, 25)


def test_import_wikipedia_json_with_a_bad_row() -> None:
    items = [{"title": "A", "text": "Alpha text.", "label": "x"}, {"title": "B", "label": "x"},
             {"title": "C", "text": "Gamma text.", "label": "y"}]
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.radio(key="imp_kind").set_value("wikipedia").run()
    at.file_uploader(key="imp_upload_wikipedia").set_value(
        ("articles.json", json.dumps(items).encode(), "application/json")).run()
    _no_exceptions(at)
    assert list(at.dataframe[0].value["title"]) == ["A", "C"]
    assert ("error", "articles.json row 2") in set(zip(at.dataframe[1].value["severity"],
                                                       at.dataframe[1].value["location"]))
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus_by_name(_store(), "articles").n_documents == 2


def test_chunked_import_links_chunks_and_review_shows_it() -> None:
    long_text = " ".join(f"Sentence {i} about the long history of Rome." for i in range(40))
    csv = "title,text,label\nRome,\"" + long_text + "\",history\nShort,A short note.,misc\n"
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.file_uploader(key="imp_upload_table").set_value(("rome.csv", csv.encode(), "text/csv")).run()
    at.radio(key="imp_chunk").set_value("Fixed size (characters, with overlap)").run()
    at.number_input(key="imp_chunk_size").set_value(800)
    at.number_input(key="imp_chunk_overlap").set_value(0).run()
    _no_exceptions(at)
    parts = [p for p in at.dataframe[0].value["part"] if p]
    n = len(parts)
    assert n >= 2 and parts[0] == f"1/{n}"
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    store = _store()
    corpus = db.get_corpus_by_name(store, "rome")
    docs = db.list_documents(store, corpus.id).items
    assert [(d.chunk_of, d.chunk_index, d.chunk_count) for d in docs] == [
        *[("Rome", i, n) for i in range(n)], (None, None, None)]
    assert {d.source for d in docs[:n]} == {"rome.csv row 1"}
    assert [d.id for d in db.source_chunks(store, docs[1].id)] == [d.id for d in docs[:n]]

    review = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    review.session_state["corpus_id"] = corpus.id
    review.session_state["rv_doc"] = docs[1].id
    review.run()
    review.radio(key="ar_view").set_value("Review queue").run()
    _no_exceptions(review)
    assert review.subheader[0].value == f"Rome \\(part 2/{n}\\)"  # Markdown-escaped: shows "Rome (part 2/3)"
    assert any(_shown(c.value) == f"Chunk 2 of {n} of 'Rome' (source: rome.csv row 1)" for c in review.caption)


# --------------------------------------------------------------------------- annotate & review page


def _shown(markdown: str) -> str:
    """What a reader sees of Markdown whose special characters are backslash-escaped (ui.render.md_plain)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _labelled_corpus(store: db.Store) -> tuple[db.CorpusInfo, list[int], dict[str, int]]:
    """Corpus 'Review me' with 3 categories, 4 unreviewed documents with ok suggestions."""
    c = db.create_corpus(store, "Review me")
    db.add_categories(store, c.id, [{"name": "sport", "description": "football match goal"},
                                    {"name": "cooking", "description": "pasta sauce"}, "science"])
    ids = db.add_documents(store, c.id, [
        {"title": "Match report", "text": "The match ended with a late goal.\n\n<b>bold?</b> & more"},
        {"title": "Recipe", "text": "Cook the pasta."},
        {"title": "Atoms", "text": "Protons and neutrons."},
        {"title": "Derby", "text": "A derby match."},
    ]).document_ids  # fmt: skip
    db.add_suggestions(store, [
        {"document_id": ids[0], "agent": "zero-shot:minilm", "category": "sport", "score": 0.91, "reason": "r1"},
        {"document_id": ids[1], "agent": "zero-shot:minilm", "category": "cooking", "score": 0.4},
        {"document_id": ids[2], "agent": "zero-shot:minilm", "category": "sport", "score": 0.3},
        {"document_id": ids[3], "agent": "zero-shot:minilm", "status": "failed", "error": "timeout"},
    ])  # fmt: skip
    cats = {x.name: x.id for x in db.list_categories(store, c.id)}
    return db.get_corpus(store, c.id), ids, cats


def _review_app(corpus_id: int, view: str = "Review queue") -> AppTest:
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="ar_view").set_value(view).run()
    _no_exceptions(at)
    return at


def _submit(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    _no_exceptions(at)
    return at


def test_review_queue_accept_save_next_and_skip() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    at = _review_app(corpus.id)
    assert at.subheader[0].value == "Match report"
    assert "Document 1 of 4" in at.caption[0].value
    text_html = next(m.value for m in at.markdown if "<p>" in m.value)
    assert "&lt;b&gt;bold?&lt;/b&gt; &amp; more" in text_html and "<b>" not in text_html  # escaped
    assert "<mark>match</mark>" in text_html and "<mark>goal</mark>" in text_html  # keywords highlighted
    assert any("confidence 91%" in m.value for m in at.markdown)

    _submit(at, "Accept suggestion")
    assert at.success[0].value.startswith("Saved 'sport'")
    assert at.subheader[0].value == "Recipe"  # advanced to the next document
    decision = db.list_decisions(store, ids[0])[-1]
    assert (decision.category, decision.annotator, decision.suggestion_id is not None) == ("sport", "reviewer", True)

    at.selectbox(key=f"rv_label_{ids[1]}").set_value("science")
    at.text_input(key=f"rv_note_{ids[1]}").set_value("not food")
    _submit(at, "Save & Next")
    decision = db.list_decisions(store, ids[1])[-1]
    assert (decision.category, decision.note, decision.suggestion_id) == ("science", "not food", None)
    assert at.subheader[0].value == "Atoms"

    _submit(at, "Skip")
    assert at.subheader[0].value == "Derby"
    assert db.list_decisions(store, ids[2]) == []  # skipped: nothing stored
    assert any("failed" in w.value and "timeout" in w.value for w in at.warning)


def test_review_queue_label_keeps_a_human_decision_over_the_suggestion() -> None:
    """Where a reviewer's decision and the machine's suggestion differ, the Label box starts on the decision:
    Save & Next confirms it; only Accept suggestion takes the suggestion."""
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)  # suggestions: sport, cooking, sport
    db.decide_label(store, ids[0], cats["science"], "alice", db.get_document(store, ids[0]).version)
    at = _review_app(corpus.id)
    assert at.subheader[0].value == "Match report"
    assert at.selectbox(key=f"rv_label_{ids[0]}").value == "science"
    _submit(at, "Save & Next")
    assert [d.category for d in db.list_decisions(store, ids[0])] == ["science", "science"]
    assert at.selectbox(key=f"rv_label_{ids[1]}").value == "cooking"  # no decision: the suggestion


def test_review_queue_shows_llm_words_and_titles_verbatim_not_as_markdown() -> None:
    store = _store()
    c = db.create_corpus(store, "Markup")
    db.add_categories(store, c.id, ["sport", "cooking"])
    ids = db.add_documents(store, c.id, [{"title": "**Big** [win](http://127.0.0.1:9/t)", "text": "A match."},
                                         {"title": "Soup", "text": "Cook it."}]).document_ids
    db.add_suggestions(store, [
        {"document_id": ids[0], "agent": "llm:m_1", "category": "sport", "score": 0.9,
         "reason": "see ![pixel](http://127.0.0.1:9/p.png) and <img src=x>"},
        {"document_id": ids[1], "agent": "llm:m_1", "status": "failed",
         "error": "answer names no valid category (label='[x](http://127.0.0.1:9/)')"},
    ])  # fmt: skip
    at = _review_app(c.id)
    # Streamlit renders these strings as Markdown: every special character arrives backslash-escaped
    # (and a word joiner after 'http': Streamlit links bare URLs whatever their escapes; ui.render.md_plain)
    assert at.subheader[0].value == "\\*\\*Big\\*\\* \\[win\\]\\(http\u2060\\://127\\.0\\.0\\.1\\:9/t\\)"
    reason = next(c.value for c in at.caption if c.value.startswith("Reason:"))
    assert "\\!\\[pixel\\]\\(" in reason and "\\<img src=x\\>" in reason and "![" not in reason
    assert any("by llm\\:m\\_1" in m.value for m in at.markdown)
    _submit(at, "Skip")
    warning = next(w.value for w in at.warning if "failed" in w.value)
    assert "label='\\[x\\]\\(http" in warning and "](" not in warning


def test_review_queue_filters() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    db.decide_label(store, ids[2], cats["science"], "alice", 1)
    at = _review_app(corpus.id)
    at.selectbox(key="rv_cat").set_value("science").run()  # decided science (Atoms)
    assert at.subheader[0].value == "Atoms" and "Document 1 of 1" in at.caption[0].value
    at.selectbox(key="rv_cat").set_value("(any)").run()
    at.checkbox(key="rv_dis").check().run()
    assert at.subheader[0].value == "Atoms" and "Document 1 of 1" in at.caption[0].value
    at.checkbox(key="rv_dis").uncheck()
    at.checkbox(key="rv_low").check().run()
    at.slider(key="rv_thr").set_value(0.5).run()  # scores 0.4 and 0.3
    assert "of 2" in at.caption[0].value
    at.checkbox(key="rv_unrev").check().run()
    assert at.subheader[0].value == "Recipe" and "Document 1 of 1" in at.caption[0].value


def test_agent_filter_lists_stored_agents_with_versions() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    db.add_suggestions(store, [{"document_id": ids[1], "agent": "llm:tiny", "model_version": "v2",
                                "category": "science", "score": 0.7, "reason": "mentions pasta?"}])
    at = _review_app(corpus.id)
    picker = at.selectbox(key="rv_agent")
    assert picker.options == ["(any)", "llm:tiny · v2 (1 suggestion)",
                              "zero-shot:minilm (4 suggestions, 1 failed)"]
    picker.set_value(("llm:tiny", "v2")).run()
    _no_exceptions(at)
    assert at.subheader[0].value == "Recipe" and "Document 1 of 1" in at.caption[0].value
    assert any("**Suggestion:** science" in m.value and "llm:tiny" in _shown(m.value) for m in at.markdown)
    at.selectbox(key="rv_agent").set_value(("zero-shot:minilm", "")).run()
    assert "Document 2 of 3" in at.caption[0].value  # its failed-only document has no ok suggestion
    at.radio(key="ar_view").set_value("Bulk accept").run()
    at.selectbox(key="bk_agent").set_value(("llm:tiny", "v2")).run()
    _no_exceptions(at)
    table = at.data_editor[0].value
    assert list(table["id"]) == [ids[1]] and list(table["suggestion"]) == ["science"]


@ON_EVERY_BACKEND
def test_review_version_conflict_is_reported_not_overwritten() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    at = _review_app(corpus.id)
    assert at.subheader[0].value == "Match report"
    # someone else labels the document while it is open
    db.decide_label(store, ids[0], cats["science"], "alice", db.get_document(store, ids[0]).version)
    _submit(at, "Accept suggestion")
    assert at.error and "labelled 'science' by 'alice'" in at.error[0].value
    assert "nothing was overwritten" in at.error[0].value
    assert at.subheader[0].value == "Match report"  # stays on the document
    assert [d.annotator for d in db.list_decisions(store, ids[0])] == ["alice"]
    at.button(key="rv_reload").click().run()
    _submit(at, "Accept suggestion")
    assert [d.annotator for d in db.list_decisions(store, ids[0])] == ["alice", "reviewer"]
    assert db.effective_label(store, ids[0]).category == "sport"


def test_a_label_refused_after_someone_edited_the_text_names_that_edit() -> None:
    """Before, the refusal named the latest label decision's annotator (an imported label: 'import') whatever the
    change was; now it names the edit that made the current version, and who made it."""
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    at = _review_app(corpus.id)
    assert at.subheader[0].value == "Match report"
    db.update_document(store, ids[0], text="The match was abandoned.", editor="bob")  # while it is open
    _submit(at, "Accept suggestion")
    error = at.error[0].value.replace("\\", "")  # shown markdown-escaped
    assert f"Document {ids[0]}: its text was edited by 'bob' at " in error
    assert "you saw version 1, it is now version 2" in error and "nothing was overwritten" in error
    assert db.list_decisions(store, ids[0]) == []


@ON_EVERY_BACKEND
def test_review_queue_edits_and_deletes_a_document() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    qs = db.create_query_set(store, corpus.id, "Q")
    (query,) = db.add_queries(store, qs.id, [{"text": "a match and pasta", "ground_truth": [ids[0], ids[1]]}])
    at = _review_app(corpus.id)
    assert at.subheader[0].value == "Match report"
    version = db.get_corpus(store, corpus.id).version
    # edit the title and the text: saved, the corpus changed (indexes stale), the document's version bumped
    at.text_input(key=f"rv_edit_title_{ids[0]}").set_value("Match report (fixed)")
    at.text_area(key=f"rv_edit_text_{ids[0]}").set_value("The match ended with a late goal.")
    _submit(at, "Save changes")
    doc = db.get_document(store, ids[0])
    assert (doc.title, doc.text, doc.version) == ("Match report (fixed)", "The match ended with a late goal.", 2)
    assert db.get_corpus(store, corpus.id).version == version + 1
    assert "indexes are stale" in at.success[0].value
    assert at.subheader[0].value == r"Match report \(fixed\)"  # shown as text, markdown-escaped
    _submit(at, "Accept suggestion")  # the label decision uses the edited document's version
    assert db.effective_label(store, ids[0]).category == "sport"
    # an empty text or another document's text is refused, and nothing changes
    at.selectbox(key="rv_cat").set_value("cooking").run()
    assert at.subheader[0].value == "Recipe"
    at.text_area(key=f"rv_edit_text_{ids[1]}").set_value("Protons and neutrons.")
    _submit(at, "Save changes")
    assert "Not saved" in at.error[0].value and "already has exactly this text" in at.error[0].value
    assert db.get_document(store, ids[1]).text == "Cook the pasta."
    at.text_input(key=f"rv_edit_title_{ids[1]}").set_value("   ")  # a title is corrected, not erased
    _submit(at, "Save changes")
    assert "Not saved" in at.error[0].value and "title must not be empty" in at.error[0].value
    assert db.get_document(store, ids[1]).title == "Recipe" and at.subheader[0].value == "Recipe"
    # delete: only once confirmed; the query whose ground truth it was loses it and is flagged
    label = confirm_and_click(at, f"rv_delete_sure_{ids[1]}", f"rv_delete_{ids[1]}")
    assert "ground truth of 1 query, which lose it and are flagged" in label
    _no_exceptions(at)
    assert "Deleted 'Recipe'. 1 query that had it as ground truth is flagged" in at.success[0].value
    assert ids[1] not in db.document_ids(store, corpus.id)
    (row,) = db.list_queries(store, qs.id)
    assert (row.id, row.status, row.ground_truth) == (query, "flagged", [ids[0]])
    assert "'Recipe'" in row.error and "was deleted" in row.error


def test_review_queue_edit_refused_when_someone_changed_the_document() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    at = _review_app(corpus.id)
    db.update_document(store, ids[0], title="Renamed meanwhile")  # another reviewer, while it is open
    at.text_area(key=f"rv_edit_text_{ids[0]}").set_value("My edit.")
    _submit(at, "Save changes")
    assert "Not saved" in at.error[0].value and "you saw version 1, it is now version 2" in at.error[0].value
    assert db.get_document(store, ids[0]).text.startswith("The match ended")
    at.checkbox(key=f"rv_delete_sure_{ids[0]}").check().run()
    at.button(key=f"rv_delete_{ids[0]}").click().run()
    assert "Not deleted" in at.error[0].value and ids[0] in db.document_ids(store, corpus.id)


@ON_EVERY_BACKEND
def test_bulk_accept_selected() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    at = _review_app(corpus.id, "Bulk accept")
    table = at.data_editor[0].value
    assert list(table["id"]) == ids and list(table["suggestion"]) == ["sport", "cooking", "sport", ""]
    assert not table["accept"].any()
    at.session_state["bulk_editor_1_0"] = {"edited_rows": {0: {"accept": True}, 1: {"accept": True}},
                                           "added_rows": [], "deleted_rows": []}
    at.run()
    button = at.button(key="bk_accept")
    assert button.label == "Accept selected (2)"
    button.click().run()
    _no_exceptions(at)
    assert at.success and "Accepted 2 suggestions" in at.success[0].value
    assert db.effective_label(store, ids[0]).source == "decision"
    assert (
        db.effective_label(store, ids[1]).category == "cooking" and db.effective_label(store, ids[1]).by == "reviewer"
    )
    assert db.list_decisions(store, ids[2]) == []
    assert list(at.data_editor[0].value["id"]) == [ids[2], ids[3]]  # accepted rows left the unreviewed list


def test_preannotate_stopped_run_says_cancelled_or_interrupted() -> None:
    store = _store()
    corpus, _, _ = _labelled_corpus(store)
    at = _review_app(corpus.id, "Pre-annotate")
    assert not at.warning
    at.session_state["pa_running"] = True  # what a run leaves behind when the page stops it mid-way
    at.run()
    assert [w.value for w in at.warning] == [
        "Pre-annotation interrupted (the page reran); every finished batch is kept. Press Resume to continue."]
    at.session_state["pa_running"] = True
    at.button(key="pa_cancel").click().run()
    assert [w.value for w in at.warning] == [
        "Pre-annotation cancelled; every finished batch is kept. Press Resume to continue."]
    at.run()
    assert not at.warning  # said once


def test_preannotate_refuses_while_another_session_runs_it() -> None:
    from ui.state import preannotation_lock

    store = _store()
    corpus, ids, _ = _labelled_corpus(store)
    at = _review_app(corpus.id, "Pre-annotate")
    n_suggestions = sum(len(db.list_suggestions(store, i)) for i in ids)
    lock = preannotation_lock(corpus.id)  # the lock the page takes (one per corpus, shared by sessions)
    assert lock.acquire(blocking=False)
    try:
        at.button(key="pa_start").click().run()
    finally:
        lock.release()
    _no_exceptions(at)
    assert [w.value for w in at.warning] == [
        "This corpus is being pre-annotated in another tab or session; wait until that run ends."]
    assert sum(len(db.list_suggestions(store, i)) for i in ids) == n_suggestions  # nothing ran
    assert "pa_running" not in at.session_state


def test_preannotate_offline_with_minilm_then_find_similar() -> None:
    store = _store()
    c = db.create_corpus(store, "Tiny")
    db.add_categories(store, c.id, [{"name": "sport", "description": "football, matches, goals, athletes"},
                                    {"name": "cooking", "description": "recipes, food, kitchen, baking"}])
    ids = db.add_documents(store, c.id, [
        {"title": "Final", "text": "The football team won the final with two goals."},
        {"title": "Bread", "text": "Knead the dough and bake the bread in a hot oven."},
        {"title": "Cup", "text": "The striker scored in the cup match."},
    ]).document_ids  # fmt: skip
    at = _review_app(c.id, "Pre-annotate")
    assert any("No LLM endpoint configured" in i.value for i in at.info)
    assert at.button(key="pa_start").label == "Start pre-annotation"
    at.button(key="pa_start").click().run()
    _no_exceptions(at)
    assert at.success and "3 suggestions, 0 failed" in at.success[0].value
    labels = db.effective_labels(store, c.id)
    assert [labels[i].category for i in ids] == ["sport", "cooking", "sport"]
    assert all(lab.source == "suggestion" for lab in labels.values())
    assert at.button(key="pa_start").disabled  # nothing left to do, and it says so (not "Resume (0 left)")
    assert at.button(key="pa_start").label == "All documents have a suggestion"
    assert "pa_running" not in at.session_state and not at.warning  # a finished run leaves no stop message
    at.button(key="pa_cancel").click().run()
    assert not at.warning  # Cancel with nothing running says nothing

    at.radio(key="ar_view").set_value("Find similar").run()
    at.toggle(key="fs_on").set_value(True).run()
    _no_exceptions(at)
    near = at.dataframe[0].value
    assert list(near["id"])[0] == ids[2]  # the other football text is the nearest to "Final"
    at.selectbox(key="fs_space").set_value(3).run()
    assert len(at.dataframe[0].value) == 2
    at.multiselect(key="fs_pick").set_value([ids[0], ids[2]])
    at.selectbox(key="fs_label").set_value("sport")
    _submit(at, "Apply label to selected")
    assert at.success and "Labelled 2 document(s) 'sport'" in at.success[0].value
    assert [db.effective_label(store, i).source for i in ids] == ["decision", "suggestion", "decision"]


def test_preannotate_skips_documents_imported_with_a_label_by_default() -> None:
    store = _store()
    c = db.create_corpus(store, "Half labelled")
    db.add_categories(store, c.id, [{"name": "sport", "description": "football, matches, goals"},
                                    {"name": "cooking", "description": "recipes, food, baking"}])
    ids = db.add_documents(store, c.id, [
        {"title": "Final", "text": "The football team won the final with two goals.", "label": "sport"},
        {"title": "Bread", "text": "Knead the dough and bake the bread in a hot oven."},
        {"title": "Cup", "text": "The striker scored in the cup match."},
    ]).document_ids  # fmt: skip
    at = _review_app(c.id, "Pre-annotate")
    assert at.radio(key="pa_undecided").value is True
    assert any(m.value.startswith("**2** of 2 documents still need a suggestion") for m in at.markdown)
    at.button(key="pa_start").click().run()
    _no_exceptions(at)
    assert at.success and "2 suggestions, 0 failed" in at.success[0].value
    assert [len(db.list_suggestions(store, i)) for i in ids] == [0, 1, 1]  # the imported label was left alone
    assert at.button(key="pa_start").disabled
    at.radio(key="pa_undecided").set_value(False).run()  # all documents, e.g. to measure agreement
    assert any(m.value.startswith("**1** of 3 documents still needs a suggestion") for m in at.markdown)
    assert at.button(key="pa_start").label == "Resume (1 left)"
    store.close()


def test_preannotate_offers_every_document_when_all_are_labelled() -> None:
    store = _store()
    c = db.create_corpus(store, "All labelled")
    db.add_categories(store, c.id, ["sport", "cooking"])
    db.add_documents(store, c.id, [{"text": "A goal in the final.", "label": "sport"},
                                   {"text": "Bake the bread.", "label": "cooking"}])
    at = _review_app(c.id, "Pre-annotate")
    assert not [r for r in at.radio if r.key == "pa_undecided"]  # nothing else to choose: the suggestions
    assert any(m.value.startswith("**2** of 2 documents still need") for m in at.markdown)  # can check the labels
    assert at.button(key="pa_start").label == "Start pre-annotation" and not at.button(key="pa_start").disabled


# --------------------------------------------------------------------------- agreement & export page


@ON_EVERY_BACKEND
def test_agreement_and_export() -> None:
    store = _store()
    corpus, ids, cats = _labelled_corpus(store)
    db.decide_label(store, ids[0], cats["sport"], "alice", 1)  # agrees
    db.decide_label(store, ids[1], cats["science"], "alice", 1)  # suggestion said cooking
    at = AppTest.from_file(AGREEMENT_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    _no_exceptions(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Documents compared": "2", "Agreement": "50.0%", "Bulk-accepted (apart)": "0"}
    per_cat = at.dataframe[0].value.set_index("category (decided)")
    assert per_cat.loc["sport", "accuracy"] == 1.0 and per_cat.loc["science", "accuracy"] == 0.0
    matrix = at.dataframe[1].value
    assert matrix.loc["suggested: cooking", "science"] == 1 and matrix.loc["suggested: sport", "sport"] == 1

    at.selectbox(key="ex_fmt").set_value("benchmark").run()
    at.button(key="ex_prepare").click().run()
    assert at.error and "no label" in at.error[0].value  # document 4 has only a failed suggestion
    at.checkbox(key="ex_skip").check().run()
    at.button(key="ex_prepare").click().run()
    _no_exceptions(at)
    assert not at.error
    assert at.get("download_button")[0].proto.label.startswith("Download MRAG benchmark JSON")
    exported = json.loads(at.session_state["ex_data"][1])
    assert [(a["title"], a["label"]) for a in exported] == [("Match report", "sport"), ("Recipe", "science"),
                                                            ("Atoms", "sport")]
    # a label change makes the prepared file stale: the download disappears until prepared again
    db.decide_label(store, ids[2], cats["science"], "alice", db.get_document(store, ids[2]).version)
    at.run()
    assert not at.get("download_button")


# --------------------------------------------------------------------------- manage corpora


def _two_corpora() -> tuple[db.Store, int, int]:
    """The demo corpus (as the page loads it) plus "News *1*" with a query set and an index."""
    AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()  # loads the demo corpus
    store = _store()
    news = db.create_corpus(store, "News *1*")
    ids = db.add_documents(store, news.id, [{"text": "a goal", "label": "sport"}, {"text": "pasta", "label": "food"}]
                           ).document_ids
    db.add_queries(store, db.create_query_set(store, news.id, "Q").id, [{"text": "goal pasta", "ground_truth": ids}])
    run = db.create_embedding_run(store, news.id, model_name="m", layer=0, pooling="mean", n_heads=1, head_dim=2, dim=2)
    db.save_vectors(store, run.id, ids, [[1.0, 0.0], [0.0, 1.0]], [[[1.0, 0.0]], [[0.0, 1.0]]])
    demo_id = next(c.id for c in db.list_corpora(store) if c.id != news.id)
    return store, demo_id, news.id


def _manage_open(at: AppTest) -> AppTest:
    """Open the "Manage corpora" expander (its contents are drawn only while it is open)."""
    at.session_state["cm_open"] = True
    return at.run()


def test_manage_corpora_lists_renames_and_refuses_a_taken_name() -> None:
    store, demo_id, news_id = _two_corpora()
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    assert not at.dataframe  # closed: nothing drawn
    _manage_open(at)
    _no_exceptions(at)
    table = at.dataframe[0].value
    assert list(table["corpus"]) == ["MRAG Studio demo", "News *1*"]
    by_name = table.set_index("corpus")
    assert by_name.loc["News *1*", ["documents", "query sets", "queries", "indexes"]].tolist() == [2, 1, 1, 1]
    assert by_name.loc["MRAG Studio demo", ["documents", "query sets", "queries"]].tolist() == [96, 1, 24]

    at.selectbox(key="cm_corpus").set_value(news_id).run()
    at.text_input(key=f"cm_name_{news_id}").set_value("MRAG Studio demo")
    at.button(key=f"FormSubmitter:cm_edit_{news_id}-Save name and description").click().run()
    assert any("already exists" in e.value for e in at.error)
    assert db.get_corpus(store, news_id).name == "News *1*"

    at.text_input(key=f"cm_name_{news_id}").set_value("World news")
    at.text_area(key=f"cm_desc_{news_id}").set_value("wire copy")
    at.button(key=f"FormSubmitter:cm_edit_{news_id}-Save name and description").click().run()
    _no_exceptions(at)
    info = db.get_corpus(store, news_id)
    assert (info.name, info.description) == ("World news", "wire copy")
    assert any("Saved corpus 'World news'" in s.value for s in at.success)
    assert at.selectbox(key="cm_corpus").value == news_id  # the choice survives the rename


@ON_EVERY_BACKEND
def test_manage_corpora_deletes_only_after_confirmation_and_names_what_goes() -> None:
    store, demo_id, news_id = _two_corpora()
    at = _manage_open(AppTest.from_file(IMPORT_PAGE, default_timeout=60).run())
    at.session_state["corpus_id"] = news_id  # the corpus the other pages have selected
    at.selectbox(key="cm_corpus").set_value(news_id).run()
    label = confirm_and_click(at, f"cm_delete_sure_{news_id}", f"cm_delete_{news_id}")
    assert label == (r"Delete 'News \*1\*' and everything it holds: 2 documents, 2 categories, 1 query set "
                     "(1 query), 1 index (0.0 MB of vectors), 0 evaluation runs. This cannot be undone.")
    _no_exceptions(at)
    assert [c.id for c in db.list_corpora(store)] == [demo_id]
    assert db.list_query_sets(store, news_id) == [] and db.list_embedding_runs(store, news_id) == []
    assert any(r"Deleted corpus 'News \*1\*'" in s.value for s in at.success)
    assert "corpus_id" not in at.session_state  # the other pages fall back to a corpus that exists
    assert list(at.dataframe[0].value["corpus"]) == ["MRAG Studio demo"]


def test_manage_corpora_refuses_to_delete_a_corpus_being_preannotated() -> None:
    from ui.state import preannotation_lock

    store, demo_id, news_id = _two_corpora()
    lock = preannotation_lock(news_id)
    assert lock.acquire(blocking=False)
    try:
        at = _manage_open(AppTest.from_file(IMPORT_PAGE, default_timeout=60).run())
        at.selectbox(key="cm_corpus").set_value(news_id).run()
        assert any("cannot be deleted while it is being pre-annotated" in i.value for i in at.info)
        assert at.checkbox(key=f"cm_delete_sure_{news_id}").disabled and at.button(key=f"cm_delete_{news_id}").disabled
    finally:
        lock.release()
    at.run()
    assert not at.checkbox(key=f"cm_delete_sure_{news_id}").disabled
