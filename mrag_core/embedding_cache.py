"""On-disk cache of embeddings, keyed by (model, layer, poolings, prompt, max length, texts' content).

Nothing is recomputed after a restart: the key hashes everything that changes the vectors, the
value is an uncompressed ``.npz`` with ``standard`` [n, d] and ``heads`` [n, h, head_dim], written
atomically (temp file + rename). Location: ``$MRAG_CACHE_DIR`` or ``~/.cache/mrag-studio``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mrag_core.extraction import Embeddings, embed_texts, prompt_texts
from mrag_core.models.loader import LoadedModel


def cache_dir() -> Path:
    """``$MRAG_CACHE_DIR`` or ``~/.cache/mrag-studio`` (created on demand)."""
    root = Path(os.environ.get("MRAG_CACHE_DIR") or Path.home() / ".cache" / "mrag-studio")
    return root


def content_hash(texts: Sequence[str]) -> str:
    """sha256 over the texts, each length-prefixed so that boundaries matter."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def model_fingerprint(lm: LoadedModel) -> str:
    """Identifies the weights: model name/path plus the size and mtime of its weight files."""
    parts = [lm.spec.name, str(lm.path), lm.family, str(lm.dtype)]
    if lm.path.is_dir() and str(lm.path) != ".":
        for f in sorted(lm.path.glob("*.safetensors")) + sorted(lm.path.glob("*.bin")):
            st = f.stat()
            parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def embedding_key(lm: LoadedModel, texts: Sequence[str], *, kind: str, layer: int | None,
                  max_length: int | None) -> str:
    """The cache key: everything that changes the vectors."""
    fields: list[Any] = [
        model_fingerprint(lm), lm.layer_index(layer), lm.head_pooling, lm.standard_pooling,
        max_length or lm.spec.max_length, content_hash(prompt_texts(lm, texts, kind)),
    ]
    return hashlib.sha256("|".join(map(str, fields)).encode()).hexdigest()


def load_cached(key: str) -> Embeddings | None:
    path = cache_dir() / f"{key}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path) as data:
            return Embeddings(data["standard"], data["heads"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None  # a damaged cache file is recomputed, never trusted


def save_cached(key: str, emb: Embeddings) -> Path:
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=root, suffix=".tmp.npz")
    os.close(fd)
    try:
        np.savez(tmp, standard=emb.standard, heads=emb.heads)
        final = root / f"{key}.npz"
        os.replace(tmp, final)
        return final
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cached_embed(lm: LoadedModel, texts: Sequence[str], *, kind: str = "doc", layer: int | None = -1,
                 max_length: int | None = None, use_cache: bool = True, **kwargs: Any) -> tuple[Embeddings, bool]:
    """:func:`embed_texts` through the cache; returns (embeddings, was_cached)."""
    key = embedding_key(lm, texts, kind=kind, layer=layer, max_length=max_length)
    if use_cache:
        hit = load_cached(key)
        if hit is not None and len(hit) == len(texts):
            progress = kwargs.get("progress")
            if progress is not None:
                progress(len(texts), len(texts))
            return hit, True
    emb = embed_texts(lm, texts, kind=kind, layer=layer, max_length=max_length, **kwargs)
    if use_cache:
        save_cached(key, emb)
    return emb, False
