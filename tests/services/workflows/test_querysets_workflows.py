"""Query-set workflows: LLM generation (real HTTP fake server), offline determinism, resume, import, export."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

import db
from services.llm.client import LLMClient
from services.workflows import querysets as qw
from tests.support.mini_corpus import add_space_music_food
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content


@pytest.fixture
def corpus(store) -> db.CorpusInfo:
    c = add_space_music_food(store)
    db.add_documents(store, c.id, [{"title": "Loose", "text": "An unlabelled note about nothing in particular."}])
    return db.get_corpus(store, c.id)


def _titles(prompt: str) -> list[str]:
    return re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)


def _story(prompt: str) -> Reply | str:
    """Stories mention every title, except: 2-article stories leave out the 2nd title (-> flagged);
    a story about Cheese fails with HTTP 400 (-> failed; an error about that one request, so it does not stop the
    others: a 5xx would trip the run's breaker, and whether the plan beside it was sent first would depend on thread
    timing). Fusion prompts get two lines."""
    titles = _titles(prompt)
    if not titles:  # the fusion sub-query prompt
        return "first sub-query about the story\nsecond sub-query about the story"
    if "Cheese" in titles:
        return Reply.error(400, "prompt too long for this model")
    named = titles[:1] if len(titles) == 2 else titles
    return ("Once upon a time " + " and ".join(named) + " met in a long story with many words, "
            "where every detail of the articles mattered a great deal to everyone involved.")


@pytest.mark.every_backend
def test_llm_generation_statuses_failed_rows_and_resume(store, corpus) -> None:
    assert qw.max_aspects(store, corpus.id) == 3
    with FakeOpenAIServer(by_content(_story)) as server:
        client = LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)
        cancel = threading.Event()
        seen: list[tuple[int, int]] = []

        def progress(done: int, total: int) -> None:
            seen.append((done, total))
            if done >= 2:
                cancel.set()

        rep = qw.generate_query_set(store, corpus_id=corpus.id, name="LLM set", aspect_counts=[1, 2, 4],
                                    per_count=2, seed=3, client=client, want_fusion=True, n_fusion=2,
                                    progress=progress, cancel=cancel, batch_size=2)
        assert rep.planned == 4 and rep.cancelled and not rep.offline
        assert any("Aspect count 4 was dropped" in w for w in rep.warnings)
        first = db.list_queries(store, rep.query_set_id)
        assert len(first) == 2  # exactly one batch saved
        n_requests = len(server.requests)

        rep2 = qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=rep.query_set_id, client=client)
        assert (rep2.done_before, rep2.remaining, rep2.cancelled) == (2, 0, False)
        queries = db.list_queries(store, rep.query_set_id)
        assert len(queries) == 4
        # The resumed call did not send the first batch again: one story (+ fusion when it worked) per plan.
        story_requests = [b for b in server.requests if _titles(b["messages"][-1]["content"])]
        assert len(story_requests) == 4
        assert len(server.requests) > n_requests

    titles = {d.id: d.title for d in db.list_documents(store, corpus.id, limit=None).items}
    used = [titles[d] for q in queries for d in q.ground_truth]
    assert len(used) == len(set(used)) == 6 and "Loose" not in used  # each labelled doc once
    assert sorted(q.n_aspects for q in queries) == [1, 1, 2, 2]
    for q in queries:
        gt = [titles[d] for d in q.ground_truth]
        if "Cheese" in gt:
            assert q.status == "failed" and q.text == "" and "prompt too long for this model" in q.error
        elif len(gt) == 2:
            assert q.status == "flagged" and q.error == f"missing titles: {gt[1]}"
            assert q.fusion == ["first sub-query about the story", "second sub-query about the story"]
        else:
            assert q.status == "ok" and gt[0] in q.text
    assert db.get_query_set(store, rep.query_set_id).source == "generated-llm"
    # Failed rows are never exported as queries.
    exported = json.loads(qw.export_benchmark_json(store, rep.query_set_id))
    assert len(exported) == 3 and all("Cheese" not in e["topics"] for e in exported)

    # Regenerating the flagged query offline gives a story that names every title -> ok.
    flagged = next(q for q in queries if q.status == "flagged")
    fixed = qw.regenerate_query(store, flagged.id, client=None)
    assert fixed.status == "ok" and fixed.error == ""
    assert all(titles[d] in fixed.text for d in flagged.ground_truth)


def test_offline_generation_is_deterministic(store, corpus) -> None:
    a = qw.generate_query_set(store, corpus_id=corpus.id, name="A", aspect_counts=[1, 3], per_count=1, seed=11)
    b = qw.generate_query_set(store, corpus_id=corpus.id, name="B", aspect_counts=[1, 3], per_count=1, seed=11)
    qa = [(q.text, q.ground_truth, q.status, q.generator) for q in db.list_queries(store, a.query_set_id)]
    qb = [(q.text, q.ground_truth, q.status, q.generator) for q in db.list_queries(store, b.query_set_id)]
    assert qa == qb and len(qa) == 2 and a.offline
    assert all(s == "ok" and g == "offline-composer" for _, _, s, g in qa)
    assert db.get_query_set(store, a.query_set_id).source == "generated-offline"
    cats = {d.id: d.label for d in db.list_documents(store, corpus.id, limit=None).items}
    three = next(q for q in db.list_queries(store, a.query_set_id) if q.n_aspects == 3)
    assert sorted(cats[d] for d in three.ground_truth) == ["food", "music", "space"]
    with pytest.raises(qw.QuerySetError, match="already has a query set"):
        qw.generate_query_set(store, corpus_id=corpus.id, name="A", aspect_counts=[1], per_count=1, seed=1)
    with pytest.raises(qw.QuerySetError, match="No query can be planned"):
        qw.generate_query_set(store, corpus_id=corpus.id, name="C", aspect_counts=[5], per_count=1, seed=1)
    assert [s.name for s in db.list_query_sets(store, corpus.id)] == ["B", "A"]


def test_import_reports_unresolved_topics_and_round_trips(store, corpus, tmp_path: Path) -> None:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps([
        {"topics": ["Mercury", "Jazz"], "text": "Mercury and Jazz", "fusion": ["Mercury", "Jazz"]},
        {"topics": ["bread"], "text": "How is bread made?", "fusion": []},
        {"topics": ["Opera", "Atlantis"], "text": "Opera in Atlantis", "fusion": []},
    ]))
    rep = qw.import_benchmark_queries(store, corpus.id, path, name="Imported")
    assert (rep.n_queries, rep.n_flagged, rep.unresolved) == (3, 1, [(3, "Atlantis")])
    ids = {d.title: d.id for d in db.list_documents(store, corpus.id, limit=None).items}
    qs = db.list_queries(store, rep.query_set_id)
    assert [q.ground_truth for q in qs] == [[ids["Mercury"], ids["Jazz"]], [ids["Bread"]], [ids["Opera"]]]
    assert qs[2].status == "flagged" and qs[2].error == "unresolved topics: Atlantis" and qs[2].n_aspects == 2
    frame = qw.review_frame(store, rep.query_set_id)
    assert frame.loc[0, "ground truth"] == "Mercury | Jazz" and frame.loc[0, "categories"] == "space | music"
    exported = json.loads(qw.export_benchmark_json(store, rep.query_set_id))
    assert exported[0] == {"topics": ["Mercury", "Jazz"], "text": "Mercury and Jazz", "fusion": ["Mercury", "Jazz"],
                           "categories": ["space", "music"], "document_ids": [ids["Mercury"], ids["Jazz"]],
                           "status": "ok", "reason": ""}
    assert exported[1]["topics"] == ["Bread"]
    assert (exported[2]["status"], exported[2]["reason"]) == ("flagged", "unresolved topics: Atlantis")

    with pytest.raises(qw.QuerySetError, match="no 'topics'"):
        qw.import_benchmark_queries(store, corpus.id, b'[{"text": "x"}]', name="Bad", file_name="bad.json")
    assert [s.name for s in db.list_query_sets(store, corpus.id)] == ["Imported"]


def test_import_csv_path_row_by_row_report(store, corpus, tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("text,topics\nMercury and Venus,Mercury|Venus\nbroken,\nJazz in Atlantis,Jazz|Atlantis\n")
    rep = qw.import_benchmark_queries(store, corpus.id, path, name="CSV")
    assert (rep.n_queries, rep.n_flagged, rep.skipped, rep.locations) == (
        2, 1, [("row 2", "has an empty 'topics' list")], ["row 1", "row 3"])
    assert rep.unresolved == [(2, "Atlantis")]
    assert qw.import_issues(rep).values.tolist() == [
        ["row 2", "error", "skipped: has an empty 'topics' list"],
        ["row 3", "warning", "imported as flagged: topic 'Atlantis' matches no document"],
    ]
    assert db.get_query_set(store, rep.query_set_id).description == "Imported from mine.csv"
    with pytest.raises(qw.QuerySetError, match="file not found"):
        qw.import_benchmark_queries(store, corpus.id, tmp_path / "nope.json", name="X")


def test_manual_query_and_edit(store, corpus) -> None:
    qs = db.create_query_set(store, corpus.id, "Hand")
    found = db.list_documents(store, corpus.id, search="trumpet").items
    assert [d.title for d in found] == ["Jazz"]
    venus = db.list_documents(store, corpus.id, search="venus").items[0]
    q = qw.add_manual_query(store, qs.id, text="Jazz on Venus", ground_truth=[found[0].id, venus.id])
    assert (q.status, q.n_aspects) == ("ok", 2)
    q2 = qw.edit_query(store, q.id, text="Jazz in space", ground_truth=[found[0].id, venus.id])
    assert q2.status == "flagged" and q2.error == "missing titles: Venus"
    with pytest.raises(qw.QuerySetError, match="at least one"):
        qw.add_manual_query(store, qs.id, text="x", ground_truth=[])


@pytest.mark.every_backend
def test_manual_query_into_a_new_set_writes_both_or_nothing(store, corpus) -> None:
    """A query that fails its checks leaves no empty set behind; a valid one creates the set with it."""
    jazz = db.list_documents(store, corpus.id, search="trumpet").items[0]
    other = db.create_corpus(store, "Other")
    (foreign,) = db.add_documents(store, other.id, [{"title": "Elsewhere", "text": "Not here."}]).document_ids
    for text, gt, problem in [("", [jazz.id], "must not be empty"), ("Jazz", [], "at least one"),
                              ("Jazz and more", [jazz.id, foreign], "not in this corpus")]:
        with pytest.raises(qw.QuerySetError, match=problem):
            qw.add_manual_query_to_new_set(store, corpus.id, "hand set", text=text, ground_truth=gt)
        assert db.list_query_sets(store, corpus.id) == []
    with pytest.raises(qw.QuerySetError, match="name must not be empty"):
        qw.add_manual_query_to_new_set(store, corpus.id, " ", text="Jazz", ground_truth=[jazz.id])
    q = qw.add_manual_query_to_new_set(store, corpus.id, " hand set ", text="All about Jazz", ground_truth=[jazz.id])
    (qs,) = db.list_query_sets(store, corpus.id)
    assert (qs.id, qs.name, qs.source, qs.n_queries) == (q.query_set_id, "hand set", "manual", 1)
    assert (q.text, q.ground_truth, q.status, q.generator) == ("All about Jazz", [jazz.id], "ok", "hand-written")
    with pytest.raises(qw.QuerySetError, match="already has a query set named 'hand set'"):
        qw.add_manual_query_to_new_set(store, corpus.id, "hand set", text="Jazz again", ground_truth=[jazz.id])
    assert [s.n_queries for s in db.list_query_sets(store, corpus.id)] == [1]


def _same_title_corpus(store, name: str) -> tuple[int, list[int]]:
    """A corpus with three documents titled "Doc 1" (two in category a, one in c) and "Other" (b)."""
    c = db.create_corpus(store, name)
    ids = db.add_documents(store, c.id, [
        {"title": "Doc 1", "text": "The first document of that name.", "label": "a"},
        {"title": "Other", "text": "Something else entirely.", "label": "b"},
        {"title": "Doc 1", "text": "The second document of that name.", "label": "a"},
        {"title": "Doc 1", "text": "A third one, elsewhere.", "label": "c"},
    ]).document_ids
    return c.id, list(ids)


def _stored(store, query_set_id: int) -> list[tuple]:
    return [(q.text, q.ground_truth, q.status, q.error) for q in db.list_queries(store, query_set_id)]


@pytest.mark.every_backend
def test_export_and_import_round_trip_exactly_with_shared_titles(store) -> None:
    """Documents sharing a title come back as the same documents (the id, checked against the title, in this
    database; the category elsewhere), a flagged query stays flagged with its reason; what nothing tells apart is
    flagged with the reason, never given the first document of that title."""
    corpus_id, (first, other, second, third) = _same_title_corpus(store, "Twins")
    orig = db.create_query_set(store, corpus_id, "hand rt2")
    db.add_queries(store, orig.id, [
        {"text": "What does Doc 1 say?", "ground_truth": [second], "status": "ok"},
        {"text": "Doc 1 and the rest", "ground_truth": [third, other], "status": "flagged",
         "error": "missing titles: Other"},
        {"text": "Both of them: Doc 1", "ground_truth": [first, second], "status": "ok"},
    ])
    exported = qw.export_benchmark_json(store, orig.id)
    rep = qw.import_benchmark_queries(store, corpus_id, exported.encode(), name="back", file_name="hand rt2.json")
    assert _stored(store, rep.query_set_id) == _stored(store, orig.id)
    assert (rep.n_flagged, rep.unresolved, rep.ambiguous) == (1, [], [])

    # Another corpus with the same documents (other ids): the category tells c from a, not the two of a.
    copy_id, (c_first, c_other, c_second, c_third) = _same_title_corpus(store, "Copy")
    rep = qw.import_benchmark_queries(store, copy_id, exported.encode(), name="copied", file_name="hand rt2.json")
    ambiguity = "ambiguous topics: 3 documents are titled 'Doc 1' and nothing in the file tells which one is meant"
    assert _stored(store, rep.query_set_id) == [
        ("What does Doc 1 say?", [], "flagged", ambiguity + " (none was taken)"),
        ("Doc 1 and the rest", [c_third, c_other], "flagged", "missing titles: Other"),
        ("Both of them: Doc 1", [c_first, c_second], "ok", ""),  # both of category a: one each
    ]
    assert rep.ambiguous == [(1, "Doc 1", 3)] and rep.unresolved == []
    assert qw.import_issues(rep).values.tolist() == [
        ["item 1", "warning", "imported as flagged: 3 documents are titled 'Doc 1' and nothing in the file tells "
                              "which one is meant; none was taken"]]

    # A benchmark file with titles only (as exported before): ambiguous, flagged, not the first "Doc 1".
    titles_only = json.dumps([{"topics": ["Doc 1"], "text": "What does Doc 1 say?"}]).encode()
    rep = qw.import_benchmark_queries(store, corpus_id, titles_only, name="old", file_name="old.json")
    assert _stored(store, rep.query_set_id) == [
        ("What does Doc 1 say?", [], "flagged", ambiguity + " (none was taken)")]


def test_a_resume_asks_again_for_failed_queries_and_replaces_their_rows(store, corpus) -> None:
    """A query whose story failed (HTTP 500) was stored as failed and counted as done, so Resume never asked
    again; now a resume asks only for it and the failed row gets the new story (no second row)."""
    down = {"Cheese": True}

    def story(prompt: str) -> Reply | str:
        titles = _titles(prompt)
        if titles and "Cheese" in titles and down["Cheese"]:
            return Reply.error(400, "prompt too long for this model")
        if not titles:
            return "first sub-query about the story\nsecond sub-query about the story"
        return "Once upon a time " + " and ".join(titles) + " met in a long story with many words and details."

    with FakeOpenAIServer(by_content(story)) as server:
        client = LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)
        rep = qw.generate_query_set(store, corpus_id=corpus.id, name="Retry", aspect_counts=[1, 2], per_count=2,
                                    seed=3, client=client, want_fusion=False)
        before = {q.id: q for q in db.list_queries(store, rep.query_set_id)}
        failed = [q for q in before.values() if q.status == "failed"]
        assert len(failed) == 1 and len(before) == 4
        info = db.get_query_set(store, rep.query_set_id)
        assert qw.generation_missing(store, info) == 1
        down["Cheese"] = False
        sent = len(server.requests)
        rep2 = qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=rep.query_set_id, client=client)
        assert (rep2.done_before, rep2.ok, rep2.failed, rep2.remaining) == (3, 1, 0, 0)
        assert len(server.requests) == sent + 1  # only the failed plan was asked again
    after = {q.id: q for q in db.list_queries(store, rep.query_set_id)}
    assert set(after) == set(before)  # the same rows
    again = after[failed[0].id]
    assert again.status == "ok" and "Cheese" in again.text and again.error == ""
    assert qw.generation_missing(store, db.get_query_set(store, rep.query_set_id)) == 0


def test_an_endpoint_down_for_every_request_stops_generation_across_batches(store, corpus) -> None:
    """A refused key trips the breaker in the first batch: later batches send nothing, the run stops resumable,
    and the report says why (each batch used to send one failing request more)."""
    with FakeOpenAIServer(lambda body: Reply.error(401, "Incorrect API key provided")) as server:
        client = LLMClient(server.llm_config(max_retries=0, concurrency=1), sleep=lambda s: None)
        rep = qw.generate_query_set(store, corpus_id=corpus.id, name="Down", aspect_counts=[1, 2], per_count=2,
                                    seed=3, client=client, want_fusion=False, batch_size=1)
        assert len(server.requests) == 1
    assert rep.cancelled and (rep.failed, rep.remaining) == (1, 3)
    assert any(w.startswith("Stopped: the endpoint failed for every request (") and "401" in w for w in rep.warnings)
    assert qw.generation_missing(store, db.get_query_set(store, rep.query_set_id)) == 4
