"""Record the texts an embedding function is called with, still running the real function."""

from __future__ import annotations

from typing import Any


def record_texts(monkeypatch: Any, module: Any, name: str) -> list[list[str]]:
    """Replace ``module.name(lm, texts, **kw)`` by a wrapper that appends ``list(texts)`` to the
    returned list on every call, then calls the original (undone by ``monkeypatch`` at test end)."""
    calls: list[list[str]] = []
    real = getattr(module, name)

    def spy(lm_: Any, texts: Any, **kw: Any) -> Any:
        calls.append(list(texts))
        return real(lm_, texts, **kw)

    monkeypatch.setattr(module, name, spy)
    return calls
