"""``eval --json / --authors-json / --plotter-json`` write a run's results in bench's three layouts, and
``eval --export RUN_ID`` writes a stored run's without evaluating; the plotter file is read as the authors' CLI
plotter reads it (pandas.read_json, its keys and nesting)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from mrag_core.evaluation import PLOTTER_KEYS  # noqa: E402
from services.cli.evaluate import add_eval_parser, cmd_eval  # noqa: E402
from services.workflows import (
    eval_exports,  # noqa: E402
    eval_results,  # noqa: E402
)
from tests.support.authors_plotter import relative  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402

ALL_EIGHT = ",".join(PLOTTER_KEYS)  # standard, mrag, mrag-decay, mrag-distance, split, split-weighted, ...


def _eval(*words: str) -> int:
    p = argparse.ArgumentParser(prog="mrag")
    add_eval_parser(p.add_subparsers(dest="command", required=True))
    return cmd_eval(p.parse_args(["eval", *words]))


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    u, store, corpus_id, ids = mini_store(tmp_path, monkeypatch)
    qs = db.create_query_set(store, corpus_id, "Set A")
    db.add_queries(store, qs.id, [
        {"text": "red planet storms", "ground_truth": [ids[1]]},
        {"text": "moon orbit and yeast bread", "ground_truth": [ids[0], ids[2]]},
        {"text": "tomato soup on mars", "ground_truth": [ids[3], ids[1]]},
    ])
    store.close()
    return u


def test_eval_writes_the_three_layouts_and_export_writes_them_again(url: str, tmp_path: Path, capsys) -> None:
    out = {name: tmp_path / f"{name}.json" for name in ("ours", "authors", "plotter")}
    assert _eval("--corpus", "Mini", "--query-set", "Set A", "--strategies", ALL_EIGHT, "--c", "4", "--k-max", "4",
                 "--database", url, "--json", str(out["ours"]), "--authors-json", str(out["authors"]),
                 "--plotter-json", str(out["plotter"])) == 0
    err = capsys.readouterr().err
    assert all(f"wrote {path}" in err for path in out.values())
    notes = [ln for ln in err.splitlines() if ln.startswith("note: ")]
    # every key is there; the two-query mini set has no 5-aspect query and k only to 4: the note says so
    assert notes == ["note: its plot_all draws queries of 5, 10, 15, 20 aspects, each at k up to its aspect count + "
                     "11 (31 for 20); these results hold queries of 1, 2 aspects, scored to k = 4: call its figure "
                     "functions with their own aspect counts n (k up to n + 11)"]
    store = db.open_store(url)
    (run,) = db.list_eval_runs(store)
    metrics = eval_results.load_run_metrics(store, run.id)
    assert json.loads(out["ours"].read_text()) == json.loads(eval_exports.authors_json(metrics))
    assert json.loads(out["authors"].read_text()) == json.loads(eval_exports.authors_file_json(metrics))
    assert out["plotter"].read_text() == eval_exports.plotter_json(metrics)

    # read as the plotter reads it: df[key][query type][measure][k - 1][query], the stored ratios
    df = pd.read_json(out["plotter"])
    assert set(df.columns) == set(PLOTTER_KEYS.values()) and sorted(df.index) == [1, 2]
    two = sorted(q for q, n in zip(metrics.queries["query_id"], metrics.queries["n_aspects"]) if n == 2)
    stored = {(r.strategy, r.query_id): r for r in db.load_eval_results(store, run.id)}
    for name, key in PLOTTER_KEYS.items():
        for k in (1, 2, 4):
            assert df[key][2]["success_ratio"][k - 1] == pytest.approx([stored[(name, q)].rsr[k - 1] for q in two])
            assert df[key][2]["category_success_ratio"][k - 1] == pytest.approx(
                [stored[(name, q)].csr[k - 1] for q in two])
    # its line plot's access, at the depth there is: MRAG's weighted improvement over Standard RAG, mean per k
    drawn = relative(df, 2, range(0, 4, 1), ["multirag", "standard-rag"], per_k=True)
    per_k = [sum((2 * stored[("mrag", q)].rsr[k] + stored[("mrag", q)].csr[k]) / 3
                 - (2 * stored[("standard", q)].rsr[k] + stored[("standard", q)].csr[k]) / 3 for q in two) / 2
             for k in range(4)]
    assert list(drawn["multirag"]) == pytest.approx(per_k)
    store.close()

    again = tmp_path / "again.json"
    assert _eval("--export", str(run.id), "--plotter-json", str(again), "--database", url) == 0
    assert again.read_text() == out["plotter"].read_text()
    assert db.list_eval_runs(db.open_store(url))[0].id == run.id  # nothing new was evaluated


def test_a_run_of_some_strategies_names_the_plotter_keys_it_leaves_out(url: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "p.json"
    assert _eval("--corpus", "Mini", "--query-set", "Set A", "--strategies", "standard,mrag", "--variant", "decay",
                 "--c", "4", "--k-max", "4", "--database", url, "--plotter-json", str(path)) == 0
    # decay voting is mrag-decay: it fills multirag-strategy-decay, not multirag
    assert list(json.loads(path.read_text())) == ["standard-rag", "multirag-strategy-decay"]
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: the authors' plotter")]
    assert notes == ["note: the authors' plotter reads 8 strategy keys; multirag, multirag-strategy-distance, "
                     "split-rag, split-rag-strategy-weighted, fusion-rag, fusion-multirag are left out (strategies "
                     "mrag, mrag-distance, split, split-weighted, fusion, fusion-mrag were not run), and it stops "
                     "with a KeyError at the first figure that needs one"]


def test_export_refuses_what_it_cannot_write(url: str, tmp_path: Path, capsys) -> None:
    def error(*words: str) -> str:
        assert _eval(*words, "--database", url) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    assert error("--export", "1") == ("error: --export writes files: give --json, --authors-json or --plotter-json "
                                      "(or several)")
    assert error("--export", "99", "--json", str(tmp_path / "x.json")) == "error: evaluation run 99 does not exist"
    missing = tmp_path / "no" / "x.json"
    assert error("--export", "1", "--plotter-json", str(missing)).startswith(f"error: cannot write --plotter-json "
                                                                             f"{missing}")
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    qs = db.list_query_sets(store, corpus.id)[0]
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="empty", seed=0,
                             config={"model": "minilm", "layer": 5, "strategies": ["standard"], "c": 4, "k_max": 4})
    store.close()
    assert error("--export", str(run.id), "--json", str(tmp_path / "y.json")).startswith(
        f"error: evaluation run {run.id} has no results yet")
    assert not (tmp_path / "y.json").exists()
