"""``.streamlit/config.toml`` is read by ``streamlit run app.py`` from the repository root, and the two
settings the app depends on for speed are the ones Streamlit parses from it (a misspelt option name
would silently leave Streamlit's default in force)."""

from __future__ import annotations

from pathlib import Path

from streamlit import config

ROOT = Path(__file__).resolve().parents[2]


def test_repository_config_turns_off_the_source_watcher_and_the_collection_after_each_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    config.get_config_options(force_reparse=True)
    try:
        # the default watcher busy-looped over the checkout's .venv while a tab was open
        # (tests/browser/test_browser_idle_server.py measures that)
        assert config.get_option("server.fileWatcherType") == "none"
        assert config.get_where_defined("server.fileWatcherType") == str(ROOT / ".streamlit" / "config.toml")
        # gc.collect(2) after every run: 0.3 s holding the GIL with torch loaded
        assert config.get_option("runner.postScriptGC") is False
        assert config.get_where_defined("runner.postScriptGC") == str(ROOT / ".streamlit" / "config.toml")
    finally:
        config.get_config_options(force_reparse=True)
