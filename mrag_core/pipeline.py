"""The headless benchmark pipeline shared by the CLI and the UI: load, embed (cached), index, evaluate."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from mrag_core.benchmark import Article, BenchQuery, load_articles, load_queries, resolve_ground_truth
from mrag_core.corpus_index import CorpusIndex
from mrag_core.embedding_cache import cached_embed
from mrag_core.evaluation import EvaluationResult, QueryCase, evaluate
from mrag_core.extraction import Embeddings
from mrag_core.models.loader import LoadedModel
from mrag_core.sentence_round_robin import query_part_rows
from mrag_core.settings import DEFAULT_C, DEFAULT_K_MAX
from mrag_core.strategy_registry import resolve
from mrag_core.topic_layout import load_topic_layout

Log = Callable[[str], None]


@dataclass
class BenchmarkData:
    """Documents, queries and resolved ground truth (``units``: topic id per document, topic layouts only; ``notes``:
    files of a topic layout not read as queries, and why)."""

    articles: list[Article]
    queries: list[BenchQuery]
    ground_truth: list[list[int]]
    unresolved: list[tuple[int, str]] = field(default_factory=list)
    units: list[int] | None = None
    notes: list[str] = field(default_factory=list)


def load_benchmark(articles: str | Path | None = None, queries: str | Path | None = None,
                   topic_layout: str | Path | None = None) -> BenchmarkData:
    """Either Wikipedia-style files (``articles`` + ``queries``) or a legal/accident topic folder."""
    if topic_layout is not None:
        ds = load_topic_layout(topic_layout, queries) if queries else load_topic_layout(topic_layout)
        topic_ids = {t: i for i, t in enumerate(sorted(set(ds.article_topics)))}
        return BenchmarkData(ds.articles, ds.queries, ds.ground_truth, ds.unresolved,
                             [topic_ids[t] for t in ds.article_topics], ds.notes)
    if articles is None or queries is None:
        raise ValueError("give both --articles and --queries (or --topic-layout)")
    arts = load_articles(articles)
    qs = load_queries(queries)
    res = resolve_ground_truth(qs, arts)
    return BenchmarkData(arts, qs, res.doc_indices, res.unresolved)


@dataclass
class PipelineOutput:
    result: EvaluationResult
    doc_embeddings: Embeddings
    index: CorpusIndex
    timings: dict[str, float]


def run_benchmark(
    lm: LoadedModel, data: BenchmarkData, strategies: Sequence[str], *, layer: int = -1, c: int = DEFAULT_C,
    k_max: int = DEFAULT_K_MAX, backend: str = "torch", batch_size: int = 32, log: Log = print,
    progress: Callable[[str, int, int], None] | None = None, target_recall: float | None = 0.9,
) -> PipelineOutput:
    """Embed documents, queries and sub-queries (cached), build the index, evaluate all strategies."""
    timings: dict[str, float] = {}

    def stage(name: str) -> Callable[[int, int], None] | None:
        return (lambda done, total: progress(name, done, total)) if progress else None

    t0 = time.perf_counter()
    docs, hit = cached_embed(lm, [a.text for a in data.articles], kind="doc", layer=layer, batch_size=batch_size,
                             progress=stage("documents"))
    timings["embed_documents"] = time.perf_counter() - t0
    log(f"documents: {len(docs)} embedded{' (from cache)' if hit else ''} in {timings['embed_documents']:.1f}s")
    t0 = time.perf_counter()
    qemb, _ = cached_embed(lm, [q.text for q in data.queries], kind="query", layer=layer, batch_size=batch_size,
                           progress=stage("queries"))
    sub_texts: list[str] = []
    cases: list[QueryCase] = []
    for q, gt in zip(data.queries, data.ground_truth):
        rows = tuple(range(len(sub_texts), len(sub_texts) + len(q.fusion)))
        sub_texts.extend(q.fusion)
        cases.append(QueryCase(tuple(gt), q.n_aspects, rows))
    specs = [resolve(s) for s in strategies]
    subs = parts = None
    if any(sp.fuses and not sp.needs_llm for sp in specs):
        subs, _ = cached_embed(lm, sub_texts, kind="query", layer=layer, batch_size=batch_size,
                               progress=stage("sub-queries"))
    if any(sp.kind == "parts" for sp in specs):  # the queries' sentences, all in one batch
        part_texts, part_rows = query_part_rows([q.text for q in data.queries])
        cases = [replace(case, part_rows=rows) for case, rows in zip(cases, part_rows)]
        parts, _ = cached_embed(lm, part_texts, kind="query", layer=layer, batch_size=batch_size,
                                progress=stage("query parts"))
    timings["embed_queries"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = CorpusIndex.build(docs, backend=backend, target_recall=target_recall)
    timings["index"] = time.perf_counter() - t0
    for line in index.calibration_lines():
        log(f"HNSW {line}")
    t0 = time.perf_counter()
    result = evaluate(index, qemb, cases, [a.label for a in data.articles], strategies, k_max=k_max, c=c,
                      subqueries=subs, units=data.units, progress=stage("evaluation"), parts=parts)
    timings["evaluate"] = time.perf_counter() - t0
    log(f"evaluated {len(cases)} queries x {len(strategies)} strategies in {timings['evaluate']:.2f}s")
    return PipelineOutput(result, docs, index, timings)
