"""The services' command line, ``mrag-studio`` (or ``python -m services``): builds the parser from the command
modules and runs the command asked for.

``bench`` is the engine's (:mod:`mrag_core.bench_cli`) with the LLM strategies added (:mod:`services.cli.bench`);
``import`` / ``queries`` (:mod:`services.cli.importing`), ``annotate``, ``generate``, ``index``, ``eval``
(:mod:`services.cli.evaluate`), ``export`` and ``corpora`` work on the app's store (``--database``, else
``$MRAG_DATABASE_URL`` or the app's file).

Bad input (missing file, wrong JSON shape, unknown model, bad option) ends with one line
``error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

from mrag_core.bench_cli import add_bench_parser
from mrag_core.cli_basics import CLIError, silence_stdout
from services.cli import annotate, bench, corpora, evaluate, export, generate, importing, index

__all__ = ["build_parser", "main"]

#: command -> its function (``args`` -> exit status)
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "bench": bench.cmd_bench,
    "eval": evaluate.cmd_eval,
    "index": index.cmd_index,
    "export": export.cmd_export,
    "generate": generate.cmd_generate,
    "annotate": annotate.cmd_annotate,
    "corpora": corpora.cmd_corpora,
    "import": importing.cmd_import,
    "queries": importing.cmd_queries,
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrag-studio", description="MRAG Studio, headless.")
    sub = p.add_subparsers(dest="command", required=True)
    add_bench_parser(sub)
    evaluate.add_eval_parser(sub)
    importing.add_import_parsers(sub)
    annotate.add_annotate_parser(sub)
    generate.add_generate_parser(sub)
    index.add_index_parser(sub)
    export.add_export_parser(sub)
    corpora.add_corpora_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = _dispatch(parser, args)
        sys.stdout.flush()  # a reader gone away shows here, not as "Exception ignored" at exit
        return status
    except BrokenPipeError:  # the reader went away (``... | head``): no traceback, and none at exit either
        silence_stdout()
        return 141  # as a shell reports a process ended by SIGPIPE


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the parsed command; returns its exit status."""
    command: Any = COMMANDS.get(args.command)
    if command is None:
        parser.error(f"unknown command {args.command}")
        return 2
    try:
        return command(args)
    except CLIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
