"""Tests for services.ingest.files: folders and real ZIP archives of text files."""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path

import pytest

from services.ingest.files import (
    read_text_file,
    read_text_files,
    read_text_folder,
    read_text_zip,
    title_from_markdown,
    unsafe_member_reason,
)
from tests.support.zips import make_zip


def test_title_from_markdown() -> None:
    assert title_from_markdown("\n\n# My Title #\nbody") == "My Title"
    assert title_from_markdown("## Sub\n# Main") is None
    assert title_from_markdown("plain") is None


def test_folder_labels_titles_and_warnings(tmp_path: Path) -> None:
    (tmp_path / "physics").mkdir()
    (tmp_path / "history").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "physics" / "gravity.txt").write_text("Things fall.\r\nAlways.", encoding="utf-8")
    (tmp_path / "history" / "rome.md").write_text("# The Roman Empire\n\nIt fell.", encoding="utf-8")
    (tmp_path / "history" / "notes.md").write_text("No heading here.", encoding="utf-8")
    (tmp_path / "top.txt").write_text("Top level.", encoding="utf-8")
    (tmp_path / "slides.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / ".git" / "config.txt").write_text("hidden")
    (tmp_path / "physics" / "empty.txt").write_text("  \n")
    (tmp_path / "physics" / "legacy.txt").write_bytes("Ångström".encode("cp1252"))
    p = read_text_folder(tmp_path)
    got = {(r.title, r.label, r.text) for r in p.records}
    assert got == {
        ("gravity", "physics", "Things fall.\nAlways."),
        ("The Roman Empire", "history", "# The Roman Empire\n\nIt fell."),
        ("notes", "history", "No heading here."),
        ("top", None, "Top level."),
        ("legacy", "physics", "Ångström"),
    }
    issues = {(i.where, i.severity) for i in p.issues}  # each names its file as its record's source would
    assert (f"{tmp_path.name}/slides.pdf", "warning") in issues
    assert (f"{tmp_path.name}/physics/empty.txt", "error") in issues
    assert (f"{tmp_path.name}/physics/legacy.txt", "warning") in issues
    assert not any(".git" in i.where for i in p.issues)
    assert p.n_rows_read == 6 and p.n_skipped == 1
    assert any(r.source == f"{tmp_path.name}/physics/gravity.txt" for r in p.records)


def test_folder_without_labels_and_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("x")
    assert read_text_folder(tmp_path, label_from_folder=False).records[0].label is None
    p = read_text_folder(tmp_path / "nope")
    assert p.records == [] and p.errors[0].message == "folder not found"


def test_folder_caps(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("y" * 3000)
    (tmp_path / "small.txt").write_text("small")
    p = read_text_folder(tmp_path, max_doc_bytes=1000)
    assert [r.title for r in p.records] == ["small"]
    err = p.errors[0]
    assert err.where == f"{tmp_path.name}/big.txt"
    assert "2.9 KB" in err.message and "over the 1000 B limit" in err.message
    p2 = read_text_folder(tmp_path, max_total_bytes=2000)
    assert p2.records == [] and "upload limit" in p2.errors[0].message


@pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")
def test_folder_symlink_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.txt").symlink_to(outside)
    p = read_text_folder(root)
    assert p.records == [] and p.warnings[0].where == "root/link.txt"


def test_zip_strips_wrapper_folder_and_labels() -> None:
    data = make_zip({
        "corpus/physics/a.txt": b"Alpha text.",
        "corpus/physics/b.md": b"# Beta\nBeta text.",
        "corpus/chemistry/c.txt": "Gamma – text".encode("utf-16"),
        "corpus/readme.docx": b"PK\x03\x04whatever",
        "__MACOSX/corpus/._a.txt": b"\x00\x05junk",
    })
    p = read_text_zip(data, "up.zip")
    assert sorted((r.title, r.label) for r in p.records) == [("Beta", "physics"), ("a", "physics"), ("c", "chemistry")]
    assert next(r for r in p.records if r.title == "c").text == "Gamma – text"
    assert [i.where for i in p.warnings] == ["up.zip:readme.docx"]
    assert {r.source for r in p.records} >= {"up.zip:physics/a.txt"}


def test_zip_rejects_escaping_entries_but_keeps_the_rest() -> None:
    data = make_zip({
        "good/ok.txt": b"fine",
        "../evil.txt": b"escape",
        "/etc/passwd.txt": b"abs",
        "C:/win.txt": b"drive",
        "a/../../b.txt": b"deep",
    })
    p = read_text_zip(data, "evil.zip")
    assert [r.title for r in p.records] == ["ok"]
    rejected = {i.where for i in p.errors}
    assert rejected == {"evil.zip:../evil.txt", "evil.zip:/etc/passwd.txt", "evil.zip:C:/win.txt",
                        "evil.zip:a/../../b.txt"}
    assert all("escapes its folder" in i.message for i in p.errors)
    assert p.n_skipped == 4 and p.n_rows_read == 5


def test_unsafe_member_reason() -> None:
    assert unsafe_member_reason("a\\..\\b.txt") == "'..' in the path"
    assert unsafe_member_reason("/x") == "absolute path"
    assert unsafe_member_reason("a/b..c.txt") is None


def test_zip_bomb_refused_by_declared_size() -> None:
    bomb = make_zip({"bomb.txt": b"0" * (3 * 1024 * 1024)})
    assert len(bomb) < 20_000  # highly compressed
    p = read_text_zip(bomb, "bomb.zip", max_total_bytes=1024 * 1024)
    assert p.records == [] and p.errors[0].where == "bomb.zip"
    assert "expands to 3.0 MB" in p.errors[0].message
    p2 = read_text_zip(bomb, "bomb.zip", max_doc_bytes=1024 * 1024)
    assert p2.records == [] and p2.errors[0].where == "bomb.zip:bomb.txt"
    assert "limit per document" in p2.errors[0].message


def test_zip_symlink_and_corrupt_archive() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("link.txt")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
        zf.writestr("real.txt", "real")
    p = read_text_zip(buf.getvalue(), "l.zip")
    assert [r.title for r in p.records] == ["real"]
    assert p.errors[0].where == "l.zip:link.txt" and "symbolic link" in p.errors[0].message
    bad = read_text_zip(b"PK\x03\x04 not really a zip", "bad.zip")
    assert bad.records == [] and "not a valid ZIP" in bad.errors[0].message


def test_binary_member_is_error_naming_file() -> None:
    p = read_text_zip(make_zip({"docs/x.txt": b"\x00\x01\x02binary\x00"}), "z.zip")
    assert p.records == [] and p.errors[0].where == "z.zip:x.txt" and "binary" in p.errors[0].message


def test_single_and_multiple_uploads() -> None:
    p = read_text_file(b"# Head\nBody", "path/to/n.md", label="misc")
    assert (p.records[0].title, p.records[0].label, p.records[0].source) == ("Head", "misc", "n.md")
    p2 = read_text_files([("a.txt", b"A"), ("b.csv", b"x,y"), ("c.txt", b"")])
    assert [r.title for r in p2.records] == ["a"]
    assert [(i.where, i.severity) for i in p2.issues] == [("b.csv", "warning"), ("c.txt", "error")]
    p3 = read_text_files([("a.txt", b"A" * 50)], max_total_bytes=10)
    assert p3.records == [] and "upload limit" in p3.errors[0].message
