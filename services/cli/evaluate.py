"""``mrag-studio eval``: evaluate a stored query set on a stored corpus, headless.

The run is written to the same store the app uses (``--database`` or ``$MRAG_DATABASE_URL``,
else the default SQLite file), so it shows up on the Evaluation Runs page. Prints the run id
and a summary table (mean RSR / CSR / weighted at k = n and k = 2n per aspect count); with LLM
strategies (``multi-query``, ``hyde``, ``intent`` and their ``-mrag`` forms, endpoint from
``MRAG_LLM_*`` as elsewhere) also their token cost per strategy and, with two or more, a ``total`` row that
counts each LLM call once (a strategy and its ``-mrag`` form search the same expansions: both rows count them,
and a line under the table says so).
``--resume ID`` continues a cancelled or interrupted run (a finished one is refused, unchanged: the error names the
``eval`` command that starts a new run with its settings); ``--stop ID`` asks the process that runs it (the app,
another ``eval``) to stop after its current batch; ``--list`` prints the stored runs (of
``--corpus`` when given) with their state as the Evaluation Runs page says it: ``done``, ``stopped``,
``failed``, ``running elsewhere`` (another process keeps its heartbeat fresh: the app, or another
``eval``) or ``interrupted`` (resumable). ``--json``, ``--authors-json`` and ``--plotter-json`` write the run's
results in the layouts ``bench`` writes (ours, the authors' result files, their CLI plotter's input); ``--export ID``
writes a stored run's and evaluates nothing. Bad input ends with one line ``error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
from typing import Any

from mrag_core import settings
from mrag_core.cli_basics import (
    add_llm_options,
    check_output_file,
    fail,
    format_table,
    llm_options_from,
    positive_int,
    text_table,
    write_layouts,
)
from mrag_core.llm_strategies import LLMOptions
from mrag_core.strategy_registry import STRATEGIES, UnknownStrategyError, parse_strategies
from services.cli.common import (
    add_database_option,
    every_few_seconds,
    named_corpus,
    print_cost_table,
    stop_on_ctrl_c,
    stopped_elsewhere,
    store_command,
)

DEFAULT_EVAL_STRATEGIES = "standard,mrag"


def _strategies(value: str) -> list[str]:
    """The ``--strategies`` list: ids or aliases (``recommended``), as their ids (a run stores ids)."""
    try:
        return parse_strategies(value, keep_names=False)
    except UnknownStrategyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


DEFAULT_K_MAX = settings.DEFAULT_K_MAX
"""``eval``'s k_max when none is given (capped at the corpus' number of documents), as the authors scored."""


def _settings(args: argparse.Namespace) -> settings.RetrievalSettings:
    """The run's settings from ``eval``'s options."""
    return settings.RetrievalSettings(model=args.model, layer=args.layer, strategies=tuple(args.strategies), c=args.c,
                                      k_max=args.k_max, variant=args.variant, w=args.w, seed=args.seed)


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``eval`` sub-command on ``subparsers`` (from ``add_subparsers``)."""
    e = subparsers.add_parser("eval", help="evaluate a stored query set of a stored corpus; the run is saved")
    e.add_argument("--corpus", help="corpus name (as on the Corpus Import page)")
    e.add_argument("--query-set", help="query set name of that corpus")
    e.add_argument("--model", default=settings.DEFAULT_MODEL,
                   help="registry name (minilm, smollm2) or a local HF folder")
    e.add_argument("--strategies", type=_strategies, default=_strategies(DEFAULT_EVAL_STRATEGIES),
                   help=f"comma list (default {DEFAULT_EVAL_STRATEGIES}); any of {', '.join(STRATEGIES)}, or "
                        "'recommended'")
    e.add_argument("--layer", type=int, default=settings.DEFAULT_LAYER,
                   help="layer for head embeddings (default -1 = last)")
    e.add_argument("--variant", choices=settings.VARIANTS, default=settings.DEFAULT_VARIANT,
                   help=f"MRAG voting variant applied to 'mrag' (default {settings.DEFAULT_VARIANT})")
    e.add_argument("--c", type=positive_int, default=settings.DEFAULT_C,
                   help=f"per-space search depth (default {settings.DEFAULT_C})")
    e.add_argument("--k-max", type=positive_int, default=None,
                   help=f"score k = 1..K (default {DEFAULT_K_MAX}, or the corpus' number of documents when fewer)")
    e.add_argument("--w", type=float, default=settings.DEFAULT_W,
                   help=f"weight of exact hits in the weighted ratio (default {settings.DEFAULT_W:g})")
    e.add_argument("--seed", type=int, default=0, help="seed (head importance sampling)")
    add_llm_options(e)
    e.add_argument("--name", default="", help="a name for the run")
    e.add_argument("--resume", type=int, default=None, metavar="RUN_ID", help="continue an unfinished run")
    e.add_argument("--list", action="store_true",
                   help="list the stored runs (of --corpus when given) with their state and exit")
    e.add_argument("--stop", type=int, default=None, metavar="RUN_ID",
                   help="ask the process that runs RUN_ID (the app, another eval) to stop after its current batch")
    e.add_argument("--export", type=int, default=None, metavar="RUN_ID",
                   help="write the stored results of RUN_ID to the files of --json, --authors-json and --plotter-json "
                        "and exit (nothing is evaluated)")
    e.add_argument("--json", dest="json_out",
                   help="write the run's per-query results: {strategy: {n_aspects: {success_ratio, "
                        "category_success_ratio: [k][query]}}}")
    e.add_argument("--authors-json", dest="authors_json_out",
                   help="write them as the MRAG authors' result files are (rat, suc, ...; their strategy names)")
    e.add_argument("--plotter-json", dest="plotter_json_out",
                   help="write them as the authors' CLI plotter reads them (multirag-cli plot: standard-rag, "
                        "multirag, multirag-strategy-decay ... with success_ratio, category_success_ratio)")
    add_database_option(e)
    e.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    return e


def format_runs(runs: list[Any], query_sets: dict[int, str], corpora: dict[int, str]) -> str:
    """Stored evaluation runs (``db.EvalRunInfo``, newest first) as a plain table: id, corpus, query set, model,
    layer, strategies, state (:func:`~services.workflows.evaluation_runs.status_label`; a run running elsewhere
    names its process), results stored and expected, creation time (UTC)."""
    from services.workflows import evaluation_runs as er

    def state(run: Any) -> str:
        label = er.status_label(run)
        return f"{label} ({run.process})" if label == "running elsewhere" else label

    def results(run: Any) -> str:
        expected = int(run.config.get("n_queries", 0)) * len(run.config.get("strategies", []))
        return f"{run.n_results}/{expected}" if expected else str(run.n_results)

    columns = [("run", ">5"), ("corpus", "<16"), ("query set", "<16"), ("model", "<12"), ("layer", ">5"),
               ("strategies", "<24"), ("results", ">9"), ("created (UTC)", "<16"), ("state", "<")]
    return text_table(columns, [
        [f"#{r.id}", corpora.get(r.corpus_id, str(r.corpus_id)), query_sets.get(r.query_set_id, str(r.query_set_id)),
         str(r.config.get("model", "?")), str(r.config.get("layer", "?")), ",".join(r.config.get("strategies", [])),
         results(r), f"{r.created_at:%Y-%m-%d %H:%M}", state(r)] for r in runs])


def same_settings_command(run: Any, corpus_name: str, query_set_name: str) -> str:
    """The ``eval`` command line that starts a new run with ``run``'s settings (``db.EvalRunInfo``): its corpus,
    query set, model, strategies (voting variants applied) and variant, layer and c as asked for, k_max, w, seed
    and, for LLM strategies, its LLM options."""
    cfg = run.config
    asked = settings.RetrievalSettings.from_dict(cfg, requested=True, seed=int(run.seed or 0))
    words = ["mrag-studio", "eval", "--corpus", corpus_name, "--query-set", query_set_name,
             "--model", asked.model, "--strategies", ",".join(cfg.get("strategies", [])),
             "--variant", asked.variant, f"--layer={asked.layer}", "--c", str(asked.c), "--k-max", str(asked.k_max),
             "--w", f"{asked.w:g}", "--seed", str(asked.seed)]
    if isinstance(cfg.get("llm"), dict):
        options = LLMOptions.from_dict(cfg["llm"])
        words += ["--rewrites", str(options.n_rewrites), "--intent-answers", str(options.n_answers),
                  "--hyde-with-query" if options.hyde_with_query else "--no-hyde-with-query"]
    return " ".join(shlex.quote(w) for w in words)


def _finished_run_error(store: Any, run: Any) -> int:
    """``error: ...`` for ``--resume`` of a finished run (left unchanged), with the command of a new run like it."""
    import db
    from services.workflows import evaluation_runs as er

    corpus = db.get_corpus(store, run.corpus_id).name
    query_set = next((q.name for q in db.list_query_sets(store, run.corpus_id) if q.id == run.query_set_id), "?")
    return fail(f"{er.finished_run_message(run)} With the command line: "
                f"{same_settings_command(run, corpus, query_set)}")


def list_runs(store: Any, corpus_name: str | None) -> int:
    """Print the stored evaluation runs (of the named corpus, else all); returns 0."""
    import db

    corpora = {c.id: c.name for c in db.list_corpora(store)}
    corpus_id = named_corpus(store, corpus_name).id if corpus_name else None
    runs = db.list_eval_runs(store, corpus_id=corpus_id)
    if not runs:
        print(f"corpus {corpus_name!r} has no evaluation run" if corpus_name else "no evaluation run is stored")
        return 0
    query_sets = {q.id: q.name for cid in {r.corpus_id for r in runs} for q in db.list_query_sets(store, cid)}
    print(format_runs(runs, query_sets, corpora))
    return 0


def partial_table_note(metrics: Any) -> str | None:
    """What the summary table of a stopped run leaves out (``metrics``: its ``RunMetrics``), or None when nothing.

    The table is over the queries every strategy with results scored (``to_evaluation_result``), so that its rows
    compare; a run scores one strategy after another, so a stop leaves the last ones with fewer queries or none:
    ``note: the table is over the 128 of 250 queries every strategy in it scored (standard 250, mrag 128); split
    scored no query yet and is not in it``."""
    pq = metrics.per_query
    counts = {s: int(pq.loc[pq["strategy"] == s, "query_id"].nunique()) for s in metrics.strategies}
    missing = [s for s in metrics.run.config.get("strategies", []) if s not in counts]
    common = len(set.intersection(*(set(pq.loc[pq["strategy"] == s, "query_id"]) for s in counts))) if counts else 0
    total = int(metrics.run.config.get("n_queries", 0)) or max(counts.values(), default=0)
    parts = []
    if counts and (len(set(counts.values())) > 1 or common < total):
        listed = ", ".join(f"{s} {n}" for s, n in counts.items())
        parts.append(f"the table is over the {common} of {total} queries every strategy in it scored ({listed})")
    if missing:
        parts.append(f"{', '.join(missing)} scored no query yet and {'is' if len(missing) == 1 else 'are'} not in it")
    return "note: " + "; ".join(parts) if parts else None


OUTPUT_OPTIONS = (("--json", "json_out"), ("--authors-json", "authors_json_out"),
                  ("--plotter-json", "plotter_json_out"))
"""``eval``'s result files: option and attribute, in the order of :func:`services.cli.main.write_layouts`."""


def export_run(store: Any, run_id: int, json_out: str | None, authors_json_out: str | None,
               plotter_json_out: str | None) -> int:
    """``eval --export RUN_ID``: write the stored results of the run to the files given (an unfinished run's, over
    the queries every strategy scored, with a ``note:`` saying so); returns the exit status."""
    import db
    from services.workflows import eval_results
    from services.workflows import evaluation_runs as er

    if not (json_out or authors_json_out or plotter_json_out):
        return fail("--export writes files: give --json, --authors-json or --plotter-json (or several)")
    try:
        info = db.get_eval_run(store, run_id)
    except db.NotFoundError:
        return fail(f"evaluation run {run_id} does not exist")
    metrics = eval_results.load_run_metrics(store, info.id)
    if not len(metrics.per_query):
        return fail(f"evaluation run {info.id} has no results yet ({er.status_label(info)})")
    if info.status != "done" and (note := partial_table_note(metrics)):
        print(note.replace("the table is", "the files are"), file=sys.stderr)
    write_layouts(eval_results.to_evaluation_result(metrics), json_out, authors_json_out, plotter_json_out)
    return 0


@store_command
def cmd_eval(args: argparse.Namespace, store: Any) -> int:
    """Run (or resume, or list) evaluations; returns the exit status (0 ok, 1 cancelled, 2 bad input)."""
    import db
    from services.workflows import eval_costs, eval_results
    from services.workflows import evaluation_runs as er

    if getattr(args, "list", False):
        return list_runs(store, args.corpus)
    if getattr(args, "stop", None) is not None:
        try:
            info = db.get_eval_run(store, args.stop)
        except db.NotFoundError:
            return fail(f"evaluation run {args.stop} does not exist")
        if not db.request_eval_stop(store, info.id):
            return fail(f"evaluation run {info.id} is not running ({er.status_label(info)}): nothing to stop")
        print(f"asked run {info.id} ({info.process}) to stop after its current batch; "
              f"eval --resume {info.id} continues it")
        return 0
    outputs = {option: getattr(args, dest, None) for option, dest in OUTPUT_OPTIONS}
    for option, path in outputs.items():
        check_output_file(option, path)
    if getattr(args, "export", None) is not None:
        return export_run(store, args.export, *outputs.values())
    resume = getattr(args, "resume", None)
    if resume is None:
        if not args.corpus or not args.query_set:
            return fail("give --corpus NAME and --query-set NAME (or --resume RUN_ID)")
        corpus = named_corpus(store, args.corpus)
        sets = [q for q in db.list_query_sets(store, corpus.id) if q.name == args.query_set]
        if not sets:
            names = ", ".join(repr(q.name) for q in db.list_query_sets(store, corpus.id)) or "none"
            return fail(f"unknown query set {args.query_set!r} in corpus {corpus.name!r} (query sets: {names})")
        if args.k_max is None:  # not asked for: as many as there are, up to the default (a given one is checked)
            args.k_max = min(DEFAULT_K_MAX, corpus.n_documents)
        try:
            er.validate_request(store, corpus_id=corpus.id, query_set_id=sets[0].id, settings=_settings(args),
                                llm_options=llm_options_from(args))
        except eval_results.EvaluationInputError as exc:
            return fail(str(exc))
    from mrag_core.device import configure_threads
    from mrag_core.models.loader import ModelLoadError, load_model

    configure_threads(getattr(args, "threads", None))
    model_name = args.model
    if resume is not None:
        try:
            resumed = db.get_eval_run(store, resume)
        except db.NotFoundError:
            return fail(f"evaluation run {resume} does not exist")
        if resumed.status == "done":  # before the model loads: a finished run stays as it is
            return _finished_run_error(store, resumed)
        model_name = resumed.config.get("model", model_name)
    try:
        lm = load_model(model_name, check_layer=args.layer if resume is None else None)  # before the weights load
    except (ModelLoadError, RuntimeError, ValueError) as exc:
        return fail(str(exc))

    progress = every_few_seconds()
    cancel = threading.Event()
    try:
        with stop_on_ctrl_c(cancel) as pressed:
            if resume is not None:
                run_id = er.resume_evaluation(store, resume, lm=lm, progress=progress, cancel=cancel)
            else:
                run_id = er.run_evaluation(
                    store, corpus_id=corpus.id, query_set_id=sets[0].id, settings=_settings(args), lm=lm,
                    name=args.name, progress=progress, cancel=cancel, llm_options=llm_options_from(args))
    except eval_results.EvaluationInputError as exc:
        return fail(str(exc))
    info = db.get_eval_run(store, run_id)
    print(f"run {run_id}: {er.status_label(info)}, {info.n_results} results")
    metrics = eval_results.load_run_metrics(store, run_id)
    if info.status == "cancelled":
        if not pressed.is_set():
            print(f"stopped: {stopped_elsewhere('a Stop button in the app, or eval --stop')}", file=sys.stderr)
        if note := partial_table_note(metrics):
            print(note, file=sys.stderr)
        print(f"eval --resume {run_id} continues it", file=sys.stderr)
    if len(metrics.per_query):
        from mrag_core.evaluation import summarize  # (the engine is imported when a run is shown)

        print(format_table(summarize(eval_results.to_evaluation_result(metrics), w=metrics.w)))
        write_layouts(eval_results.to_evaluation_result(metrics), *outputs.values())
        llm = [s for s in metrics.strategies if s in STRATEGIES and STRATEGIES[s].needs_llm]
        if llm:
            print()
            total = [{"strategy": "total", **eval_costs.llm_cost_total(metrics)}] if len(llm) > 1 else []
            print_cost_table([{"strategy": s, **eval_costs.llm_cost(metrics, s)} for s in llm] + total, llm)
            warning = info.timing.get("warning")
            if warning:
                print(f"warning: {warning}", file=sys.stderr)
    return 0 if info.status == "done" else 1
