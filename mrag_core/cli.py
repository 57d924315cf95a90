"""Command line: ``python -m mrag_core bench ...`` runs the engine headless; ``import``, ``queries``,
``index`` and ``eval`` (:mod:`mrag_core.cli_import`, :mod:`mrag_core.cli_index`, :mod:`mrag_core.cli_eval`)
work on the app's store.

Bad input (missing file, wrong JSON shape, unknown model, bad option) ends with one line
``error: ...`` and exit status 2, never a traceback.

LLM strategies (``multi-query``, ``hyde``, ``intent`` and their ``-mrag`` forms) take the endpoint
from ``MRAG_LLM_*`` (as the app does) and cache its answers in ``$MRAG_CACHE_DIR/llm_cache.json``,
so a rerun sends no request; their token cost is printed after the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from mrag_core.evaluation import (NAMED_STRATEGIES, EvaluationResult, QueryCase, authors_file_layout, authors_layout,
                                  evaluate, summarize)
from mrag_core.llm_strategies import LLMOptions, TextBatch, families_for, is_llm_strategy
from mrag_core.wording import counted

DEFAULT_STRATEGIES = "standard,mrag,split,fusion,fusion-mrag"


class CLIError(Exception):
    """A user-facing error: printed as ``error: <message>``."""


def fail(message: str) -> int:
    """Print ``error: <message>`` on stderr; returns the exit status of bad input (2)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def open_cli_store(url: str | None) -> Any:
    """The app's store at ``url`` (else ``$MRAG_DATABASE_URL`` or the default file); raises :class:`CLIError`
    naming the problem (a bad URL, a file that is not a database, a failed migration)."""
    import db

    try:
        return db.open_store(url)
    except Exception as exc:  # noqa: BLE001 - any connection/migration problem, one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # not SQLAlchemy's "Background on..." line
        if url is None:
            url = db.engine.default_database_url()
        raise CLIError(f"cannot open the database: {hide_secrets(first, url)}") from None


def url_secrets(url: str) -> list[str]:
    """What of a database URL could be a password, longest first: the parsed password, and in its
    ``scheme://user:secret@host`` part the text after the first ``:`` (up to the last ``@``, or the
    whole rest, unless a number, when an ``@`` is missing: a parser takes it for a port)."""
    from sqlalchemy.engine import make_url

    found: set[str] = set()
    try:
        if password := make_url(url).password:
            found.add(str(password))
    except Exception:  # noqa: BLE001 - an unparsable URL: the text below still names the candidates
        pass
    netloc = url.partition("://")[2].split("/", 1)[0] if "://" in url else ""
    userinfo = netloc.rpartition("@")[0] if "@" in netloc else netloc
    after_colon = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    if "@" in netloc or not after_colon.isdigit():  # "host:5432" without "@" is a port, nothing secret
        found.add(after_colon)
    return sorted((s for s in found if s), key=len, reverse=True)


def hide_secrets(text: str, url: str) -> str:
    """``text`` with every :func:`url_secrets` of ``url`` written ``***``: an error from opening a database
    never shows its password."""
    for secret in url_secrets(url):
        text = text.replace(secret, "***")
    return text


def store_command(command: Callable[[argparse.Namespace, Any], int]) -> Callable[[argparse.Namespace], int]:
    """``command(args, store)`` as ``command(args)``: the store named by ``args.database`` is opened
    before it runs and closed after, and a :class:`CLIError` from either, or a store error the
    command did not handle itself (e.g. ``db.BusyError``: another writer held the database too
    long), or a database that refused a statement (read-only file, full disk, lost connection, a value it
    cannot store: :func:`database_failure`), ends as ``error: ...`` with exit status 2."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        import db
        from sqlalchemy.exc import DBAPIError

        try:
            store = open_cli_store(args.database)
        except CLIError as exc:
            return fail(str(exc))
        try:
            return command(args, store)
        except (CLIError, db.StoreError) as exc:
            return fail(str(exc))
        except DBAPIError as exc:  # its session was rolled back: what earlier sessions committed stays
            return fail(database_failure(exc))
        finally:
            store.close()

    return run


def database_failure(exc: Exception) -> str:
    """One line for a statement the database refused (a SQLAlchemy ``DBAPIError``): the driver's own first line
    (not the SQL, its parameters or SQLAlchemy's "Background on this error" link), that the transaction's change was
    not kept, and what to do: for a read-only database, to make it writable or give another one; for a value it
    cannot store (``DataError``: a NUL character on PostgreSQL, a text too long), to fix that value."""
    from sqlalchemy.exc import DataError

    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    if "readonly" in first.replace(" ", "").lower():
        advice = "Check that the database file and its folder may be written, or give another --database"
    elif isinstance(exc, DataError):
        advice = "A value of the input cannot be stored in this database: fix it and run the command again"
    else:
        advice = "Check the database (its disk, its server) and run the command again"
    return f"the database refused the change ({first}); nothing of it was written. {advice}"


def named_corpus(store: Any, name: str) -> Any:
    """The stored corpus called ``name`` (a ``db.CorpusInfo``); raises :class:`CLIError` naming the
    corpora there are when there is none."""
    import db

    try:
        return db.get_corpus_by_name(store, name)
    except db.NotFoundError:
        names = ", ".join(repr(c.name) for c in db.list_corpora(store)) or "none"
        raise CLIError(f"unknown corpus {name!r} (corpora: {names})") from None


def _strategies(value: str) -> list[str]:
    names = [s.strip() for s in value.split(",") if s.strip()]
    bad = [s for s in names if s not in NAMED_STRATEGIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown strategies {bad}; choose from {', '.join(NAMED_STRATEGIES)}")
    return names


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


def _recall_target(value: str) -> float:
    from mrag_core.hnsw_tuning import check_target

    try:
        r = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    try:
        return check_target(r)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mrag_core", description="MRAG Studio engine, headless.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="embed a benchmark, evaluate strategies, print RSR / CSR / weighted")
    b.add_argument("--articles", help="articles JSON / JSON.bz2: [{title, text, label}]")
    b.add_argument("--queries", help="queries JSON / JSON.bz2: [{topics, text, fusion}]")
    b.add_argument("--topic-layout", help="legal / accident folder: <category>/<category>_<topic>.json")
    b.add_argument("--model", default="minilm", help="registry name (minilm, smollm2) or a local HF folder")
    more = ", ".join(n for n in NAMED_STRATEGIES if n not in DEFAULT_STRATEGIES.split(","))
    b.add_argument("--strategies", type=_strategies, default=_strategies(DEFAULT_STRATEGIES),
                   help=f"comma list (default {DEFAULT_STRATEGIES}); also {more}")
    b.add_argument("--layer", type=int, default=-1, help="layer for head embeddings (default -1 = last)")
    b.add_argument("--pooling", choices=("last", "first", "mean"), help="token pooling of head vectors")
    b.add_argument("--c", type=positive_int, default=32, help="per-space search depth (default 32)")
    b.add_argument("--k-max", type=positive_int, default=32, help="score k = 1..K (default 32)")
    b.add_argument("--w", type=float, default=2.0, help="weight of exact hits in the weighted ratio (default 2)")
    b.add_argument("--backend", choices=("torch", "faiss-flat", "faiss-hnsw"), default="torch")
    b.add_argument("--target-recall", type=_recall_target, default=0.9,
                   help="faiss-hnsw: each space's efSearch is the smallest reaching this recall@32 (default 0.9)")
    b.add_argument("--device", default="auto", help="auto | cpu | cuda")
    b.add_argument("--half", action="store_true", help="float16 weights on CUDA")
    b.add_argument("--batch-size", type=positive_int, default=32)
    b.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    b.add_argument("--json", dest="json_out",
                   help="write per-query results: {strategy: {n_aspects: {success_ratio, category_success_ratio: "
                        "[k][query]}}}")
    b.add_argument("--authors-json", dest="authors_json_out",
                   help="write them as the MRAG authors' result files are (keys rat, suc, category_rat, category_suc; "
                        "their strategy names, e.g. standard-rag), for their plotting code")
    add_llm_options(b)
    try:
        from mrag_core.cli_eval import add_eval_parser
    except ImportError:  # the evaluation-runs command is optional
        pass
    else:
        add_eval_parser(sub)
    from mrag_core.cli_annotate import add_annotate_parser
    from mrag_core.cli_corpora import add_corpora_parser
    from mrag_core.cli_export import add_export_parser
    from mrag_core.cli_generate import add_generate_parser
    from mrag_core.cli_import import add_import_parsers
    from mrag_core.cli_index import add_index_parser

    add_import_parsers(sub)
    add_annotate_parser(sub)
    add_generate_parser(sub)
    add_index_parser(sub)
    add_export_parser(sub)
    add_corpora_parser(sub)
    return p


def add_llm_options(p: argparse.ArgumentParser) -> None:
    """Options of the LLM strategies (``--rewrites``, ``--intent-answers``, ``--hyde-with-query``)."""
    d = LLMOptions()
    p.add_argument("--rewrites", type=positive_int, default=d.n_rewrites,
                   help=f"multi-query: rewrites asked of the LLM (default {d.n_rewrites}, at most 10)")
    p.add_argument("--intent-answers", type=positive_int, default=d.n_answers,
                   help=f"intent: plausible answers asked of the LLM (default {d.n_answers}, at most 8)")
    p.add_argument("--hyde-with-query", action=argparse.BooleanOptionalAction, default=d.hyde_with_query,
                   help="HyDE: fuse the passage's list with the query's own list (default yes)")


def llm_options_from(args: argparse.Namespace) -> LLMOptions:
    """The :class:`LLMOptions` of parsed arguments (defaults where the options are absent)."""
    d = LLMOptions()
    return LLMOptions(n_rewrites=getattr(args, "rewrites", d.n_rewrites),
                      n_answers=getattr(args, "intent_answers", d.n_answers),
                      hyde_with_query=getattr(args, "hyde_with_query", d.hyde_with_query))


@contextlib.contextmanager
def stop_on_ctrl_c(cancel: threading.Event, message: str = "stopping after the current batch (Ctrl+C again to "
                                                               "stop now)") -> Iterator[threading.Event]:
    """While the block runs, the first Ctrl+C sets ``cancel`` (resumable work then stops after its current batch,
    keeping what it saved) and says so on stderr (``message``); a second one stops at once (``KeyboardInterrupt``).
    Python's handler is put back afterwards. Outside the main thread (where signals cannot be caught) it does
    nothing. Yields an event set by a Ctrl+C: ``cancel`` set without it was set by someone else (a stop asked
    through the database, :func:`stopped_elsewhere`)."""
    pressed = threading.Event()

    def on_interrupt(_signum: int, _frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        print(message, file=sys.stderr, flush=True)
        pressed.set()
        cancel.set()

    previous = signal.signal(signal.SIGINT, on_interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        yield pressed
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def stopped_elsewhere(how: str) -> str:
    """Why a run stopped when no Ctrl+C stopped it: its heartbeat found a stop request (``how`` says where one is
    asked), or another claim."""
    return f"it was asked to stop from elsewhere ({how}), or another process took the work over"


def print_progress(stage: str, done: int, total: int) -> None:
    """``stage: done/total`` on stderr (the CLI's progress line)."""
    print(f"{stage}: {done}/{total}", file=sys.stderr, flush=True)


def every_few_seconds(show: Callable[..., None] = print_progress, seconds: float = 5.0) -> Callable[..., None]:
    """A progress callback ``(stage, done, total, *extra)`` that passes a stage's reports to ``show`` (with the
    same arguments; default :func:`print_progress`) at most once every ``seconds``, and always its first and last
    (``done == total``); a report equal to the last one shown is not shown again."""
    last: dict[str, float] = {}
    shown: dict[str, tuple[int, int]] = {}

    def progress(stage: str, done: int, total: int, *extra: Any) -> None:
        now = time.monotonic()
        if shown.get(stage) == (done, total):  # said already (a batch's last report, then the batch's own)
            return
        if done == total or stage not in last or now - last[stage] >= seconds:
            last[stage] = now
            shown[stage] = (done, total)
            show(stage, done, total, *extra)

    return progress


def text_table(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table: ``columns`` are (heading, format spec) pairs, e.g. ``("RSR", ">8.3f")``; the heading
    takes the spec's alignment and width; every cell is formatted with its column's spec (text longer than
    a ``<`` column's width is cut to it); cells are separated by one space."""
    layout = [re.match(r"[<>^]?\d*", spec).group(0) for _, spec in columns]

    def cell(value: Any, spec: str, head: str) -> str:
        width = int(head.lstrip("<>^") or 0)
        if isinstance(value, str) and width:
            value = value[:width]
        return format(value, spec)

    lines = [" ".join(format(h, head) for (h, _), head in zip(columns, layout))]
    lines += [" ".join(cell(v, spec, head) for v, (_, spec), head in zip(row, columns, layout)) for row in rows]
    return "\n".join(lines)


def format_cost_table(rows: list[dict[str, Any]]) -> str:
    """Plain-text LLM cost table: strategy, queries, tokens (prompt + completion of the expansions,
    cache hits at their original cost), tokens per query, spent (sent now), LLM seconds, cached, failed."""
    columns = [("strategy", "<18"), ("queries", ">7"), ("tokens", ">8"), ("tok/query", ">10.1f"), ("spent", ">7"),
               ("LLM s", ">7.2f"), ("cached", ">7"), ("failed", ">7")]
    return text_table(columns, [[r["strategy"], r["llm_queries"], r["tokens"], r["tokens_per_query"],
                                 r["spent_tokens"], r["llm_s"], r["cached"], r["failed"]] for r in rows])


COST_HEADING = "LLM cost (tokens of the expansions; spent = sent by this run, 0 when cached)"


def format_table(rows: list) -> str:
    """Plain-text table: strategy, aspects, k, RSR, CSR, weighted, queries."""
    width = max([15, *(len(r.strategy) for r in rows)])  # "multi-query-mrag" whole, not cut to 15
    columns = [("strategy", f"<{width}"), ("aspects", ">7"), ("k", ">4"), ("RSR", ">7.3f"), ("CSR", ">7.3f"),
               ("weighted", ">9.3f"), ("queries", ">8")]
    return text_table(columns, [[r.strategy, r.n_aspects, r.k, r.rsr, r.csr, r.weighted, r.n_queries] for r in rows])


def cmd_bench(args: argparse.Namespace) -> int:
    from mrag_core.benchmark import BenchmarkFormatError
    from mrag_core.device import configure_threads
    from mrag_core.models.loader import ModelLoadError, load_model
    from mrag_core.pipeline import load_benchmark, run_benchmark

    try:
        data = load_benchmark(args.articles, args.queries, args.topic_layout)
    except (BenchmarkFormatError, ValueError, OSError) as exc:
        raise CLIError(str(exc)) from exc
    for note in data.notes:
        print(f"note: {note}", file=sys.stderr)
    if data.unresolved:
        n = len(data.unresolved)
        print(f"warning: {counted(n, 'query topic')} {'matches' if n == 1 else 'match'} no single document (none, or "
              "several that nothing tells apart; they are left out of the ground truth; "
              f"first: {data.unresolved[0][1]!r})", file=sys.stderr)
    for option, path in (("--json", args.json_out), ("--authors-json", args.authors_json_out)):
        check_output_file(option, path)
    llm_names = [s for s in args.strategies if is_llm_strategy(s)]
    llm_cfg = _bench_endpoint(llm_names)
    options = llm_options_from(args)
    if llm_names:
        _check_options(options)
    configure_threads(args.threads)
    try:  # a layer the model lacks is refused from its config, before the weights load
        lm = load_model(args.model, device=args.device, half=args.half, head_pooling=args.pooling,
                        check_layer=args.layer)
    except (ModelLoadError, RuntimeError, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    print(f"model {lm.spec.name}: {lm.family}, {lm.n_layers} layers, {lm.n_heads} heads x {lm.head_dim}, "
          f"layer {lm.layer_index(args.layer)}, device {lm.device}", file=sys.stderr)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    base = [s for s in args.strategies if not is_llm_strategy(s)]
    out = run_benchmark(lm, data, base, layer=args.layer, c=args.c, k_max=args.k_max,
                        backend=args.backend, batch_size=args.batch_size, log=log, target_recall=args.target_recall)
    costs: list[dict[str, Any]] = []
    if llm_names:
        assert llm_cfg is not None
        llm_result, costs = _bench_llm(lm, data, out.index, llm_names, llm_cfg, options, args, log)
        merged = {**out.result.strategies, **llm_result.strategies}
        out.result.strategies = {s: merged[s] for s in args.strategies}
    print(format_table(summarize(out.result, w=args.w)))
    if costs:
        print()
        print_cost_table(costs, llm_names)
    from mrag_core.cli_export import write_whole

    for path, layout in ((args.json_out, authors_layout), (args.authors_json_out, authors_file_layout)):
        if path:
            write_whole(json.dumps(layout(out.result)).encode("utf-8"), Path(path))
            print(f"wrote {path}", file=sys.stderr)
    return 0


def check_output_file(option: str, path: str | None) -> None:
    """Refuse, before any work, an output ``path`` of ``option`` that cannot be a file to write: one in a folder that
    does not exist, or a folder itself (raises :class:`CLIError`; ``None`` is no output and passes)."""
    if not path:
        return
    if Path(path).is_dir():
        raise CLIError(f"cannot write {option} {path}: it is a folder; give the file to write")
    out_dir = Path(path).resolve().parent
    if not out_dir.is_dir():
        raise CLIError(f"cannot write {option} {path}: folder {out_dir} does not exist")


def llm_endpoint(needs: str | None = None) -> Any:
    """The environment's LLM endpoint (``MRAG_LLM_*``), or None when none is configured. Raises :class:`CLIError`
    for unusable settings, and when none is configured but ``needs`` (e.g. ``"hyde needs"``) says one is needed."""
    from mrag_core.llm.config import LLMConfig, LLMConfigError, no_endpoint_message

    try:
        cfg = LLMConfig.from_env()
    except LLMConfigError as exc:
        raise CLIError(f"the LLM endpoint settings are unusable: {exc}") from exc
    if cfg is None and needs:
        raise CLIError(no_endpoint_message(needs))
    return cfg


def _bench_endpoint(llm_names: Sequence[str]) -> Any:
    """The environment's LLM endpoint when LLM strategies are asked for (CLIError when none)."""
    if not llm_names:
        return None
    return llm_endpoint(f"{', '.join(llm_names)} {'needs' if len(llm_names) == 1 else 'need'}")


def _check_options(options: LLMOptions) -> None:
    from mrag_core.expansion.intent import MAX_ANSWERS
    from mrag_core.expansion.multi_query import MAX_REWRITES

    if options.n_rewrites > MAX_REWRITES:
        raise CLIError(f"--rewrites must be at most {MAX_REWRITES} (got {options.n_rewrites})")
    if options.n_answers > MAX_ANSWERS:
        raise CLIError(f"--intent-answers must be at most {MAX_ANSWERS} (got {options.n_answers})")


def _bench_llm(lm: Any, data: Any, index: Any, names: Sequence[str], cfg: Any, options: LLMOptions,
               args: argparse.Namespace, log: Any) -> tuple[EvaluationResult, list[dict[str, Any]]]:
    """Expand every benchmark query per LLM family (cached in ``$MRAG_CACHE_DIR/llm_cache.json``), embed
    all expansion texts in one pass, evaluate the LLM strategies per k; returns the result and the
    cost rows (:func:`bench_cost_rows`). A failed expansion searches the query's own text (counted as failed)."""
    from mrag_core.embedding_cache import cache_dir, cached_embed
    from mrag_core.llm.cache import JsonFileCache
    from mrag_core.llm.client import LLMClient
    from mrag_core.llm_strategies import expand_many

    questions = [q.text for q in data.queries]
    records: dict[str, list[dict[str, Any]]] = {}
    batch = TextBatch()
    with JsonFileCache(cache_dir() / "llm_cache.json", autoflush=False) as cache, LLMClient(cfg) as client:
        for fam in families_for(names):
            outcomes = expand_many(client, fam, questions, options, cache)
            records[fam] = [o.record() for o in outcomes]
            for qi, o in enumerate(outcomes):
                batch.add((fam, qi), list(o.texts) if o.ok else [questions[qi]])
            failed = sum(not o.ok for o in outcomes)
            log(f"LLM {fam}: {len(outcomes)} queries, {sum(o.cached for o in outcomes)} from cache"
                + (f", {failed} failed (searched with the query text)" if failed else ""))
    qemb, _ = cached_embed(lm, questions, kind="query", layer=args.layer, batch_size=args.batch_size)
    texts, _ = cached_embed(lm, batch.texts, kind="query", layer=args.layer, batch_size=args.batch_size)
    cases = [QueryCase(tuple(gt), q.n_aspects, (), {fam: batch.rows[(fam, qi)] for fam in records})
             for qi, (q, gt) in enumerate(zip(data.queries, data.ground_truth))]
    result = evaluate(index, qemb, cases, [a.label for a in data.articles], names, k_max=args.k_max, c=args.c,
                      expansions=texts, hyde_with_query=options.hyde_with_query, units=data.units)
    return result, bench_cost_rows(names, records)


def bench_cost_rows(names: Sequence[str], records: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """``bench``'s LLM cost rows: per strategy of ``names`` the expansions it searched (``records``: per LLM family,
    one record per benchmark query, in query order), with ``shared_with`` naming the strategies that search the
    same expansions; with two or more strategies a ``total`` row that counts each expansion once, by the rule of
    an evaluation run's cost table (:func:`~mrag_core.workflows.evaluation_runs.once_each_cost`)."""
    from mrag_core.workflows import evaluation_runs as er

    rows = [{"strategy": name, **er.cost_row(records[NAMED_STRATEGIES[name].source]),
             er.SHARED_COLUMN: ", ".join(er.shared_with(names, name))} for name in names]
    if len(names) > 1:
        once = er.once_each_cost((name, qi, record) for name in names
                                 for qi, record in enumerate(records[NAMED_STRATEGIES[name].source]))
        rows.append({"strategy": "total", **once, er.SHARED_COLUMN: ""})
    return rows


def print_cost_table(rows: list[dict[str, Any]], strategies: Sequence[str]) -> None:
    """Print :data:`COST_HEADING`, the cost table of ``rows`` and, when some of ``strategies`` share their LLM
    expansions, the note that says so (:func:`~mrag_core.workflows.evaluation_runs.shared_expansions_note`)."""
    from mrag_core.workflows import evaluation_runs as er

    print(COST_HEADING)
    print(format_cost_table(rows))
    if shared := er.shared_expansions_note(strategies):
        print(f"note: {shared}")


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not fail on a closed pipe again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (e.g. captured by a test)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = _dispatch(parser, args)
        sys.stdout.flush()  # a reader gone away shows here, not as "Exception ignored" at exit
        return status
    except BrokenPipeError:  # the reader went away (``... | head``): no traceback, and none at exit either
        _silence_stdout()
        return 141  # as a shell reports a process ended by SIGPIPE


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the parsed command; returns its exit status."""
    try:
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "eval":
            from mrag_core.cli_eval import cmd_eval  # registered when the evaluation-runs feature is present

            return cmd_eval(args)
        if args.command == "index":
            from mrag_core.cli_index import cmd_index

            return cmd_index(args)
        if args.command == "export":
            from mrag_core.cli_export import cmd_export

            return cmd_export(args)
        if args.command == "generate":
            from mrag_core.cli_generate import cmd_generate

            return cmd_generate(args)
        if args.command == "annotate":
            from mrag_core.cli_annotate import cmd_annotate

            return cmd_annotate(args)
        if args.command == "corpora":
            from mrag_core.cli_corpora import cmd_corpora

            return cmd_corpora(args)
        if args.command in ("import", "queries"):
            from mrag_core import cli_import

            return cli_import.cmd_import(args) if args.command == "import" else cli_import.cmd_queries(args)
    except CLIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command}")
    return 2
