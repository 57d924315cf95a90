"""The CLI's commands that only touch the store (import, corpora, export) run without loading the engine: no torch,
numba, transformers or faiss is imported (they took some 2-3 s of every such command before, through the parser's
imports). Run in a fresh interpreter, since this test process has them loaded already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "numba", "transformers", "faiss", "sklearn")

SCRIPT = """
import json, sys
from services.cli.main import main
statuses = [main(argv) for argv in json.loads(sys.argv[1])]
heavy = sorted(m for m in sys.modules if m.split('.')[0] in json.loads(sys.argv[2]))
print(json.dumps({"statuses": statuses, "heavy": heavy}))
"""


def _run(commands: list[list[str]]) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(commands), json.dumps(HEAVY)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_store_commands_do_not_load_the_engine(tmp_path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"title": "A", "text": "alpha", "label": "x"}\n{"title": "B", "text": "beta", "label": "y"}\n')
    db = ["--database", f"sqlite:///{tmp_path / 'cli.db'}"]
    got = _run([["import", str(docs), "--corpus", "C", *db], ["corpora", *db], ["corpora", "--corpus", "C",
                "--categories", *db], ["export", str(tmp_path / "out.jsonl"), "--corpus", "C", *db]])
    assert got["statuses"] == [0, 0, 0, 0]
    assert got["heavy"] == []
    assert [json.loads(line)["title"] for line in (tmp_path / "out.jsonl").read_text().splitlines()] == ["A", "B"]


def test_the_engine_is_loaded_when_a_command_needs_it(tmp_path) -> None:
    """The same check sees the engine when it is there: ``index --list`` reads the indexes through the engine's
    index code (so this test would fail if the check could not see torch)."""
    db = ["--database", f"sqlite:///{tmp_path / 'cli.db'}"]
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"title": "A", "text": "alpha", "label": "x"}\n')
    got = _run([["import", str(docs), "--corpus", "C", *db], ["index", "--list", "--corpus", "C", *db]])
    assert got["statuses"] == [0, 0]
    assert "torch" in got["heavy"]
