"""Layer sweeps: one evaluation run per layer of one model (:func:`layer_sweep`), the stored sweeps
(:func:`sweep_plans`, :func:`sweeps`), finishing a stopped one (:func:`resume_sweep`) and the per-layer frame of
its runs (:func:`layer_sweep_frame`). No Streamlit here.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd

import db
from mrag_core.llm_strategies import LLMOptions
from mrag_core.settings import DEFAULT_MODEL, RetrievalSettings
from services.llm.config import LLMConfig
from services.workflows.eval_results import EvaluationInputError, k_for, load_run_metrics
from services.workflows.evaluation_runs import (
    DEFAULT_BATCH,
    ProgressFn,
    loaded_model,
    resume_evaluation,
    run_evaluation,
)

__all__ = [
    "SweepPlan",
    "layer_sweep",
    "layer_sweep_frame",
    "resume_sweep",
    "sweep_plans",
]


def layer_sweep(
    store: db.Store,
    *,
    corpus_id: int,
    query_set_id: int,
    layers: Sequence[int],
    settings: RetrievalSettings = RetrievalSettings(),
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    lm: Any | None = None,
    llm_config: LLMConfig | None = None,
    llm_options: LLMOptions | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> list[int]:
    """One run per layer of one model (the same ``settings``, their ``layer`` set per run); the runs share a
    ``config.sweep`` id and record all the sweep's layers (``config.sweep_layers``, as requested), so
    :func:`resume_sweep` can finish a stopped sweep. Stops after a run that did not finish (``cancel``
    set, or stopped otherwise). LLM expansions are asked once: the later layers' runs read them from the cache."""
    if not layers:
        raise EvaluationInputError("choose at least one layer")
    lm = loaded_model(settings.model, lm)
    sweep = uuid.uuid4().hex[:12]
    return _sweep_layers(store, list(layers), sweep=sweep, progress=progress, runs=lambda layer, prog: run_evaluation(
        store, corpus_id=corpus_id, query_set_id=query_set_id, settings=settings.with_(layer=layer), progress=prog,
        cancel=cancel, lm=lm, extra_config={"sweep": sweep, "sweep_layers": list(layers)}, llm_config=llm_config,
        llm_options=llm_options, batch_size=batch_size))


def _sweep_layers(store: db.Store, layers: list[int], *, sweep: str, progress: ProgressFn | None,
                  runs: Callable[[int, ProgressFn], int]) -> list[int]:
    """``runs(layer, progress)`` for each of ``layers`` in order (progress stages prefixed with the layer), until
    one returns a run that did not finish; returns the run ids."""
    ids: list[int] = []
    for i, layer in enumerate(layers):
        def prog(stage: str, done: int, total: int, _i: int = i, _layer: int = layer) -> None:
            if progress is not None:
                progress(f"layer {_layer} ({_i + 1}/{len(layers)}): {stage}", done, total)

        ids.append(runs(layer, prog))
        if db.get_eval_run(store, ids[-1]).status != "done":
            break
    return ids


def _requested_layer(run: db.EvalRunInfo) -> int:
    """The layer a run was asked for (``-1`` = last), or its resolved layer for a run stored before that was kept."""
    return int(run.config.get("layer_requested", run.config.get("layer", 0)))


@dataclass(frozen=True)
class SweepPlan:
    """A stored layer sweep: its runs (ascending layer) and the layers it was started with.

    ``layers``: ``config.sweep_layers`` as requested (``-1`` = last); for a sweep stored before that was
    recorded, the requested layers of its runs. ``missing``: layers without a run yet (the sweep stopped
    before them); ``unfinished``: its runs not done."""

    sweep: str
    layers: list[int]
    runs: list[db.EvalRunInfo]

    @property
    def model(self) -> str:
        return str(self.runs[0].config.get("model", "?")) if self.runs else "?"

    def run_for(self, layer: int) -> db.EvalRunInfo | None:
        """The sweep's run of requested ``layer`` (the newest, should there be several)."""
        found = [r for r in self.runs if _requested_layer(r) == layer]
        return max(found, key=lambda r: r.id) if found else None

    @property
    def missing(self) -> list[int]:
        return [layer for layer in self.layers if self.run_for(layer) is None]

    @property
    def unfinished(self) -> list[db.EvalRunInfo]:
        return [r for r in self.runs if r.status != "done"]

    @property
    def finished(self) -> bool:
        return not self.missing and not self.unfinished


def sweep_plans(store: db.Store, corpus_id: int | None = None) -> list[SweepPlan]:
    """Every stored layer sweep (of one corpus), newest first."""
    members: dict[str, list[db.EvalRunInfo]] = {}
    for r in db.list_eval_runs(store, corpus_id=corpus_id):  # newest first
        if sid := r.config.get("sweep"):
            members.setdefault(str(sid), []).append(r)
    plans = []
    for sid, runs in members.items():
        runs = sorted(runs, key=lambda r: int(r.config.get("layer", 0)))
        planned = next((r.config["sweep_layers"] for r in runs if r.config.get("sweep_layers")), None)
        layers = [int(x) for x in planned] if planned else list(dict.fromkeys(_requested_layer(r) for r in runs))
        plans.append(SweepPlan(sid, layers, runs))
    return plans


def resume_sweep(store: db.Store, run_id: int, *, lm: Any | None = None, progress: ProgressFn | None = None,
                 cancel: threading.Event | None = None, llm_config: LLMConfig | None = None) -> list[int]:
    """Finish the layer sweep of run ``run_id``: each of its layers in order, resuming an unfinished run and
    starting the layers that have none with the sweep's settings (done layers are skipped); stops after a run
    that did not finish. A run outside any sweep is resumed alone (:func:`resume_evaluation`). Returns the ids
    of the runs resumed or started."""
    try:
        info = db.get_eval_run(store, run_id)
    except db.NotFoundError as exc:
        raise EvaluationInputError(f"evaluation run {run_id} does not exist") from exc
    sid = info.config.get("sweep")
    plan = next((p for p in sweep_plans(store, info.corpus_id) if p.sweep == sid), None) if sid else None
    if plan is None:
        return [resume_evaluation(store, run_id, lm=lm, progress=progress, cancel=cancel, llm_config=llm_config)]
    cfg = info.config
    lm = loaded_model(str(cfg.get("model") or DEFAULT_MODEL), lm)
    todo = [layer for layer in plan.layers if (r := plan.run_for(layer)) is None or r.status != "done"]

    def run_layer(layer: int, prog: ProgressFn) -> int:
        existing = plan.run_for(layer)
        if existing is not None:
            return resume_evaluation(store, existing.id, lm=lm, progress=prog, cancel=cancel, llm_config=llm_config)
        asked = RetrievalSettings.from_dict(cfg, requested=True, seed=int(info.seed or 0)).with_(layer=layer)
        return run_evaluation(
            store, corpus_id=info.corpus_id, query_set_id=info.query_set_id, settings=asked, progress=prog,
            cancel=cancel, lm=lm,
            extra_config={"sweep": plan.sweep, "sweep_layers": plan.layers}, llm_config=llm_config,
            llm_options=LLMOptions.from_dict(cfg.get("llm")) if cfg.get("llm") else None)

    return _sweep_layers(store, todo, sweep=plan.sweep, progress=progress, runs=run_layer)


def layer_sweep_frame(store: db.Store, run_ids: Sequence[int], *, k: int | None = None) -> pd.DataFrame:
    """Per (layer, strategy): mean weighted ratio at k (default k = n_aspects) over all scored queries."""
    rows = []
    for rid in run_ids:
        m = load_run_metrics(store, rid)
        pq = m.per_query
        if pq.empty:
            continue
        want = pq["n_aspects"].map(lambda n, _km=m.k_max: k_for(int(n), k, _km))
        at = pq[pq["k"] == want]
        for strat, grp in at.groupby("strategy"):
            rows.append({"run_id": rid, "layer": int(m.run.config.get("layer", -1)), "strategy": strat,
                         "weighted": float(grp["weighted"].mean()), "rsr": float(grp["rsr"].mean()),
                         "csr": float(grp["csr"].mean()), "queries": int(grp["query_id"].nunique())})
    return pd.DataFrame(rows, columns=["run_id", "layer", "strategy", "weighted", "rsr", "csr", "queries"]) \
        .sort_values(["strategy", "layer"]).reset_index(drop=True)


def sweeps(store: db.Store, corpus_id: int | None = None) -> dict[str, list[db.EvalRunInfo]]:
    """Stored layer sweeps that can be drawn: sweep id -> its runs with results (ascending layer), for the
    sweeps with results at two layers or more (newest first). A sweep stopped during its first layer, or after
    it, is not a sweep to look at yet: it is offered for resuming instead (:func:`sweep_plans`)."""
    out: dict[str, list[db.EvalRunInfo]] = {}
    for plan in sweep_plans(store, corpus_id):
        scored = [r for r in plan.runs if r.n_results]
        if len({int(r.config.get("layer", 0)) for r in scored}) >= 2:
            out[plan.sweep] = scored
    return out
