"""``mrag-studio annotate``: pre-annotate a stored corpus headless, as the Annotate and Review page does.

Every document that has no suggestion from the annotator yet gets one (a failed one is asked again), a batch at a
time, each batch stored in its own transaction: a run that is stopped or fails is resumed by the same command. A
Ctrl+C stops sending requests and stores the current batch with the answers in flight; a second one stops at once
and stores the answers the batch has received (the progress line counted them; answers still in flight reach the
LLM cache only, so the resume asks for nothing twice). The annotator is the configured OpenAI-compatible LLM
(``MRAG_LLM_*``, as elsewhere; answers cached in the store) or, offline, MiniLM zero-shot similarity to each
category's name and description (``--annotator``; ``auto``: the LLM when one is configured). Suggestions are
proposals: reviewers accept them on the Annotate and Review page. Bad input ends with one line ``error: ...`` and
exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
from typing import Any

from mrag_core.cli_basics import CLIError, fail, positive_int
from mrag_core.wording import counted
from services.cli.common import (
    add_database_option,
    every_few_seconds,
    llm_endpoint,
    named_corpus,
    stop_on_ctrl_c,
    store_command,
)

ZERO_SHOT_MODEL = "minilm"
ANNOTATORS = ("auto", "llm", "zero-shot")


def add_annotate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``annotate`` sub-command on ``subparsers`` (from ``add_subparsers``)."""
    a = subparsers.add_parser("annotate", help="suggest a category for each document of a stored corpus "
                                               "(LLM or offline zero-shot); resumable")
    a.add_argument("--corpus", required=True, help="corpus name (as on the Corpus Import page)")
    a.add_argument("--annotator", choices=ANNOTATORS, default="auto",
                   help="llm: the endpoint of MRAG_LLM_*; zero-shot: offline MiniLM similarity to each category; "
                        "auto (default): the LLM when one is configured")
    a.add_argument("--undecided-only", action="store_true",
                   help="only documents without a label decision (not those imported with a label)")
    a.add_argument("--batch-size", type=positive_int, default=32, help="documents stored per transaction (32)")
    add_database_option(a)
    a.add_argument("--threads", type=int, default=None, help="torch CPU threads (zero-shot)")
    return a


def make_annotator(kind: str, store: Any, threads: int | None) -> Any:
    """The annotator ``--annotator kind`` names (``auto`` resolved), and says on stderr which it is."""
    from services.workflows import annotation as aw

    cfg = llm_endpoint("--annotator llm needs" if kind == "llm" else None) if kind in ("auto", "llm") else None
    if cfg is not None:
        from services.llm.client import LLMClient
        from services.workflows.llm_cache import StoreLLMCache

        print(f"annotator: LLM, {cfg.describe()}", file=sys.stderr)
        return aw.LLMAnnotator(LLMClient(cfg), cache=StoreLLMCache(store))
    from mrag_core.device import configure_threads
    from mrag_core.extraction import embed_texts
    from mrag_core.models.loader import ModelLoadError, load_model

    configure_threads(threads)
    try:
        lm = load_model(ZERO_SHOT_MODEL)
    except (ModelLoadError, RuntimeError, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    print(f"annotator: offline zero-shot ({ZERO_SHOT_MODEL} similarity to each category's name and description)"
          + ("; no LLM endpoint is configured" if kind == "auto" else ""), file=sys.stderr)
    return aw.ZeroShotAnnotator(lambda texts: embed_texts(lm, texts).standard, ZERO_SHOT_MODEL)


@store_command
def cmd_annotate(args: argparse.Namespace, store: Any) -> int:
    """Pre-annotate a corpus; returns the exit status (0 done, 1 stopped, 2 bad input, 130 stopped at once by a
    second Ctrl+C: the summary then counts what the run stored up to that moment)."""
    import db
    from services.workflows import annotation as aw

    corpus = named_corpus(store, args.corpus)
    if not db.list_categories(store, corpus.id):
        return fail(f"corpus {corpus.name!r} has no categories: import documents with labels, or add categories "
                    "on the Annotate and Review page first")
    if corpus.n_documents == 0:
        return fail(f"corpus {corpus.name!r} has no documents")
    annotator = make_annotator(args.annotator, store, args.threads)
    progress = every_few_seconds()
    cancel = threading.Event()
    so_far: list[aw.PreannotateSummary] = []  # what the run has stored, after each store
    interrupted = False
    try:
        with stop_on_ctrl_c(cancel):
            summary = aw.preannotate(store, corpus.id, annotator, batch_size=args.batch_size,
                                     progress=lambda done, total: progress("documents", done, total),
                                     cancel=cancel, undecided_only=args.undecided_only, on_summary=so_far.append)
    except ValueError as exc:  # the corpus' categories cannot be offered (e.g. two differing only in case)
        return fail(str(exc))
    except KeyboardInterrupt:  # a second Ctrl+C: the answers the current batch received are stored
        if not so_far:
            raise
        summary, interrupted = dataclasses.replace(so_far[-1], cancelled=True), True
    finally:
        if isinstance(annotator, aw.LLMAnnotator):
            annotator.close()
    who = f"{summary.agent} ({summary.model_version})"
    if summary.todo == 0:
        which = "every document without a label decision" if args.undecided_only else "every document"
        print(f"{corpus.name}: {which} already has a suggestion from {who}; nothing to do")
        return 0
    scope = " of those without a label decision" if args.undecided_only else ""
    print(f"{corpus.name}: {counted(summary.ok, 'suggestion')} stored, {summary.failed} failed, by {who}; "
          f"{summary.already_done}{scope} already had one")
    for error in summary.errors:
        print(f"failed: {error}", file=sys.stderr)
    if summary.cancelled:
        why = "" if cancel.is_set() else "the endpoint failed for every request (see 'failed:' above); fix it, then "
        print(f"stopped with {counted(summary.remaining, 'document')} left; {why}run the same command again to "
              "resume", file=sys.stderr)
        return 130 if interrupted else 1
    if summary.failed:
        print("the same command asks again for the failed ones", file=sys.stderr)
    return 0
