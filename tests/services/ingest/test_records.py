"""services.ingest.records.check_records: what a record may hold to be stored, row by row."""

from __future__ import annotations

from services.ingest import ImportRecord
from services.ingest.chunking import apply_chunking
from services.ingest.records import MAX_LABEL_CHARS, check_records


def _record(title: str = "T", text: str = "Some text.", label: str | None = "L", row: int = 1) -> ImportRecord:
    return ImportRecord(title=title, text=text, label=label, source=f"f.json row {row}")


def test_a_label_of_exactly_the_limit_is_kept_one_more_is_an_error() -> None:
    at_limit, over = "a" * MAX_LABEL_CHARS, "b" * (MAX_LABEL_CHARS + 1)
    spaced = f" {over[:100]}   {over[100:]} "
    kept, issues = check_records([_record(label=at_limit, row=1), _record(label=spaced, row=2)])
    assert [r.label for r in kept] == [at_limit]  # the second has 201 + 1 characters once its spacing is collapsed
    assert [(i.location, i.severity, i.message) for i in issues] == [
        ("f.json row 2", "error", "the label is 202 characters long, over the 200 a category name may have; "
                                  "shorten it")]


def test_a_label_with_nothing_visible_is_dropped_with_a_warning() -> None:
    kept, issues = check_records([_record(label="\u200b\u2060"), _record(label="   ", row=2)])
    assert [r.label for r in kept] == [None, None]
    assert [(i.location, i.message) for i in issues] == [
        ("f.json row 1", "the label '\\u200b\\u2060' has no visible character; imported without a label")]


def test_the_parts_of_a_chunked_record_report_a_nul_once_and_all_lose_it() -> None:
    text = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(4))
    parts = apply_chunking([_record(title="Ti\u0000tle", text=text)], method="chars", size=300, overlap=0)
    assert len(parts) > 1
    kept, issues = check_records(parts)
    assert len(kept) == len(parts) and all("\x00" not in r.title and r.parent_title == "Title" for r in kept)
    assert [i.message for i in issues] == ["1 NUL character (\\x00) removed from the title: a database cannot "
                                           "store them"]
