"""`eval` on a stopped run says what its summary table leaves out.

Found on the MRAG Wikipedia benchmark (standard, mrag, split over 250 queries), Ctrl+C after 378 of 750 results: the
table printed standard and mrag over the 128 queries both had scored, and split not at all, without a word."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from services.cli.evaluate import add_eval_parser, cmd_eval, partial_table_note  # noqa: E402
from services.workflows import eval_results  # noqa: E402
from services.workflows import evaluation_runs as er  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402


def _stored_run(store: db.Store, scored: dict[str, int], n_queries: int = 3) -> eval_results.RunMetrics:
    """A stopped run of standard, mrag, split on 3 queries whose results are each strategy's first ``scored[s]``."""
    corpus = db.create_corpus(store, "S")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("ab")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    qids = db.add_queries(store, qs.id, [{"text": f"q{i}", "ground_truth": [ids[i % 2]]} for i in range(3)])
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id,
                             config={"model": "minilm", "layer": 5, "strategies": ["standard", "mrag", "split"],
                                     "c": 2, "k_max": 2, "w": 2.0, "n_queries": n_queries}, seed=0)
    db.save_eval_results(store, run.id, [{"strategy": s, "query_id": q, "retrieved": [], "rsr": [1.0, 1.0],
                                          "csr": [1.0, 1.0]} for s, n in scored.items() for q in qids[:n]])
    db.finish_eval_run(store, run.id, status="cancelled")
    return eval_results.load_run_metrics(store, run.id)


@pytest.fixture
def store(tmp_path: Path):
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()


def test_the_note_names_the_queries_the_table_is_over_and_the_strategies_left_out(store) -> None:
    assert partial_table_note(_stored_run(store, {"standard": 3, "mrag": 1})) == (
        "note: the table is over the 1 of 3 queries every strategy in it scored (standard 3, mrag 1); split scored "
        "no query yet and is not in it")


def test_a_first_strategy_stopped_part_way_is_said_to_cover_part_of_the_queries(store) -> None:
    assert partial_table_note(_stored_run(store, {"standard": 2})) == (
        "note: the table is over the 2 of 3 queries every strategy in it scored (standard 2); mrag, split scored no "
        "query yet and are not in it")


def test_a_run_with_every_result_needs_no_note(store) -> None:
    assert partial_table_note(_stored_run(store, {"standard": 3, "mrag": 3, "split": 3})) is None


def test_ctrl_c_output_says_which_strategy_the_table_leaves_out(tmp_path: Path, monkeypatch, capsys) -> None:
    url, mini, corpus_id, ids = mini_store(tmp_path, monkeypatch)
    qs = db.create_query_set(mini, corpus_id, "Set A")
    db.add_queries(mini, qs.id, [{"text": "red planet storms", "ground_truth": [ids[1]]},
                                 {"text": "moon orbit and yeast bread", "ground_truth": [ids[0], ids[2]]}])
    mini.close()
    real = er.evaluate

    def evaluate_then_interrupt(*a, **kw):
        out = real(*a, **kw)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C while standard (the first strategy) is scored
        return out

    monkeypatch.setattr(er, "evaluate", evaluate_then_interrupt)
    parser = argparse.ArgumentParser(prog="mrag")
    add_eval_parser(parser.add_subparsers(dest="command", required=True))
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                       "standard,mrag", "--c", "4", "--database", url])) == 1
    err = capsys.readouterr().err.strip().splitlines()
    store = db.open_store(url)
    (run,) = db.list_eval_runs(store)
    store.close()
    assert err[-2:] == ["note: mrag scored no query yet and is not in it", f"eval --resume {run.id} continues it"]
