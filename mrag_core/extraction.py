"""One batched forward pass gives all three embeddings: standard, per-head and split.

* Per-head (MRAG): the *input* of the chosen layer's attention output projection
  (``o_proj`` / ``c_proj`` / ``attention.output.dense``) is ``concat_i(head_i)`` of shape
  ``[batch, tokens, h * head_dim]``. Pooled over tokens (last real token for decoders, as in the
  paper; first or mean for encoders) and reshaped it gives ``[n, h, head_dim]``. Because
  ``attn_out = concat_i(head_i) @ W_o.T + b``, nothing is lost: the heads times the projection
  equal the attention output at that token.
* Standard: the model's usual sentence vector: last real token's final hidden state for
  decoders, mean over real tokens for MiniLM (as sentence-transformers does).
* Split: the standard vector cut into ``h`` equal pieces, ``[n, h, d / h]``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from mrag_core.models.loader import LoadedModel

ProgressFn = Callable[[int, int], None]
POOLINGS = ("last", "first", "mean")


class ExtractionCancelled(RuntimeError):
    """Raised when the caller's cancel event is set between batches."""


@dataclass
class Embeddings:
    """Embeddings of ``n`` texts.

    Attributes:
        standard: ``[n, d]`` float32 sentence vectors.
        heads: ``[n, h, head_dim]`` float32 per-head vectors (one embedding space per head).
    """

    standard: np.ndarray
    heads: np.ndarray

    def __len__(self) -> int:
        return int(self.standard.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.heads.shape[1])

    def split(self, pieces: int | None = None) -> np.ndarray:
        """Split RAG vectors: the standard vector cut into ``pieces`` (default ``h``) equal parts."""
        return split_vectors(self.standard, pieces or self.n_heads)

    def take(self, idx: Sequence[int] | np.ndarray) -> "Embeddings":
        """Rows ``idx`` as a new :class:`Embeddings`."""
        idx = np.asarray(idx, dtype=np.int64)
        return Embeddings(self.standard[idx], self.heads[idx])


def split_vectors(standard: np.ndarray, pieces: int) -> np.ndarray:
    """``[n, d] -> [n, pieces, d / pieces]``; ``d`` must be divisible by ``pieces``."""
    n, d = standard.shape
    if d % pieces:
        raise ValueError(f"cannot split a {d}-dim vector into {pieces} equal pieces")
    return standard.reshape(n, pieces, d // pieces)


def token_positions(mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Index of the last (or first) real token per row of an attention ``mask`` [b, t].

    Works for left and right padding: last = argmax over ``mask * position``; first = argmax of mask.
    """
    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
    if mode == "last":
        return (mask.long() * (positions + 1)).argmax(dim=1)
    if mode == "first":
        return mask.long().argmax(dim=1)
    raise ValueError(f"no single token position for pooling '{mode}'")


def pool_tokens(x: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Pool ``x`` [b, t, f] over real tokens: ``last``, ``first``, or ``mean`` = sum(x * m) / sum(m)."""
    if mode == "mean":
        m = mask.to(x.dtype).unsqueeze(-1)
        return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
    if mode in ("last", "first"):
        idx = token_positions(mask, mode)
        return x[torch.arange(x.shape[0], device=x.device), idx]
    raise ValueError(f"unknown pooling '{mode}': use one of {', '.join(POOLINGS)}")


class HeadCapture:
    """Forward pre-hook that keeps the input of an attention output projection."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.value: torch.Tensor | None = None
        self._handle = module.register_forward_pre_hook(self._hook)

    def _hook(self, _module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        self.value = args[0]

    def remove(self) -> None:
        self._handle.remove()

    def __enter__(self) -> "HeadCapture":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def prompt_texts(lm: LoadedModel, texts: Sequence[str], kind: str) -> list[str]:
    """Prefix the spec's document or query prompt (``kind`` = ``doc`` | ``query``)."""
    prefix = lm.spec.query_prompt if kind == "query" else lm.spec.doc_prompt
    return [prefix + t for t in texts] if prefix else list(texts)


@torch.inference_mode()
def forward_batch(
    lm: LoadedModel, texts: Sequence[str], *, layer: int | None = -1, max_length: int | None = None,
    head_pooling: str | None = None, standard_pooling: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass over ``texts``: returns (standard [b, d], heads [b, h, head_dim]) on device."""
    enc = lm.tokenizer(
        list(texts), padding=True, truncation=True, max_length=max_length or lm.spec.max_length,
        return_tensors="pt",
    )
    enc = {k: v.to(lm.device) for k, v in enc.items()}
    mask = enc["attention_mask"]
    if not lm.is_encoder:
        # Positions count real tokens only, so a left-padded row sees the same positions as when
        # run alone (absolute position embeddings, e.g. GPT-2, would otherwise shift).
        enc["position_ids"] = (mask.long().cumsum(dim=1) - 1).clamp(min=0)
    with HeadCapture(lm.oproj_module(layer)) as cap:
        out = lm.model(**enc)
    assert cap.value is not None, "the attention output projection did not run"
    heads = pool_tokens(cap.value, mask, head_pooling or lm.head_pooling)
    standard = pool_tokens(out.last_hidden_state, mask, standard_pooling or lm.standard_pooling)
    return standard, heads.reshape(heads.shape[0], lm.n_heads, lm.head_dim)


def embed_texts(
    lm: LoadedModel,
    texts: Sequence[str],
    *,
    kind: str = "doc",
    layer: int | None = -1,
    batch_size: int = 32,
    max_length: int | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    sort_by_length: bool = True,
) -> Embeddings:
    """Embed ``texts`` in batches; texts are processed longest first (less padding), results in input order.

    ``progress(done, total)`` is called after every batch; setting ``cancel`` stops between batches
    with :class:`ExtractionCancelled`.
    """
    items = prompt_texts(lm, texts, kind)
    n = len(items)
    if n == 0:
        return Embeddings(np.zeros((0, lm.hidden_size), np.float32), np.zeros((0, lm.n_heads, lm.head_dim), np.float32))
    order = np.argsort([-len(t) for t in items], kind="stable") if sort_by_length else np.arange(n)
    std_out = np.empty((n, lm.hidden_size), dtype=np.float32)
    head_out = np.empty((n, lm.n_heads, lm.head_dim), dtype=np.float32)
    done = 0
    for start in range(0, n, batch_size):
        if cancel is not None and cancel.is_set():
            raise ExtractionCancelled(f"embedding cancelled after {done} of {n} texts")
        idx = order[start:start + batch_size]
        std, heads = forward_batch(lm, [items[i] for i in idx], layer=layer, max_length=max_length)
        std_out[idx] = std.float().cpu().numpy()
        head_out[idx] = heads.float().cpu().numpy()
        done += len(idx)
        if progress is not None:
            progress(done, n)
    return Embeddings(std_out, head_out)


def timed_embed(lm: LoadedModel, texts: Sequence[str], **kwargs: object) -> tuple[Embeddings, float]:
    """:func:`embed_texts` plus wall seconds."""
    t0 = time.perf_counter()
    emb = embed_texts(lm, texts, **kwargs)  # type: ignore[arg-type]
    return emb, time.perf_counter() - t0
