"""The demo's first-open waits, in a real headless Chromium (issue 36: no blank waits).

    python bench/demo_waits.py [--pages Compare,Maps,Attention,Reader,Index] [--home-first 5] [--umap]

Prepares the demo as a user does, in the app: a first start on an empty database (the demo corpus is loaded), the
Index page's "Build index" (MiniLM, its defaults), then Maps opened until it no longer says that maps are being
computed (whatever the app computes in the background after the build is done). Then, for each model-backed page,
starts a fresh ``streamlit run app.py`` on a copy of that database and opens the page straight from its URL in a
new Chromium tab (``/usr/bin/chromium``, never ``playwright install``). Every 100 ms it looks at the page's main area:

* ``first``: anything drawn in the main area (the title counts);
* ``shown``: a spinner or progress bar with its text, or the page's content: the main area is not blank;
* ``content``: what the page is for (Compare's button, a drawn chart, the Reader's retrieval line, the Index page's
  "is ready");
* ``blank``: the longest stretch, from opening the URL, in which neither a spinner / progress bar nor the content
  was shown: what a user watched without being told anything; and the same counted from the first spinner on (a page
  that goes quiet between two waits);
* ``said``: the texts the spinners showed, in order.

``--home-first S`` adds a row: Home opened first, S seconds spent there, then Compare opened from Home's step 2
(the model may already be loaded in the background). ``--umap`` adds the cost of the demo index's 13 UMAP maps in
a fresh Python process (the numba JIT included), as the first "Compute UMAP maps" paid it.

Times are wall seconds from the navigation on this machine (other work on it shifts them); compare rows measured
in one run. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, AppServer  # noqa: E402
from tests.support.main_area import Waits, watch  # noqa: E402

#: What each page is for, as a JavaScript test on the main area ``m``.
CONTENT = {
    "Compare": "[...m.querySelectorAll('button')].some(b => b.innerText.trim() === 'Compare')",
    "Maps": "!!m.querySelector('[data-testid=\"stPlotlyChart\"] .main-svg')",
    "Attention": "!!m.querySelector('[data-testid=\"stPlotlyChart\"] .main-svg')",
    "Reader": "m.innerText.includes('Fusion sub-queries')",
    "Index": "m.innerText.includes('is ready')",
}

def checkpointed(db_file: Path) -> None:
    with sqlite3.connect(db_file) as conn:  # fold the WAL into the file: the one file is the database
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def main_text(page) -> str:  # noqa: ANN001
    return page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')?.innerText || ''")


def prepare(folder: Path, browser, timeout_s: float) -> tuple[float, float]:  # noqa: ANN001
    """The demo index built through the app on a new database in ``folder``, then Maps opened until nothing is
    being computed; the seconds each took."""
    server = AppServer(folder)
    server.start()
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(timeout_s * 1000)
        page.goto(f"{server.url}/Index")
        page.get_by_role("button", name="Build index").click()
        t0 = time.perf_counter()
        page.get_by_text("is ready").first.wait_for()
        built = time.perf_counter() - t0
        t0 = time.perf_counter()
        page.goto(f"{server.url}/Maps")
        while time.perf_counter() - t0 < timeout_s:
            drawn = page.locator('[data-testid="stPlotlyChart"] .main-svg').count() > 0
            if drawn and "being computed" not in main_text(page):
                break
            time.sleep(1.0)
        page.close()
        settled = time.perf_counter() - t0
    finally:
        server.stop()
    checkpointed(folder / "t.db")
    return built, settled


def fresh_server(prepared: Path, where: Path) -> AppServer:
    where.mkdir(parents=True)
    shutil.copyfile(prepared / "t.db", where / "t.db")
    server = AppServer(where)
    server.start()
    return server


def umap_cost(db_file: Path) -> dict[str, float]:
    """The demo index's 13 UMAP maps computed in a fresh process on a copy of ``db_file`` (none stored there)."""
    code = """
import json, sys, time
t0 = time.perf_counter()
import db
from mrag_core.projection import ensure_maps
store = db.open_store(f"sqlite:///{sys.argv[1]}")
run = next(r for c in db.list_corpora(store) for r in db.list_embedding_runs(store, c.id, status="done"))
for p in db.list_projections(store, run.id):
    db.delete_projection(store, p.id)
t1 = time.perf_counter()
import umap
t2 = time.perf_counter()
ensure_maps(store, run.id, "umap")
t3 = time.perf_counter()
print(json.dumps({"import_umap_s": t2 - t1, "fit_13_maps_s": t3 - t2}))
"""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "u.db"
        shutil.copyfile(db_file, copy)
        out = subprocess.run([sys.executable, "-c", code, str(copy)], cwd=ROOT, capture_output=True, text=True,
                             check=True, env={**os.environ, "MRAG_CACHE_DIR": str(Path(tmp) / "cache")})
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", default=",".join(CONTENT))
    ap.add_argument("--home-first", type=float, default=5.0, help="seconds on Home before Compare (0: no such row)")
    ap.add_argument("--umap", action="store_true", help="also time the demo index's UMAP maps in a fresh process")
    ap.add_argument("--timeout", type=float, default=240.0)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="mrag-bench-waits-"))
    prepared = tmp / "prepared"
    prepared.mkdir()
    rows: list[Waits] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        built, settled = prepare(prepared, browser, args.timeout)
        print(f"demo index built in the app in {built:.1f} s; Maps settled {settled:.1f} s later", flush=True)
        for n, name in enumerate(args.pages.split(",")):
            server = fresh_server(prepared, tmp / f"run{n}")
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                t = time.perf_counter()
                page.goto(f"{server.url}/{name}", wait_until="commit")
                rows.append(watch(page, name, CONTENT[name], args.timeout, t))
                page.close()
            finally:
                server.stop()
            print(f"  {name}: {json.dumps(rows[-1].__dict__)}", flush=True)
        if args.home_first > 0:
            server = fresh_server(prepared, tmp / "home")
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.goto(server.url)
                step = page.get_by_role("button", name="2. Compare", exact=False)
                step.wait_for(timeout=120_000)
                time.sleep(args.home_first)
                t = time.perf_counter()
                step.click()
                w = watch(page, "Compare", CONTENT["Compare"], args.timeout, t)
                w.page = f"Compare via Home ({args.home_first:.0f} s there)"
                rows.append(w)
                page.close()
            finally:
                server.stop()
            print(f"  {rows[-1].page}: {json.dumps(rows[-1].__dict__)}", flush=True)
        browser.close()

    print()
    print("| first open | first element s | spinner or content s | content s | longest blank s | "
          "longest blank after the first spinner s | Maps method | spinner texts |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for w in rows:
        print(f"| {w.page} | {fmt(w.first)} | {fmt(w.shown)} | {fmt(w.content)} | {w.blank:.1f} | "
              f"{w.blank_after_shown:.1f} | {w.method or '—'} | {'; '.join(w.said) or '—'} |")
    if args.umap:
        cost = umap_cost(prepared / "t.db")
        print(f"\nUMAP maps of the demo index (13 spaces) in a fresh process: "
              f"import umap {cost['import_umap_s']:.1f} s, fit {cost['fit_13_maps_s']:.1f} s")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
