"""What one process does in the multi-process extraction test (a module-level function: spawned processes import it).

Each process loads MiniLM itself, waits for the others at the barrier, then embeds its texts in two threads at
once through the disk embedding cache (:func:`mrag_core.embedding_cache.cached_embed`), whose folder all the
processes share, as the app's server, CLI runs and benchmark runs on one machine do.
"""

from __future__ import annotations

from typing import Any

BARRIER_TIMEOUT_S = 120.0


def embed_in_process(barrier: Any, query_texts: list[str], doc_texts: list[str], rounds: int
                     ) -> dict[str, list[tuple[Any, Any]]]:
    """``{"queries": [...], "docs": [...]}``: per round, the (standard, heads) arrays of ``query_texts`` (embedded as
    queries, one at a time) and of ``doc_texts`` (as documents, in batches of 2), each list made by its own thread.
    Every round but the last embeds; the last goes through the cache (written by whichever process gets there first,
    read by the others)."""
    import threading

    import torch

    from mrag_core.embedding_cache import cached_embed
    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    lm = load_model("minilm", device="cpu")
    out: dict[str, list[tuple[Any, Any]]] = {"queries": [], "docs": []}
    errors: list[BaseException] = []

    def work(key: str, texts: list[str], kind: str, batch_size: int, start: threading.Barrier) -> None:
        try:
            for r in range(rounds):
                start.wait(timeout=BARRIER_TIMEOUT_S)
                emb, _ = cached_embed(lm, texts, kind=kind, batch_size=batch_size, use_cache=r == rounds - 1)
                out[key].append((emb.standard, emb.heads))
        except BaseException as exc:  # noqa: BLE001 - raised below, in the process's main thread
            start.abort()
            errors.append(exc)

    barrier.wait(timeout=BARRIER_TIMEOUT_S)  # every process has loaded its model
    start = threading.Barrier(2)
    threads = [threading.Thread(target=work, args=("queries", query_texts, "query", 1, start)),
               threading.Thread(target=work, args=("docs", doc_texts, "doc", 2, start))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out
