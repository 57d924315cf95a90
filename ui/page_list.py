"""The app's pages: its name, every page in ``pages/`` in the sidebar's order with what it does, and a page's title.

Read by the navigation (:mod:`ui.navigation`) and by Home (:mod:`ui.home`), which lists them.
"""

from __future__ import annotations

from pathlib import PurePath

__all__ = ["APP_NAME", "PAGES", "page_title"]

APP_NAME = "MRAG Studio"

# Every page in pages/, in the sidebar's order: (file, what it does).
PAGES = [
    ("pages/1_Corpus_Import.py", "JSON / JSONL / CSV, folders and ZIPs of text, benchmark formats"),
    ("pages/2_Annotate_and_Review.py", "LLM or offline pre-annotation, then human correction"),
    ("pages/3_Agreement_and_Export.py", "agreement; JSONL, CSV, Parquet, benchmark JSON"),
    ("pages/4_Index.py", "embed a corpus once (standard, per-head, split) and see head importance"),
    ("pages/5_Compare.py", "one query through every strategy side by side, with per-head evidence"),
    ("pages/6_Attention.py", "attention heatmaps of one document or query"),
    ("pages/7_Maps.py", "UMAP / PCA maps of each head space; select points to filter documents"),
    ("pages/8_Query_Builder.py", "generated, hand-written and imported multi-aspect query sets"),
    ("pages/9_Evaluation_Runs.py", "stored runs, the paper's figures, significance, layer sweeps"),
    ("pages/10_Reader.py", "an LLM answers one query from two strategies' documents"),
]


def page_title(path: str) -> str:
    """A page's title from its file name, as Streamlit names it: "pages/4_Index.py" -> "Index"."""
    return PurePath(path).stem.split("_", 1)[1].replace("_", " ")
