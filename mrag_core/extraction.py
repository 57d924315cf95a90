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

Concurrency: one loaded model serves every caller at once (all Streamlit sessions share it). Nothing per call is
kept on the model or its tokenizer: the heads are handed to the calling thread's own :class:`HeadCapture` by a hook
installed once, and every tokenizer call holds that tokenizer's lock (:func:`tokenize`). Forward passes themselves
run in parallel.
"""

from __future__ import annotations

import threading
import time
import weakref
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Callable, Sequence

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


_ACTIVE_CAPTURES: ContextVar[tuple["HeadCapture", ...]] = ContextVar("mrag_head_captures", default=())
"""The captures open in this thread (or asyncio task): each call's own, never another's."""
_REGISTRY_LOCK = threading.Lock()
_TOKENIZER_LOCKS: "weakref.WeakKeyDictionary[Any, threading.Lock]" = weakref.WeakKeyDictionary()


def _capture_hook(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
    """Forward pre-hook installed once per module (:func:`install_capture_hook`): hands the module's input to the
    calling thread's open :class:`HeadCapture` of that module, if any (a forward of another thread is not seen)."""
    for cap in _ACTIVE_CAPTURES.get():
        if cap.module is module:
            cap.value = args[0]


def install_capture_hook(module: torch.nn.Module) -> None:
    """Register :func:`_capture_hook` on ``module`` unless it is there already (once, under a lock: registering
    changes the module's hook dict, which forward passes of other threads read)."""
    if _capture_hook in module._forward_pre_hooks.values():
        return
    with _REGISTRY_LOCK:
        if _capture_hook not in module._forward_pre_hooks.values():
            module.register_forward_pre_hook(_capture_hook)


class HeadCapture:
    """Keeps the input of an attention output projection (all heads' outputs) while its ``with`` block is open.

    Concurrency: the model is shared (the app loads it once for every session), so nothing per call lives on it.
    The module gets one permanent pre-hook (:func:`install_capture_hook`), which does nothing unless the thread
    running the forward pass has a capture of that module open; the open captures are a context variable, so each
    thread (or asyncio task) sees only its own. Forward passes of the same model may run in any number of threads at
    once, each with torch's intra-op threads; each capture gets its own call's tensor.
    """

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.value: torch.Tensor | None = None
        self._token: Token | None = None
        install_capture_hook(module)

    def __enter__(self) -> "HeadCapture":
        self._token = _ACTIVE_CAPTURES.set((*_ACTIVE_CAPTURES.get(), self))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE_CAPTURES.reset(self._token)
            self._token = None


def tokenizer_lock(tokenizer: Any) -> threading.Lock:
    """The lock held while ``tokenizer`` encodes (one per tokenizer object, made on first use).

    A fast (Rust) tokenizer keeps its truncation and padding settings between calls: each call sets them on the
    shared object, then encodes. Two threads asking for different settings (an embedding truncated to 256 tokens
    and padded, a query-length check untruncated) would otherwise encode with each other's settings: a text left
    untruncated or a batch left unpadded, so wrong vectors, a wrong length, or an error."""
    with _REGISTRY_LOCK:
        lock = _TOKENIZER_LOCKS.get(tokenizer)
        if lock is None:
            lock = _TOKENIZER_LOCKS[tokenizer] = threading.Lock()
        return lock


def tokenize(tokenizer: Any, texts: Sequence[str], **kwargs: Any) -> Any:
    """``tokenizer(list(texts), **kwargs)`` under :func:`tokenizer_lock`: every call on a shared model's tokenizer
    goes through here."""
    with tokenizer_lock(tokenizer):
        return tokenizer(list(texts), **kwargs)


def prompt_texts(lm: LoadedModel, texts: Sequence[str], kind: str) -> list[str]:
    """Prefix the spec's document or query prompt (``kind`` = ``doc`` | ``query``)."""
    prefix = lm.spec.query_prompt if kind == "query" else lm.spec.doc_prompt
    return [prefix + t for t in texts] if prefix else list(texts)


@torch.inference_mode()
def forward_batch(
    lm: LoadedModel, texts: Sequence[str], *, layer: int | None = -1, max_length: int | None = None,
    head_pooling: str | None = None, standard_pooling: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass over ``texts``: returns (standard [b, d], heads [b, h, head_dim]) on device.

    Safe to call from several threads at once on one shared ``lm`` (see :class:`HeadCapture`, :func:`tokenize`):
    each call gets its own texts' vectors, and forward passes are not serialised."""
    enc = tokenize(lm.tokenizer, texts, padding=True, truncation=True,
                   max_length=max_length or lm.spec.max_length, return_tensors="pt")
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
