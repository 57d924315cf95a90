"""The app's own demo corpus: original text written for MRAG Studio (12 categories x 8 documents,
24 multi-aspect queries with ground truth and fusion sub-queries), shipped as ``part_*.json``.

The queries' order matters: Compare preselects the first query with the most aspects (Home's demo step 2), so the
first 6-aspect query is one where MRAG finds aspects Standard RAG misses with the shipped MiniLM index (the sculptor's
exhibition, kept in ``part_a.json`` although its topics are ``part_b``'s; queries may use any part's documents).
Evaluation Runs score all 24."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
DEMO_CORPUS_NAME = "MRAG Studio demo"


@dataclass(frozen=True)
class DemoCorpus:
    """Categories ``[{name, description}]``, documents ``[{title, text, label}]``, queries
    ``[{topics, text, fusion}]``."""

    categories: list[dict[str, str]]
    documents: list[dict[str, str]]
    queries: list[dict[str, object]]


def load_demo() -> DemoCorpus:
    """Read and merge every ``part_*.json`` in sorted order."""
    cats: list[dict[str, str]] = []
    docs: list[dict[str, str]] = []
    queries: list[dict[str, object]] = []
    for part in sorted(DEMO_DIR.glob("part_*.json")):
        data = json.loads(part.read_text(encoding="utf-8"))
        cats.extend(data["categories"])
        docs.extend(data["documents"])
        queries.extend(data["queries"])
    return DemoCorpus(cats, docs, queries)
