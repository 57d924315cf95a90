"""Write bench/v1_split.json: a seeded split of the v1 queries into a tune half and a test half.

    python bench/v1_split_make.py [DATA_DIR]

Stratified by aspect count: within each aspect count the query indices (positions in
``wikipedia_queries_v1.json.bz2``) are shuffled with ``random.Random(SEED)`` and the first half
(rounded down) goes to ``tune``, the rest to ``test``. Only indices are written, no text.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mrag_core.benchmark import load_queries  # noqa: E402

SEED = 33
OUT = ROOT / "bench" / "v1_split.json"


def make_split(aspect_counts: list[int], seed: int = SEED) -> dict[str, list[int]]:
    """{"tune": [...], "test": [...]}: per aspect count, a seeded shuffle cut in half (tune gets the floor)."""
    rng = random.Random(seed)
    tune: list[int] = []
    test: list[int] = []
    for n in sorted(set(aspect_counts)):
        rows = [i for i, a in enumerate(aspect_counts) if a == n]
        rng.shuffle(rows)
        half = len(rows) // 2
        tune.extend(sorted(rows[:half]))
        test.extend(sorted(rows[half:]))
    return {"tune": sorted(tune), "test": sorted(test)}


def main() -> None:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "data" / "mrag-wikipedia-v1"
    queries = load_queries(data / "wikipedia_queries_v1.json.bz2")
    split = make_split([q.n_aspects for q in queries])
    OUT.write_text(json.dumps({"seed": SEED, "stratified_by": "n_aspects", "n_queries": len(queries), **split},
                              indent=None) + "\n", encoding="utf-8")
    print(f"{OUT}: tune {len(split['tune'])}, test {len(split['test'])}")


if __name__ == "__main__":
    main()
