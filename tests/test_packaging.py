"""pyproject.toml declares the project as requirements*.txt install it: the same pins, the four packages, the
``mrag-studio`` console script pointing at the services' CLI."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _requirements(name: str) -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / name).read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("-r")]


def test_the_dependencies_are_requirements_txt_pins() -> None:
    assert PROJECT["project"]["dependencies"] == _requirements("requirements.txt")
    assert PROJECT["project"]["optional-dependencies"]["dev"] == _requirements("requirements-dev.txt")


def test_the_console_script_is_the_services_cli() -> None:
    target = PROJECT["project"]["scripts"]["mrag-studio"]
    module, _, name = target.partition(":")
    assert target == "services.cli.main:main"
    main = getattr(importlib.import_module(module), name)
    assert main.__module__ == "services.cli.main" and callable(main)


def test_the_packages_found_are_the_four_layers() -> None:
    from setuptools import find_packages

    found = find_packages(str(ROOT), include=PROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
    assert {p.split(".")[0] for p in found} == {"mrag_core", "services", "db", "ui"}
    assert {"services.cli", "services.workflows", "services.demo", "mrag_core.metrics", "db"} <= set(found)
    demo = ROOT / "services" / "demo"
    assert sorted(p.name for p in demo.glob(PROJECT["tool"]["setuptools"]["package-data"]["services"][0].split("/")[1]
                                            )) == ["part_a.json", "part_b.json"]
