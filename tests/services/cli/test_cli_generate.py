"""`mrag-studio generate`: a multi-aspect query set written headless into a real store (offline composer),
resumed, refused while another process generates into it, and bad input."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from services.cli.main import main  # noqa: E402
from services.workflows import querysets as qw  # noqa: E402
from tests.support.mini_corpus import MINI_DOCS, mini_store  # noqa: E402

MORE_DOCS = [
    {"title": "Venus", "text": "Venus is wrapped in thick clouds of acid. Its surface is hotter than an oven.",
     "label": "space"},
    {"title": "Comets", "text": "A comet grows a bright tail near the sun. The tail always points away from it.",
     "label": "space"},
    {"title": "Pancakes", "text": "Pancakes need flour, milk and eggs. Flip them once bubbles form.", "label": "food"},
    {"title": "Curry", "text": "A curry simmers with cumin and coriander. Rice is served on the side.",
     "label": "food"},
    {"title": "Chess", "text": "A chess match can last for hours. The clock decides many endgames.", "label": "games"},
    {"title": "Go", "text": "Go is played with black and white stones. Surrounded stones are captured.",
     "label": "games"},
    {"title": "Cards", "text": "Bridge is a card game for four players. Partners bid for the contract.",
     "label": "games"},
    {"title": "Dice", "text": "Backgammon moves are decided by two dice. Doubles are played twice.", "label": "games"},
]
LABELS = {d["title"]: d["label"] for d in [*MINI_DOCS, *MORE_DOCS]}


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Mini's 4 documents and 8 more: 4 documents in each of space, food and games."""
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    u, store, corpus_id, _ = mini_store(tmp_path, monkeypatch)
    db.add_documents(store, corpus_id, MORE_DOCS)
    store.close()
    return u


def _generate(url: str, *extra: str) -> int:
    return main(["generate", "--corpus", "Mini", "--database", url, *extra])


def test_offline_generation_stores_queries_whose_ground_truth_spans_distinct_categories(url: str, capsys) -> None:
    assert _generate(url, "--name", "Stories", "--aspects", "1,2", "--per-count", "2") == 0
    captured = capsys.readouterr()
    assert "generator: offline composer" in captured.err and "no LLM endpoint is configured" in captured.err
    store = db.open_store(url)
    (qs,) = db.list_query_sets(store)
    queries = db.list_queries(store, qs.id)
    label = LABELS
    titles = {d.id: d.title for d in db.list_documents(store, qs.corpus_id).items}
    store.close()
    assert captured.out.strip() == (f"query set 'Stories' (#{qs.id}): {sum(q.status == 'ok' for q in queries)} ok, "
                                    f"{sum(q.status == 'flagged' for q in queries)} flagged, 0 failed now; 4 of 4 "
                                    "stored")
    assert sorted(q.n_aspects for q in queries) == [1, 1, 2, 2]
    for q in queries:  # one document per aspect, each from another category, and a text to search with
        assert q.text.strip() and len({label[titles[d]] for d in q.ground_truth}) == q.n_aspects
    assert all(len(q.fusion) >= 1 for q in queries if q.n_aspects == 2)
    assert _generate(url, "--name", "Stories") == 0
    assert capsys.readouterr().out.strip() == f"query set 'Stories' (#{qs.id}) is complete: 4 queries"


def test_an_unfinished_set_is_resumed_with_its_own_settings(url: str, capsys) -> None:
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    cancel = threading.Event()
    first = qw.generate_query_set(store, corpus_id=corpus.id, name="Half", aspect_counts=[1, 2], per_count=2,
                                  batch_size=1, cancel=cancel,
                                  progress=lambda done, total: cancel.set() if done >= 1 else None)
    assert first.cancelled and db.get_query_set(store, first.query_set_id).n_queries == 1
    store.close()
    # other settings on the command line do not change a resumed set's plan
    assert _generate(url, "--name", "Half", "--aspects", "3", "--per-count", "1") == 0
    captured = capsys.readouterr()
    assert (f"resuming query set 'Half' (#{first.query_set_id}): 1 of 4 stored (failed ones are asked again), with "
            "its own settings") in captured.err
    assert captured.out.strip().endswith("now; 4 of 4 stored")
    store = db.open_store(url)
    assert sorted(q.n_aspects for q in db.list_queries(store, first.query_set_id)) == [1, 1, 2, 2]
    store.close()


def test_a_set_another_process_generates_into_is_left_alone(url: str, capsys) -> None:
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    cancel = threading.Event()
    cancel.set()  # stored the set, generated nothing yet
    rep = qw.generate_query_set(store, corpus_id=corpus.id, name="Busy", aspect_counts=[1], per_count=2,
                                cancel=cancel)
    db.take_lease(store, qw.generation_lease(rep.query_set_id), "gpu-box pid 4242 #0badc0de",
                  "Query generation for set", rep.query_set_id)
    store.close()
    assert _generate(url, "--name", "Busy") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"error: Query generation for set 'Busy' (#{rep.query_set_id}) is already running in another process "
        "(gpu-box pid 4242; started ")
    store = db.open_store(url)
    assert db.get_query_set(store, rep.query_set_id).n_queries == 0
    store.close()


def test_bad_input_is_one_line(url: str, capsys) -> None:
    assert main(["generate", "--corpus", "Nope", "--name", "S", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown corpus 'Nope' (corpora: 'Mini')"
    assert _generate(url, "--name", "S", "--generator", "llm") == 2
    assert capsys.readouterr().err.strip() == (
        "error: the llm generator needs an OpenAI-compatible LLM endpoint, and none is configured: set "
        "MRAG_LLM_BASE_URL and MRAG_LLM_MODEL (and MRAG_LLM_API_KEY if it needs one)")
    assert _generate(url, "--name", "S", "--aspects", "4") == 2  # three categories
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "error: No query can be planned: Aspect count 4 was dropped: the collection has only 3 categories")
    assert _generate(url, "--name", " ") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: Give the query set a name."
    with pytest.raises(SystemExit):
        main(["generate", "--corpus", "Mini", "--name", "S", "--aspects", "0,x"])
    assert "--aspects takes whole numbers separated by commas, not '0,x'" in capsys.readouterr().err
    store = db.open_store(url)
    db.add_queries(store, db.create_query_set(store, db.get_corpus_by_name(store, "Mini").id, "Mine").id,
                   [{"text": "a hand-written query"}])
    store.close()
    assert _generate(url, "--name", "Mine") == 2
    assert capsys.readouterr().err.strip() == ("error: query set 'Mine' exists and was not generated here: choose "
                                               "another --name")
    store = db.open_store(url)
    assert [q.name for q in db.list_query_sets(store)] == ["Mine"]  # nothing half-written
    store.close()
