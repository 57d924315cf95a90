"""Tests for services.ingest.benchmarks: the authors' corpora as import previews."""

from __future__ import annotations

import bz2
import io
import json
import zipfile
from pathlib import Path

import pytest

from services.ingest.benchmarks import (
    preview_topic_layout,
    preview_wikipedia_articles,
    topic_of_source,
    topic_source,
)

WIKI = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "mrag-wikipedia-v1"


def test_wikipedia_small_file_row_by_row() -> None:
    items = [
        {"title": "A", "text": "Alpha.", "label": "x"},
        {"title": "B", "label": "x"},
        {"title": "C", "text": "Gamma.", "label": "y"},
    ]
    p = preview_wikipedia_articles(bz2.compress(json.dumps(items).encode()), "arts.json.bz2")
    assert [(r.title, r.label) for r in p.records] == [("A", "x"), ("C", "y")]
    assert p.errors[0].location == "row 2"


def test_wikipedia_not_json() -> None:
    p = preview_wikipedia_articles(b"title,text\n", "arts.json")
    assert p.records == [] and p.errors[0].where == "arts.json" and "invalid JSON" in p.errors[0].message


def layout_zip(extra: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("legal/contract/contract_breach.json", json.dumps(["Breach one.", "Breach two."]))
        zf.writestr("legal/tort/tort_negligence.json", json.dumps([{"title": "Duty", "text": "Duty of care."}]))
        zf.writestr("legal/queries/queries.json", json.dumps([{"text": "q", "related": ["breach"]}]))
        for k, v in (extra or {}).items():
            zf.writestr(zipfile.ZipInfo(k), v)
    return buf.getvalue()


def test_topic_layout_zip_preview() -> None:
    p = preview_topic_layout(layout_zip(), "legal.zip")
    assert [(r.title, r.label) for r in p.records] == [
        ("breach #1", "contract"), ("breach #2", "contract"), ("Duty", "tort")]
    assert p.records[0].source == "legal.zip topic breach" == topic_source("legal.zip", "breach")
    assert topic_of_source(p.records[0].source) == "breach"
    assert topic_of_source("data.csv row 7") is None and topic_of_source("") is None
    assert p.issues == [] and p.n_rows_read == 3


def test_topic_layout_zip_with_escaping_entry() -> None:
    p = preview_topic_layout(layout_zip({"../x/x_y.json": b"[]"}), "legal.zip")
    assert len(p.records) == 3
    assert p.errors[0].where == "legal.zip:../x/x_y.json"


def test_topic_layout_errors_become_issues(tmp_path: Path) -> None:
    bad = io.BytesIO()
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("a/a_t.json", json.dumps({"nothing": 1}))
    p = preview_topic_layout(bad.getvalue(), "bad.zip")
    assert p.records == [] and "a/a_t.json" in p.errors[0].message
    assert "not a valid ZIP" in preview_topic_layout(b"garbage", "g.zip").errors[0].message
    missing = preview_topic_layout(tmp_path / "missing")
    assert missing.records == [] and "not found" in missing.errors[0].message


def test_topic_layout_bad_file_is_one_row_the_rest_imports(tmp_path: Path) -> None:
    p = preview_topic_layout(layout_zip({"legal/tort/tort_bad.json": b'{"nothing": 1}'}), "legal.zip")
    assert [r.title for r in p.records] == ["breach #1", "breach #2", "Duty"]
    assert [(i.severity, i.where) for i in p.issues] == [("error", "legal.zip:legal/tort/tort_bad.json")]
    assert p.issues[0].message.startswith("expected a list of documents")
    assert (p.n_rows_read, p.n_skipped) == (4, 1)
    (tmp_path / "chem").mkdir()
    (tmp_path / "chem" / "chem_leak.json").write_text(json.dumps(["Leak."]))
    (tmp_path / "chem" / "chem_fire.json").write_text("[")
    folder = preview_topic_layout(tmp_path)
    assert [r.text for r in folder.records] == ["Leak."]
    assert [i.where for i in folder.errors] == ["chem/chem_fire.json"]


def test_topic_layout_folder_preview(tmp_path: Path) -> None:
    (tmp_path / "chem").mkdir()
    (tmp_path / "chem" / "chem_leak.json").write_text(json.dumps(["Leak.", "  "]))
    p = preview_topic_layout(tmp_path)
    # the loader rejects empty documents: the whole topic file is reported
    assert p.records == [] and "document 2 is empty" in p.errors[0].message


def test_real_wikipedia_file_imports_completely() -> None:
    path = WIKI / "wikipedia_articles_v1.json.bz2"
    if not path.exists():
        pytest.skip(f"shared MRAG Wikipedia benchmark not present at {WIKI.resolve()}")
    p = preview_wikipedia_articles(path.read_bytes(), path.name)
    assert len(p.records) == 1250 and p.issues == []
    assert len({r.label for r in p.records}) == 25
