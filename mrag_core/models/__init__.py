"""Model registry and loading: which transformer, where its attention heads live, how to pool."""

from mrag_core.models.loader import LoadedModel, ModelLoadError, load_model
from mrag_core.models.registry import MODEL_REGISTRY, ModelSpec, get_spec, resolve_model

__all__ = ["ModelSpec", "MODEL_REGISTRY", "get_spec", "resolve_model", "LoadedModel", "ModelLoadError", "load_model"]
