"""Every import issue names the file it is in (and the archive, for a member of a ZIP), so the issues of several
files read at once can be told apart: ``str(issue)`` reads ``ERROR a.csv row 2: ...`` or
``ERROR reviews.zip:data/b.txt: ...`` (a member is named as its record's ``source``)."""

from __future__ import annotations

from services.ingest.files import read_text_files, read_text_zip
from services.ingest.records import ImportIssue, in_source, member_source
from services.ingest.tabular import ColumnMapping, read_table
from tests.support.zips import make_zip

MAP = ColumnMapping(text="text", title="title", label="label")


def test_issue_where_and_str_name_the_file_then_the_row() -> None:
    assert str(ImportIssue("row 2", "empty text", "error", source="a.csv")) == "ERROR a.csv row 2: empty text"
    assert str(ImportIssue.of_file("a.csv", "the file is empty")) == "ERROR a.csv: the file is empty"
    assert ImportIssue("upload", "no file was uploaded").where == "upload"  # of no one file
    assert member_source("reviews.zip", "data/b.txt") == "reviews.zip:data/b.txt"


def test_in_source_names_the_file_once_and_keeps_named_issues() -> None:
    issues = [ImportIssue("row 1", "bad"), ImportIssue("x.csv", "whole file", "warning"),
              ImportIssue("row 3", "kept", source="other.csv")]
    assert in_source(issues, "x.csv") == [
        ImportIssue("row 1", "bad", source="x.csv"), ImportIssue("", "whole file", "warning", source="x.csv"),
        ImportIssue("row 3", "kept", source="other.csv")]
    # a ZIP member read under its path: an issue at that path is about the whole member
    assert in_source([ImportIssue("data/b.txt", "empty")], "r.zip:data/b.txt", "data/b.txt") == [
        ImportIssue("", "empty", source="r.zip:data/b.txt")]


def test_every_row_issue_of_a_table_names_the_table() -> None:
    data = b'[{"title": "A", "text": "Alpha."}, {"title": "B", "text": ""}, {"title": "C", "text": "Gamma.", ' \
           b'"label": ["x", "y"]}, 7]'
    p = read_table(data, "json", MAP, "reviews.json")
    assert [str(i) for i in p.issues] == [
        "ERROR reviews.json row 4: expected an object, found a number",
        "ERROR reviews.json row 2: empty text (column 'text')",
        "WARNING reviews.json row 3: label is a list, expected a string; ignored",
    ]
    assert [r.source for r in p.records] == ["reviews.json row 1", "reviews.json row 3"]


def test_an_issue_of_a_whole_file_has_the_file_as_its_source_and_no_location() -> None:
    # the first bad byte, \xe9, follows "title,text\nA,caf" (16 bytes)
    latin = read_table(b"title,text\nA,caf\xe9\n", "csv", ColumnMapping(text="text"), "latin.csv")
    missing = read_table(b"name,body\nA,x\n", "csv", MAP, "cols.csv")
    texts = read_text_files([("a.txt", b"A"), ("b.txt", b" "), ("c.docx", b"PK")])
    assert [(i.source, i.location, str(i)) for i in latin.issues + missing.issues + texts.issues] == [
        ("latin.csv", "", "WARNING latin.csv: not valid UTF-8 (first bad byte at offset 16); read as Windows-1252 "
                          "(cp1252). Check accented characters, or save the file as UTF-8"),
        ("cols.csv", "", "ERROR cols.csv: columns 'text', 'title', 'label' not found; available columns: 'name', "
                         "'body'"),
        ("b.txt", "", "ERROR b.txt: the file is empty"),
        ("c.docx", "", "WARNING c.docx: unsupported file type .docx; only .txt, .md, .markdown files are imported"),
    ]


def test_issues_of_two_members_of_a_zip_name_the_zip_and_the_member() -> None:
    data = make_zip({
        "reviews/data/a.txt": b"Fine text.",
        "reviews/data/b.txt": b"   \n",
        "reviews/other/c.txt": b"\x00\x01\x02binary\x00",
        "reviews/other/d.pdf": b"%PDF-1.4",
        "../escape.txt": b"out",
    })
    p = read_text_zip(data, "reviews.zip")
    assert sorted(str(i) for i in p.issues) == [
        "ERROR reviews.zip:../escape.txt: rejected: the entry escapes its folder ('..' in the path)",
        "ERROR reviews.zip:data/b.txt: the file is empty",
        "ERROR reviews.zip:other/c.txt: the file contains NUL bytes: it looks binary, not text",
        "WARNING reviews.zip:other/d.pdf: unsupported file type .pdf; only .txt, .md, .markdown files are "
        "imported",
    ]
    # the common top folder "reviews/" is stripped from the members read, as from their records' sources
    assert [r.source for r in p.records] == ["reviews.zip:data/a.txt"]
    assert (p.n_rows_read, p.n_skipped) == (4, 3)  # a, b, c and the rejected entry; the .pdf is not a document


def test_issues_of_two_zips_name_their_own_archive() -> None:
    first = read_text_zip(make_zip({"docs/x.txt": b"", "docs/y.txt": b"Why."}), "one.zip")
    second = read_text_zip(make_zip({"docs/x.txt": b"", "docs/z.txt": b"Zed."}), "two.zip")
    assert [str(i) for i in first.issues + second.issues] == [
        "ERROR one.zip:x.txt: the file is empty", "ERROR two.zip:x.txt: the file is empty"]
