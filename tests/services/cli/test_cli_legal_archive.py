"""The MRAG authors' legal archive, as they lay it out, read by ``python -m mrag_core bench --topic-layout`` and
``import``: its ``legal_queries/`` folder holds ``generated_random.json`` (queries: ``text`` and ``related`` topics,
keyed by aspect count) beside ``sampled_random.json`` (the same topics, no text). Both were read as query files, and
both commands stopped with "sampled_random.json: [1] item 1 has no 'text'". Query files are the ones whose items
have a text; the other is skipped with a note. The folder here is built the same way, with invented documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from mrag_core.benchmark import BenchmarkFormatError
from mrag_core.topic_layout import load_topic_layout
from services.cli.main import main

DOCS = {
    "contract": {"breach": ["A seller failed to deliver the goods on time.", "The buyer refused to pay after a late "
                                                                              "delivery."],
                 "formation": ["An offer was accepted by email.", "Silence is not acceptance of an offer."]},
    "tort": {"negligence": ["A driver ignored a red light and hit a cyclist.", "A shop left a wet floor without a "
                                                                              "sign."],
             "defamation": ["A newspaper printed a false story about a baker.", "A blog accused a teacher of theft."]},
}
GENERATED = {"1": [{"related": ["contract_breach"], "text": "Late goods and a refused payment."}],
             "2": [{"related": ["contract_formation", "tort_negligence"], "text": "An emailed offer and a careless "
                                                                                  "driver."},
                   {"related": ["tort_defamation", "contract_breach"], "text": "A false story about a late "
                                                                              "delivery."}]}
NOTE = ("legal_queries/sampled_random.json: skipped: its items have topics but no text, so they are not queries "
        "(query files are the ones whose items have a 'text')")


def _archive(root: Path) -> Path:
    """``root`` laid out as the authors' legal archive: ``legal_documents/<category>/<category>_<topic>.json`` and
    ``legal_queries/{generated,sampled}_random.json``."""
    for category, topics in DOCS.items():
        (root / "legal_documents" / category).mkdir(parents=True)
        for topic, texts in topics.items():
            (root / "legal_documents" / category / f"{category}_{topic}.json").write_text(
                json.dumps([{"title": f"{topic} case {i}", "text": text} for i, text in enumerate(texts, 1)]))
    (root / "legal_queries").mkdir()
    (root / "legal_queries" / "generated_random.json").write_text(json.dumps(GENERATED))
    sampled = {k: [{"related": q["related"]} for q in group] for k, group in GENERATED.items()}
    (root / "legal_queries" / "sampled_random.json").write_text(json.dumps(sampled))
    return root


def test_the_queries_are_those_with_text_and_the_sampled_file_is_noted(tmp_path: Path) -> None:
    ds = load_topic_layout(_archive(tmp_path))
    assert [q.text for q in ds.queries] == ["Late goods and a refused payment.", "An emailed offer and a careless "
                                            "driver.", "A false story about a late delivery."]
    # topics in file order: contract_breach, contract_formation, tort_defamation, tort_negligence; 2 documents each
    assert ds.ground_truth == [[0, 1], [2, 3, 6, 7], [0, 1, 4, 5]]
    assert ds.notes == [NOTE] and ds.unresolved == []


def test_bench_runs_on_the_archive_folder_and_notes_the_skipped_file(tmp_path: Path, capsys,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    root = _archive(tmp_path / "legal")
    common = ["--model", "minilm", "--device", "cpu", "--threads", "1", "--strategies", "standard,mrag",
              "--k-max", "8", "--c", "8"]
    assert main(["bench", "--topic-layout", str(root), *common]) == 0
    captured = capsys.readouterr()
    assert "error" not in captured.err and f"note: {NOTE}" in captured.err.splitlines()
    assert "evaluated 3 queries x 2 strategies" in captured.err
    rows = [line.split() for line in captured.out.splitlines()[1:]]
    # 1 query of 1 aspect (k = 1, 2), 2 of 2 aspects (k = 2, 4), for each strategy
    assert sorted({(r[0], r[1], r[2], r[6]) for r in rows}) == sorted(
        (s, a, k, n) for s in ("standard", "mrag") for a, k, n in (("1", "1", "1"), ("1", "2", "1"), ("2", "2", "2"),
                                                                    ("2", "4", "2")))
    # the same with the queries given apart, as the authors ship them (a folder of their own)
    assert main(["bench", "--topic-layout", str(root / "legal_documents"), "--queries", str(root / "legal_queries"),
                 *common]) == 0
    again = capsys.readouterr()
    assert again.out == captured.out
    assert f"note: {root / 'legal_queries' / 'sampled_random.json'}: skipped: its items have topics but no text" \
        in again.err


def test_given_only_files_without_text_bench_says_so_in_one_line(tmp_path: Path, capsys) -> None:
    root = _archive(tmp_path)
    sampled = root / "legal_queries" / "sampled_random.json"
    assert main(["bench", "--topic-layout", str(root / "legal_documents"), "--queries", str(sampled),
                 "--model", str(tmp_path / "no-model")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [f"error: {root / 'legal_documents'}: no query file with query texts; "
                                        f"{sampled}: skipped: its items have topics but no text, so they are not "
                                        "queries (query files are the ones whose items have a 'text')"]


def test_a_query_file_missing_some_texts_is_still_an_error(tmp_path: Path) -> None:
    root = _archive(tmp_path)
    broken = dict(GENERATED, **{"1": [{"related": ["contract_breach"]}]})  # one query lost its text
    (root / "legal_queries" / "generated_random.json").write_text(json.dumps(broken))
    with pytest.raises(BenchmarkFormatError, match=r"generated_random.json: \[1\] item 1 has no 'text'"):
        load_topic_layout(root)


def test_import_reads_the_archive_folder(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    assert main(["import", "--corpus", "Legal", "--database", url, str(_archive(tmp_path / "legal"))]) == 0
    assert capsys.readouterr().out.splitlines()[0] == ("read 8 files: 8 documents to import in 2 categories; "
                                                       "0 errors (left out), 0 warnings")
    store = db.open_store(url)
    try:
        assert db.get_corpus_by_name(store, "Legal").n_documents == 8
    finally:
        store.close()
