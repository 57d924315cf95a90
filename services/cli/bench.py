"""``mrag-studio bench``: the engine's ``bench`` (:mod:`mrag_core.bench_cli`, one implementation) with the
LLM-assisted strategies plugged in.

LLM strategies (``multi-query``, ``hyde``, ``intent`` and their ``-mrag`` forms) take the endpoint
from ``MRAG_LLM_*`` (as the app does) and cache its answers in ``$MRAG_CACHE_DIR/llm_cache.json``,
so a rerun sends no request; their token cost is printed after the summary.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mrag_core import bench_cli
from mrag_core.cli_basics import CLIError
from mrag_core.llm_strategies import LLMOptions, TextBatch, families_for
from mrag_core.strategy_registry import resolve
from services.cli.common import llm_endpoint, print_cost_table

if TYPE_CHECKING:  # pragma: no cover
    from mrag_core.evaluation import EvaluationResult

__all__ = ["ServicesLLMBench", "bench_cost_rows", "cmd_bench"]


class ServicesLLMBench:
    """The :class:`~mrag_core.bench_cli.LLMBench` of the services: the environment's endpoint, its answers cached."""

    def __init__(self) -> None:
        self.cfg: Any = None

    def check(self, names: Sequence[str], options: LLMOptions) -> None:
        self.cfg = _bench_endpoint(names)
        _check_options(options)

    def evaluate(self, lm: Any, data: Any, index: Any, names: Sequence[str], options: LLMOptions,
                 args: argparse.Namespace, log: Callable[[str], None]) -> tuple[EvaluationResult, list[dict[str, Any]]]:
        assert self.cfg is not None
        return _bench_llm(lm, data, index, names, self.cfg, options, args, log)

    def report(self, rows: list[dict[str, Any]], names: Sequence[str]) -> None:
        print()
        print_cost_table(rows, names)


def cmd_bench(args: argparse.Namespace) -> int:
    """``bench`` with every strategy, the LLM-assisted ones included."""
    return bench_cli.cmd_bench(args, ServicesLLMBench())


def _bench_endpoint(llm_names: Sequence[str]) -> Any:
    """The environment's LLM endpoint for the LLM strategies asked for (CLIError when none)."""
    return llm_endpoint(f"{', '.join(llm_names)} {'needs' if len(llm_names) == 1 else 'need'}")


def _check_options(options: LLMOptions) -> None:
    from services.expansion.intent import MAX_ANSWERS
    from services.expansion.multi_query import MAX_REWRITES

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
    from mrag_core.evaluation import QueryCase, evaluate
    from services.llm.cache import JsonFileCache
    from services.llm.client import LLMClient
    from services.llm_strategies import expand_many

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
    an evaluation run's cost table (:func:`~services.workflows.eval_costs.once_each_cost`)."""
    from services.workflows import eval_costs

    rows = [{"strategy": name, **eval_costs.cost_row(records[resolve(name).source]),
             eval_costs.SHARED_COLUMN: ", ".join(eval_costs.shared_with(names, name))} for name in names]
    if len(names) > 1:
        once = eval_costs.once_each_cost((name, qi, record) for name in names
                                 for qi, record in enumerate(records[resolve(name).source]))
        rows.append({"strategy": "total", **once, eval_costs.SHARED_COLUMN: ""})
    return rows
