"""``mrag-studio generate``: write a multi-aspect query set for a stored corpus headless, as the Query
Builder does.

Each planned query draws one labelled document from each of N distinct categories (N from ``--aspects``,
``--per-count`` plans per N, seeded) and gets a story that touches all of them, plus Fusion sub-queries: written
by the configured OpenAI-compatible LLM (``MRAG_LLM_*``, as elsewhere) or, offline, composed from the documents'
salient sentences (``--generator``; ``auto``: the LLM when one is configured). The documents are the query's ground
truth. Queries are stored a batch at a time; a set named like an unfinished generated one is resumed with its own
stored settings and generator (Ctrl+C stops after the current batch). Bad input ends with one line
``error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from mrag_core.cli_basics import fail, positive_int
from mrag_core.wording import counted
from services.cli.common import (
    add_database_option,
    every_few_seconds,
    llm_endpoint,
    named_corpus,
    stop_on_ctrl_c,
    store_command,
)

GENERATORS = ("auto", "llm", "offline")


def _counts(value: str) -> list[int]:
    try:
        counts = sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--aspects takes whole numbers separated by commas, not {value!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("--aspects takes counts of 1 or more, e.g. 1,2,3")
    return counts


def add_generate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``generate`` sub-command on ``subparsers`` (from ``add_subparsers``)."""
    g = subparsers.add_parser("generate", help="write a multi-aspect query set for a stored corpus (LLM or offline); "
                                               "resumable")
    g.add_argument("--corpus", required=True, help="corpus name (as on the Corpus Import page)")
    g.add_argument("--name", required=True, help="the query set's name (an unfinished generated set of this name "
                                                 "is resumed)")
    g.add_argument("--aspects", type=_counts, default=[1, 2, 3], help="aspect counts, comma list (default 1,2,3)")
    g.add_argument("--per-count", type=positive_int, default=5, help="queries per aspect count (default 5)")
    g.add_argument("--seed", type=int, default=0, help="seed of the document draw (default 0)")
    g.add_argument("--generator", choices=GENERATORS, default="auto",
                   help="llm: the endpoint of MRAG_LLM_*; offline: extracts of the documents' salient sentences; "
                        "auto (default): the LLM when one is configured")
    g.add_argument("--fusion", type=int, default=3, metavar="N",
                   help="Fusion sub-queries per query (default 3; 0 for none)")
    add_database_option(g)
    return g


def _client(kind: str) -> Any:
    """An LLM client for ``--generator kind`` (``None``: offline), saying on stderr which generator writes."""
    cfg = None if kind == "offline" else llm_endpoint("the llm generator needs" if kind == "llm" else None)
    if cfg is None:
        print("generator: offline composer (extracts of the documents' salient sentences)"
              + ("; no LLM endpoint is configured" if kind == "auto" else ""), file=sys.stderr)
        return None
    from services.llm.client import LLMClient

    print(f"generator: LLM, {cfg.describe()}", file=sys.stderr)
    return LLMClient(cfg)


@store_command
def cmd_generate(args: argparse.Namespace, store: Any) -> int:
    """Generate (or resume) a query set; returns the exit status (0 done, 1 stopped, 2 bad input). Done with
    failed queries (an answer that was no story, an endpoint error for one request), it says how many and the
    first one's error: the same command asks again for them. So for stories whose Fusion sub-queries request
    failed: the same command asks for those sub-queries only, keeping the stories."""
    import db
    from services.workflows import querysets as qw

    corpus = named_corpus(store, args.corpus)
    if args.fusion < 0:
        return fail("--fusion takes 0 or more sub-queries")
    existing = next((q for q in db.list_query_sets(store, corpus.id) if q.name == args.name.strip()), None)
    resume = existing is not None
    if resume:
        planned = int(existing.params.get("planned", 0))
        if not existing.source.startswith("generated") or not planned:
            return fail(f"query set {existing.name!r} exists and was not generated here: choose another --name")
        todo = qw.generation_todo(store, existing)
        if not todo.missing:
            print(f"query set {existing.name!r} (#{existing.id}) is complete: {counted(planned, 'query', 'queries')}")
            return 0
        stored = str(existing.params.get("generator", ""))
        kind = "offline" if stored.startswith("offline") else "llm"  # the generator it was started with
        print(f"resuming query set {existing.name!r} (#{existing.id}): {todo.usable} of {planned} stored "
              f"({todo.resume_text() or 'failed ones are asked again'}), with its own settings", file=sys.stderr)
    else:
        kind = args.generator
    client = _client(kind)
    progress = every_few_seconds()
    cancel = threading.Event()
    try:
        with stop_on_ctrl_c(cancel):
            report = qw.generate_query_set(
                store, corpus_id=corpus.id, name=args.name, aspect_counts=args.aspects, per_count=args.per_count,
                seed=args.seed, client=client, want_fusion=args.fusion > 0, n_fusion=max(args.fusion, 1),
                progress=lambda done, total: progress("queries", done, total), cancel=cancel,
                query_set_id=existing.id if resume else None)
    except qw.QuerySetError as exc:
        return fail(str(exc))
    finally:
        if client is not None:
            client.close()
    info = db.get_query_set(store, report.query_set_id)
    print(f"query set {info.name!r} (#{info.id}): {report.ok} ok, {report.flagged} flagged, {report.failed} failed "
          f"now; {info.n_queries} of {report.planned} stored")
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if report.fusion_asked:
        print(f"Fusion sub-queries asked for again for {counted(report.fusion_asked, 'story', 'stories')}: "
              f"{report.fusion_made} now {'has' if report.fusion_made == 1 else 'have'} them", file=sys.stderr)
    if report.cancelled:
        print(f"stopped with {counted(report.remaining, 'query', 'queries')} left ({report.left_text()}); run the "
              "same command again to resume", file=sys.stderr)
        return 1
    queries = db.list_queries(store, info.id)
    if failed := [q for q in queries if q.status == "failed"]:
        print(f"{counted(len(failed), 'query', 'queries')} failed (first: {failed[0].error[:200]}); run the same "
              f"command again to ask again for {'it' if len(failed) == 1 else 'them'}", file=sys.stderr)
    want = bool(info.params.get("want_fusion", False))
    if no_fusion := [q for q in queries if qw.needs_fusion(q, want)]:
        one = len(no_fusion) == 1
        print(f"{counted(len(no_fusion), 'query has', 'queries have')} no Fusion sub-queries: the endpoint failed "
              f"on that request (first: {no_fusion[0].error[:200]}); run the same command again to ask for "
              f"{'its' if one else 'their'} sub-queries again ({'its story is' if one else 'their stories are'} "
              "kept)",
              file=sys.stderr)
    return 0
