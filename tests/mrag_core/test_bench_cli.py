"""``python -m mrag_core``: the engine's ``bench`` alone. The same table and files as ``mrag-studio bench`` (one
implementation), LLM strategies refused with a line naming the services' CLI, and every command that moved to
``mrag-studio`` answered with where it went (exit status 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mrag_core.bench_cli import MOVED_COMMANDS
from mrag_core.bench_cli import main as engine_main
from services.cli.main import main as services_main
from tests.services.cli.test_cli import write_dataset

ROOT = Path(__file__).resolve().parents[2]


def test_engine_bench_prints_what_the_services_bench_prints(tmp_path: Path, capsys,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    a, q = write_dataset(tmp_path)
    args = ["bench", "--articles", str(a), "--queries", str(q), "--model", "minilm", "--device", "cpu",
            "--threads", "1", "--strategies", "standard,mrag,split"]
    assert engine_main([*args, "--json", str(tmp_path / "engine.json")]) == 0
    engine = capsys.readouterr()
    assert services_main([*args, "--json", str(tmp_path / "services.json")]) == 0
    services = capsys.readouterr()
    assert "Traceback" not in engine.err + services.err
    table = engine.out.strip().splitlines()
    assert table[0].split()[:3] == ["strategy", "aspects", "k"] and {ln.split()[0] for ln in table[1:]} == {
        "standard", "mrag", "split"}
    assert engine.out == services.out
    assert (tmp_path / "engine.json").read_bytes() == (tmp_path / "services.json").read_bytes()


def test_engine_bench_refuses_llm_strategies_naming_the_services_cli(tmp_path: Path, capsys) -> None:
    a, q = write_dataset(tmp_path)
    assert engine_main(["bench", "--articles", str(a), "--queries", str(q), "--strategies", "standard,hyde,intent-mrag"
                        ]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("error: hyde, intent-mrag need an LLM endpoint, which the engine alone does not call: run "
                           "`mrag-studio bench ...` (or `python -m services bench ...`) with the same options, which "
                           "adds the LLM strategies")


@pytest.mark.parametrize("command", MOVED_COMMANDS)
def test_a_moved_command_says_where_it_went(command: str, capsys) -> None:
    assert engine_main([command, "--corpus", "x"]) == 2
    assert capsys.readouterr().err == (f"error: the {command} command moved: run `mrag-studio {command} ...` or "
                                       f"`python -m services {command} ...` (`python -m mrag_core` runs only bench)\n")


def test_python_m_mrag_core_import_says_where_it_went_and_python_m_services_runs_the_cli() -> None:
    moved = subprocess.run([sys.executable, "-m", "mrag_core", "import", "--corpus", "x", "a.csv"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert (moved.returncode, moved.stdout) == (2, "")
    assert moved.stderr == ("error: the import command moved: run `mrag-studio import ...` or `python -m services "
                            "import ...` (`python -m mrag_core` runs only bench)\n")
    helped = subprocess.run([sys.executable, "-m", "services", "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: mrag-studio ")
    commands = helped.stdout.split("{", 1)[1].split("}", 1)[0].split(",")
    assert sorted(commands) == sorted(["bench", *MOVED_COMMANDS])


def test_bench_json_keys_the_recommended_strategy_as_asked(tmp_path: Path, capsys,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``--strategies standard,mrag,recommended``: the table and ``--json`` name it ``recommended`` (as the user
    asked); its numbers are the sentence round-robin's (the same as asked by its id); the authors' layout keeps
    the name; an unknown name is refused with the valid ones."""
    import json

    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    a, q = write_dataset(tmp_path)
    args = ["bench", "--articles", str(a), "--queries", str(q), "--model", "minilm", "--device", "cpu",
            "--threads", "1"]
    assert engine_main([*args, "--strategies", "standard,mrag,recommended", "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert {ln.split()[0] for ln in out.strip().splitlines()[1:]} == {"standard", "mrag", "recommended"}
    by_alias = json.loads((tmp_path / "a.json").read_text())
    assert list(by_alias) == ["standard", "mrag", "recommended"]
    assert engine_main([*args, "--strategies", "sentence-round-robin", "--json", str(tmp_path / "b.json")]) == 0
    by_id = json.loads((tmp_path / "b.json").read_text())
    assert by_alias["recommended"] == by_id["sentence-round-robin"]
    capsys.readouterr()
    with pytest.raises(SystemExit):
        engine_main([*args, "--strategies", "standard,best"])
    assert "unknown strategies ['best']: use standard, mrag," in capsys.readouterr().err
