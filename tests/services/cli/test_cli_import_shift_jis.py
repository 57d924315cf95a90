"""Files in Shift_JIS (a Japanese spreadsheet's CSV): ``mrag-studio import`` and ``queries`` read them as
Shift_JIS and say so. They were read as Latin-1 mojibake ('東京' stored as '\\x93\\x8c\\x8b\\x9e') with only a warning
that the file was not UTF-8; Windows-1252 files are still read as before."""

from __future__ import annotations

from pathlib import Path

import db
from services.cli.main import main

ROWS = [("東京", "東京は日本の首都で、大きな都市です。", "地理"),
        ("物理", "量子力学は小さな粒子の振る舞いを説明する理論です。", "科学")]


def _run(url: str, *argv: str) -> int:
    return main([*argv, "--database", url])


def test_a_shift_jis_table_is_imported_in_japanese(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    table = tmp_path / "sjis.csv"
    table.write_bytes(("title,text,label\n" + "".join(f"{t},{x},{lab}\n" for t, x, lab in ROWS)).encode("shift_jis"))
    assert _run(url, "import", "--corpus", "JP", str(table)) == 0
    out = capsys.readouterr().out.splitlines()
    # "title,text,label\n" is 17 bytes; the first byte of 東 (0x93) is not UTF-8
    assert out[:2] == ["read 2 rows: 2 documents to import in 2 categories; 0 errors (left out), 1 warning",
                       "  WARNING sjis.csv: not valid UTF-8 (first bad byte at offset 17); read as Shift_JIS (cp932), "
                       "detected from its bytes. Check the text, or save the file as UTF-8"]
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "JP")
        assert [(d.title, d.text, d.label) for d in db.list_documents(store, corpus.id, limit=None).items] == ROWS
    finally:
        store.close()


def test_a_shift_jis_query_table_is_read_in_japanese(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    store = db.open_store(url)
    corpus = db.create_corpus(store, "JP")
    db.add_documents(store, corpus.id, [{"title": t, "text": x, "label": lab} for t, x, lab in ROWS])
    store.close()
    queries = tmp_path / "q.csv"
    queries.write_bytes("text,topics\n東京で物理を学ぶ。,東京|物理\n".encode("shift_jis"))
    assert _run(url, "queries", "--corpus", "JP", "--name", "Q", str(queries)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["query set 'Q' (#1): 1 query imported, 0 flagged, 0 rows skipped",
                   "  q.csv: not valid UTF-8 (first bad byte at offset 12); read as Shift_JIS (cp932), detected from "
                   "its bytes. Check the text, or save the file as UTF-8"]
    store = db.open_store(url)
    try:
        (query,) = db.list_queries(store, db.list_query_sets(store, corpus.id)[0].id)
        assert query.text == "東京で物理を学ぶ。" and len(query.ground_truth) == 2
    finally:
        store.close()
