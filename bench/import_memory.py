"""Memory of a table import: peak RSS of ``mrag-studio import`` over the size of the CSV (or JSON) it imports.

    python bench/import_memory.py [--rows 200000] [--format csv|json] [--code DIR] [--dry-run]

Writes a CSV shaped like the one of issue 32 (about 89 bytes a row: 1M rows = 89 MB), imports it into a new SQLite
database with the CLI in a child process, and reads that child's peak resident memory (``ru_maxrss``). It also
imports a CSV a quarter as large, so the memory each further MB of file costs shows apart from what the process
needs anyway (Python, SQLAlchemy, the libraries: about the same for any file). ``--code DIR`` runs another checkout's
CLI (e.g. the code before a change, side by side); ``--dry-run`` reads and previews only. ``--format json`` writes
the same rows as one JSON array of objects instead.

Before the stream (the whole file, its decoded text, every row, record and ORM object held at once) an 89 MB file
took 5.16 GB (58x); the target is memory that does not grow with the file: a growth per file MB near 0.

Ends with one line: ``RESULT rows=N file_mb=X rss_mb=Y rss_over_file=Z growth_mb_per_file_mb=W``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_csv(path: Path, rows: int) -> Path:
    """``rows`` distinct rows of about 89 bytes (title, a text of ~60 characters, one of 12 labels)."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write("title,text,label\n")
        for i in range(rows):
            fh.write(f"Row {i:07d},Text number {i:07d} about a topic with a few more words,topic {i % 12}\n")
    return path


def write_json(path: Path, rows: int) -> Path:
    """The rows of :func:`write_csv` as one JSON array of objects (about 110 bytes a row)."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[\n")
        for i in range(rows):
            fh.write(("," if i else "") + f'{{"title": "Row {i:07d}", "text": "Text number {i:07d} about a topic '
                     f'with a few more words", "label": "topic {i % 12}"}}\n')
        fh.write("]\n")
    return path


def measure(code: Path, csv: Path, dry_run: bool) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one CLI import of ``csv`` into a fresh database, run by ``code``'s CLI."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "services", "import", "--corpus", "Big", "--database",
               f"sqlite:///{tmp}/bench.db", str(csv)] + (["--dry-run"] if dry_run else [])
        # a child of its own per measurement: ru_maxrss of RUSAGE_CHILDREN is the largest child so far
        probe = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
                 "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
                 "sys.stderr.write(r.stderr[-2000:] if r.returncode else ''); "
                 "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t, r.returncode)")
        env = {**os.environ, "PYTHONPATH": str(code), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
        out = subprocess.run([sys.executable, "-c", probe, *cmd], cwd=code, env=env, capture_output=True, text=True)
        if out.returncode != 0 or not out.stdout.strip():
            raise SystemExit(f"the import failed: {out.stderr}")
        kb, seconds, rc = out.stdout.split()
        if rc != "0":
            raise SystemExit(f"the import exited with {rc}: {out.stderr}")
        return int(kb) / 1024, float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose CLI runs (default: this one)")
    parser.add_argument("--dry-run", action="store_true", help="read and preview only (no database writes)")
    parser.add_argument("--format", choices=("csv", "json"), default="csv", help="the file imported (default: csv)")
    args = parser.parse_args()
    write = write_json if args.format == "json" else write_csv
    with tempfile.TemporaryDirectory() as tmp:
        quarter = write(Path(tmp) / f"quarter.{args.format}", args.rows // 4)
        full = write(Path(tmp) / f"full.{args.format}", args.rows)
        mb = full.stat().st_size / 2**20
        mb_q = quarter.stat().st_size / 2**20
        t0 = time.perf_counter()
        rss_q, s_q = measure(args.code, quarter, args.dry_run)
        rss, s = measure(args.code, full, args.dry_run)
        growth = (rss - rss_q) / (mb - mb_q)
        print(f"code: {args.code}")
        print(f"{args.rows // 4:>9} rows, {mb_q:7.1f} MB file: peak RSS {rss_q:8.1f} MB ({s_q:.0f} s)")
        print(f"{args.rows:>9} rows, {mb:7.1f} MB file: peak RSS {rss:8.1f} MB ({s:.0f} s)")
        print(f"RSS / file size: {rss / mb:.2f}x; each further MB of file costs {growth:.2f} MB "
              f"(total {time.perf_counter() - t0:.0f} s)")
        print(f"RESULT format={args.format} rows={args.rows} file_mb={mb:.1f} rss_mb={rss:.1f} "
              f"rss_over_file={rss / mb:.2f} growth_mb_per_file_mb={growth:.2f}")


if __name__ == "__main__":
    main()
