"""Why an LLM request (or a batch of them) failed, in one word, with what to do about it.

Every failure the app reports - a stored failed suggestion, the stop message of a pre-annotation on the Annotate and
Review page, the summary of ``mrag-studio annotate`` - names one *cause* from :data:`CAUSES`, so that they
all say the same thing. A failure's text starts with its cause (``"timeout: LLM request to model ... failed: no
answer within 60 s (MRAG_LLM_TIMEOUT)"``: :func:`tag`), which :func:`cause_of` reads back from a stored error.

Causes of one request (:class:`~services.llm.client.LLMError` sets ``cause``):

* ``timeout``: no answer within ``MRAG_LLM_TIMEOUT``;
* ``connection``: the endpoint cannot be reached;
* ``auth``: HTTP 401 / 403, the key is refused;
* ``not_found``: HTTP 404, an unknown model or a wrong base URL;
* ``rate_limit``: HTTP 429 through every retry;
* ``server``: HTTP 5xx through every retry;
* ``rejected``: another 4xx, the endpoint refused this request (a prompt too long for the model's context);
* ``bad_answer``: a 200 that is not a chat completion (a wrong base URL answering with a web page).

Causes of an answer (the annotator sets them):

* ``refusal``: the model declined to answer (OpenAI's ``message.refusal``);
* ``parse``: the answer names no valid category, through every re-ask.

:func:`advice` turns a cause into what to do, naming the settings (``MRAG_LLM_TIMEOUT``, ``MRAG_LLM_CONCURRENCY``,
...) with their values now.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.llm.config import LLMConfig, redact_url

__all__ = ["CAUSES", "Cause", "advice", "cause_of", "describe", "tag"]


@dataclass(frozen=True)
class Cause:
    """A cause's short name for counts (``what``) and its advice, a template that may use ``{timeout}``,
    ``{concurrency}``, ``{retries}``, ``{url}`` and ``{model}``."""

    what: str
    advice: str


CAUSES: dict[str, Cause] = {
    "timeout": Cause("no answer in time",
                     "raise MRAG_LLM_TIMEOUT (now {timeout} s), or lower MRAG_LLM_CONCURRENCY (now {concurrency}): a "
                     "small local server answers one request at a time, so the others wait in its queue"),
    "connection": Cause("endpoint unreachable", "check that the server at {url} runs (MRAG_LLM_BASE_URL)"),
    "auth": Cause("API key refused", "check MRAG_LLM_API_KEY"),
    "not_found": Cause("unknown model or URL", "check MRAG_LLM_MODEL ({model}) and MRAG_LLM_BASE_URL ({url})"),
    "rate_limit": Cause("rate limited", "lower MRAG_LLM_CONCURRENCY (now {concurrency}), or wait a while"),
    "server": Cause("server error",
                    "look at the server's log; lower MRAG_LLM_CONCURRENCY (now {concurrency}) if it is overloaded"),
    "rejected": Cause("request refused by the endpoint",
                      "the endpoint refused the request: see its message (a document too long for the model's "
                      "context needs a model with a longer one)"),
    "bad_answer": Cause("not a chat completion",
                        "check that MRAG_LLM_BASE_URL ({url}) is the OpenAI-compatible API, usually ending in /v1"),
    "refusal": Cause("the model refused", "label these documents by hand, or use the offline zero-shot suggestion"),
    "parse": Cause("no valid category in the answer",
                   "use a larger model, or the offline zero-shot suggestion for these documents"),
}


def tag(cause: str, message: str) -> str:
    """``message`` as stored and shown: ``"<cause>: <message>"`` (``cause`` one of :data:`CAUSES`)."""
    if cause not in CAUSES:
        raise ValueError(f"unknown cause {cause!r}")
    return f"{cause}: {message}"


def cause_of(error: str | None) -> str | None:
    """The cause a failure's text starts with (see :func:`tag`), else None (an error stored before causes were)."""
    head, sep, _rest = (error or "").partition(": ")
    return head if sep and head in CAUSES else None


def advice(cause: str | None, config: LLMConfig | None) -> str:
    """What to do about ``cause``, with the configured values filled in (``""`` for an unknown cause)."""
    if cause not in CAUSES:
        return ""
    template = CAUSES[cause].advice
    if config is None:
        return template.replace(" (now {timeout} s)", "").replace(" (now {concurrency})", "").format(
            timeout="?", concurrency="?", retries="?", url="the configured URL", model="the configured model")
    return template.format(timeout=f"{config.timeout_s:g}", concurrency=config.concurrency,
                           retries=config.max_retries, url=redact_url(config.base_url), model=config.model)


def describe(counts: dict[str, int]) -> str:
    """Failures by cause, most first: ``"30 no valid category in the answer (parse), 5 no answer in time
    (timeout)"``; unknown causes count as ``other``."""
    parts = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{n} {CAUSES[c].what} ({c})" if c in CAUSES else f"{n} other" for c, n in parts)
