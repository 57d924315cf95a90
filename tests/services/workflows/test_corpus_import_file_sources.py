"""Several files imported at once: each issue names its file (a table's row or line after it; a ZIP member after its
archive), in the preview of :func:`cw.read_upload` / :func:`cw.prepare_import` and in the problems
``mrag-studio import`` lists. A row issue said only ``row 2``, whichever table it was in."""

from __future__ import annotations

from pathlib import Path

import db
from services.cli.main import main
from services.ingest import ColumnMapping
from services.workflows import corpus as cw
from tests.support.zips import make_zip

MAP = ColumnMapping(text="text", title="title", label="label")
# row 2 has no text; row 3's text is in Latin-1 (read as cp1252, with a warning naming the file)
REVIEWS_CSV = b"title,text,label\nGood,Works well.,praise\nEmpty,,praise\nCafe,caf\xe9 ok,praise\n"
# line 2 is not JSON; line 3's label is a list (ignored, a warning); line 4 repeats a text of the CSV
REVIEWS_JSONL = (b'{"title": "Bad", "text": "Broke at once.", "label": "complaint"}\n'
                 b'{broken\n'
                 b'{"title": "Odd", "text": "Arrived late.", "label": ["complaint"]}\n'
                 b'{"title": "Again", "text": "Works well.", "label": "praise"}\n')
EXPECTED_TABLE_ISSUES = [
    # the first bad byte, \xe9, follows the header (17 bytes), two rows (24 + 14) and "Cafe,caf" (8)
    "WARNING a.csv: not valid UTF-8 (first bad byte at offset 63); read as Windows-1252 (cp1252). Check accented "
    "characters, or save the file as UTF-8",
    "ERROR a.csv row 2: empty text (column 'text')",
    "ERROR b.jsonl line 2: invalid JSON at column 2: Expecting property name enclosed in double quotes",
    "WARNING b.jsonl line 3: label is a list, expected a string; ignored",
    "WARNING b.jsonl line 4: 'Again' has the same text as 'Good' (a.csv row 1); skipped",
]


REVIEWS_ZIP = make_zip({"data/a.txt": b"Fine.", "data/b.txt": b"  ", "other/c.txt": b"\x00\x01bin\x00",
                    "data/d.txt": b"Fine."})
EXPECTED_ZIP_ISSUES = [
    "ERROR reviews.zip:data/b.txt: the file is empty",
    "ERROR reviews.zip:other/c.txt: the file contains NUL bytes: it looks binary, not text",
    "WARNING reviews.zip:data/d.txt: 'd' has the same text as 'a' (reviews.zip:data/a.txt); skipped",
]


def test_a_two_table_upload_names_each_table_in_its_issues() -> None:
    read = cw.read_upload("table", [("a.csv", REVIEWS_CSV), ("b.jsonl", REVIEWS_JSONL)], mapping=MAP)
    preview = cw.prepare_import(read)
    assert [str(i) for i in preview.issues] == EXPECTED_TABLE_ISSUES
    assert [(i.source, i.location) for i in read.issues[:3]] == [("a.csv", ""), ("a.csv", "row 2"),
                                                                ("b.jsonl", "line 2")]
    assert [r.title for r in preview.records] == ["Good", "Cafe", "Bad", "Odd"]


def test_a_two_table_upload_with_one_mapping_each_names_each_table() -> None:
    read = cw.read_upload("table", [("a.csv", b"h,body\nA,\n"), ("b.csv", b"name,content\nB,\n")],
                          mapping=[ColumnMapping("body", "h"), ColumnMapping("content", "name")])
    assert [str(i) for i in read.issues] == ["ERROR a.csv row 1: empty text (column 'body')",
                                             "ERROR b.csv row 1: empty text (column 'content')"]


def test_a_zip_names_the_archive_and_the_member_in_its_issues() -> None:
    preview = cw.prepare_import(cw.read_upload("zip", [("reviews.zip", REVIEWS_ZIP)]))
    assert [str(i) for i in preview.issues] == EXPECTED_ZIP_ISSUES
    assert [(r.title, r.source) for r in preview.records] == [("a", "reviews.zip:data/a.txt")]


def test_the_cli_lists_each_problem_with_its_file(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    (tmp_path / "a.csv").write_bytes(REVIEWS_CSV)
    (tmp_path / "b.jsonl").write_bytes(REVIEWS_JSONL)
    (tmp_path / "reviews.zip").write_bytes(REVIEWS_ZIP)
    assert main(["import", "--corpus", "Reviews", "--dry-run", str(tmp_path / "a.csv"), str(tmp_path / "b.jsonl"),
                 "--database", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:-1] == [f"  {line}" for line in EXPECTED_TABLE_ISSUES] and out[-1] == "dry run: nothing was written"
    assert main(["import", "--corpus", "Zipped", str(tmp_path / "reviews.zip"), "--database", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:-1] == [f"  {line}" for line in EXPECTED_ZIP_ISSUES]
    store = db.open_store(url)
    try:
        assert [c.name for c in db.list_corpora(store)] == ["Zipped"]
    finally:
        store.close()
