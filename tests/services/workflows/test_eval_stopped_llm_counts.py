"""An evaluation run stopped during its LLM expansions keeps what that session spent there: its seconds in the step
(``timing["llm_expansions_s"]``, added up over the run's sessions) and, in ``llm_usage``, the request that failed and
whose retry wait the Stop ended (one request, one failure). Against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import threading

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from mrag_core.settings import RetrievalSettings  # noqa: E402
from services.workflows import evaluation_runs as er  # noqa: E402
from tests.support.mini_corpus import add_sky_and_food  # noqa: E402
from tests.support.openai_server import Reply, by_content, fake_openai  # noqa: E402

__all__ = ["fake_openai"]  # re-exported fixture

ANSWER_S = 0.4  # the server's delay before each answer: a session's seconds in the expansions step are at least this
# per request it sent there (one request at a time)
QUESTIONS = ["comet", "bread", "galaxy and sauce", "telescope"]


class _ScriptStopped(BaseException):
    """What Streamlit raises in the script thread on Stop (not an Exception)."""


@pytest.fixture(scope="module")
def lm():
    import torch

    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    return load_model("minilm")


def _corpus_and_queries(store: db.Store, questions: list[str]) -> tuple[int, int]:
    """(corpus id, query set id): 4 documents in 2 categories, one query per question (its ground truth d0)."""
    corpus, ids = add_sky_and_food(store)
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [{"text": q, "ground_truth": [ids[0]]} for q in questions])
    return corpus.id, qs.id


def _question(prompt: str) -> str:
    return prompt.rsplit("Question: ", 1)[1].strip()


def _passage(question: str) -> str:
    """A hypothetical passage long enough for HyDE to accept (and cache)."""
    return f"The {question} is described in this short encyclopedia passage about it."


@pytest.mark.parametrize("how", ["stop button", "script stopped"])
def test_the_expansion_seconds_of_a_session_stopped_during_the_expansions_count(store, lm, fake_openai, how) -> None:
    """Stopped after the first answer (the Stop button: the cancel event; a rerun: the progress call raises), then
    resumed: the stored seconds are at least the server's delay times every request, both sessions'."""
    corpus_id, qs_id = _corpus_and_queries(store, QUESTIONS)
    server = fake_openai(by_content(lambda p: Reply.ok(_passage(_question(p)), delay_s=ANSWER_S)))
    cancel = threading.Event()

    def stop_at_first_answer(stage: str, done: int, total: int) -> None:
        if stage == "LLM hyde" and done == 1:
            if how == "stop button":
                cancel.set()
            else:
                raise _ScriptStopped()

    cfg = server.llm_config(max_retries=0, concurrency=1)
    try:
        run_id = er.run_evaluation(store, corpus_id=corpus_id, query_set_id=qs_id,
                                   settings=RetrievalSettings(strategies=["hyde"], c=4, k_max=2), lm=lm, llm_config=cfg,
                                   cancel=cancel, progress=stop_at_first_answer)
    except _ScriptStopped:
        run_id = db.list_eval_runs(store)[0].id
    stopped = db.get_eval_run(store, run_id)
    first = len(server.requests)  # the answer before the Stop, and one the single worker may have started meanwhile
    assert stopped.status == "cancelled" and stopped.n_results == 0 and first in (1, 2)
    assert stopped.timing["llm_expansions_s"] >= first * ANSWER_S  # no seconds were stored for a stopped session

    er.resume_evaluation(store, run_id, lm=lm, llm_config=cfg)
    done = db.get_eval_run(store, run_id)
    assert done.status == "done" and done.n_results == len(QUESTIONS)
    assert len(server.requests) == len(QUESTIONS)  # the resume asked the rest; the first session's came from the cache
    assert len(server.requests) - first >= 2
    # both sessions: the stopped one's seconds, then at least ANSWER_S per request of the resume
    assert done.timing["llm_expansions_s"] >= stopped.timing["llm_expansions_s"] + (len(QUESTIONS) - first) * ANSWER_S
    assert done.timing["llm_expansions_s"] >= len(QUESTIONS) * ANSWER_S
    assert done.timing["total_s"] >= done.timing["llm_expansions_s"]


def test_a_request_stopped_in_its_retry_wait_counts_as_a_failed_request(store, lm, fake_openai) -> None:
    """The second question's request gets HTTP 500; the Stop comes 0.1 s later, while the client waits (0.5 to 1 s
    of backoff) to retry it. That request was sent and failed: the stopped run counts it (requests 2, failed 1), the
    question stays to do, and the resume's totals add up."""
    corpus_id, qs_id = _corpus_and_queries(store, QUESTIONS[:2])
    cancel = threading.Event()
    timers: list[threading.Timer] = []
    asked: dict[str, int] = {}

    def answer(prompt: str) -> Reply:
        question = _question(prompt)
        asked[question] = asked.get(question, 0) + 1
        if question == "bread" and asked[question] == 1:
            timers.append(threading.Timer(0.1, cancel.set))  # the user presses Stop during the backoff
            timers[-1].start()
            return Reply.error(500, "overloaded")
        return Reply.ok(_passage(question), prompt_tokens=30, completion_tokens=20)

    server = fake_openai(by_content(answer))
    cfg = server.llm_config(max_retries=2, concurrency=1)
    try:
        run_id = er.run_evaluation(store, corpus_id=corpus_id, query_set_id=qs_id,
                                   settings=RetrievalSettings(strategies=["hyde"], c=4, k_max=2), lm=lm, llm_config=cfg,
                                   cancel=cancel)
    finally:
        for timer in timers:
            timer.cancel()
    stopped = db.get_eval_run(store, run_id)
    assert stopped.status == "cancelled" and stopped.n_results == 0
    assert len(server.requests) == 2  # comet answered, bread's 500; its retry was never sent
    total = stopped.llm_usage["total"]
    assert (total["requests"], total["failed"], total["expansions"], total["cached"]) == (2, 1, 2, 0)
    assert total["spent_tokens"] == 50 and stopped.llm_usage["families"]["hyde"]["requests"] == 2

    er.resume_evaluation(store, run_id, lm=lm, llm_config=cfg)
    done = db.get_eval_run(store, run_id)
    assert done.status == "done" and done.n_results == 2
    assert len(server.requests) == 3 and asked == {"comet": 1, "bread": 2}  # comet from the cache
    total = done.llm_usage["total"]
    # first session: comet sent, bread failed; resume: comet cached, bread sent
    assert (total["requests"], total["failed"], total["expansions"], total["cached"]) == (3, 1, 4, 1)
    assert total["spent_tokens"] == 100
    # the stopped request has no result: every stored result is an answered expansion
    assert all("error" not in r.details["llm"] for r in db.load_eval_results(store, run_id))
