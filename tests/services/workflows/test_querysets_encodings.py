"""A query file saved by a spreadsheet in another encoding than UTF-8 (Excel's 'Unicode text' is UTF-16 with a
byte-order mark, its CSV often Windows-1252) is read as the document import reads it, its accented titles found,
and the report says how it was read; a binary file is one clear refusal and writes nothing. (Query files were
refused with 'not UTF-8 text' while the same spreadsheet's documents imported.)"""

from __future__ import annotations

import pytest

import db
from services.workflows import querysets as qw

CSV = "text,topics\nA café in Zürich.,Café Society|Zürich\n"


def _corpus(store: db.Store) -> tuple[int, dict[str, int]]:
    corpus = db.create_corpus(store, "Accents")
    db.add_documents(store, corpus.id, [
        {"title": "Café Society", "text": "Coffee houses where people met to talk.", "label": "culture"},
        {"title": "Zürich", "text": "A Swiss city on a lake.", "label": "places"},
    ])
    return corpus.id, {d.title: d.id for d in db.list_documents(store, corpus.id, limit=None).items}


@pytest.mark.parametrize(("data", "note"), [
    (CSV.encode("cp1252"), "not valid UTF-8 (first bad byte at offset 17); read as Windows-1252 (cp1252). Check "
                           "accented characters, or save the file as UTF-8"),
    (CSV.replace(",", "\t").encode("utf-16"), None),  # a byte-order mark says which: nothing was guessed
], ids=["cp1252-csv", "utf16-tsv"])
def test_a_query_file_in_another_encoding_is_read_and_says_how(store: db.Store, data: bytes, note: str | None) -> None:
    corpus_id, ids = _corpus(store)
    name = "queries.csv" if note else "queries.tsv"
    report = qw.import_benchmark_queries(store, corpus_id, data, name="Q", file_name=name)
    (query,) = db.list_queries(store, report.query_set_id)
    assert (query.text, query.ground_truth, query.status) == ("A café in Zürich.", [ids["Café Society"],
                                                                                   ids["Zürich"]], "ok")
    assert report.notes == ([note] if note else []) and report.file_name == name
    if note:
        assert qw.import_problems(report) == ("The file is not UTF-8: its encoding was guessed; check the accented "
                                              "characters")
        assert qw.import_issues(report).to_dict("records") == [
            {"location": "queries.csv", "severity": "warning", "message": note}]
    else:
        assert qw.import_problems(report) == "" and qw.import_issues(report).empty


def test_a_binary_query_file_is_refused_and_writes_nothing(store: db.Store) -> None:
    corpus_id, _ = _corpus(store)
    with pytest.raises(qw.QuerySetError, match=r"^queries\.csv: the file contains NUL bytes: it looks binary, not "
                                               r"text$"):
        qw.import_benchmark_queries(store, corpus_id, b"text,topics\n\x00\x01\x02\x00", name="Q",
                                    file_name="queries.csv")
    assert db.list_query_sets(store, corpus_id) == []
