"""MRAG Studio engine: multi-head embeddings, retrieval strategies and metrics.

No Streamlit imports live here; the UI (``app.py``, ``pages/``) and the CLI
(``python -m mrag_core``) both call into this package.
"""

__version__ = "0.1.0"
