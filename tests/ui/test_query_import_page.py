"""AppTest runs of the Query Builder's Import tab: JSONL and CSV query files with ground truth by
title (and by legal / accident topic), one bad row each, the row-by-row report and the stored set."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUERY_PAGE = str(ROOT / "pages" / "8_Query_Builder.py")

DOCS = [
    ("Mercury", "space", "Mercury is the smallest planet and the closest to the Sun."),
    ("Venus", "space", "Venus is the hottest planet because of its thick atmosphere."),
    ("Jazz", "music", "Jazz began in New Orleans and spread around the world."),
    ("Bread", "food", "Bread is made of flour, water and yeast and baked in an oven."),
]


pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


@pytest.fixture
def store(tmp_path: Path):
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()


def _corpus(store: db.Store) -> tuple[int, dict[str, int]]:
    c = db.create_corpus(store, "Planets and more")
    db.add_documents(store, c.id, [{"title": t, "label": lab, "text": x} for t, lab, x in DOCS])
    return c.id, {d.title: d.id for d in db.list_documents(store, c.id, limit=None).items}


def _page(corpus_id: int) -> AppTest:
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _import(at: AppTest, file_name: str, data: bytes, set_name: str) -> AppTest:
    at.file_uploader(key="qb_imp_file").set_value((file_name, data, "application/octet-stream")).run()
    at.text_input(key="qb_imp_name").set_value(set_name)
    at.button(key="qb_imp_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _report(at: AppTest) -> list[tuple[str, str, str]]:
    frame = next(df.value for df in at.dataframe if "severity" in df.value.columns)
    return list(zip(frame["location"], frame["severity"], frame["message"]))


def test_import_jsonl_with_a_bad_line_and_an_unknown_title(store: db.Store) -> None:
    corpus_id, ids = _corpus(store)
    lines = [
        json.dumps({"topics": ["Mercury", "Jazz"], "text": "Mercury hums Jazz.", "fusion": ["1. Mercury", "Jazz"]}),
        "{this is not json",
        json.dumps({"topics": ["bread"], "text": "How is bread made?"}),  # case-insensitive title match
        json.dumps({"topics": ["Venus", "Atlantis"], "text": "Venus and Atlantis."}),
        json.dumps({"text": "no topics here"}),
    ]
    at = _page(corpus_id)
    assert at.button(key="qb_imp_go").disabled  # nothing uploaded yet
    _import(at, "queries.jsonl", "\n".join(lines).encode(), "From JSONL")
    assert [s.value for s in at.success] == [
        "Imported 3 queries into 'From JSONL' (1 flagged, 2 rows skipped)."]
    assert _report(at) == [
        ("line 2", "error", "skipped: not valid JSON: Expecting property name enclosed in double quotes"),
        ("line 5", "error", "skipped: has no 'topics' (or 'related')"),
        ("line 4", "warning", "imported as flagged: topic 'Atlantis' matches no document"),
    ]
    (qs,) = db.list_query_sets(store, corpus_id)
    assert (qs.name, qs.source, qs.n_queries) == ("From JSONL", "imported", 3)
    queries = db.list_queries(store, qs.id)
    assert [(q.text, q.ground_truth, q.n_aspects, q.status) for q in queries] == [
        ("Mercury hums Jazz.", [ids["Mercury"], ids["Jazz"]], 2, "ok"),
        ("How is bread made?", [ids["Bread"]], 1, "ok"),
        ("Venus and Atlantis.", [ids["Venus"]], 2, "flagged"),
    ]
    assert queries[0].fusion == ["Mercury", "Jazz"] and queries[0].generator == "imported"
    assert queries[2].error == "unresolved topics: Atlantis"
    # the review tab now shows the imported set with titles and categories
    review = next(df.value for df in at.dataframe if "ground truth" in df.value.columns)
    assert list(review["ground truth"]) == ["Mercury | Jazz", "Bread", "Venus"]
    assert list(review["categories"]) == ["space | music", "food", "space"]


def test_import_csv_with_a_bad_row(store: db.Store) -> None:
    corpus_id, ids = _corpus(store)
    csv_text = (
        "text,topics,fusion\n"
        "\"Venus, then Bread.\",Venus|Bread,venus heat|bread baking\n"
        "A row without ground truth,,\n"
        "Jazz alone,Jazz,\n"
    )
    at = _page(corpus_id)
    _import(at, "mine.csv", csv_text.encode(), "From CSV")
    assert [s.value for s in at.success] == ["Imported 2 queries into 'From CSV' (0 flagged, 1 row skipped)."]
    assert _report(at) == [("row 2", "error", "skipped: has an empty 'topics' list")]
    (qs,) = db.list_query_sets(store, corpus_id)
    queries = db.list_queries(store, qs.id)
    assert [(q.text, q.ground_truth, q.fusion, q.status) for q in queries] == [
        ("Venus, then Bread.", [ids["Venus"], ids["Bread"]], ["venus heat", "bread baking"], "ok"),
        ("Jazz alone", [ids["Jazz"]], [], "ok"),
    ]


def test_import_errors_write_nothing(store: db.Store) -> None:
    corpus_id, _ = _corpus(store)
    at = _page(corpus_id)
    _import(at, "q.csv", b"question,answer\nwhat,42\n", "Bad columns")
    assert at.error and at.error[0].value.startswith(
        r"Nothing was imported: q\.csv\: a query table needs a text column"
    )
    _import(at, "q.jsonl", b'{"text": "x"}\n', "Only bad rows")
    assert r"no query can be imported; line 1\: has no 'topics'" in at.error[0].value
    _import(at, "q.json", json.dumps([{"topics": ["Jazz"], "text": "Jazz"}]).encode(), "")
    assert "name must not be empty" in at.error[0].value
    assert db.list_query_sets(store, corpus_id) == []


def test_import_legal_queries_resolve_topics_to_their_documents(store: db.Store) -> None:
    c = db.create_corpus(store, "Legal")
    db.add_documents(store, c.id, [
        {"title": "breach #1", "text": "A breach of contract.", "label": "contract",
         "source": "legal.zip topic breach"},
        {"title": "breach #2", "text": "Damages for breach.", "label": "contract", "source": "legal.zip topic breach"},
        {"title": "Duty", "text": "A duty of care.", "label": "tort", "source": "legal.zip topic negligence"},
    ])  # fmt: skip
    ids = {d.title: d.id for d in db.list_documents(store, c.id, limit=None).items}
    queries = {"2": [{"text": "Breach and negligence", "related": ["contract_breach", "tort/negligence"]}],
               "1": [{"text": "Only fraud", "related": ["fraud"]}]}
    at = _page(c.id)
    _import(at, "legal_queries.json", json.dumps(queries).encode(), "Legal queries")
    assert [s.value for s in at.success] == ["Imported 2 queries into 'Legal queries' (1 flagged, 0 rows skipped)."]
    assert _report(at) == [("[1] item 1", "warning", "imported as flagged: topic 'fraud' matches no document")]
    (qs,) = db.list_query_sets(store, c.id)
    got = [(q.text, sorted(q.ground_truth), q.n_aspects, q.status) for q in db.list_queries(store, qs.id)]
    assert got == [("Only fraud", [], 1, "flagged"),
                   ("Breach and negligence", sorted([ids["breach #1"], ids["breach #2"], ids["Duty"]]), 2, "ok")]


def test_export_then_import_keeps_documents_of_one_title_apart_and_flags(store: db.Store) -> None:
    """Two documents titled "Doc 1": a set exported and imported back names the same documents, its flagged
    query flagged with its reason; a titles-only file is not guessed: its query is flagged and the page says so."""
    from services.workflows import querysets as qw

    c = db.create_corpus(store, "Twins")
    first, other, second = db.add_documents(store, c.id, [
        {"title": "Doc 1", "text": "The first one.", "label": "notes"},
        {"title": "Other", "text": "Something else.", "label": "misc"},
        {"title": "Doc 1", "text": "The second one.", "label": "notes"},
    ]).document_ids
    orig = db.create_query_set(store, c.id, "hand rt2")
    db.add_queries(store, orig.id, [
        {"text": "What does Doc 1 say?", "ground_truth": [second]},
        {"text": "Doc 1 with more", "ground_truth": [first, other], "status": "flagged",
         "error": "missing titles: Other"},
    ])
    at = _page(c.id)
    _import(at, "hand rt2.json", qw.export_benchmark_json(store, orig.id).encode(), "back")
    assert [s.value for s in at.success] == ["Imported 2 queries into 'back' (1 flagged, 0 rows skipped)."]
    assert not at.warning, [w.value for w in at.warning]
    back = next(s for s in db.list_query_sets(store, c.id) if s.name == "back")
    assert [(q.ground_truth, q.status, q.error) for q in db.list_queries(store, back.id)] == [
        ([second], "ok", ""), ([first, other], "flagged", "missing titles: Other")]

    titles_only = json.dumps([{"topics": ["Doc 1"], "text": "What does Doc 1 say?"}]).encode()
    _import(at, "old.json", titles_only, "old")
    assert [w.value for w in at.warning] == [
        "1 topic names several documents of one title that nothing in the file tells apart:"]
    assert _report(at) == [("item 1", "warning", "imported as flagged: 2 documents are titled 'Doc 1' and nothing "
                                                 "in the file tells which one is meant; none was taken")]
    old = next(s for s in db.list_query_sets(store, c.id) if s.name == "old")
    (q,) = db.list_queries(store, old.id)
    assert (q.ground_truth, q.status) == ([], "flagged") and q.error.startswith("ambiguous topics: 2 documents")


def test_import_a_windows_1252_csv_says_its_encoding_was_guessed(store: db.Store) -> None:
    """A spreadsheet's CSV in Windows-1252 imports with its accented text whole, and the page says how it was read
    (it said 'Nothing was imported: ... not UTF-8 text')."""
    corpus_id, ids = _corpus(store)
    at = _import(_page(corpus_id), "queries.csv", "text,topics\nJazz and Bread à la française.,Jazz|Bread\n"
                 .encode("cp1252"), "Excel")
    assert [s.value for s in at.success] == ["Imported 1 query into 'Excel' (0 flagged, 0 rows skipped)."]
    assert [w.value for w in at.warning] == ["The file is not UTF-8: its encoding was guessed; check the accented "
                                             "characters:"]
    assert _report(at) == [("queries.csv", "warning", "not valid UTF-8 (first bad byte at offset 27); read as "
                            "Windows-1252 (cp1252). Check accented characters, or save the file as UTF-8")]
    (qs,) = db.list_query_sets(store, corpus_id)
    (query,) = db.list_queries(store, qs.id)
    assert (query.text, query.ground_truth) == ("Jazz and Bread à la française.", [ids["Jazz"], ids["Bread"]])
