"""``python -m mrag_core bench``: plain one-line errors with exit status 2, and a tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from services.cli.main import main

torch.set_num_threads(1)

TOPICS = {
    "astronomy": ["Mars", "Jupiter", "Comets", "Nebulae", "Black holes", "Moon"],
    "cooking": ["Bread", "Pasta", "Sushi", "Curry", "Pancakes", "Soup"],
    "sports": ["Football", "Tennis", "Chess", "Cycling", "Rowing", "Skiing"],
    "music": ["Violin", "Jazz", "Opera", "Drums", "Piano", "Guitar"],
}


def write_dataset(root: Path) -> tuple[Path, Path]:
    articles = [
        {
            "title": t,
            "text": f"{t} is a topic in {label}. This article describes {t.lower()} in some detail.",
            "label": label,
        }
        for label, titles in TOPICS.items()
        for t in titles
    ]
    queries = [
        {"topics": ["Mars", "Bread"], "text": "An astronaut on Mars bakes fresh bread.",
         "fusion": ["1. life on Mars", "2. baking bread"]},
        {"topics": ["Tennis", "Violin", "Soup"], "text": "After tennis she played the violin and ate soup.",
         "fusion": ["tennis match", "violin lesson", "hot soup"]},
        {"topics": ["Jazz", "Comets"], "text": "A jazz band plays while a comet crosses the sky.",
         "fusion": ["jazz music", "comet in the sky"]},
        {"topics": ["Chess", "Sushi"], "text": "Chess players eat sushi between games.",
         "fusion": ["chess game", "sushi dinner"]},
    ]
    a, q = root / "articles.json", root / "queries.json"
    a.write_text(json.dumps(articles))
    q.write_text(json.dumps(queries))
    return a, q


def _only_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if "error:" in ln]
    assert len(lines) == 1, err
    return lines[0]


def test_missing_file(tmp_path: Path, capsys) -> None:
    rc = main(["bench", "--articles", str(tmp_path / "nope.json"), "--queries", str(tmp_path / "q.json")])
    assert rc == 2
    line = _only_error_line(capsys.readouterr().err)
    assert line.startswith("error:") and "nope.json" in line and "not found" in line


def test_wrong_json_shape(tmp_path: Path, capsys) -> None:
    a, q = write_dataset(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"foo": [1, 2]}))
    assert main(["bench", "--articles", str(bad), "--queries", str(q)]) == 2
    line = _only_error_line(capsys.readouterr().err)
    assert line.startswith("error:") and "bad.json" in line
    bad.write_text(json.dumps([{"title": "x", "label": "y"}]))
    assert main(["bench", "--articles", str(bad), "--queries", str(q)]) == 2
    assert "'text'" in _only_error_line(capsys.readouterr().err)
    assert main(["bench", "--articles", str(a)]) == 2  # --queries missing
    assert _only_error_line(capsys.readouterr().err).startswith("error:")


def test_unknown_model(tmp_path: Path, capsys) -> None:
    a, q = write_dataset(tmp_path)
    assert main(["bench", "--articles", str(a), "--queries", str(q), "--model", "no-such-model"]) == 2
    line = _only_error_line(capsys.readouterr().err)
    assert line.startswith("error:") and "no-such-model" in line


def test_unknown_strategy_is_an_argparse_error(tmp_path: Path, capsys) -> None:
    a, q = write_dataset(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--articles", str(a), "--queries", str(q), "--strategies", "standard,bm25"])
    assert exc.value.code == 2
    line = _only_error_line(capsys.readouterr().err)
    assert "bm25" in line


def test_json_into_missing_folder(tmp_path: Path, capsys) -> None:
    a, q = write_dataset(tmp_path)
    rc = main(["bench", "--articles", str(a), "--queries", str(q), "--json", str(tmp_path / "no" / "out.json")])
    assert rc == 2
    assert "does not exist" in _only_error_line(capsys.readouterr().err)


def test_authors_json_into_missing_folder(tmp_path: Path, capsys) -> None:
    a, q = write_dataset(tmp_path)
    rc = main(["bench", "--articles", str(a), "--queries", str(q), "--authors-json", str(tmp_path / "no" / "x.json")])
    assert rc == 2
    assert "cannot write --authors-json" in _only_error_line(capsys.readouterr().err)


def test_bench_end_to_end(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    a, q = write_dataset(tmp_path)
    out = tmp_path / "result.json"
    args = ["bench", "--articles", str(a), "--queries", str(q), "--model", "minilm", "--device", "cpu",
            "--threads", "1", "--json", str(out), "--authors-json", str(tmp_path / "authors.json"),
            "--plotter-json", str(tmp_path / "plotter.json")]
    # default k_max = c = 32 > 24 documents
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    table = captured.out.strip().splitlines()
    assert table[0].split()[:3] == ["strategy", "aspects", "k"]
    strategies = ["standard", "mrag", "split", "fusion", "fusion-mrag"]
    printed = {ln.split()[0] for ln in table[1:]}
    assert printed == set(strategies)
    # aspects 2 (3 queries) at k = 2, 4 and aspects 3 (1 query) at k = 3, 6
    rows = [ln.split() for ln in table[1:]]
    assert {(r[1], r[2], r[6]) for r in rows} == {("2", "2", "3"), ("2", "4", "3"), ("3", "3", "1"), ("3", "6", "1")}
    for r in rows:
        rsr, csr, weighted = map(float, r[3:6])
        assert 0 <= rsr <= 1 and 0 <= csr <= 1
        assert weighted == pytest.approx((2 * rsr + csr) / 3, abs=2e-3)

    layout = json.loads(out.read_text())
    assert list(layout) == strategies
    theirs = json.loads((tmp_path / "authors.json").read_text())  # the same ratios as the authors' files hold them
    assert list(theirs) == ["standard-rag", "mrag", "split-rag", "fusion-rag", "fusion-mrag"]
    assert theirs["split-rag"]["2"]["rat"] == layout["split"]["2"]["success_ratio"]
    assert theirs["standard-rag"]["3"]["suc"] == [[int(r == 1.0) for r in row]
                                                  for row in layout["standard"]["3"]["success_ratio"]]
    # ... and as the authors' CLI plotter reads them: five of its eight keys, the three not run named on stderr
    plotter = json.loads((tmp_path / "plotter.json").read_text())
    assert list(plotter) == ["standard-rag", "multirag", "split-rag", "fusion-rag", "fusion-multirag"]
    assert plotter["multirag"]["2"]["success_ratio"] == layout["mrag"]["2"]["success_ratio"]
    assert plotter["fusion-multirag"]["3"]["category_success_ratio"] == layout["fusion-mrag"]["3"][
        "category_success_ratio"]
    notes = [ln for ln in captured.err.splitlines() if ln.startswith("note: the authors' plotter")]
    assert notes == ["note: the authors' plotter reads 8 strategy keys; multirag-strategy-decay, "
                     "multirag-strategy-distance, split-rag-strategy-weighted are left out (strategies mrag-decay, "
                     "mrag-distance, split-weighted were not run), and it stops with a KeyError at the first figure "
                     "that needs one"]
    for name in strategies:
        assert list(layout[name]) == ["2", "3"]
        for n, n_queries in (("2", 3), ("3", 1)):
            block = layout[name][n]
            assert set(block) == {"success_ratio", "category_success_ratio"}
            for key in block:
                assert len(block[key]) == 32 and all(len(row) == n_queries for row in block[key])
                vals = [v for row in block[key] for v in row]
                assert all(0.0 <= v <= 1.0 for v in vals)
                # prefix strategies can only gain with k
                if name in ("standard", "mrag", "split"):
                    for qi in range(n_queries):
                        col = [row[qi] for row in block[key]]
                        assert col == sorted(col)
    # at k = 4 the easy, keyword-rich queries find something; at k = 24 (all documents) prefix strategies
    # and fusion (4 sub-lists of depth >= 24 each) have found every topic
    assert max(layout["standard"]["2"]["success_ratio"][3]) > 0
    for name in strategies:
        assert layout[name]["2"]["success_ratio"][31] == [1.0, 1.0, 1.0], name
        assert layout[name]["3"]["category_success_ratio"][31] == [1.0], name
    assert list((tmp_path / "cache").glob("*.npz"))  # embeddings were cached

    # second run: everything comes from the cache, same results
    assert main(args) == 0
    captured2 = capsys.readouterr()
    assert "(from cache)" in captured2.err
    assert captured2.out == captured.out


@pytest.mark.parametrize("option", ["--k-max", "--c", "--batch-size"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_non_positive_sizes_are_refused(option: str, value: str, capsys) -> None:
    from services.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", "--articles", "a.json", "--queries", "q.json", option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "must be 1 or more" in err and "Traceback" not in err


def test_bench_llm_strategies_through_fake_endpoint(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("MRAG_LLM_MODEL", "MRAG_LLM_BASE_URL", "OPENAI_API_KEY", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    a, q = write_dataset(tmp_path)
    args = ["bench", "--articles", str(a), "--queries", str(q), "--model", "minilm", "--device", "cpu",
            "--threads", "1", "--k-max", "6", "--c", "6", "--strategies", "standard,multi-query,intent-mrag",
            "--json", str(tmp_path / "out.json")]
    assert main(args) == 2  # no endpoint configured
    assert "need an OpenAI-compatible LLM endpoint" in _only_error_line(capsys.readouterr().err)

    def answer(prompt: str) -> Reply:
        question = prompt.rsplit("Question: ", 1)[1]
        if "diverse search queries" in prompt:
            return Reply.ok(f"1. {question}\n2. more on {question}", prompt_tokens=20, completion_tokens=6)
        if "Chess" in question:
            return Reply.ok("no idea", prompt_tokens=9, completion_tokens=2)  # unusable intent answer
        return Reply.ok(json.dumps({"statements": [question, f"facts: {question}"]}), prompt_tokens=30,
                        completion_tokens=10)

    with FakeOpenAIServer(by_content(answer)) as server:
        server.set_env(monkeypatch)
        assert main(args) == 0
        assert len(server.requests) == 8  # 4 queries x 2 families
        captured = capsys.readouterr()
        assert main(args) == 0  # again: answers from $MRAG_CACHE_DIR/llm_cache.json
        assert len(server.requests) == 9  # only the unusable answer (never cached) again
        again = capsys.readouterr()
    assert "1 failed (searched with the query text)" in captured.err
    lines = captured.out.splitlines()
    head = lines.index("LLM cost (tokens of the expansions; spent = sent by this run, 0 when cached)")
    assert {ln.split()[0] for ln in lines[1:head] if ln.strip()} == {"standard", "multi-query", "intent-mrag"}
    assert lines[head + 2].split()[:5] == ["multi-query", "4", "104", "26.0", "104"]
    intent = lines[head + 3].split()
    assert intent[:5] == ["intent-mrag", "4", str(3 * 40 + 11), f"{(3 * 40 + 11) / 4:.1f}", str(3 * 40 + 11)]
    assert intent[-1] == "1"  # failed
    rerun = again.out.splitlines()
    assert rerun[head + 2].split()[4] == "0" and rerun[head + 3].split()[4] == "11"  # spent: only the retry
    layout = json.loads((tmp_path / "out.json").read_text())
    assert list(layout) == ["standard", "multi-query", "intent-mrag"]
    assert len(layout["multi-query"]["2"]["success_ratio"]) == 6
    assert lines[:head] == rerun[:head]  # same scores from the cached answers


def test_bench_hnsw_logs_its_calibration_and_refuses_bad_targets(tmp_path: Path, capsys,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from services.cli.main import main

    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    a, q = write_dataset(tmp_path)
    base = ["bench", "--articles", str(a), "--queries", str(q), "--device", "cpu", "--threads", "1",
            "--strategies", "standard,mrag,split"]
    assert main(base) == 0
    exact = capsys.readouterr()
    assert "HNSW" not in exact.err  # exact backend: nothing calibrated
    assert main(base + ["--backend", "faiss-hnsw", "--target-recall", "0.95"]) == 0
    hnsw = capsys.readouterr()
    lines = [ln for ln in hnsw.err.splitlines() if ln.startswith("HNSW ")]
    per_space, per_vote = lines[:3], lines[3:]
    assert [ln.split(":")[0] for ln in per_space] == ["HNSW standard", "HNSW heads", "HNSW split"]
    assert all("recall@24" in ln and "target 0.95" in ln for ln in per_space)  # 24 documents: depth clamps to 24
    # the voted views, once per vote, on their final lists (top 10 and top 24)
    assert [ln.split(":")[0] for ln in per_vote] == [
        "HNSW heads, importance vote", "HNSW heads, decay vote", "HNSW heads, distance vote",
        "HNSW split, decay vote", "HNSW split, importance vote"]
    assert all("final top-10/24 recall" in ln and "target 0.95" in ln for ln in per_vote)
    assert hnsw.out == exact.out  # efSearch >= n over 24 documents: the same results as exact search
    for bad in ("0", "1.5", "high"):
        with pytest.raises(SystemExit) as exc:
            main(base + ["--backend", "faiss-hnsw", "--target-recall", bad])
        assert exc.value.code == 2
        assert "--target-recall" in capsys.readouterr().err


def test_text_table_aligns_formats_and_cuts_text_to_width() -> None:
    from mrag_core.cli_basics import text_table

    table = text_table(
        [("strategy", "<8"), ("RSR", ">7.3f"), ("n", ">3")], [["standard-long", 0.5, 3], ["mrag", 1 / 3, 12]]
    )
    assert table.splitlines() == ["strategy     RSR   n",
                                  "standard   0.500   3",
                                  "mrag       0.333  12"]


def test_bench_warns_about_query_topics_without_a_single_document(tmp_path: Path, capsys) -> None:
    """A topic no article has (or several that nothing tells apart) is named before anything runs (the --json
    folder is missing here, so the command stops right after the warning)."""
    a, q = write_dataset(tmp_path)
    queries = json.loads(q.read_text())
    queries[1]["topics"][1] = "Atlantis"
    q.write_text(json.dumps(queries))
    assert main(["bench", "--articles", str(a), "--queries", str(q), "--json", str(tmp_path / "no" / "o.json")]) == 2
    err = capsys.readouterr().err
    warning = next(line for line in err.splitlines() if line.startswith("warning:"))
    assert warning.startswith("warning: 1 query topic matches no single document (none, or several that nothing ")
    assert warning.endswith("first: 'Atlantis')")


def test_bench_cost_table_counts_shared_expansions_once_in_its_total(tmp_path: Path, capsys,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """multi-query and multi-query-mrag (Fusion RAG and Fusion MRAG over the LLM's rewrites) search the same
    expansions, one call per query: bench's cost table had one row each and no total, so a sum counted the
    rewrites twice. A total row counts each call once (as eval's table does) and a note says which share."""
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("MRAG_LLM_MODEL", "MRAG_LLM_BASE_URL", "OPENAI_API_KEY", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    a, q = write_dataset(tmp_path)
    args = ["bench", "--articles", str(a), "--queries", str(q), "--model", "minilm", "--device", "cpu",
            "--threads", "1", "--k-max", "6", "--c", "6", "--strategies", "standard,multi-query,multi-query-mrag,hyde"]

    def answer(prompt: str) -> Reply:
        question = prompt.rsplit("Question: ", 1)[1]
        if "diverse search queries" in prompt:
            return Reply.ok(f"1. {question}\n2. more on {question}", prompt_tokens=20, completion_tokens=6)
        return Reply.ok(f"An encyclopedia passage: {question}", prompt_tokens=30, completion_tokens=10)

    with FakeOpenAIServer(by_content(answer)) as server:
        server.set_env(monkeypatch)
        assert main(args) == 0
        assert len(server.requests) == 8  # 4 queries x 2 families: the rewrites serve both multi-query strategies
        first = capsys.readouterr().out.splitlines()
        assert main(args) == 0  # again: every answer from the cache
        again = capsys.readouterr().out.splitlines()
    head = first.index("LLM cost (tokens of the expansions; spent = sent by this run, 0 when cached)")
    # 4 rewrites at 26 tokens: 104 per multi-query row; 4 passages at 40: 160. Sent: 104 + 160 = 264, not 368.
    assert [ln.split()[:5] for ln in first[head + 2:head + 6]] == [
        ["multi-query", "4", "104", "26.0", "104"], ["multi-query-mrag", "4", "104", "26.0", "104"],
        ["hyde", "4", "160", "40.0", "160"], ["total", "8", "264", "33.0", "264"]]
    assert first[head + 6] == ("note: multi-query and multi-query-mrag share their LLM expansions (one call per query "
                               "serves both strategies): each of their rows counts those calls, so a sum of the rows "
                               "counts them twice; the total counts each call once.")
    total = again[head + 5].split()
    assert total[:5] == ["total", "8", "264", "33.0", "0"] and total[-2:] == ["8", "0"]  # all 8 cached, 0 failed
