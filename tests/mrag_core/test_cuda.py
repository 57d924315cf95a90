"""The CUDA paths against the CPU ones: extraction (float32 and half precision) and the torch backend.

Skipped without a CUDA device (CI has none); run them on a GPU box with
``python -m pytest tests/mrag_core/test_cuda.py``. The CPU results are the reference: the CPU paths
are tested against hand-computed values and the attention equivalence elsewhere, so agreement
here carries those properties over to the GPU.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from mrag_core.backends import TorchIndex
from mrag_core.extraction import embed_texts, forward_batch
from mrag_core.models.loader import load_model, model_from_module
from tests.mrag_core.test_extraction import TEXTS, VOCAB, attention_module, tiny_model
from tests.support.tiny_tokenizer import WordTokenizer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _pair(family: str):
    """The same tiny random model loaded on the CPU and on CUDA."""
    cpu = tiny_model(family)
    gpu = copy.deepcopy(cpu).to("cuda")
    tok = lambda: WordTokenizer(VOCAB, specials=family == "bert")  # noqa: E731
    return (model_from_module(cpu, tok(), name=f"tiny-{family}"),
            model_from_module(gpu, tok(), name=f"tiny-{family}"))


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
def test_cuda_extraction_equals_cpu(family: str) -> None:
    lm_cpu, lm_gpu = _pair(family)
    assert lm_gpu.device.type == "cuda"
    for layer in (0, -1):
        std_c, heads_c = forward_batch(lm_cpu, TEXTS, layer=layer)
        std_g, heads_g = forward_batch(lm_gpu, TEXTS, layer=layer)
        assert heads_g.device.type == "cuda"
        torch.testing.assert_close(std_g.cpu(), std_c, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(heads_g.cpu(), heads_c, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_cuda_heads_times_projection_equal_attention_output(family: str) -> None:
    # the equivalence itself, on the GPU: captured heads @ o_proj^T + b = the attention output at the token
    _, lm = _pair(family)
    W, b = lm.oproj_weight(-1)
    captured = {}
    hook = attention_module(lm, -1).register_forward_hook(
        lambda _m, _a, out: captured.__setitem__("out", out[0] if isinstance(out, tuple) else out))
    try:
        _, heads = forward_batch(lm, TEXTS, layer=-1, head_pooling="last")
    finally:
        hook.remove()
    mask = lm.tokenizer(TEXTS)["attention_mask"]
    pos = mask.sum(1) - 1  # right padding: the last real token
    with torch.no_grad():
        expected = captured["out"][torch.arange(len(TEXTS), device="cuda"), pos.to("cuda")]
        projected = heads.reshape(len(TEXTS), -1).clone() @ W.T + (b if b is not None else 0)
    torch.testing.assert_close(projected, expected, rtol=1e-4, atol=1e-5)


def test_cuda_half_precision_load_and_embed(tmp_path: Path) -> None:
    # load_model(..., device="cuda", half=True) from a saved folder: float16 weights, float32 outputs
    # that point where the float32 model's do (cosine > 0.999 for every vector)
    from transformers import BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted({w for t in TEXTS for w in t.split()})
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(tmp_path)
    tiny_model("bert").save_pretrained(tmp_path)
    full = load_model(str(tmp_path), device="cuda", half=False)
    half = load_model(str(tmp_path), device="cuda", half=True)
    assert full.dtype == torch.float32 and half.dtype == torch.float16 and half.device.type == "cuda"
    a, b = embed_texts(full, TEXTS), embed_texts(half, TEXTS)
    assert b.heads.dtype == np.float32 and b.heads.shape == a.heads.shape and np.isfinite(b.heads).all()

    def cos(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x * y).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1))

    assert cos(a.standard, b.standard).min() > 0.999
    assert cos(a.heads, b.heads).min() > 0.999
    # Stored, each precision makes an index of its own: the float16 build copies nothing from the float32 one.
    import db
    from services.workflows.indexing import build_embedding_run

    with db.open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        corpus = db.create_corpus(store, "c")
        db.add_documents(store, corpus.id, [{"title": f"T{i}", "text": t} for i, t in enumerate(TEXTS)])
        r32, r16 = build_embedding_run(store, corpus.id, full), build_embedding_run(store, corpus.id, half)
        assert (r32.run.precision, r16.run.precision) == ("float32", "float16") and r16.run.id != r32.run.id
        assert (r16.copied, r16.embedded_now) == (0, r16.run.n_saved) and r16.run.n_saved == r32.run.n_saved


@pytest.mark.parametrize("metric", ["cosine", "ip"])
def test_torch_index_cuda_equals_cpu(metric: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5000, 12, 32)).astype(np.float32)
    q = rng.standard_normal((7, 12, 32)).astype(np.float32)
    cpu = TorchIndex(x, metric=metric, device="cpu")
    gpu = TorchIndex(x, metric=metric, device="cuda")
    for depth in (1, 32, 6000):  # 6000 > n: clamped to every document
        a, b = cpu.search(q, depth), gpu.search(q, depth)
        assert b.ids.shape == a.ids.shape == (7, 12, min(depth, 5000))
        np.testing.assert_array_equal(b.ids, a.ids)
        np.testing.assert_allclose(b.scores, a.scores, rtol=1e-4, atol=1e-4)


def test_torch_index_cuda_orders_ties_by_the_smaller_id() -> None:
    # duplicated documents score exactly alike: both devices must list the smaller id first and
    # cut at the same place
    rng = np.random.default_rng(6)
    base = rng.standard_normal((300, 3, 16)).astype(np.float32)
    x = np.concatenate([base, base, base])  # doc i, i + 300 and i + 600 are identical
    q = rng.standard_normal((4, 3, 16)).astype(np.float32)
    a = TorchIndex(x, device="cpu").search(q, 32)
    b = TorchIndex(x, device="cuda").search(q, 32)
    np.testing.assert_array_equal(b.ids, a.ids)
    assert (a.ids[..., 0] < 300).all() and (a.ids[..., 1] == a.ids[..., 0] + 300).all()
