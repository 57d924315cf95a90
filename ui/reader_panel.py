"""The Reader panel: two strategies' top-k documents go to an LLM with the multi-aspect reader
prompt; the two answers are shown side by side with the distinct facts each contains.

Use from any page that has per-strategy result lists::

    reader_panel(store, query_text, comparison_lists(store, result), key="compare_reader",
                 labels=comparison_labels(result))

The generator is the configured OpenAI-compatible endpoint (answers cached in the store's LLM
cache) or, without one, SmolLM2-135M-Instruct running locally. Answers are also kept in
``st.session_state`` per (generator, question, documents, answer length), so reruns are instant
and nothing is generated before the button is pressed. Everything from documents and answers is
HTML-escaped before display.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping, Sequence

import pandas as pd
import streamlit as st

from services import storage
from services.reader import Answer, FactCount, LocalGenerator, ReaderDoc, ReaderError, RemoteGenerator, count_facts
from services.workflows import corpus as cw
from services.workflows.compare import STRATEGY_LABELS, Comparison
from services.workflows.llm_cache import StoreLLMCache
from ui.render import highlight, md_plain
from ui.state import KEEP, clamp_state, follow_default, llm_config

__all__ = ["ReaderDoc", "answer_html", "comparison_labels", "comparison_lists", "reader_panel"]

LOCAL = "local"
ENDPOINT = "endpoint"
MAX_KEPT_ANSWERS = 64
CONFIGURE_HELP = (
    "**No LLM endpoint is configured.** To read with your own model, point the app at any OpenAI-compatible "
    "chat-completions endpoint (OpenAI, vLLM, llama.cpp server, Ollama, LM Studio, ...): set the environment "
    "variables `MRAG_LLM_BASE_URL` (omit for api.openai.com), `MRAG_LLM_MODEL` and `MRAG_LLM_API_KEY` "
    "(or `OPENAI_API_KEY`), or put `base_url`, `model` and `api_key` under `[llm]` in "
    "`.streamlit/secrets.toml`, then restart the app."
)
LOCAL_NOTE = ("Meanwhile the answers come from **SmolLM2-135M-Instruct** running locally through transformers "
              "(greedy decoding). It is a very small model: expect short answers that can be wrong; "
              "the fact counts still show how much of each document list reaches the answer.")


@st.cache_resource(show_spinner="Loading SmolLM2-135M-Instruct…", max_entries=1)
def local_generator() -> LocalGenerator:
    """The local SmolLM2 generator, loaded once per process (CUDA when present)."""
    return LocalGenerator()


def comparison_lists(store: storage.Store, comparison: Comparison) -> dict[str, list[ReaderDoc]]:
    """Per strategy key, the comparison's top-k rows as reader documents (texts fetched from the store)."""
    ids = sorted({r.doc_id for o in comparison.outcomes.values() for r in o.rows})
    texts = {d.id: d.text for d in cw.get_documents(store, ids)}
    return {key: [ReaderDoc(r.title, r.category, texts.get(r.doc_id, "")) for r in outcome.rows]
            for key, outcome in comparison.outcomes.items()}


def comparison_labels(comparison: Comparison) -> dict[str, str]:
    """Per strategy key, its display label as the comparison names it (LLM strategies included)."""
    return {key: outcome.label for key, outcome in comparison.outcomes.items()}


def answer_html(text: str, facts: Sequence[str] = ()) -> str:
    """Escaped answer with its facts in ``<mark>`` and line breaks kept (blank lines -> paragraphs)."""
    safe = highlight(text, facts)
    paras = [p for p in re.split(r"\n\s*\n", safe) if p.strip()]
    return "".join(f"<p>{'<br>'.join(p.strip().splitlines())}</p>" for p in paras)


def _fingerprint(*parts: Any) -> str:
    """Stable short hash of JSON-able parts (session-state keys for answers)."""
    raw = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


def _answer_key(generator_id: str, max_tokens: int, question: str, docs: Sequence[ReaderDoc]) -> str:
    return _fingerprint(generator_id, max_tokens, question, [(d.title, d.category, d.text) for d in docs])


def _remember(store_key: str, key: str, answer: Answer) -> None:
    kept: dict[str, Answer] = st.session_state.setdefault(store_key, {})
    kept[key] = answer
    while len(kept) > MAX_KEPT_ANSWERS:
        kept.pop(next(iter(kept)))


def _generate(store: storage.Store, choice: str, cfg: Any, question: str, docs: Sequence[ReaderDoc],
              max_tokens: int) -> Answer:
    """One answer from the chosen generator (raises :class:`ReaderError`)."""
    if choice == ENDPOINT:
        from services.llm.client import LLMClient

        with LLMClient(cfg) as client:
            return RemoteGenerator(client, StoreLLMCache(store)).answer(question, docs, max_new_tokens=max_tokens)
    return local_generator().answer(question, docs, max_new_tokens=max_tokens)


def _facts_frame(facts: FactCount) -> pd.DataFrame:
    items = facts.items()
    return pd.DataFrame({"kind": [k for k, _ in items], "fact": [f for _, f in items]})


def _show_answer(answer: Answer, facts: FactCount, other: FactCount | None, key: str, max_tokens: int) -> None:
    delta = None if other is None else facts.total - other.total
    st.metric("Distinct facts", facts.total, delta=delta,
              help="Numbers, dates and named entities in the answer, each counted once (see count_facts).")
    st.caption(f"{len(facts.numbers)} numbers · {len(facts.dates)} dates · {len(facts.entities)} entities")
    with st.container(border=True):
        st.markdown(answer_html(answer.text, [f for _, f in facts.items()]), unsafe_allow_html=True)
    timing = "from the LLM cache (no tokens spent now)" if answer.cached else f"{answer.seconds:.1f} s"
    st.caption(f"{md_plain(answer.model)} · {answer.prompt_tokens} prompt + {answer.completion_tokens} answer tokens "
               f"· {timing}")
    if answer.cut_off or answer.completion_tokens >= max_tokens:
        st.caption(f"The answer stopped at the {max_tokens}-token limit, so it may be cut off: raise "
                   "**Max answer tokens** for a longer one.")
    if answer.truncated:
        st.warning(f"Prompt shortened: {answer.note}")
    if facts.total:
        st.dataframe(_facts_frame(facts), hide_index=True, key=f"{key}_facts")


def reader_panel(
    store: storage.Store,
    question: str,
    lists: Mapping[str, Sequence[ReaderDoc]],
    *,
    key: str,
    default_k: int | None = None,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Two strategies' answers side by side.

    ``lists`` maps strategy keys (``standard``, ``mrag``, ...) to their ranked documents;
    ``labels`` names them (default :data:`STRATEGY_LABELS`); ``default_k`` is the initial number
    of documents sent (default: all of the shorter list, at most 5). ``key`` prefixes every widget
    key, so the panel can appear on several pages.
    """
    names = {**STRATEGY_LABELS, **(labels or {})}
    strategies = [s for s in lists if lists[s]]
    # no heading of its own: the Reader page's title and Compare's expander ("Reader: ...") already name it
    st.caption("The top-k documents of two strategies go to an LLM with the multi-aspect reader prompt (each "
               "document a numbered section with its title and category, then the task and the question). "
               "More distinct facts (numbers, dates, named entities) usually means more aspects answered.")
    if not question.strip() or not strategies:
        st.info("Pick a query with retrieved documents to read them.")
        return

    cfg = llm_config()
    if cfg is None:
        st.info(CONFIGURE_HELP)
        st.caption(LOCAL_NOTE)
        choice = LOCAL
    else:
        choice = st.radio("Generator", [ENDPOINT, LOCAL], horizontal=True, key=f"{key}_generator", **KEEP,
                          format_func={ENDPOINT: f"Endpoint: {md_plain(cfg.describe())}",
                                       LOCAL: "Local SmolLM2-135M-Instruct"}.get)
    generator_id = f"{ENDPOINT}:{cfg.model}@{cfg.base_url}" if choice == ENDPOINT and cfg else f"{LOCAL}:smollm2"

    left_default = "standard" if "standard" in strategies else strategies[0]
    right_default = "mrag" if "mrag" in strategies else strategies[min(1, len(strategies) - 1)]
    longest = max(len(lists[s]) for s in strategies)
    cols = st.columns([2, 2, 1, 1])
    # the choices are kept for the session (back from another page they are still there); a strategy no longer
    # offered falls back to the default
    for side, default in (("left", left_default), ("right", right_default)):
        if st.session_state.get(f"{key}_{side}", default) not in strategies:
            st.session_state.pop(f"{key}_{side}")
    left = cols[0].selectbox("Left", strategies, index=strategies.index(left_default), key=f"{key}_left",
                             format_func=lambda s: names.get(s, s), **KEEP)
    right = cols[1].selectbox("Right", strategies, index=strategies.index(right_default), key=f"{key}_right",
                              format_func=lambda s: names.get(s, s), **KEEP)
    k_default = max(1, min(default_k or min(5, len(lists[left]), len(lists[right])), longest))
    k_key = f"{key}_k"
    follow_default(k_key, (question, default_k), k_default)  # k follows the default of a newly picked question
    clamp_state(k_key, 1, longest)
    k = int(cols[2].number_input("k (documents sent)", 1, longest, key=k_key, **KEEP))
    max_tokens = int(cols[3].number_input("Max answer tokens", 16, 4096, 256 if choice == ENDPOINT else 128,
                                          step=16, key=f"{key}_max_tokens", **KEEP))

    sides = [(left, list(lists[left])[:k]), (right, list(lists[right])[:k])]
    kept_key = f"{key}_answers"
    keys = [_answer_key(generator_id, max_tokens, question, docs) for _, docs in sides]
    errors: dict[str, str] = {}
    if st.button("Generate answers", type="primary", key=f"{key}_go"):
        for (strategy, docs), ak in zip(sides, keys):
            if ak in st.session_state.get(kept_key, {}) or ak in errors:
                continue  # already answered (also: the same list on both sides)
            hint = "" if choice == ENDPOINT else " (SmolLM2 on a CPU can take a minute)"
            with st.spinner(f"{names.get(strategy, strategy)}: generating the answer{hint}…"):
                try:
                    _remember(kept_key, ak, _generate(store, choice, cfg, question, docs, max_tokens))
                except ReaderError as exc:
                    errors[ak] = str(exc)
    kept = st.session_state.get(kept_key, {})
    answers = [kept.get(ak) for ak in keys]
    facts = [count_facts(a.text) if a is not None else None for a in answers]
    for i, (col, (strategy, docs), ak) in enumerate(zip(st.columns(2), sides, keys)):
        with col:
            st.markdown(f"**{md_plain(names.get(strategy, strategy))}** · top {len(docs)}")
            with st.expander(f"Documents sent ({len(docs)})"):
                st.dataframe(pd.DataFrame({"#": range(1, len(docs) + 1), "title": [d.title for d in docs],
                                           "category": [d.category for d in docs]}),
                             hide_index=True, key=f"{key}_docs_{i}")
            answer, fc = answers[i], facts[i]
            if ak in errors:
                st.error(f"No answer: {md_plain(str(errors[ak]))}")
            elif answer is None or fc is None:
                st.caption("Press **Generate answers** to read these documents.")
            else:
                _show_answer(answer, fc, facts[1 - i], f"{key}_{i}", max_tokens)
