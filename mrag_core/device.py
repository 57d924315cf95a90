"""Device and thread settings: CUDA when present, else CPU with a bounded thread count."""

from __future__ import annotations

import os

import torch


def pick_device(preference: str = "auto") -> torch.device:
    """``auto`` -> ``cuda`` when available, else ``cpu``; ``cuda`` without a GPU raises a clear error."""
    pref = (preference or "auto").lower()
    if pref == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if pref.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("CUDA was requested but no CUDA device is available; use device 'cpu' or 'auto'")
    return torch.device(pref)


def configure_threads(n_threads: int | None) -> int:
    """Set torch's and FAISS's intra-op threads (``None``: leave as is); returns torch's count in force.

    Interactive searches should use one thread with ``OMP_WAIT_POLICY=PASSIVE``: two spinning
    OpenMP threads on a 2-core box collapse badly when the other core is busy, and for one query
    FAISS's per-call thread wake-up costs more than the search (MRAG pays it once per head).
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if n_threads is not None and n_threads > 0:
        torch.set_num_threads(int(n_threads))
        try:
            import faiss  # FAISS ships its own OpenMP runtime: torch's setting does not reach it

            faiss.omp_set_num_threads(int(n_threads))
        except ImportError:  # pragma: no cover - faiss-cpu is a requirement
            pass
    return torch.get_num_threads()
