"""Corpus-studio workflows (import, pre-annotation, review helpers, export) against a real store."""

from __future__ import annotations

import bz2
import io
import json
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

import db
from services.ingest import ColumnMapping, sniff_columns, suggest_mapping
from services.llm.client import LLMClient
from services.workflows import annotation as ann
from services.workflows import corpus as cw
from services.workflows.llm_cache import StoreLLMCache
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content, by_document

CSV = (
    "title,body,topic\n"
    "Goal,The striker scored a late goal in the football match,sport\n"
    "Pasta,Boil the pasta and stir the tomato sauce in the kitchen,cooking\n"
    "Empty,,sport\n"
    "Again,The striker scored a late goal in the football match,sport\n"
    ",Whisk eggs and flour for a pancake batter,cooking\n"
).encode()


def _csv_preview() -> cw.ImportPreview:
    cols = sniff_columns(CSV, "csv", "news.csv")
    mapping = suggest_mapping(cols) or ColumnMapping(text="body")
    mapping = ColumnMapping(text="body", title=mapping.title, label="topic")
    return cw.read_upload("table", [("news.csv", CSV)], mapping=mapping)


# --------------------------------------------------------------------------- import


def test_csv_preview_reports_rows_and_dedupes(store: db.Store) -> None:
    read = _csv_preview()
    assert len(read.records) == 4  # the empty row is an error
    assert [i.location for i in read.errors] == ["row 3"]
    prepared = cw.prepare_import(read)
    assert [r.title for r in prepared.records] == ["Goal", "Pasta", "Whisk eggs and flour for a pancake batter"]
    dup = [i for i in prepared.warnings if "same text" in i.message]
    assert len(dup) == 1 and dup[0].location == "news.csv row 4"
    # nothing written by previewing
    assert db.list_corpora(store) == []


@pytest.mark.every_backend
def test_import_records_new_corpus_writes_labels_as_import_decisions(store: db.Store) -> None:
    prepared = cw.prepare_import(_csv_preview())
    result = cw.import_records(store, prepared.records, new_name="News")
    assert result.created_corpus and result.added == 3 and result.n_categories == 2
    corpus = db.get_corpus_by_name(store, "News")
    assert corpus.n_documents == 3
    assert {c.name for c in db.list_categories(store, corpus.id)} == {"sport", "cooking"}
    labels = db.effective_labels(store, corpus.id)
    assert sorted(lab.category for lab in labels.values()) == ["cooking", "cooking", "sport"]
    assert all(lab.source == "decision" and lab.by == db.IMPORT_ANNOTATOR for lab in labels.values())


def test_import_into_existing_corpus_skips_texts_already_there(store: db.Store) -> None:
    first = cw.import_records(store, cw.prepare_import(_csv_preview()).records, new_name="News")
    again = cw.prepare_import(_csv_preview(), existing_hashes=cw.corpus_text_hashes(store, first.corpus_id))
    assert again.records == []
    assert sum("already in the collection" in i.message for i in again.warnings) == 4
    with pytest.raises(ValueError, match="nothing to import"):
        cw.import_records(store, again.records, corpus_id=first.corpus_id)


def _json_upload(n: int, duplicate_of: int | None = None) -> cw.ImportPreview:
    """A JSON table of ``n`` distinct articles, plus one exact copy of article ``duplicate_of`` when given."""
    rows = [{"title": f"T{i}", "text": f"Article number {i} on its own subject."} for i in range(n)]
    if duplicate_of is not None:
        rows.append({"title": "Copy", "text": rows[duplicate_of]["text"]})
    return cw.read_upload("table", [("articles.json", json.dumps(rows).encode())],
                          mapping=ColumnMapping(text="text", title="title"))


def test_prepare_import_counts_duplicates_as_skipped() -> None:
    """The QA case: 13 rows with one exact duplicate are 12 ready + 1 skipped, and the summary says it was a
    duplicate (it said "12 documents ready, 0 skipped of 13 read" while the issues said "skipped")."""
    prepared = cw.prepare_import(_json_upload(12, duplicate_of=3))
    assert (len(prepared.records), prepared.n_skipped, prepared.n_rows_read, prepared.n_duplicates) == (12, 1, 13, 1)
    assert prepared.summary() == "12 documents ready, 1 skipped (1 duplicate) of 13 read, 0 errors, 1 warning"
    # with an empty row too: errors and duplicates are both skipped, the counts still add up
    read = _csv_preview()  # 5 rows: one empty (an error), one a copy of the first
    prepared = cw.prepare_import(read)
    assert (len(prepared.records), prepared.n_skipped, prepared.n_rows_read, prepared.n_duplicates) == (3, 2, 5, 1)
    assert prepared.summary() == "3 documents ready, 2 skipped (1 duplicate) of 5 read, 1 error, 2 warnings"
    # nothing de-duplicated when asked not to
    kept = cw.prepare_import(_json_upload(12, duplicate_of=3), deduplicate=False)
    assert (len(kept.records), kept.n_skipped, kept.n_duplicates) == (13, 0, 0)


def test_prepare_import_counts_texts_already_in_the_corpus(store: db.Store) -> None:
    """Importing a corpus' own 11 documents into it again: all 11 skipped as duplicates (was "0 skipped")."""
    first = cw.import_records(store, cw.prepare_import(_json_upload(11)).records, new_name="Articles")
    again = cw.prepare_import(_json_upload(11), existing_hashes=cw.corpus_text_hashes(store, first.corpus_id))
    assert (len(again.records), again.n_skipped, again.n_duplicates) == (0, 11, 11)
    assert again.summary() == "0 documents ready, 11 skipped (11 duplicates) of 11 read, 0 errors, 11 warnings"


def test_prepare_import_counts_rows_not_parts_when_chunking() -> None:
    """With chunking, a row is skipped only when none of its parts is left; duplicate parts are counted apart."""
    para = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(4))
    rows = [{"title": "Long", "text": para}, {"title": "Short", "text": "A short note."},
            {"title": "Long again", "text": para + "\n\nA closing paragraph " + "word " * 40},
            {"title": "Short again", "text": "A short note."}]
    read = cw.read_upload("table", [("long.json", json.dumps(rows).encode())],
                          mapping=ColumnMapping(text="text", title="title"))
    prepared = cw.prepare_import(read, chunking=cw.ChunkOptions(method="paragraphs", min_chars=100, max_chars=300))
    long_parts = [r for r in prepared.records if r.parent_title == "Long"]
    again_parts = [r for r in prepared.records if r.parent_title == "Long again"]
    assert len(long_parts) == 4 and len(again_parts) == 1  # its first 4 parts repeat Long's
    assert (prepared.n_rows_read, prepared.n_skipped, prepared.n_duplicates) == (4, 1, 5)  # "Short again" skipped
    assert prepared.summary() == ("6 documents ready from 3 of 4 read, 1 skipped, 5 duplicate parts left out, "
                                  "0 errors, 5 warnings")


@pytest.mark.every_backend
def test_import_failure_leaves_nothing_behind(store: db.Store) -> None:
    records = _csv_preview().records  # contains a duplicate text (not de-duplicated)
    with pytest.raises(db.DuplicateError):
        cw.import_records(store, records, new_name="Broken", deduplicate=False)
    assert db.list_corpora(store) == []  # the corpus created for the import was removed


def test_import_needs_exactly_one_target(store: db.Store) -> None:
    records = cw.prepare_import(_csv_preview()).records
    with pytest.raises(ValueError, match="either"):
        cw.import_records(store, records)
    c = db.create_corpus(store, "X")
    with pytest.raises(ValueError, match="either"):
        cw.import_records(store, records, corpus_id=c.id, new_name="Y")


@pytest.mark.every_backend
def test_name_clash_is_reported_and_nothing_written(store: db.Store) -> None:
    db.create_corpus(store, "News")
    with pytest.raises(db.DuplicateError):
        cw.import_records(store, cw.prepare_import(_csv_preview()).records, new_name="News")
    assert db.get_corpus_by_name(store, "News").n_documents == 0


def test_zip_labels_by_folder_and_chunking(store: db.Store) -> None:
    buf = io.BytesIO()
    long_text = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(6))
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("physics/atoms.txt", "Atoms are made of protons, neutrons and electrons.")
        zf.writestr("history/rome.md", "# Rome\n\n" + long_text)
        zf.writestr("history/bad.bin", b"\x00\x01")
    preview = cw.read_upload("zip", [("notes.zip", buf.getvalue())])
    prepared = cw.prepare_import(preview, chunking=cw.ChunkOptions(method="paragraphs", min_chars=800, max_chars=1500))
    labels = {r.label for r in prepared.records}
    assert labels == {"physics", "history"}
    parts = [r for r in prepared.records if r.parent_title == "Rome"]
    assert len(parts) >= 2 and all(len(r.text) <= 1500 for r in parts)
    assert parts[0].title.startswith("Rome (part 1/")
    res = cw.import_records(store, prepared.records, new_name="Notes")
    docs = db.list_documents(store, res.corpus_id, limit=None).items
    assert [d.chunk_index for d in docs if d.title.startswith("Rome")] == list(range(len(parts)))
    rome = [d for d in docs if d.chunk_of == "Rome"]
    assert [(d.chunk_index, d.chunk_count) for d in rome] == [(i, len(parts)) for i in range(len(parts))]
    assert rome[0].chunk_label == f"chunk 1 of {len(parts)} of 'Rome'"
    assert [d.id for d in db.source_chunks(store, rome[-1].id)] == [d.id for d in rome]
    atoms = next(d for d in docs if d.title == "atoms")
    assert (atoms.chunk_of, atoms.chunk_index, atoms.chunk_count) == (None, None, None)


def _write_topic_layout(root: Path) -> Path:
    (root / "contract").mkdir(parents=True)
    (root / "tort").mkdir()
    (root / "contract" / "contract_breach.json").write_text(json.dumps(["Breach one.", "Breach two."]))
    (root / "tort" / "tort_duty.json").write_text(json.dumps([{"title": "Duty", "text": "Duty of care."}]))
    (root / "tort" / "tort_bad.json").write_text("[1")
    return root


def test_topic_layout_folder_and_zip_import(store: db.Store, tmp_path: Path) -> None:
    root = _write_topic_layout(tmp_path / "legal")
    folder = cw.prepare_import(cw.read_topic_folder(f"  {root}  "))
    assert [(r.title, r.label) for r in folder.records] == [
        ("breach #1", "contract"), ("breach #2", "contract"), ("Duty", "tort")]
    assert [(i.severity, i.where) for i in folder.issues] == [("error", "tort/tort_bad.json")]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(root.rglob("*.json")):
            zf.write(p, p.relative_to(root).as_posix())
    zipped = cw.prepare_import(cw.read_upload("topics", [("legal.zip", buf.getvalue())]))
    assert [(r.title, r.label, r.text) for r in zipped.records] == [(r.title, r.label, r.text) for r in folder.records]
    assert zipped.records[0].source == "legal.zip topic breach"
    res = cw.import_records(store, zipped.records, new_name="Legal")
    assert (res.added, res.n_categories) == (3, 2)
    assert cw.read_topic_folder(" ").errors[0].message == "no folder was given"
    assert "not found" in cw.read_topic_folder(tmp_path / "nope").errors[0].message


def test_source_signature_changes_with_the_folder(tmp_path: Path) -> None:
    root = _write_topic_layout(tmp_path / "legal")
    first = cw.source_signature(root)
    assert first and cw.source_signature(str(root)) == first
    (root / "tort" / "tort_new.json").write_text(json.dumps(["New."]))
    assert cw.source_signature(root) != first
    assert cw.source_signature(tmp_path / "missing") == ""
    f = root / "tort" / "tort_new.json"
    assert cw.source_signature(f) == f"{f.stat().st_size}:{f.stat().st_mtime_ns}"


def test_chars_chunking_validation() -> None:
    with pytest.raises(ValueError, match="overlap"):
        cw.prepare_import(_csv_preview(), chunking=cw.ChunkOptions(method="chars", size=100, overlap=100))


def test_wikipedia_bz2(store: db.Store) -> None:
    articles = [
        {"title": f"A{i}", "text": f"Article {i} text about topic {i}.", "label": f"L{i % 2}"} for i in range(4)
    ]
    articles.append({"title": "bad", "text": 5.5, "label": "L0"})
    data = bz2.compress(json.dumps(articles).encode())
    preview = cw.prepare_import(cw.read_upload("wikipedia", [("wikipedia_articles_v1.json.bz2", data)]))
    assert len(preview.records) == 5  # a number is converted to text with a warning
    assert any(i.location == "row 5" for i in preview.warnings)
    res = cw.import_records(store, preview.records, new_name="Wiki")
    assert res.added == 5


def test_bad_upload_is_one_error_not_an_exception() -> None:
    preview = cw.read_upload("table", [("x.json", b"{not json")], mapping=ColumnMapping(text="text"))
    assert preview.records == [] and preview.has_errors
    assert "invalid JSON" in preview.errors[0].message


# --------------------------------------------------------------------------- export


def test_export_prefers_human_labels_and_marks_suggestions(store: db.Store) -> None:
    c = db.create_corpus(store, "E")
    db.add_categories(store, c.id, ["a", "b"])
    res = db.add_documents(store, c.id, [
        {"title": "human", "text": "one", "label": "a"},
        {"title": "machine", "text": "two"},
        {"title": "none", "text": "three"},
    ])  # fmt: skip
    h, m, _ = res.document_ids
    db.add_suggestions(store, [
        {"document_id": h, "agent": "zs", "category": "b"},
        {"document_id": m, "agent": "zs", "category": "b", "score": 0.9},
    ])  # fmt: skip
    rows = cw.export_rows(store, c.id)
    assert [(r["title"], r["label"], r["label_source"]) for r in rows] == [
        ("human", "a", "human"), ("machine", "b", "suggestion"), ("none", None, None)]
    strict = cw.export_rows(store, c.id, include_suggestions=False)
    assert strict[1]["label"] is None
    lines = [json.loads(x) for x in cw.export_documents(store, c.id, "jsonl").decode().splitlines()]
    assert lines[1] == {"title": "machine", "text": "two", "label": "b", "label_source": "suggestion"}
    with pytest.raises(cw.ExportError, match="no label"):
        cw.export_documents(store, c.id, "benchmark")
    bench = json.loads(cw.export_documents(store, c.id, "benchmark", unlabeled="skip"))
    assert [a["title"] for a in bench] == ["human", "machine"]
    assert cw.export_documents(store, c.id, "parquet")[:4] == b"PAR1"
    assert cw.export_documents(store, c.id, "csv").decode().startswith("title,text,label,label_source")


# --------------------------------------------------------------------------- pre-annotation


def _keyword_embed(calls: list[int] | None = None):
    """Tiny deterministic embedding: [sport-ness, cooking-ness, bias]; 'ZERO' texts give 0s."""

    def embed(texts: list[str]) -> np.ndarray:
        if calls is not None:
            calls.append(len(texts))
        rows = []
        for t in texts:
            low = t.lower()
            if "zero" in low:
                rows.append([0.0, 0.0, 0.0])
                continue
            rows.append([
                sum(low.count(w) for w in ("sport", "goal", "match", "team")),
                sum(low.count(w) for w in ("cooking", "pasta", "sauce", "oven")),
                0.1,
            ])
        return np.asarray(rows, dtype=float)

    return embed


@pytest.fixture
def small_corpus(store: db.Store) -> db.CorpusInfo:
    c = db.create_corpus(store, "Small")
    db.add_categories(store, c.id, [{"name": "sport", "description": "team match goal"},
                                    {"name": "cooking", "description": "pasta sauce oven"}])
    texts = ["goal in the match", "pasta with sauce", "the team won the match", "bake in the oven",
             "ZERO signal here", "another goal for the team", "cooking pasta"]
    db.add_documents(store, c.id, [{"title": f"d{i}", "text": t} for i, t in enumerate(texts)])
    return c


def test_preannotate_zero_shot_stores_ok_and_failed(store: db.Store, small_corpus: db.CorpusInfo) -> None:
    annotator = ann.ZeroShotAnnotator(_keyword_embed(), "kw")
    seen: list[tuple[int, int]] = []
    summary = ann.preannotate(
        store, small_corpus.id, annotator, batch_size=3, progress=lambda d, t: seen.append((d, t))
    )
    assert (summary.todo, summary.ok, summary.failed, summary.cancelled) == (7, 6, 1, False)
    assert seen == [(0, 7), (3, 7), (6, 7), (7, 7)]
    ids = db.document_ids(store, small_corpus.id)
    labels = db.effective_labels(store, small_corpus.id)
    assert labels[ids[0]].category == "sport" and labels[ids[1]].category == "cooking"
    assert labels[ids[0]].source == "suggestion"
    assert ids[4] not in labels  # the failed one never becomes a label
    failed = db.list_suggestions(store, ids[4])
    assert [(s.status, s.category) for s in failed] == [("failed", None)] and "zeros" in failed[0].error
    # resume: only the failed document is retried
    again = ann.preannotate(store, small_corpus.id, annotator, batch_size=3)
    assert (again.todo, again.already_done, again.failed) == (1, 6, 1)


@pytest.mark.every_backend
def test_preannotate_cancel_keeps_finished_batches_and_resumes(store: db.Store, small_corpus: db.CorpusInfo) -> None:
    cancel = threading.Event()
    calls: list[int] = []
    annotator = ann.ZeroShotAnnotator(_keyword_embed(calls), "kw")

    def progress(done: int, total: int) -> None:
        if done >= 2:
            cancel.set()

    first = ann.preannotate(store, small_corpus.id, annotator, batch_size=2, progress=progress, cancel=cancel)
    assert first.cancelled and first.stored == 2 and first.remaining == 5
    ids = db.document_ids(store, small_corpus.id)
    assert db.documents_without_suggestion(store, small_corpus.id, annotator.agent, annotator.model_version) == ids[2:]
    calls.clear()
    second = ann.preannotate(store, small_corpus.id, annotator, batch_size=2)
    assert second.todo == 5 and not second.cancelled and second.already_done == 2
    # documents of the first run were not embedded again (only categories + the 5 remaining)
    assert sum(calls) - 2 * 3 == 5


def test_preannotate_without_categories_is_a_clear_error(store: db.Store) -> None:
    c = db.create_corpus(store, "NoCats")
    db.add_documents(store, c.id, [{"text": "x"}])
    with pytest.raises(ValueError, match="no categories"):
        ann.preannotate(store, c.id, ann.ZeroShotAnnotator(_keyword_embed(), "kw"))


def test_preannotate_llm_path_with_fake_server(store: db.Store, small_corpus: db.CorpusInfo) -> None:
    def answer(user: str) -> Reply | str:
        doc = user.split("Document title:")[1].split("Reply with JSON")[0]
        if "ZERO" in doc:
            return "I am not sure."  # unparseable -> failed suggestion
        label = "cooking" if any(w in doc for w in ("pasta", "oven")) else "sport"
        return json.dumps({"label": label, "confidence": 0.8, "reason": "keywords"})

    with FakeOpenAIServer(by_document(answer)) as server:
        client = LLMClient(server.llm_config(), sleep=lambda s: None)
        annotator = ann.LLMAnnotator(client, cache=StoreLLMCache(store))
        seen: list[tuple[int, int]] = []
        summary = ann.preannotate(store, small_corpus.id, annotator, batch_size=4,
                                  progress=lambda d, t: seen.append((d, t)))
        assert (summary.ok, summary.failed) == (6, 1)
        # every answer moves the bar, not only each stored batch of 4
        assert seen == [(0, 7), (1, 7), (2, 7), (3, 7), (4, 7), (4, 7), (5, 7), (6, 7), (7, 7), (7, 7)]
        n_requests = len(server.requests)
        again = ann.preannotate(store, small_corpus.id, annotator, batch_size=4)
        # only the failed doc is asked again: its first prompt and two re-asks with another prompt and temperature
        assert again.todo == 1 and len(server.requests) == n_requests + 3
    ids = db.document_ids(store, small_corpus.id)
    assert db.list_suggestions(store, ids[1])[-1].category == "cooking"
    assert db.list_suggestions(store, ids[1])[-1].score == pytest.approx(0.8)
    assert db.llm_cache_stats(store).n_entries >= 6


def test_preannotate_only_documents_without_a_label_decision(store: db.Store, small_corpus: db.CorpusInfo) -> None:
    ids = db.document_ids(store, small_corpus.id)
    cats = {c.name: c.id for c in db.list_categories(store, small_corpus.id)}
    for doc in ids[:3]:  # three documents already carry a human label
        db.decide_label(store, doc, cats["sport"], "ann", expected_version=db.get_document(store, doc).version)
    assert db.undecided_documents(store, small_corpus.id) == 4

    def answer(user: str) -> str:
        return json.dumps({"label": "cooking", "confidence": 0.9, "reason": "r"})

    with FakeOpenAIServer(by_content(answer)) as server:
        annotator = ann.LLMAnnotator(LLMClient(server.llm_config(), sleep=lambda s: None), cache=StoreLLMCache(store))
        summary = ann.preannotate(store, small_corpus.id, annotator, batch_size=2, undecided_only=True)
        assert (summary.todo, summary.ok) == (4, 4) and len(server.requests) == 4  # no tokens for labelled ones
        assert [d for d in ids if db.list_suggestions(store, d)] == ids[3:]
        assert ann.preannotate(store, small_corpus.id, annotator, undecided_only=True).todo == 0
        # All documents (e.g. to measure the annotator against the human labels): the three labelled ones now.
        assert ann.preannotate(store, small_corpus.id, annotator).todo == 3 and len(server.requests) == 7
    assert db.effective_labels(store, small_corpus.id)[ids[0]].category == "sport"  # decisions win


def test_preannotate_real_minilm_on_demo_subset(store: db.Store) -> None:
    from mrag_core.extraction import embed_texts
    from mrag_core.models.loader import load_model
    from services.demo import load_demo

    demo = load_demo()
    c = db.create_corpus(store, "Demo subset")
    db.add_categories(store, c.id, demo.categories)
    subset, seen = [], set()
    for d in demo.documents:  # two documents per category
        if sum(x["label"] == d["label"] for x in subset) < 2:
            subset.append(d)
        seen.add(d["label"])
    db.add_documents(store, c.id, [{"title": d["title"], "text": d["text"], "label": d["label"]} for d in subset])
    lm = load_model("minilm")
    annotator = ann.ZeroShotAnnotator(lambda texts: embed_texts(lm, texts).standard, "minilm")
    summary = ann.preannotate(store, c.id, annotator, batch_size=8)
    assert summary.ok == len(subset) == 2 * len(seen) and summary.failed == 0
    agreement = db.agreement(store, c.id, agent=annotator.agent)
    assert agreement.n == len(subset)
    assert agreement.accuracy is not None and agreement.accuracy >= 0.5  # far above chance (1/12)
    names, matrix = ann.confusion_table(agreement)
    assert sum(map(sum, matrix)) == len(subset)
    assert sum(matrix[i][i] for i in range(len(names))) == agreement.n_agree


# --------------------------------------------------------------------------- review / bulk / similar


def test_review_helpers_and_conflicts(store: db.Store, small_corpus: db.CorpusInfo) -> None:
    ann.preannotate(store, small_corpus.id, ann.ZeroShotAnnotator(_keyword_embed(), "kw"))
    ids = db.document_ids(store, small_corpus.id)
    item = ann.review_item(store, ids[0])
    assert item.suggestion is not None and item.suggestion.category == "sport"
    assert {"sport", "team", "match", "goal"} <= {k.lower() for k in item.keywords}
    assert ann.next_in_queue(ids, ids[0]) == ids[1]
    assert ann.next_in_queue(ids, ids[-1]) == ids[0]
    assert ann.next_in_queue([ids[0]], ids[0]) is None
    assert ann.next_in_queue([], None) is None

    rows = ann.bulk_rows(store, ids[:3])
    assert [r.suggestion for r in rows] == ["sport", "cooking", "sport"]
    # someone decides document 2 meanwhile: its acceptance is refused, the others stored
    sport = next(c.id for c in db.list_categories(store, small_corpus.id) if c.name == "sport")
    db.decide_label(store, ids[1], sport, "alice", rows[1].version)
    result = ann.accept_rows(store, rows, "bob")
    assert set(result.new_versions) == {ids[0], ids[2]}
    assert [c.document_id for c in result.conflicts] == [ids[1]]
    assert db.effective_label(store, ids[0]).by == "bob"

    cooking = next(c.id for c in db.list_categories(store, small_corpus.id) if c.name == "cooking")
    res = ann.apply_label(store, [ids[3], ids[6]], cooking, "carol", versions={ids[3]: 99})
    assert list(res.new_versions) == [ids[6]] and res.conflicts[0].document_id == ids[3]


def test_nearest_documents_per_space() -> None:
    standard = np.array([[1, 0], [0.9, 0.1], [0, 1], [-1, 0]], dtype=np.float32)
    heads = np.stack([standard, standard[:, ::-1]], axis=1)  # head 1 swaps the axes
    ids = [10, 11, 12, 13]
    near = ann.nearest_documents(ann.space_vectors(standard, heads, "standard"), ids, 10, k=2)
    assert [n.document_id for n in near] == [11, 12]
    assert near[0].score == pytest.approx(0.9 / np.hypot(0.9, 0.1), rel=1e-5)
    head1 = ann.nearest_documents(ann.space_vectors(standard, heads, 1), ids, 12, k=1)
    assert [n.document_id for n in head1] == [11]  # head 1: doc 12 = [1, 0], doc 11 = [0.1, 0.9]
    with pytest.raises(ValueError, match="head 5"):
        ann.space_vectors(standard, heads, 5)
    with pytest.raises(ValueError, match="not in the embedded corpus"):
        ann.nearest_documents(standard, ids, 99)


HOLD_LEASE = """
import sys, time
import db
from services.heartbeat import Heartbeat
from services.workflows.annotation import preannotation_lease
store = db.open_store(sys.argv[1])
name, owner = preannotation_lease(int(sys.argv[2])), db.new_owner()
db.take_lease(store, name, owner, "Pre-annotation of corpus", int(sys.argv[2]))
print(owner, flush=True)
with Heartbeat(lambda: db.beat_lease(store, name, owner), every=0.2):
    time.sleep(300)
"""


@pytest.mark.every_backend
def test_preannotate_refuses_while_another_process_holds_the_corpus_lease(store: db.Store,
                                                                         small_corpus: db.CorpusInfo) -> None:
    """A second real process (``mrag-studio annotate`` beside the app) pre-annotating the corpus holds its
    lease: a pre-annotation here is refused and writes nothing; once that process is killed and silent for
    db.LIVE_WINDOW_S, the lease is taken over and the run completes, then given back."""
    import os
    import signal
    import subprocess
    import sys
    from datetime import timedelta
    from pathlib import Path

    from sqlalchemy import update

    from db.models import AppMarker, utcnow

    lease = ann.preannotation_lease(small_corpus.id)
    annotator = ann.ZeroShotAnnotator(_keyword_embed(), "kw")
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LEASE, store.engine.url.render_as_string(hide_password=False),
                             str(small_corpus.id)], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                            stdout=subprocess.PIPE, text=True)
    try:
        owner = proc.stdout.readline().strip()
        assert f"pid {proc.pid} #" in owner and db.lease_holder(store, lease) == owner
        with pytest.raises(db.RunInProgressError,
                           match=rf"Pre-annotation of corpus 'Small' \(#{small_corpus.id}\) is already running in "
                                 rf"another process \(\S+ pid {proc.pid}; started \d{{4}}-\d\d-\d\d "):
            ann.preannotate(store, small_corpus.id, annotator, batch_size=3)
        assert all(db.list_suggestions(store, d) == [] for d in db.document_ids(store, small_corpus.id))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    with store.session() as session:  # ... silent for longer than the window
        session.execute(update(AppMarker).where(AppMarker.name == lease)
                        .values(updated_at=utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)))
    assert db.lease_holder(store, lease) is None
    summary = ann.preannotate(store, small_corpus.id, annotator, batch_size=3)
    assert (summary.todo, summary.ok, summary.failed) == (7, 6, 1)
    assert db.get_marker(store, lease) is None  # given back when the run ended


@pytest.mark.every_backend
def test_leases_by_hand(store: db.Store) -> None:
    db.take_lease(store, "work:1", "a pid 1 #x", "Work", 1)
    assert db.lease_holder(store, "work:1") == "a pid 1 #x"
    db.take_lease(store, "work:1", "a pid 1 #x", "Work", 1)  # its own again: fine
    with pytest.raises(db.RunInProgressError, match=r"Work #1 is already running in another process \(a pid 1;"):
        db.take_lease(store, "work:1", "b pid 2 #y", "Work", 1)
    assert db.beat_lease(store, "work:1", "a pid 1 #x") and not db.beat_lease(store, "work:1", "b pid 2 #y")
    db.release_lease(store, "work:1", "b pid 2 #y")  # not b's to give back
    assert db.lease_holder(store, "work:1") == "a pid 1 #x"
    db.release_lease(store, "work:1", "a pid 1 #x")
    assert db.lease_holder(store, "work:1") is None and not db.beat_lease(store, "work:1", "a pid 1 #x")
    db.take_lease(store, "work:1", "b pid 2 #y", "Work", 1)
    assert db.lease_holder(store, "work:1") == "b pid 2 #y"
