"""The retrieval and evaluation settings, typed and with their defaults written once.

:class:`RetrievalSettings` is what a benchmark, an evaluation run or a Compare view is asked for: the model, the
layer and head pooling, the per-space depth ``c``, the scored ``k = 1..k_max``, the weight ``w`` of the weighted
ratio, the MRAG vote (``variant``), the importance seed, the strategies and the search backend. The defaults are
the module's constants (:data:`DEFAULT_C` = 32, :data:`DEFAULT_K_MAX` = 32, :data:`DEFAULT_W` = 2, ...), which the
CLI options, the pages and the engine's signatures read.

Storage: :meth:`RetrievalSettings.to_dict` gives the JSON-ready dict an evaluation run stores (its ``config``), and
:meth:`RetrievalSettings.from_dict` reads one back, also one stored before this class existed: missing keys take the
defaults, unknown keys (``n_queries``, ``queries``, ``llm``...) are ignored, and ``c_requested`` /
``layer_requested`` (what the user asked for, before ``c`` was capped at the corpus size and ``layer`` counted from
0) are preferred when ``requested=True``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping, Sequence

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "DEFAULT_C",
    "DEFAULT_K_MAX",
    "DEFAULT_LAYER",
    "DEFAULT_MODEL",
    "DEFAULT_STRATEGIES",
    "DEFAULT_VARIANT",
    "DEFAULT_W",
    "POOLINGS",
    "VARIANTS",
    "RetrievalSettings",
]

DEFAULT_C = 32
"""Per-space search depth: each head's (MRAG), each piece's (Split) and each part's list is searched to ``c``."""
DEFAULT_K_MAX = 32
"""Scored k = 1..k_max (the MRAG authors' 32)."""
DEFAULT_W = 2.0
"""Weight of exact hits in the weighted ratio (w * RSR + CSR) / (w + 1)."""
DEFAULT_LAYER = -1
"""The layer of the head embeddings (-1: the last)."""
DEFAULT_MODEL = "minilm"
DEFAULT_VARIANT = "importance"
DEFAULT_BACKEND = "torch"
DEFAULT_STRATEGIES = ("standard", "mrag")
VARIANTS = ("importance", "decay", "distance")
BACKENDS = ("torch", "faiss-flat", "faiss-hnsw", "milvus", "milvus-hnsw")
IN_PROCESS = ("torch", "faiss-flat", "faiss-hnsw")
"""Backends that hold the vectors in this process; ``milvus`` (exact) and ``milvus-hnsw`` search a Milvus collection
(:mod:`mrag_core.milvus_backend`)."""
POOLINGS = ("last", "first", "mean")


@dataclass(frozen=True)
class RetrievalSettings:
    """Retrieval / evaluation settings (see the module docstring). ``pooling`` None: the model's default;
    ``strategies``: ids or aliases (:mod:`mrag_core.strategy_registry`)."""

    model: str = DEFAULT_MODEL
    layer: int = DEFAULT_LAYER
    pooling: str | None = None
    c: int = DEFAULT_C
    k_max: int = DEFAULT_K_MAX
    w: float = DEFAULT_W
    variant: str = DEFAULT_VARIANT
    seed: int = 0
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    backend: str = DEFAULT_BACKEND

    def __post_init__(self) -> None:  # a list given for the strategies is kept as a tuple (hashable, frozen)
        object.__setattr__(self, "strategies", tuple(self.strategies))

    def check(self) -> "RetrievalSettings":
        """``self`` when every value is usable, else ``ValueError`` naming the first that is not."""
        from mrag_core.strategy_registry import resolve_all

        if self.c < 1 or self.k_max < 1:
            raise ValueError(f"c and k_max must be at least 1 (got c={self.c}, k_max={self.k_max})")
        if self.w < 0:
            raise ValueError(f"the weight w must be non-negative (got {self.w})")
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown voting variant {self.variant!r}: use one of {', '.join(VARIANTS)}")
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}: use one of {', '.join(BACKENDS)}")
        if self.pooling is not None and self.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r}: use one of {', '.join(POOLINGS)}")
        resolve_all(self.strategies)
        return self

    def with_(self, **changes: Any) -> "RetrievalSettings":
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the strategies as a list)."""
        out = asdict(self)
        out["strategies"] = list(self.strategies)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, requested: bool = False,
                  seed: int | None = None) -> "RetrievalSettings":
        """Inverse of :meth:`to_dict`, and the reader of a stored run's ``config``: missing keys take the defaults,
        unknown keys are ignored. ``requested``: the ``c_requested`` / ``layer_requested`` a run stored (what was
        asked for) win over the effective ``c`` / ``layer``; ``seed`` (a run stores it beside its config) wins over
        the dict's."""
        data = dict(data or {})
        d = cls()
        c = data.get("c_requested", data.get("c")) if requested else data.get("c")
        layer = data.get("layer_requested", data.get("layer")) if requested else data.get("layer")
        strategies: Sequence[str] = data.get("strategies") or d.strategies
        return cls(
            model=str(data.get("model") or d.model),
            layer=int(d.layer if layer is None else layer),
            pooling=None if data.get("pooling") is None else str(data["pooling"]),
            c=int(d.c if c is None else c),
            k_max=int(data.get("k_max") or d.k_max),
            w=float(d.w if data.get("w") is None else data["w"]),
            variant=str(data.get("variant") or d.variant),
            seed=int(seed if seed is not None else (data.get("seed") or 0)),
            strategies=tuple(str(s) for s in strategies),
            backend=str(data.get("backend") or d.backend),
        )

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The settings' names, in order."""
        return tuple(f.name for f in fields(cls))
