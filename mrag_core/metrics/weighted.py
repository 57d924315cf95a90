"""Weighted success ratio (MRAG paper): exact hits weigh ``w`` times a category hit.

    Weighted = (w * RSR + CSR) / (w + 1),   w = 2 by default

Worked example: RSR = 2/10, CSR = 3/10 give (2 * 0.2 + 0.3) / 3 = 0.2333.
"""

from __future__ import annotations

from mrag_core.settings import DEFAULT_W


def weighted_success_ratio(rsr: float, csr: float, w: float = DEFAULT_W) -> float:
    """``(w * rsr + csr) / (w + 1)``."""
    if w < 0:
        raise ValueError("the weight w must be non-negative")
    return (w * rsr + csr) / (w + 1.0)
