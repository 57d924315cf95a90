"""Compare page rerun time (issue: warm reruns under a second), measured with Streamlit's AppTest.

    python bench/ui_rerun.py [--reruns 5]

On a temporary database: load the demo corpus and build its index through the Index page, then run
the Compare page on a 5-aspect demo query once (cold: model, index and query embedding are loaded)
and rerun it with k changed ``--reruns`` times (warm: everything cached, only search and drawing).
AppTest adds its own overhead, so a browser rerun is a little faster than these numbers. AppTest skips
Streamlit's full garbage collection after each run; the served app has it off too (.streamlit/config.toml).
Ends with one line: ``RESULT compare_cold_s=X compare_warm_rerun_s=X`` (warm = median).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reruns", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mrag-bench-ui-"))
    os.environ["MRAG_DATABASE_URL"] = f"sqlite:///{tmp / 't.db'}"
    os.environ["MRAG_CACHE_DIR"] = str(tmp / "cache")
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        os.environ.pop(name, None)
    from streamlit.testing.v1 import AppTest

    def page(name: str) -> AppTest:
        return AppTest.from_file(str(ROOT / "pages" / name), default_timeout=300)

    index = page("4_Index.py").run()
    index.button(key="index_build").click().run()
    while not index.success:
        if index.exception:
            raise SystemExit(f"index build failed: {index.exception[0].value}")
        time.sleep(1.0)
        index.run()
    print("index built")

    at = page("5_Compare.py").run()
    qsel = at.selectbox(key="compare_query")
    qsel.select_index(next(i for i, o in enumerate(qsel.options) if o.startswith("[5 aspects]"))).run()
    t0 = time.perf_counter()
    at.button(key="compare_go").click().run()
    cold = time.perf_counter() - t0
    if at.exception:
        raise SystemExit(f"compare failed: {at.exception[0].value}")
    warm = []
    for i in range(args.reruns):
        t0 = time.perf_counter()
        at.number_input(key="compare_k").set_value(3 + i % 3).run()
        warm.append(time.perf_counter() - t0)
    print(f"compare: cold {cold:.2f} s, warm reruns {', '.join(f'{w:.2f}' for w in warm)} s")
    print(f"RESULT compare_cold_s={cold:.3f} compare_warm_rerun_s={statistics.median(warm):.3f}")


if __name__ == "__main__":
    main()
