"""Extraction on tiny random Llama (GQA), GPT-2 and BERT models built in code (no downloads).

The captured head vectors are the input of the attention output projection; concatenated and
multiplied by that projection they must give the attention module's own output at the pooled
token. Padded batches must equal one-by-one runs for every pooling and padding side.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np
import pytest
import torch

from mrag_core.extraction import (
    Embeddings,
    ExtractionCancelled,
    HeadCapture,
    embed_texts,
    forward_batch,
    pool_tokens,
    split_vectors,
    token_positions,
)
from mrag_core.models.loader import model_from_module
from tests.support.tiny_tokenizer import WordTokenizer

torch.set_num_threads(1)

VOCAB = 97
HIDDEN = 32
N_HEADS = 4
HEAD_DIM = HIDDEN // N_HEADS
N_LAYERS = 3


def tiny_model(family: str, impl: str = "eager") -> torch.nn.Module:
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, LlamaConfig, LlamaModel

    torch.manual_seed({"llama": 1, "gpt2": 2, "bert": 3}[family])
    if family == "llama":
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=N_LAYERS,
                          num_attention_heads=N_HEADS, num_key_value_heads=2, max_position_embeddings=64,
                          attention_bias=True, attn_implementation=impl)
        model = LlamaModel(cfg)
    elif family == "gpt2":
        cfg = GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=N_LAYERS, n_head=N_HEADS, n_positions=64,
                         bos_token_id=1, eos_token_id=2, attn_implementation=impl)
        model = GPT2Model(cfg)
    else:
        cfg = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=N_LAYERS, num_attention_heads=N_HEADS,
                         intermediate_size=64, max_position_embeddings=64, attn_implementation=impl)
        model = BertModel(cfg)
    return model.eval()


def tiny_lm(family: str, *, padding_side: str = "right", impl: str = "eager", **pool):
    return model_from_module(
        tiny_model(family, impl),
        WordTokenizer(VOCAB, specials=family == "bert", padding_side=padding_side),
        name=f"tiny-{family}",
        **pool,
    )


TEXTS = [
    "the cat sat on the mat today",
    "a dog",
    "quantum fields and gauge symmetry in four dimensions",
    "bread",
    "rivers flow to the sea",
]


def attention_module(lm, layer: int) -> torch.nn.Module:
    idx = lm.layer_index(layer)
    if lm.family == "llama":
        return lm.model.layers[idx].self_attn
    if lm.family == "gpt2":
        return lm.model.h[idx].attn
    return lm.model.encoder.layer[idx].attention


class OutputCapture:
    """Forward hook keeping a module's first output (attention modules return tuples)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.value = None
        self._h = module.register_forward_hook(self._hook)

    def _hook(self, _m, _a, out) -> None:
        self.value = out[0] if isinstance(out, tuple) else out

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._h.remove()


# --------------------------------------------------------------------------- pure helpers


def test_token_positions_right_and_left_padding() -> None:
    mask = torch.tensor([
        [1, 1, 1, 0, 0],  # right padded
        [0, 0, 1, 1, 1],  # left padded
        [1, 1, 1, 1, 1],  # full
        [0, 0, 0, 0, 1],  # one real token at the end
    ])
    assert token_positions(mask, "last").tolist() == [2, 4, 4, 4]
    assert token_positions(mask, "first").tolist() == [0, 2, 0, 4]
    with pytest.raises(ValueError):
        token_positions(mask, "mean")


def test_pool_tokens_hand_computed() -> None:
    x = torch.arange(2 * 4 * 2, dtype=torch.float32).reshape(2, 4, 2)
    mask = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1]])
    # row 0 tokens: [0,1] [2,3] [4,5] [6,7]; row 1: [8,9] [10,11] [12,13] [14,15]
    assert pool_tokens(x, mask, "last").tolist() == [[2, 3], [14, 15]]
    assert pool_tokens(x, mask, "first").tolist() == [[0, 1], [10, 11]]
    assert pool_tokens(x, mask, "mean").tolist() == [[1, 2], [12, 13]]
    with pytest.raises(ValueError):
        pool_tokens(x, mask, "max")


def test_split_vectors_and_embeddings_helpers() -> None:
    std = np.arange(12, dtype=np.float32).reshape(2, 6)
    pieces = split_vectors(std, 3)
    assert pieces.shape == (2, 3, 2)
    assert pieces[0].tolist() == [[0, 1], [2, 3], [4, 5]]
    assert pieces[1, 2].tolist() == [10, 11]
    with pytest.raises(ValueError):
        split_vectors(std, 4)
    heads = np.arange(2 * 2 * 3, dtype=np.float32).reshape(2, 2, 3)
    emb = Embeddings(std, heads)
    assert len(emb) == 2 and emb.n_heads == 2
    assert emb.split().shape == (2, 2, 3)  # default: h pieces
    assert emb.split()[1, 1].tolist() == [9, 10, 11]
    sub = emb.take([1])
    assert sub.standard.tolist() == [std[1].tolist()] and sub.heads.tolist() == [heads[1].tolist()]


def test_head_capture_stops_capturing_when_its_block_ends() -> None:
    lin = torch.nn.Linear(3, 2)
    with HeadCapture(lin) as cap:
        lin(torch.ones(1, 3))
        assert cap.value is not None and cap.value.tolist() == [[1.0, 1.0, 1.0]]
    cap.value = None
    lin(torch.zeros(1, 3))
    assert cap.value is None
    with HeadCapture(lin) as again:  # a second capture of the same module installs no second hook
        lin(torch.full((1, 3), 2.0))
    assert again.value.tolist() == [[2.0, 2.0, 2.0]] and cap.value is None
    assert len(lin._forward_pre_hooks) == 1


# --------------------------------------------------------------------------- heads x projection == attention output


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
@pytest.mark.parametrize("layer", [0, -1])
def test_heads_times_projection_equal_attention_output(family: str, layer: int) -> None:
    lm = tiny_lm(family)
    pooling = "first" if family == "bert" else "last"
    other = "last" if family == "bert" else "first"
    attn = attention_module(lm, layer)
    W, b = lm.oproj_weight(layer)
    with OutputCapture(attn) as out_cap, torch.no_grad():
        layer_mod = (lm.model.encoder.layer[lm.layer_index(layer)] if family == "bert" else None)
        attn_in: dict[str, torch.Tensor] = {}
        h = None
        if layer_mod is not None:
            def grab(_m, args, kwargs):
                attn_in["x"] = args[0] if args else kwargs["hidden_states"]
            h = layer_mod.register_forward_pre_hook(grab, with_kwargs=True)
        try:
            enc = lm.tokenizer(TEXTS)
            mask = enc["attention_mask"]
            for pool in (pooling, other):
                _, heads = forward_batch(lm, TEXTS, layer=layer, head_pooling=pool)
                assert heads.shape == (len(TEXTS), N_HEADS, HEAD_DIM)  # query heads, not the 2 KV heads
                pos = token_positions(mask, pool)
                rows = torch.arange(len(TEXTS))
                expected = out_cap.value[rows, pos]
                projected = heads.reshape(len(TEXTS), -1) @ W.T + (b if b is not None else 0)
                if family == "bert":
                    ln = lm.model.encoder.layer[lm.layer_index(layer)].attention.output.LayerNorm
                    projected = ln(projected + attn_in["x"][rows, pos])
                torch.testing.assert_close(projected, expected, rtol=1e-5, atol=1e-5)
        finally:
            if h is not None:
                h.remove()


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_mean_pooled_heads_project_to_mean_attention_output(family: str) -> None:
    """The projection is affine, so it commutes with the mean over real tokens."""
    lm = tiny_lm(family)
    W, b = lm.oproj_weight(1)
    with OutputCapture(attention_module(lm, 1)) as cap:
        _, heads = forward_batch(lm, TEXTS, layer=1, head_pooling="mean")
    mask = lm.tokenizer(TEXTS)["attention_mask"]
    m = mask.unsqueeze(-1).float()
    with torch.inference_mode():
        expected = (cap.value * m).sum(1) / m.sum(1)
        projected = heads.reshape(len(TEXTS), -1) @ W.T + b
    torch.testing.assert_close(projected, expected, rtol=1e-5, atol=1e-5)


def test_gpt2_head_recomputed_by_hand() -> None:
    lm = tiny_lm("gpt2")
    layer = 1
    block = lm.model.h[layer]
    ln_out: dict[str, torch.Tensor] = {}
    hk = block.ln_1.register_forward_hook(lambda _m, _a, o: ln_out.__setitem__("x", o))
    try:
        texts = ["the cat sat on the mat today", "a dog"]  # row 1 is right padded
        _, heads = forward_batch(lm, texts, layer=layer, head_pooling="last")
    finally:
        hk.remove()
    with torch.inference_mode():
        q, k, v = block.attn.c_attn(ln_out["x"]).split(HIDDEN, dim=2)
    mask = lm.tokenizer(texts)["attention_mask"]
    for row in range(len(texts)):
        t = int(mask[row].sum()) - 1  # last real token (right padding)
        for i in range(N_HEADS):
            sl = slice(i * HEAD_DIM, (i + 1) * HEAD_DIM)
            qi, ki, vi = q[row, t, sl], k[row, : t + 1, sl], v[row, : t + 1, sl]  # causal: keys 0..t
            with torch.inference_mode():
                w = torch.softmax(ki @ qi / math.sqrt(HEAD_DIM), dim=0)
                manual = w @ vi
            torch.testing.assert_close(heads[row, i], manual, rtol=1e-5, atol=1e-5)
    # the heads really differ from one another (a wrong reshape would still pass a sum check)
    assert not torch.allclose(heads[0, 0], heads[0, 1])


def test_layer_choice_changes_heads_but_not_standard() -> None:
    lm = tiny_lm("llama")
    s0, h0 = forward_batch(lm, TEXTS[:2], layer=0)
    s1, h1 = forward_batch(lm, TEXTS[:2], layer=-1)
    torch.testing.assert_close(s0, s1)
    assert not torch.allclose(h0, h1)
    with pytest.raises(ValueError):
        forward_batch(lm, TEXTS[:2], layer=N_LAYERS)


def test_standard_vector_is_pooled_final_hidden_state() -> None:
    lm = tiny_lm("bert")  # encoder default: mean pooling
    assert lm.standard_pooling == "mean"
    enc = lm.tokenizer(TEXTS)
    with torch.no_grad():
        hidden = lm.model(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    std, _ = forward_batch(lm, TEXTS)
    torch.testing.assert_close(std, (hidden * m).sum(1) / m.sum(1), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- padding


CASES = [
    ("llama", "right"), ("llama", "left"), ("gpt2", "right"), ("gpt2", "left"), ("bert", "right"),
]


@pytest.mark.parametrize("family,side", CASES)
@pytest.mark.parametrize("pool", ["last", "first", "mean"])
def test_padded_batch_equals_one_by_one(family: str, side: str, pool: str) -> None:
    lm = tiny_lm(family, padding_side=side, head_pooling=pool, standard_pooling=pool, impl="sdpa")
    batched = embed_texts(lm, TEXTS, layer=1, batch_size=len(TEXTS), sort_by_length=False)
    single = embed_texts(lm, TEXTS, layer=1, batch_size=1)
    assert batched.heads.shape == (len(TEXTS), N_HEADS, HEAD_DIM)
    assert batched.standard.shape == (len(TEXTS), HIDDEN)
    np.testing.assert_allclose(batched.heads, single.heads, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(batched.standard, single.standard, rtol=1e-4, atol=1e-5)


def test_eager_and_sdpa_agree() -> None:
    a = embed_texts(tiny_lm("llama", impl="eager"), TEXTS)
    b = embed_texts(tiny_lm("llama", impl="sdpa"), TEXTS)
    np.testing.assert_allclose(a.heads, b.heads, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- embed_texts


def test_embed_texts_order_progress_prompt_cancel_and_empty() -> None:
    lm = tiny_lm("gpt2")
    calls: list[tuple[int, int]] = []
    sorted_run = embed_texts(lm, TEXTS, batch_size=2, progress=lambda d, t: calls.append((d, t)))
    plain = embed_texts(lm, TEXTS, batch_size=2, sort_by_length=False)
    # longest-first batching must give results back in input order
    np.testing.assert_allclose(sorted_run.heads, plain.heads, rtol=1e-4, atol=1e-5)
    assert calls == [(2, 5), (4, 5), (5, 5)]
    # each row is the text's own vector
    alone = embed_texts(lm, [TEXTS[3]])
    np.testing.assert_allclose(sorted_run.heads[3], alone.heads[0], rtol=1e-4, atol=1e-5)

    lm_q = dataclasses.replace(lm, spec=lm.spec.with_options(query_prompt="find this :"))
    as_query = embed_texts(lm_q, TEXTS[:2], kind="query")
    prefixed = embed_texts(lm, ["find this :" + t for t in TEXTS[:2]], kind="doc")
    np.testing.assert_allclose(as_query.heads, prefixed.heads, rtol=1e-5, atol=1e-6)
    assert not np.allclose(embed_texts(lm_q, TEXTS[:2], kind="doc").heads, as_query.heads)

    ev = threading.Event()
    ev.set()
    with pytest.raises(ExtractionCancelled):
        embed_texts(lm, TEXTS, cancel=ev)

    empty = embed_texts(lm, [])
    assert empty.standard.shape == (0, HIDDEN) and empty.heads.shape == (0, N_HEADS, HEAD_DIM)


def test_truncation_uses_max_length() -> None:
    lm = tiny_lm("llama")
    long_text = "one two three four five six"
    cut = embed_texts(lm, [long_text], max_length=3)
    short = embed_texts(lm, ["one two three"])
    np.testing.assert_allclose(cut.heads, short.heads, rtol=1e-5, atol=1e-6)
