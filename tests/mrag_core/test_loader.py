"""Model registry and loader: architecture facts, projection paths and weights, local folders only."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from mrag_core.models.loader import ModelLoadError, describe_architecture, load_model, model_from_module
from mrag_core.models.registry import MODEL_REGISTRY, default_poolings, get_spec, resolve_model

torch.set_num_threads(1)


def _llama():
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=32)
    return LlamaModel(cfg).eval()


def _gpt2():
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    return GPT2Model(GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                bos_token_id=1, eos_token_id=2)).eval()


def _bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=32)).eval()


def test_llama_gqa_facts_and_projection() -> None:
    model = _llama()
    lm = model_from_module(model, None)
    assert (lm.family, lm.n_layers, lm.n_heads, lm.head_dim, lm.hidden_size) == ("llama", 3, 6, 8, 48)
    assert (lm.head_pooling, lm.standard_pooling) == ("last", "last")
    assert not lm.is_encoder
    assert lm.oproj_module(1) is model.layers[1].self_attn.o_proj
    assert lm.oproj_module(-1) is model.layers[2].self_attn.o_proj
    assert lm.oproj_module(None) is model.layers[2].self_attn.o_proj
    W, b = lm.oproj_weight(0)
    assert W.shape == (48, 6 * 8) and b is None  # input width = query heads x head_dim
    x = torch.randn(2, 48)
    with torch.no_grad():
        torch.testing.assert_close(x @ W.T, model.layers[0].self_attn.o_proj(x))


def test_gpt2_conv1d_projection_is_transposed() -> None:
    model = _gpt2()
    lm = model_from_module(model, None)
    assert (lm.family, lm.n_layers, lm.n_heads, lm.head_dim, lm.hidden_size) == ("gpt2", 2, 4, 8, 32)
    conv = model.h[1].attn.c_proj
    assert lm.oproj_module(1) is conv
    W, b = lm.oproj_weight(1)
    x = torch.randn(3, 32)
    with torch.no_grad():
        torch.testing.assert_close(x @ W.T + b, conv(x))


def test_bert_facts_and_projection() -> None:
    model = _bert()
    lm = model_from_module(model, None, head_pooling="first")
    assert (lm.family, lm.n_heads, lm.head_dim, lm.is_encoder) == ("bert", 4, 8, True)
    assert (lm.head_pooling, lm.standard_pooling) == ("first", "mean")
    dense = model.encoder.layer[0].attention.output.dense
    assert lm.oproj_module(0) is dense
    W, b = lm.oproj_weight(0)
    x = torch.randn(2, 32)
    with torch.no_grad():
        torch.testing.assert_close(x @ W.T + b, dense(x))


def test_layer_index_bounds() -> None:
    lm = model_from_module(_gpt2(), None)
    assert [lm.layer_index(i) for i in (0, 1, -1, -2, None)] == [0, 1, 1, 0, 1]
    for bad in (2, -3):
        with pytest.raises(ValueError, match="out of range"):
            lm.layer_index(bad)


def test_describe_architecture_rejects_unknown_family() -> None:
    with pytest.raises(ModelLoadError, match="not supported"):
        describe_architecture(SimpleNamespace(model_type="t5"))
    cfg = SimpleNamespace(model_type="qwen3", num_hidden_layers=4, num_attention_heads=8, hidden_size=64, head_dim=16)
    assert describe_architecture(cfg) == ("qwen3", 4, 8, 16, 64)  # explicit head_dim wins over hidden / heads


def test_registry_lookup() -> None:
    assert get_spec("minilm") is MODEL_REGISTRY["minilm"]
    with pytest.raises(KeyError, match="unknown model"):
        get_spec("nope")
    with pytest.raises(KeyError, match="not an existing folder"):
        resolve_model("/definitely/not/here")
    assert default_poolings("bert") == ("mean", "mean")
    assert default_poolings("llama") == ("last", "last")


def test_load_model_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="unknown model"):
        load_model("no-such-model", device="cpu")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(str(tmp_path), device="cpu")


def test_load_model_from_local_folder(tmp_path: Path) -> None:
    from transformers import BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(tmp_path)
    model = _bert()
    model.save_pretrained(tmp_path)
    lm = load_model(str(tmp_path), device="cpu", head_pooling="first")
    assert lm.family == "bert" and lm.n_heads == 4 and lm.head_dim == 8
    assert (lm.head_pooling, lm.standard_pooling) == ("first", "mean")  # no registry family: encoder defaults
    assert lm.device.type == "cpu" and lm.dtype == torch.float32
    assert lm.tokenizer("the cat sat")["input_ids"] == [2, 5, 6, 7, 3]
    W, _ = lm.oproj_weight(-1)
    torch.testing.assert_close(W, model.encoder.layer[1].attention.output.dense.weight)


def test_load_model_refuses_a_missing_layer_from_the_config_before_the_weights(tmp_path: Path) -> None:
    """``check_layer`` is checked against config.json alone: a folder without weights says the layer is out of
    range (nothing was loaded), and only a valid layer gets as far as the missing weights."""
    _bert().config.save_pretrained(tmp_path)  # 2 layers, no weights, no tokenizer
    with pytest.raises(ValueError, match=r"layer 5 is out of range: this model has 2 layers "
                                         r"\(0\.\.1, or -2\.\.-1 counted from the last\)"):
        load_model(str(tmp_path), device="cpu", check_layer=5)
    with pytest.raises(ValueError, match="layer -3 is out of range"):
        load_model(str(tmp_path), device="cpu", check_layer=-3)
    with pytest.raises(ModelLoadError, match="cannot load the model"):
        load_model(str(tmp_path), device="cpu", check_layer=-1)


LOADS_AT_ONCE = """
import json, os, sys, threading
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
os.environ["HF_HUB_OFFLINE"] = "1"
from mrag_core.models.loader import load_model
errors, dims = [], []
def load(attn):
    try:
        m = load_model("minilm", attn_implementation=attn)
        dims.append([m.hidden_size, m.n_heads, m.attn_implementation])
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=load, args=(a,)) for a in ("sdpa", "eager", "sdpa", "eager")]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps({"errors": errors, "dims": dims}))
"""


def test_models_loaded_by_four_threads_at_once_in_a_fresh_process_all_load() -> None:
    """The app warms MiniLM (sdpa) at start-up while a page may load it with eager attention: in a process that
    has not imported transformers yet, loads at once failed with "cannot import name 'AutoConfig' from
    'transformers'" (its lazy module is not thread-safe; 4 of 4 tries here before the loader's lock)."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", LOADS_AT_ONCE], cwd=root, capture_output=True, text=True,
                         timeout=600, check=True, env={**os.environ, "PYTHONPATH": str(root)})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["errors"] == []
    assert sorted(got["dims"]) == [[384, 12, "eager"]] * 2 + [[384, 12, "sdpa"]] * 2
