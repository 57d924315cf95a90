"""Load a transformer and its tokenizer from a local folder and locate its attention heads.

Nothing is downloaded: ``HF_HUB_OFFLINE=1`` and ``local_files_only=True`` are always set.
The loaded model is the *base* model (``AutoModel``): its ``last_hidden_state`` gives the
standard embedding, and a forward pre-hook on the chosen layer's attention output projection
gives the per-head vectors (see :mod:`mrag_core.extraction`).
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mrag_core.device import pick_device
from mrag_core.models.registry import FAMILY_OPROJ, ModelSpec, default_poolings, position_limit, resolve_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says why in plain words."""


@dataclass
class LoadedModel:
    """A ready-to-run model with the facts extraction needs."""

    spec: ModelSpec
    path: Path
    model: torch.nn.Module
    tokenizer: Any
    family: str
    n_layers: int
    n_heads: int
    head_dim: int
    hidden_size: int
    device: torch.device
    dtype: torch.dtype
    head_pooling: str
    standard_pooling: str
    attn_implementation: str

    @property
    def is_encoder(self) -> bool:
        return self.family in ("bert", "roberta", "xlm-roberta")

    def layer_index(self, layer: int | None) -> int:
        """Normalise a layer index (``None`` or negative counts from the end: -1 is the last)."""
        return layer_index(layer, self.n_layers)

    def oproj_module(self, layer: int | None) -> torch.nn.Module:
        """The attention output projection of ``layer``; its input holds all head outputs."""
        path = FAMILY_OPROJ[self.family].format(i=self.layer_index(layer))
        return self.model.get_submodule(path)

    def oproj_weight(self, layer: int | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(W, b) such that ``attn_out = heads_concat @ W.T + b`` (GPT-2's Conv1D is transposed)."""
        mod = self.oproj_module(layer)
        if self.family == "gpt2":
            return mod.weight.T, mod.bias
        return mod.weight, getattr(mod, "bias", None)

    @property
    def model_id(self) -> str:
        return self.spec.name


def _config_value(cfg: Any, *names: str) -> Any:
    for name in names:
        value = getattr(cfg, name, None)
        if value is not None:
            return value
    return None


def describe_architecture(cfg: Any) -> tuple[str, int, int, int, int]:
    """(family, n_layers, n_query_heads, head_dim, hidden) from a transformers config."""
    family = getattr(cfg, "model_type", None)
    if family not in FAMILY_OPROJ:
        known = ", ".join(sorted(FAMILY_OPROJ))
        raise ModelLoadError(f"model type '{family}' is not supported yet (supported: {known})")
    n_layers = int(_config_value(cfg, "num_hidden_layers", "n_layer"))
    n_heads = int(_config_value(cfg, "num_attention_heads", "n_head"))
    hidden = int(_config_value(cfg, "hidden_size", "n_embd"))
    head_dim = _config_value(cfg, "head_dim")
    head_dim = int(head_dim) if head_dim else hidden // n_heads
    return family, n_layers, n_heads, head_dim, hidden


def _spec_within_positions(spec: ModelSpec, cfg: Any, tokenizer: Any) -> ModelSpec:
    """``spec`` with ``max_length`` lowered to the model's own limit (:func:`position_limit` of its config and
    tokenizer); ``spec`` itself when that limit is not smaller."""
    limit = position_limit(cfg, getattr(tokenizer, "model_max_length", None), spec.max_length)
    return spec if limit == spec.max_length else spec.with_options(max_length=limit)


def first_line(exc: BaseException) -> str:
    """The first non-blank line of ``exc``'s message (its type's name when it has none): Transformers follows its
    reason with paragraphs of upgrade advice that do not fit a one-line error."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def layer_index(layer: int | None, n_layers: int) -> int:
    """``layer`` as an index into ``n_layers`` layers (``None`` or negative counts from the end: -1 is the last);
    ValueError when there is no such layer."""
    if layer is None:
        layer = -1
    idx = layer if layer >= 0 else n_layers + layer
    if not 0 <= idx < n_layers:
        raise ValueError(f"layer {layer} is out of range: this model has {n_layers} layers "
                         f"(0..{n_layers - 1}, or -{n_layers}..-1 counted from the last)")
    return idx


#: Held while a model loads: one load at a time per process. Transformers' lazy module is not safe to import from
#: two threads at once: the app's start-up warm-up (MiniLM, sdpa) and a page loading MiniLM with eager attention at
#: the same moment made the second fail with "cannot import name 'AutoConfig' from 'transformers'".
LOADING = threading.RLock()


def _one_load_at_a_time(load: Any) -> Any:
    @functools.wraps(load)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with LOADING:
            return load(*args, **kwargs)

    return locked


@_one_load_at_a_time
def load_model(
    spec_or_name: ModelSpec | str = "minilm",
    *,
    check_layer: int | None = None,
    device: str = "auto",
    half: bool = False,
    attn_implementation: str = "sdpa",
    head_pooling: str | None = None,
    standard_pooling: str | None = None,
) -> LoadedModel:
    """Load a registry model or a local Hugging Face folder. Its spec's ``max_length`` is lowered to the model's
    own limit (its position table, its tokenizer's ``model_max_length``): a BERT with 128 positions reads 128 tokens.

    Args:
        spec_or_name: a :class:`ModelSpec`, a registry name or a folder path.
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        half: float16 weights on CUDA (ignored on CPU, where float32 is kept).
        attn_implementation: ``sdpa`` (fast) or ``eager`` (returns attention weights for heatmaps).
        head_pooling / standard_pooling: override the spec's poolings.
        check_layer: a layer the caller will use; ValueError from the config, before the weights are loaded,
            when the model has no such layer.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    try:
        spec = spec_or_name if isinstance(spec_or_name, ModelSpec) else resolve_model(spec_or_name)
        path = Path(spec.locate())
    except (KeyError, FileNotFoundError) as exc:
        raise ModelLoadError(str(exc).strip("'\"")) from exc
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"'{path}' is not a Hugging Face model folder (no config.json there)")
    try:
        cfg = AutoConfig.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - report any config problem plainly
        raise ModelLoadError(f"cannot read the model config in '{path}': {first_line(exc)}") from exc
    family, n_layers, n_heads, head_dim, hidden = describe_architecture(cfg)
    if check_layer is not None:
        layer_index(check_layer, n_layers)
    dev = pick_device(device)
    dtype = torch.float16 if (half and dev.type == "cuda") else torch.float32
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModel.from_pretrained(
            path, local_files_only=True, dtype=dtype, attn_implementation=attn_implementation
        )
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"cannot load the model in '{path}': {first_line(exc)}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    model.eval().to(dev)
    spec = _spec_within_positions(spec, cfg, tokenizer)
    default_head, default_std = default_poolings(family)
    spec_head = spec.head_pooling if spec.family else default_head
    spec_std = spec.standard_pooling if spec.family else default_std
    return LoadedModel(
        spec=spec,
        path=path,
        model=model,
        tokenizer=tokenizer,
        family=family,
        n_layers=n_layers,
        n_heads=n_heads,
        head_dim=head_dim,
        hidden_size=hidden,
        device=dev,
        dtype=dtype,
        head_pooling=head_pooling or spec_head,
        standard_pooling=standard_pooling or spec_std,
        attn_implementation=attn_implementation,
    )


def model_from_module(
    model: torch.nn.Module, tokenizer: Any, *, name: str = "in-memory", head_pooling: str | None = None,
    standard_pooling: str | None = None,
) -> LoadedModel:
    """Wrap an already-built model (tests build tiny random configs in code); its spec's ``max_length`` is the
    model's own limit when below 512 (as :func:`load_model` sets it)."""
    family, n_layers, n_heads, head_dim, hidden = describe_architecture(model.config)
    default_head, default_std = default_poolings(family)
    if tokenizer is not None and tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    p = next(model.parameters())
    spec = _spec_within_positions(ModelSpec(name=name, locate=lambda: Path("."), family=family), model.config,
                                  tokenizer)
    return LoadedModel(
        spec=spec, path=Path("."), model=model.eval(), tokenizer=tokenizer, family=family,
        n_layers=n_layers, n_heads=n_heads, head_dim=head_dim, hidden_size=hidden, device=p.device,
        dtype=p.dtype, head_pooling=head_pooling or default_head, standard_pooling=standard_pooling or default_std,
        attn_implementation=getattr(model.config, "_attn_implementation", "sdpa") or "sdpa",
    )
