"""The layers hold: import-linter's contracts (``pyproject.toml``) pass, a crossed layer breaks them, the pages (scripts
outside any package, which import-linter does not see) import no store, and ``ruff check`` passes."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PACKAGES = ("mrag_core", "services", "db", "ui")
#: what a page or app.py may not import: the store, and the database library under it
STORE_MODULES = {"db", "sqlalchemy"}


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_import_contracts_hold() -> None:
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 6 kept, 0 broken." in run.stdout


def test_a_crossed_layer_breaks_its_contract(tmp_path: Path) -> None:
    """A copy of the packages where the engine imports the store, ui imports the store and two ui modules import
    each other: lint-imports fails, naming each."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "mrag_core" / "rrf.py", "a", encoding="utf-8") as f:
        f.write("\nimport db  # a crossed layer\n")
    with open(tmp_path / "ui" / "render.py", "a", encoding="utf-8") as f:
        f.write("\nimport db  # a crossed layer\n")
    with open(tmp_path / "ui" / "page_list.py", "a", encoding="utf-8") as f:
        f.write("\nimport ui.home  # a cycle: ui.home imports ui.page_list\n")
    run = _lint_imports(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert "Contracts: 3 kept, 3 broken." in out
    broken = [line for line in out.splitlines() if line.rstrip().endswith("BROKEN")]
    assert len(broken) == 3, out
    for contract in ("mrag_core is the engine", "ui reaches the store only through services",
                     "No import cycles between the CLI's modules, nor between ui's"):
        assert any(line.startswith(contract) for line in broken), contract
    assert "mrag_core.rrf -> db" in out and "ui.render -> db" in out and ".page_list -> .home" in out


def store_imports(source: str) -> list[str]:
    """The modules of :data:`STORE_MODULES` (or their submodules) that ``source`` imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        found += [n for n in names if n.split(".")[0] in STORE_MODULES]
    return found


def test_the_check_of_the_pages_finds_a_store_import() -> None:
    assert store_imports("import db\nimport streamlit as st\n") == ["db"]
    assert store_imports("def f():\n    from db.corpora import list_corpora\n    import sqlalchemy.orm\n") == [
        "db.corpora", "sqlalchemy.orm"]
    assert store_imports("from services import storage\nfrom services.workflows import corpus as cw\n") == []


def test_no_page_and_not_app_py_imports_the_store() -> None:
    scripts = sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]
    assert len(scripts) == 11
    assert {str(p.relative_to(ROOT)): store_imports(p.read_text(encoding="utf-8")) for p in scripts} == {
        str(p.relative_to(ROOT)): [] for p in scripts}


def test_ruff_check_passes() -> None:
    run = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
