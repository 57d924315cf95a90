"""``python -m mrag_core bench ...``: embed a benchmark, evaluate the strategies, print RSR / CSR / weighted, with the
engine alone (no store, no LLM endpoint).

The LLM-assisted strategies (``multi-query``, ``hyde``, ``intent`` and their ``-mrag`` forms) need an LLM endpoint,
which the engine does not call: ``mrag-studio bench`` (the services' CLI, :mod:`services.cli.bench`) runs this same
command with an :class:`LLMBench` that asks for their expansions. Asked of the engine alone, they are refused with a
line saying so.

The app's other commands (``import``, ``index``, ``eval``...) moved to the services' CLI: ``python -m mrag_core
import ...`` says where (:func:`main`) and exits with status 2.

Bad input (missing file, wrong JSON shape, unknown model, bad option) ends with one line
``error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from mrag_core.cli_basics import (
    CLIError,
    add_llm_options,
    check_output_file,
    fail,
    format_table,
    llm_options_from,
    positive_int,
    silence_stdout,
    write_layouts,
)
from mrag_core.llm_strategies import LLMOptions
from mrag_core.settings import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_C,
    DEFAULT_K_MAX,
    DEFAULT_LAYER,
    DEFAULT_MODEL,
    DEFAULT_W,
    POOLINGS,
    RetrievalSettings,
)
from mrag_core.strategy_registry import STRATEGIES, UnknownStrategyError, parse_strategies, resolve
from mrag_core.wording import counted

if TYPE_CHECKING:  # pragma: no cover
    from mrag_core.evaluation import EvaluationResult

__all__ = ["DEFAULT_STRATEGIES", "MOVED_COMMANDS", "LLMBench", "add_bench_parser", "cmd_bench", "main", "moved"]

DEFAULT_STRATEGIES = "standard,mrag,split,fusion,fusion-mrag"

#: The commands of the services' CLI (``mrag-studio``) that ``python -m mrag_core`` once ran.
MOVED_COMMANDS = ("import", "queries", "index", "eval", "annotate", "generate", "export", "corpora")


class LLMBench(Protocol):
    """What ``bench`` needs to evaluate the LLM-assisted strategies (the services' :mod:`services.cli.bench`)."""

    def check(self, names: Sequence[str], options: LLMOptions) -> None:
        """Before any work: refuse (:class:`CLIError`) an unusable or missing endpoint, or options out of range."""

    def evaluate(self, lm: Any, data: Any, index: Any, names: Sequence[str], options: LLMOptions,
                 args: argparse.Namespace, log: Callable[[str], None]) -> tuple[EvaluationResult, list[dict[str, Any]]]:
        """The LLM strategies ``names`` evaluated on the benchmark ``data`` over ``index``, and their cost rows."""

    def report(self, rows: list[dict[str, Any]], names: Sequence[str]) -> None:
        """Print the cost rows after the summary table."""


def _strategies(value: str) -> list[str]:
    """The ``--strategies`` list: ids or aliases (:mod:`mrag_core.strategy_registry`), kept as given, so that
    ``recommended`` is reported (and keyed in ``--json``) as ``recommended``."""
    try:
        return parse_strategies(value)
    except UnknownStrategyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``bench`` command and its options (the same in ``python -m mrag_core`` and ``mrag-studio``)."""
    b = subparsers.add_parser("bench", help="embed a benchmark, evaluate strategies, print RSR / CSR / weighted")
    b.add_argument("--articles", help="articles JSON / JSON.bz2: [{title, text, label}]")
    b.add_argument("--queries", help="queries JSON / JSON.bz2: [{topics, text, fusion}]")
    b.add_argument("--topic-layout", help="legal / accident folder: <category>/<category>_<topic>.json")
    b.add_argument("--model", default=DEFAULT_MODEL, help="registry name (minilm, smollm2) or a local HF folder")
    more = ", ".join(n for n in STRATEGIES if n not in DEFAULT_STRATEGIES.split(","))
    b.add_argument("--strategies", type=_strategies, default=_strategies(DEFAULT_STRATEGIES),
                   help=f"comma list (default {DEFAULT_STRATEGIES}); also {more}; 'recommended' is "
                        f"{resolve('recommended').id}")
    b.add_argument("--layer", type=int, default=DEFAULT_LAYER, help="layer for head embeddings (default -1 = last)")
    b.add_argument("--pooling", choices=POOLINGS, help="token pooling of head vectors")
    b.add_argument("--c", type=positive_int, default=DEFAULT_C, help=f"per-space search depth (default {DEFAULT_C})")
    b.add_argument("--k-max", type=positive_int, default=DEFAULT_K_MAX,
                   help=f"score k = 1..K (default {DEFAULT_K_MAX})")
    b.add_argument("--w", type=float, default=DEFAULT_W,
                   help=f"weight of exact hits in the weighted ratio (default {DEFAULT_W:g})")
    b.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                   help="milvus / milvus-hnsw: a scratch collection in $MRAG_MILVUS_URI (else a temporary Milvus Lite)")
    b.add_argument("--target-recall", type=_recall_target, default=0.9,
                   help="faiss-hnsw, milvus-hnsw: each space's efSearch is the smallest reaching this recall@32 "
                        "(default 0.9)")
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
    b.add_argument("--plotter-json", dest="plotter_json_out",
                   help="write them as the authors' CLI plotter reads them (multirag-cli plot: keys standard-rag, "
                        "multirag, multirag-strategy-decay ... with success_ratio, category_success_ratio)")
    add_llm_options(b)
    return b


def _engine_only(names: Sequence[str]) -> str:
    listed = ", ".join(names)
    return (f"{listed} {'needs' if len(names) == 1 else 'need'} an LLM endpoint, which the engine alone does not call: "
            "run `mrag-studio bench ...` (or `python -m services bench ...`) with the same options, which adds "
            "the LLM strategies")


def bench_settings(args: argparse.Namespace) -> RetrievalSettings:
    """``bench``'s options as :class:`~mrag_core.settings.RetrievalSettings` (checked)."""
    try:
        return RetrievalSettings(model=args.model, layer=args.layer, pooling=args.pooling, c=args.c, k_max=args.k_max,
                                 w=args.w, strategies=tuple(args.strategies), backend=args.backend).check()
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


def cmd_bench(args: argparse.Namespace, llm: LLMBench | None = None) -> int:
    """Run ``bench``; ``llm`` evaluates the LLM-assisted strategies (without it they are refused)."""
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
    for option, path in (("--json", args.json_out), ("--authors-json", args.authors_json_out),
                         ("--plotter-json", args.plotter_json_out)):
        check_output_file(option, path)
    llm_names = [s for s in args.strategies if resolve(s).needs_llm]
    options = llm_options_from(args)
    if llm_names:
        if llm is None:
            raise CLIError(_engine_only(llm_names))
        llm.check(llm_names, options)
    configure_threads(args.threads)
    try:  # a layer the model lacks is refused from its config, before the weights load
        lm = load_model(args.model, device=args.device, half=args.half, head_pooling=args.pooling,
                        check_layer=args.layer)
    except (ModelLoadError, RuntimeError, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    print(f"model {lm.spec.name}: {lm.family}, {lm.n_layers} layers, {lm.n_heads} heads x {lm.head_dim}, "
          f"layer {lm.layer_index(args.layer)}, device {lm.device}", file=sys.stderr)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    asked = bench_settings(args)
    base = [s for s in asked.strategies if not resolve(s).needs_llm]
    out = run_benchmark(lm, data, base, layer=asked.layer, c=asked.c, k_max=asked.k_max,
                        backend=asked.backend, batch_size=args.batch_size, log=log, target_recall=args.target_recall)
    costs: list[dict[str, Any]] = []
    if llm_names:
        assert llm is not None
        llm_result, costs = llm.evaluate(lm, data, out.index, llm_names, options, args, log)
        merged = {**out.result.strategies, **llm_result.strategies}
        out.result.strategies = {s: merged[s] for s in args.strategies}
    from mrag_core.evaluation import summarize  # (the engine is imported when a benchmark runs, not for the parser)

    print(format_table(summarize(out.result, w=asked.w)))
    if costs:
        assert llm is not None
        llm.report(costs, llm_names)
    write_layouts(out.result, args.json_out, args.authors_json_out, args.plotter_json_out)
    return 0


def moved(command: str) -> str:
    """Where a command of the services' CLI went (what ``python -m mrag_core <command>`` prints)."""
    return (f"the {command} command moved: run `mrag-studio {command} ...` or `python -m services {command} ...` "
            "(`python -m mrag_core` runs only bench)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mrag_core", description="MRAG Studio engine, headless: bench only.",
        epilog=f"The app's other commands ({', '.join(MOVED_COMMANDS)}) are `mrag-studio <command>` "
               "(or `python -m services <command>`).")
    sub = p.add_subparsers(dest="command", required=True)
    add_bench_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mrag_core``: ``bench``, or for a moved command the line saying where it went (exit status 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in MOVED_COMMANDS:
        return fail(moved(argv[0]))
    args = build_parser().parse_args(argv)
    try:
        try:
            status = cmd_bench(args)
        except CLIError as exc:
            status = fail(str(exc))
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            status = 130
        sys.stdout.flush()  # a reader gone away shows here, not as "Exception ignored" at exit
        return status
    except BrokenPipeError:  # the reader went away (``... | head``): no traceback, and none at exit either
        silence_stdout()
        return 141  # as a shell reports a process ended by SIGPIPE
