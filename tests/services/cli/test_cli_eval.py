"""`mrag-studio eval`: through a parser built with add_eval_parser, against a real store."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from mrag_core.settings import RetrievalSettings  # noqa: E402
from services.cli.evaluate import add_eval_parser, cmd_eval  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrag")
    add_eval_parser(p.add_subparsers(dest="command", required=True))
    return p


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    u, store, corpus_id, ids = mini_store(tmp_path, monkeypatch)
    qs = db.create_query_set(store, corpus_id, "Set A")
    db.add_queries(store, qs.id, [
        {"text": "red planet storms", "ground_truth": [ids[1]]},
        {"text": "moon orbit and yeast bread", "ground_truth": [ids[0], ids[2]]},
    ])
    store.close()
    return u


def test_cli_writes_a_listed_run(url: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv(db.ENV_DATABASE_URL, url)  # the same store the UI would open
    args = _parser().parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                 "standard,mrag", "--c", "4", "--k-max", "3", "--seed", "3"])
    assert cmd_eval(args) == 0
    out = capsys.readouterr().out
    store = db.open_store()
    runs = db.list_eval_runs(store)
    assert len(runs) == 1
    run = runs[0]
    assert out.splitlines()[0] == f"run {run.id}: done, 4 results"
    assert run.status == "done" and run.seed == 3
    assert run.config["strategies"] == ["standard", "mrag"] and run.config["k_max"] == 3
    # Summary table: header, then standard/mrag rows at k = n and 2n (capped at 3) for n = 1, 2.
    lines = out.splitlines()[1:]
    assert lines[0].split() == ["strategy", "aspects", "k", "RSR", "CSR", "weighted", "queries"]
    keys = [tuple(line.split()[:3]) for line in lines[1:]]
    assert keys == [("standard", "1", "1"), ("standard", "1", "2"), ("standard", "2", "2"), ("standard", "2", "3"),
                    ("mrag", "1", "1"), ("mrag", "1", "2"), ("mrag", "2", "2"), ("mrag", "2", "3")]
    # The numbers printed are the stored ones: weighted = (2 RSR + CSR) / 3 of the stored results.
    res = {r.strategy: r for r in db.load_eval_results(store, run.id) if r.query_id == min(
        x.query_id for x in db.load_eval_results(store, run.id))}
    rsr, csr = res["standard"].rsr[0], res["standard"].csr[0]
    first = lines[1].split()
    assert float(first[3]) == pytest.approx(rsr, abs=1e-3) and float(first[5]) == pytest.approx(
        (2 * rsr + csr) / 3, abs=1e-3
    )
    store.close()


def test_cli_default_k_max_is_capped_at_the_corpus_size(url: str, capsys) -> None:
    """Without --k-max a corpus of 4 documents is scored at k = 1..4 (not refused for the default 32)."""
    args = _parser().parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies", "standard",
                                 "--c", "4", "--database", url])
    assert cmd_eval(args) == 0
    assert "error" not in capsys.readouterr().err
    store = db.open_store(url)
    (run,) = db.list_eval_runs(store)
    assert run.status == "done" and run.config["k_max"] == 4
    assert {len(r.rsr) for r in db.load_eval_results(store, run.id)} == {4}
    store.close()


def test_cli_database_option_and_errors(url: str, capsys) -> None:
    parser = _parser()
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Nope", "--query-set", "Set A", "--database", url])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: unknown corpus 'Nope' (corpora: 'Mini')"]
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Mini", "--query-set", "B", "--database", url])) == 2
    assert capsys.readouterr().err.strip() == "error: unknown query set 'B' in corpus 'Mini' (query sets: 'Set A')"
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--k-max", "9",
                                       "--database", url])) == 2
    assert capsys.readouterr().err.strip() == "error: k_max (9) exceeds the number of documents in 'Mini' (4)"
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--k-max", "3",
                                       "--layer", "9", "--database", url])) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == ("error: layer 9 is out of range: this model has 6 layers "
                                            "(0..5, or -6..-1 counted from the last)")
    assert "Loading weights" not in err  # refused from the model's config, before its weights were loaded
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "--strategies", "bogus"])
    store = db.open_store(url)
    assert db.list_eval_runs(store) == []
    store.close()


def _llm_env(monkeypatch: pytest.MonkeyPatch, base_url: str | None) -> None:
    for var in ("MRAG_LLM_MODEL", "MRAG_LLM_BASE_URL", "OPENAI_API_KEY", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    if base_url is not None:
        monkeypatch.setenv("MRAG_LLM_BASE_URL", base_url)
        monkeypatch.setenv("MRAG_LLM_MODEL", "fake-model")
        monkeypatch.setenv("MRAG_LLM_MAX_RETRIES", "0")


def test_cli_llm_strategies_write_a_run_and_print_tokens(url: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    def answer(prompt: str) -> Reply:
        question = prompt.rsplit("Question: ", 1)[1]
        if "diverse search queries" in prompt:
            return Reply.ok(f"{question}\n{question} facts", prompt_tokens=20, completion_tokens=5)
        return Reply.ok(f"{question} is told in this passage of an encyclopedia.", prompt_tokens=30,
                        completion_tokens=10)

    with FakeOpenAIServer(by_content(answer)) as server:
        _llm_env(monkeypatch, server.base_url)
        args = _parser().parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                     "standard,multi-query,hyde-mrag", "--c", "4", "--k-max", "3", "--rewrites", "2",
                                     "--no-hyde-with-query", "--database", url])
        assert cmd_eval(args) == 0
        assert len(server.requests) == 4  # 2 queries x (rewrites, passage)
        out = capsys.readouterr().out
        # Same run again: the answers come from the database cache, nothing is sent.
        assert cmd_eval(args) == 0
        assert len(server.requests) == 4
        again = capsys.readouterr().out
    store = db.open_store(url)
    first = db.list_eval_runs(store)[-1]
    assert first.status == "done" and first.n_results == 6
    assert first.config["llm"] == {"model": "fake-model", "n_rewrites": 2, "n_answers": 3, "hyde_with_query": False}
    assert first.llm_usage["total"]["spent_tokens"] == 2 * 25 + 2 * 40
    store.close()
    lines = out.splitlines()
    head = lines.index("LLM cost (tokens of the expansions; spent = sent by this run, 0 when cached)")
    assert lines[head + 1].split() == ["strategy", "queries", "tokens", "tok/query", "spent", "LLM", "s", "cached",
                                       "failed"]
    assert lines[head + 2].split()[:5] == ["multi-query", "2", "50", "25.0", "50"]
    assert lines[head + 3].split()[:5] == ["hyde-mrag", "2", "80", "40.0", "80"]
    assert [ln.split()[0] for ln in lines[2:head] if ln.strip()][::4] == ["standard", "multi-query", "hyde-mrag"]
    rerun = again.splitlines()
    head = rerun.index("LLM cost (tokens of the expansions; spent = sent by this run, 0 when cached)")
    mq = rerun[head + 2].split()
    assert mq[:5] == ["multi-query", "2", "50", "25.0", "0"] and mq[-2:] == ["2", "0"]  # 2 cached, 0 failed


def test_cli_cost_table_counts_shared_expansions_once_in_its_total(url: str, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys) -> None:
    """multi-query and multi-query-mrag search the same rewrites: one request per query serves both. Each row
    shows what its strategy searched; the total row counts each call once, and a note says they are shared."""
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    def answer(prompt: str) -> Reply:
        question = prompt.rsplit("Question: ", 1)[1]
        return Reply.ok(f"{question}\n{question} facts", prompt_tokens=20, completion_tokens=5)

    with FakeOpenAIServer(by_content(answer)) as server:
        _llm_env(monkeypatch, server.base_url)
        args = _parser().parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                     "multi-query,multi-query-mrag", "--c", "4", "--k-max", "3", "--rewrites", "2",
                                     "--database", url])
        assert cmd_eval(args) == 0
        assert len(server.requests) == 2  # one per query, for both strategies
    lines = capsys.readouterr().out.splitlines()
    head = lines.index("LLM cost (tokens of the expansions; spent = sent by this run, 0 when cached)")
    # 2 queries x (20 + 5) tokens: each strategy searched 50 tokens' worth; the run sent 50, not 100.
    assert lines[head + 2].split()[:5] == ["multi-query", "2", "50", "25.0", "50"]
    assert lines[head + 3].split()[:5] == ["multi-query-mrag", "2", "50", "25.0", "50"]
    assert lines[head + 4].split()[:5] == ["total", "2", "50", "25.0", "50"]
    assert lines[head + 5] == ("note: multi-query and multi-query-mrag share their LLM expansions (one call per query "
                               "serves both strategies): each of their rows counts those calls, so a sum of the rows "
                               "counts them twice; the total counts each call once.")


def test_cli_llm_strategies_without_endpoint(url: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    _llm_env(monkeypatch, None)
    args = _parser().parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                 "standard,intent", "--k-max", "3", "--database", url])
    assert cmd_eval(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: intent needs an OpenAI-compatible LLM endpoint") and "MRAG_LLM_BASE_URL" in err
    args = _parser().parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies", "intent",
                                 "--intent-answers", "9", "--k-max", "3", "--database", url])
    assert cmd_eval(args) == 2
    assert "between 1 and 8" in capsys.readouterr().err
    store = db.open_store(url)
    assert db.list_eval_runs(store) == []
    store.close()


def test_cli_lists_runs_with_the_states_the_page_shows(url: str, capsys) -> None:
    """--list: every stored run, newest first, with its state; a run another process works on names that
    process, one whose process fell silent is interrupted (the --resume candidates)."""
    from datetime import timedelta

    from sqlalchemy import update

    from db.models import EvalRun, utcnow

    parser = _parser()
    assert cmd_eval(parser.parse_args(["eval", "--list", "--database", url])) == 0
    assert capsys.readouterr().out.strip() == "no evaluation run is stored"
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                       "standard,mrag", "--c", "4", "--database", url])) == 0
    capsys.readouterr()
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    (done,) = db.list_eval_runs(store)
    qs = done.query_set_id
    config = {"model": "minilm", "layer": 5, "strategies": ["standard"], "n_queries": 2}
    elsewhere = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs, config=config,
                                   owner="gpu-box pid 4242 #0badc0de")
    silent = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs, config=config, owner="laptop pid 7 #ab")
    with store.session() as session:
        session.execute(update(EvalRun).where(EvalRun.id == silent.id)
                        .values(heartbeat_at=utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)))
    stopped = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs, config=config)
    db.finish_eval_run(store, stopped.id, status="cancelled")
    other = db.create_corpus(store, "Other")
    store.close()

    assert cmd_eval(parser.parse_args(["eval", "--list", "--corpus", "Mini", "--database", url])) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["run", "corpus", "query", "set", "model", "layer", "strategies", "results", "created",
                                "(UTC)", "state"]
    rows = [line.split(None, 10) for line in lines[1:]]
    # columns: run, corpus, query set (2 words), model, layer, strategies, results, date, time, state
    assert [(r[0], r[1], r[2] + " " + r[3], r[4], r[5], r[6], r[7], r[10]) for r in rows] == [
        (f"#{stopped.id}", "Mini", "Set A", "minilm", "5", "standard", "0/2", "stopped"),
        (f"#{silent.id}", "Mini", "Set A", "minilm", "5", "standard", "0/2", "interrupted"),
        (f"#{elsewhere.id}", "Mini", "Set A", "minilm", "5", "standard", "0/2", "running elsewhere (gpu-box pid 4242)"),
        (f"#{done.id}", "Mini", "Set A", "minilm", "5", "standard,mrag", "4/4", "done"),
    ]
    assert cmd_eval(parser.parse_args(["eval", "--list", "--corpus", "Other", "--database", url])) == 0
    assert capsys.readouterr().out.strip() == f"corpus {other.name!r} has no evaluation run"
    assert cmd_eval(parser.parse_args(["eval", "--list", "--corpus", "Nope", "--database", url])) == 2
    assert capsys.readouterr().err.strip() == "error: unknown corpus 'Nope' (corpora: 'Mini', 'Other')"


def test_ctrl_c_stops_after_the_batch_and_resume_finishes(url: str, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Ctrl+C stops the run after its current batch (stored 'stopped', with what it saved) and says how
    to continue; `eval --resume ID` scores only the rest. Before, Ctrl+C broke off mid-batch with 'interrupted'."""
    import signal

    from services.workflows import evaluation_runs as er

    real = er.evaluate
    calls: list[int] = []

    def evaluate_then_interrupt(*a, **kw):
        calls.append(1)
        out = real(*a, **kw)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C while the first batch (standard) is scored
        return out

    monkeypatch.setattr(er, "evaluate", evaluate_then_interrupt)
    before = signal.getsignal(signal.SIGINT)
    parser = _parser()
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                       "standard,mrag", "--c", "4", "--database", url])) == 1
    captured = capsys.readouterr()
    assert "stopping after the current batch (Ctrl+C again to stop now)" in captured.err
    store = db.open_store(url)
    (run,) = db.list_eval_runs(store)
    assert (run.status, run.n_results) == ("cancelled", 2)  # standard's batch kept, mrag's never started
    assert captured.out.splitlines()[0] == f"run {run.id}: stopped, 2 results"
    assert captured.err.strip().splitlines()[-1] == f"eval --resume {run.id} continues it"
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
    monkeypatch.setattr(er, "evaluate", real)
    assert cmd_eval(parser.parse_args(["eval", "--resume", str(run.id), "--database", url])) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"run {run.id}: done, 4 results"
    assert db.completed_queries(store, run.id, "mrag") == {q.id for q in db.list_queries(store, run.query_set_id)}
    store.close()


def test_progress_is_shown_every_few_seconds_and_at_the_end() -> None:
    from services.cli.common import every_few_seconds

    shown: list[tuple[str, int, int]] = []
    progress = every_few_seconds(lambda *a: shown.append(a), seconds=3600)
    for done in range(1, 6):
        progress("evaluation", done, 5)
    progress("documents", 1, 9)
    assert shown == [("evaluation", 1, 5), ("evaluation", 5, 5), ("documents", 1, 9)]
    every = every_few_seconds(lambda *a: shown.append(a), seconds=0)
    shown.clear()
    for done in range(1, 4):
        every("queries", done, 9)
    assert shown == [("queries", 1, 9), ("queries", 2, 9), ("queries", 3, 9)]


def test_stop_asks_the_process_that_runs_it(url: str, capsys) -> None:
    parser = _parser()
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    qs = db.list_query_sets(store, corpus.id)[0]
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, owner="gpu-box pid 4242 #0badc0de")
    assert cmd_eval(parser.parse_args(["eval", "--stop", str(run.id), "--database", url])) == 0
    assert capsys.readouterr().out.strip() == (f"asked run {run.id} (gpu-box pid 4242) to stop after its current "
                                               f"batch; eval --resume {run.id} continues it")
    assert db.eval_stop_requested(store, run.id)
    db.finish_eval_run(store, run.id, status="cancelled", owner="gpu-box pid 4242 #0badc0de")  # it stopped
    assert cmd_eval(parser.parse_args(["eval", "--stop", str(run.id), "--database", url])) == 2
    assert (
        capsys.readouterr().err.strip() == f"error: evaluation run {run.id} is not running (stopped): nothing to stop"
    )
    assert cmd_eval(parser.parse_args(["eval", "--stop", "999", "--database", url])) == 2
    assert capsys.readouterr().err.strip() == "error: evaluation run 999 does not exist"
    store.close()


def test_resume_of_a_finished_run_is_refused_and_names_the_command_of_a_new_one(url: str, capsys) -> None:
    """`eval --resume` of a done run re-scored its edited queries, changing a finished record. It is refused now,
    before the model loads, with the command line of a new run with its settings, which starts that run."""
    import shlex

    parser = _parser()
    assert cmd_eval(parser.parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                       "standard,mrag", "--variant", "decay", "--layer", "-1", "--c", "4",
                                       "--k-max", "3", "--w", "1.5", "--seed", "3", "--database", url])) == 0
    capsys.readouterr()
    store = db.open_store(url)
    (run,) = db.list_eval_runs(store)
    results = db.load_eval_results(store, run.id)
    first = min(q.id for q in db.list_queries(store, run.query_set_id))
    db.update_query(store, first, text="storms on the red planet")
    assert cmd_eval(parser.parse_args(["eval", "--resume", str(run.id), "--database", url])) == 2
    err = capsys.readouterr().err
    command = ("mrag-studio eval --corpus Mini --query-set 'Set A' --model minilm --strategies "
               "standard,mrag-decay --variant decay --layer=-1 --c 4 --k-max 3 --w 1.5 --seed 3")
    assert err.strip() == (f"error: evaluation run {run.id} is finished (done) and is not resumed: a finished run is "
                           "kept as it is, to compare other runs against. To score the query set as it is now, start "
                           f"a new run with the same settings. With the command line: {command}")
    assert "Loading weights" not in err
    after = db.get_eval_run(store, run.id)
    assert (after.status, after.finished_at, after.config) == ("done", run.finished_at, run.config)
    assert db.load_eval_results(store, run.id) == results
    # The command it names starts a new run with the same settings.
    assert cmd_eval(parser.parse_args(shlex.split(command)[1:] + ["--database", url])) == 0
    new = db.list_eval_runs(store)[0]
    assert new.id != run.id and new.seed == 3
    assert {k: new.config[k] for k in ("model", "layer", "layer_requested", "strategies", "variant", "c", "k_max",
                                       "w", "n_queries")} == {k: run.config[k] for k in (
        "model", "layer", "layer_requested", "strategies", "variant", "c", "k_max", "w", "n_queries")}
    store.close()


def test_list_counts_the_queries_a_resume_added_in_the_expected_results(url: str, capsys) -> None:
    """A run stopped after its first batch, a query added, `eval --resume`: --list read '6/4' (the 2 queries the
    run began with x 2 strategies); it reads 6/6 now."""
    import threading

    from services.workflows import evaluation_runs as er

    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    (qs,) = db.list_query_sets(store, corpus.id)
    cancel = threading.Event()
    run = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                            settings=RetrievalSettings(strategies=["standard", "mrag"], c=4, k_max=3), cancel=cancel,
                            batch_size=2, progress=lambda s, d, t: cancel.set() if s == "evaluation" else None)
    assert db.get_eval_run(store, run).n_results == 2
    db.add_queries(store, qs.id, [{"text": "yeast and flour", "ground_truth": [db.document_ids(store, corpus.id)[2]]}])
    parser = _parser()
    assert cmd_eval(parser.parse_args(["eval", "--list", "--database", url])) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[7] == "2/4"  # as the stopped run began: 2 queries
    assert cmd_eval(parser.parse_args(["eval", "--resume", str(run), "--database", url])) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"run {run}: done, 6 results"
    assert cmd_eval(parser.parse_args(["eval", "--list", "--database", url])) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[7] == "6/6"
    store.close()


def test_cli_eval_accepts_the_recommended_alias(url: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``--strategies standard,recommended``: the run stores the sentence round-robin under its id and prints it."""
    monkeypatch.setenv(db.ENV_DATABASE_URL, url)
    args = _parser().parse_args(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies",
                                 "standard,recommended", "--c", "4", "--k-max", "3"])
    assert args.strategies == ["standard", "sentence-round-robin"]
    assert cmd_eval(args) == 0
    out = capsys.readouterr().out
    store = db.open_store()
    run = db.list_eval_runs(store)[0]
    assert run.config["strategies"] == ["standard", "sentence-round-robin"] and run.n_results == 4
    assert {line.split()[0] for line in out.splitlines()[2:]} == {"standard", "sentence-round-robin"}
    store.close()
