"""The real all-MiniLM-L6-v2 (shipped in the venv): standard vectors match sentence-transformers,
head vectors have shape (n, 12, 32) and, through the attention output projection, rebuild the
attention output of the real model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mrag_core.extraction import embed_texts, forward_batch, token_positions
from mrag_core.models.loader import load_model

torch.set_num_threads(1)

TEXTS = [
    "The Treaty of Westphalia ended the Thirty Years' War in 1648.",
    "Photosynthesis converts light energy into chemical energy.",
    "A short one.",
    "Volcanic eruptions can cool the global climate for several years by injecting sulfate aerosols.",
]


@pytest.fixture(scope="module")
def lm():
    return load_model("minilm", device="cpu")


def test_model_facts(lm) -> None:
    assert (lm.family, lm.n_layers, lm.n_heads, lm.head_dim, lm.hidden_size) == ("bert", 6, 12, 32, 384)
    assert (lm.head_pooling, lm.standard_pooling) == ("mean", "mean")


def test_standard_matches_sentence_transformers(lm) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(lm.path), device="cpu")
    ref = st.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    emb = embed_texts(lm, TEXTS, batch_size=3)  # two batches, padded, longest first
    ours = emb.standard / np.linalg.norm(emb.standard, axis=1, keepdims=True)
    np.testing.assert_allclose(ours, ref, atol=2e-5)
    assert emb.heads.shape == (len(TEXTS), 12, 32)
    assert emb.heads.dtype == np.float32 and np.isfinite(emb.heads).all()


@pytest.mark.parametrize("layer", [2, -1])
def test_heads_rebuild_attention_output(lm, layer: int) -> None:
    idx = lm.layer_index(layer)
    bert_layer = lm.model.encoder.layer[idx]
    grabbed: dict[str, torch.Tensor] = {}

    def attn_in(_m, args, kwargs):
        grabbed["in"] = args[0] if args else kwargs["hidden_states"]

    def attn_out(_m, _a, out):
        grabbed["out"] = out[0] if isinstance(out, tuple) else out

    def dense_out(_m, _a, out):
        grabbed["dense"] = out

    hooks = [
        bert_layer.register_forward_pre_hook(attn_in, with_kwargs=True),
        bert_layer.attention.register_forward_hook(attn_out),
        bert_layer.attention.output.dense.register_forward_hook(dense_out),
    ]
    try:
        _, first = forward_batch(lm, TEXTS, layer=layer, head_pooling="first")
        dense_first = grabbed["dense"]
        _, mean = forward_batch(lm, TEXTS, layer=layer, head_pooling="mean")
    finally:
        for h in hooks:
            h.remove()
    assert first.shape == mean.shape == (len(TEXTS), 12, 32)
    W, b = lm.oproj_weight(layer)
    mask = lm.tokenizer(TEXTS, padding=True, return_tensors="pt")["attention_mask"]
    rows = torch.arange(len(TEXTS))
    with torch.inference_mode():
        # CLS token: LayerNorm(dense(heads) + attention input) == BertAttention output
        pos = token_positions(mask, "first")
        rebuilt = bert_layer.attention.output.LayerNorm(
            first.reshape(len(TEXTS), -1) @ W.T + b + grabbed["in"][rows, pos]
        )
        torch.testing.assert_close(rebuilt, grabbed["out"][rows, pos], rtol=1e-4, atol=1e-4)
        # mean pooling: dense is affine, so dense(mean heads) == mean over real tokens of dense(heads)
        m = mask.unsqueeze(-1).float()
        expected = (dense_first * m).sum(1) / m.sum(1)
        torch.testing.assert_close(mean.reshape(len(TEXTS), -1) @ W.T + b, expected, rtol=1e-4, atol=1e-4)
