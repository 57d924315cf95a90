"""Attention weights of one layer for one text, for heatmaps (no Streamlit).

The model must run with ``attn_implementation="eager"`` (fused SDPA kernels do not return the
weights): load it with ``load_model(name, attn_implementation="eager")``. The forward pass uses
``output_attentions=True``; ``weights[h, i, j]`` is how much token ``i`` attends to token ``j`` in
head ``h`` (each row sums to 1; decoders are causal, so everything above the diagonal is 0).
Long texts are truncated to ``min(max_tokens, lm.spec.max_length)`` tokens, the caller's limit or the model's own
(the most positions it has, what retrieval reads), and say so (``truncated``, ``cut_by_model``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mrag_core.extraction import tokenize
from mrag_core.models.loader import LoadedModel

DEFAULT_MAX_TOKENS = 96


class AttentionUnavailable(RuntimeError):
    """The model was not loaded with eager attention, so it cannot return weights."""


@dataclass(frozen=True)
class AttentionMaps:
    """One layer's attention for one text: ``weights`` [heads, tokens, tokens] float32.

    ``truncated``: the text had more than the ``len(tokens)`` tokens shown; ``cut_by_model``: it was cut at the
    model's own limit (``lm.spec.max_length``), at or below the ``max_tokens`` asked for, so asking for more tokens
    shows no more.
    """

    tokens: list[str]
    weights: np.ndarray
    layer: int
    n_tokens_total: int
    truncated: bool
    cut_by_model: bool = False

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[0])

    def head(self, h: int) -> np.ndarray:
        """Token x token attention of head ``h`` (rows: attending token, columns: attended token)."""
        return self.weights[h]

    def from_token(self, position: int = -1) -> np.ndarray:
        """Attention of the token at ``position`` (default: the last) over all tokens: [heads, tokens]."""
        return self.weights[:, position, :]


def uses_eager(lm: LoadedModel) -> bool:
    impl = getattr(lm.model.config, "_attn_implementation", None) or lm.attn_implementation
    return impl == "eager"


def token_labels(lm: LoadedModel, ids: list[int]) -> list[str]:
    """Readable token strings (SentencePiece/BPE space markers shown as a leading space);
    duplicates stay (heatmap axes get position numbers added by the caller)."""
    convert = getattr(lm.tokenizer, "convert_ids_to_tokens", None)
    toks = convert(ids) if convert is not None else [str(i) for i in ids]
    return [str(t).replace("Ġ", " ").replace("▁", " ").replace("Ċ", "\\n") for t in toks]


def token_limit(lm: LoadedModel, max_tokens: int) -> int:
    """The most tokens :func:`attention_maps` reads: ``min(max_tokens, lm.spec.max_length)``. The model's limit is
    its position table's (a BERT with 128 positions fails with IndexError on a 129th token)."""
    return min(int(max_tokens), int(lm.spec.max_length))


@torch.inference_mode()
def attention_maps(lm: LoadedModel, text: str, layer: int | None = -1, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                   kind: str = "doc") -> AttentionMaps:
    """Attention weights of ``layer`` for ``text``, truncated to :func:`token_limit` tokens (``max_tokens`` or the
    model's own limit, the smaller).

    ``kind="query"`` prepends the model's query prompt, as retrieval does. Raises
    :class:`AttentionUnavailable` unless the model runs eager attention; ValueError for empty text.
    """
    if not text or not text.strip():
        raise ValueError("The text is empty.")
    if not uses_eager(lm):
        raise AttentionUnavailable(
            "attention weights need the model loaded with attn_implementation='eager' (SDPA does not return them)")
    idx = lm.layer_index(layer)
    prompt = lm.spec.query_prompt if kind == "query" else lm.spec.doc_prompt
    full = prompt + text if prompt else text
    n_total = len(tokenize(lm.tokenizer, [full], padding=False, truncation=False, return_tensors="pt")["input_ids"][0])
    limit = token_limit(lm, max_tokens)
    enc = tokenize(lm.tokenizer, [full], padding=False, truncation=True, max_length=limit, return_tensors="pt")
    enc = {k: v.to(lm.device) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    out = lm.model(**enc, output_attentions=True)
    attentions = getattr(out, "attentions", None)
    if not attentions:
        raise AttentionUnavailable("the model returned no attention weights")
    weights = attentions[idx][0].float().cpu().numpy()
    ids = enc["input_ids"][0].tolist()
    truncated = n_total > len(ids)
    return AttentionMaps(token_labels(lm, ids), weights, idx, n_total, truncated,
                         cut_by_model=truncated and lm.spec.max_length <= max_tokens)
