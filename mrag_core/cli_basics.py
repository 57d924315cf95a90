"""The command line's plain parts, shared by the engine's ``python -m mrag_core bench`` and the services' CLI
(``mrag-studio``): the user-facing error and its exit status 2, argument types, plain-text tables, result files
written whole, and the LLM strategies' options (defined once here, for ``bench`` and ``eval``).

Bad input ends with one line ``error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from mrag_core.llm_strategies import LLMOptions

if TYPE_CHECKING:  # pragma: no cover
    from mrag_core.evaluation import EvaluationResult

__all__ = [
    "CLIError",
    "add_llm_options",
    "check_output_file",
    "fail",
    "format_table",
    "llm_options_from",
    "positive_int",
    "silence_stdout",
    "text_table",
    "write_layouts",
    "write_whole",
]


class CLIError(Exception):
    """A user-facing error: printed as ``error: <message>``."""


def fail(message: str) -> int:
    """Print ``error: <message>`` on stderr; returns the exit status of bad input (2)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


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


def format_table(rows: list) -> str:
    """Plain-text table: strategy, aspects, k, RSR, CSR, weighted, queries."""
    width = max([15, *(len(r.strategy) for r in rows)])  # "multi-query-mrag" whole, not cut to 15
    columns = [("strategy", f"<{width}"), ("aspects", ">7"), ("k", ">4"), ("RSR", ">7.3f"), ("CSR", ">7.3f"),
               ("weighted", ">9.3f"), ("queries", ">8")]
    return text_table(columns, [[r.strategy, r.n_aspects, r.k, r.rsr, r.csr, r.weighted, r.n_queries] for r in rows])


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


def write_whole(data: bytes, path: Path) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`mrag_core.whole_file.write_whole`: a temporary file
    beside it renamed at the end, only over a regular file or at a new path, with the user's umask): an interrupted or
    failed write leaves an existing ``path`` as it was. Raises :class:`CLIError`."""
    from mrag_core.whole_file import WriteError
    from mrag_core.whole_file import write_whole as write_file

    try:
        write_file(data, path)
    except WriteError as exc:
        raise CLIError(str(exc)) from None


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


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not fail on a closed pipe again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (e.g. captured by a test)
        pass


def write_layouts(result: EvaluationResult, json_out: str | None, authors_json_out: str | None,
                  plotter_json_out: str | None) -> None:
    """Write ``result`` to the files given: ``--json`` (:func:`~mrag_core.evaluation.authors_layout`),
    ``--authors-json`` (:func:`~mrag_core.evaluation.authors_file_layout`) and ``--plotter-json``
    (:func:`~mrag_core.evaluation.plotter_layout`, with ``note:`` lines for what the plotter cannot draw from it),
    each whole or not at all. Raises :class:`CLIError`."""
    from mrag_core.evaluation import authors_file_layout, authors_layout, plotter_layout, plotter_notes

    for path, layout in ((json_out, authors_layout), (authors_json_out, authors_file_layout),
                         (plotter_json_out, plotter_layout)):
        if path:
            write_whole(json.dumps(layout(result)).encode("utf-8"), Path(path))
            print(f"wrote {path}", file=sys.stderr)
    if plotter_json_out:
        for note in plotter_notes(result):
            print(f"note: {note}", file=sys.stderr)
