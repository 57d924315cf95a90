"""Command line: ``python -m mrag_core bench ...`` runs the engine headless.

Bad input (missing file, wrong JSON shape, unknown model, bad option) ends with one line
``error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from mrag_core.evaluation import NAMED_STRATEGIES, authors_layout, summarize

DEFAULT_STRATEGIES = "standard,mrag,split,fusion,fusion-mrag"


class CLIError(Exception):
    """A user-facing error: printed as ``error: <message>``."""


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mrag_core", description="MRAG Studio engine, headless.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="embed a benchmark, evaluate strategies, print RSR / CSR / weighted")
    b.add_argument("--articles", help="articles JSON / JSON.bz2: [{title, text, label}]")
    b.add_argument("--queries", help="queries JSON / JSON.bz2: [{topics, text, fusion}]")
    b.add_argument("--topic-layout", help="legal / accident folder: <category>/<category>_<topic>.json")
    b.add_argument("--model", default="minilm", help="registry name (minilm, smollm2) or a local HF folder")
    b.add_argument("--strategies", type=_strategies, default=_strategies(DEFAULT_STRATEGIES),
                   help=f"comma list (default {DEFAULT_STRATEGIES}); also {', '.join(n for n in NAMED_STRATEGIES if n not in DEFAULT_STRATEGIES.split(','))}")
    b.add_argument("--layer", type=int, default=-1, help="layer for head embeddings (default -1 = last)")
    b.add_argument("--pooling", choices=("last", "first", "mean"), help="token pooling of head vectors")
    b.add_argument("--c", type=positive_int, default=32, help="per-space search depth (default 32)")
    b.add_argument("--k-max", type=positive_int, default=32, help="score k = 1..K (default 32)")
    b.add_argument("--w", type=float, default=2.0, help="weight of exact hits in the weighted ratio (default 2)")
    b.add_argument("--backend", choices=("torch", "faiss-flat", "faiss-hnsw"), default="torch")
    b.add_argument("--device", default="auto", help="auto | cpu | cuda")
    b.add_argument("--half", action="store_true", help="float16 weights on CUDA")
    b.add_argument("--batch-size", type=positive_int, default=32)
    b.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    b.add_argument("--json", dest="json_out", help="write per-query results in the authors' layout")
    try:
        from mrag_core.cli_eval import add_eval_parser
    except ImportError:  # the evaluation-runs command is optional
        pass
    else:
        add_eval_parser(sub)
    return p


def format_table(rows: list) -> str:
    """Plain-text table: strategy, aspects, k, RSR, CSR, weighted."""
    lines = [f"{'strategy':<15}{'aspects':>8}{'k':>5}{'RSR':>8}{'CSR':>8}{'weighted':>10}{'queries':>9}"]
    for r in rows:
        lines.append(f"{r.strategy:<15}{r.n_aspects:>8}{r.k:>5}{r.rsr:>8.3f}{r.csr:>8.3f}{r.weighted:>10.3f}{r.n_queries:>9}")
    return "\n".join(lines)


def cmd_bench(args: argparse.Namespace) -> int:
    from mrag_core.benchmark import BenchmarkFormatError
    from mrag_core.device import configure_threads
    from mrag_core.models.loader import ModelLoadError, load_model
    from mrag_core.pipeline import load_benchmark, run_benchmark

    try:
        data = load_benchmark(args.articles, args.queries, args.topic_layout)
    except (BenchmarkFormatError, ValueError, OSError) as exc:
        raise CLIError(str(exc)) from exc
    if data.unresolved:
        print(f"warning: {len(data.unresolved)} query topics match no document (first: {data.unresolved[0][1]!r})",
              file=sys.stderr)
    if args.json_out:
        out_dir = Path(args.json_out).resolve().parent
        if not out_dir.is_dir():
            raise CLIError(f"cannot write --json {args.json_out}: folder {out_dir} does not exist")
    configure_threads(args.threads)
    try:
        lm = load_model(args.model, device=args.device, half=args.half, head_pooling=args.pooling)
    except (ModelLoadError, RuntimeError) as exc:
        raise CLIError(str(exc)) from exc
    try:
        lm.layer_index(args.layer)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    print(f"model {lm.spec.name}: {lm.family}, {lm.n_layers} layers, {lm.n_heads} heads x {lm.head_dim}, "
          f"layer {lm.layer_index(args.layer)}, device {lm.device}", file=sys.stderr)
    out = run_benchmark(lm, data, args.strategies, layer=args.layer, c=args.c, k_max=args.k_max,
                        backend=args.backend, batch_size=args.batch_size, log=lambda m: print(m, file=sys.stderr))
    print(format_table(summarize(out.result, w=args.w)))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(authors_layout(out.result)))
        print(f"wrote {args.json_out}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "eval":
            from mrag_core.cli_eval import cmd_eval  # registered when the evaluation-runs feature is present

            return cmd_eval(args)
    except CLIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command}")
    return 2
