"""Corpus Import, the topic layout from "A folder on the machine running the app": only folders under the import
root are read (MRAG_IMPORT_ROOT; by default the home folder when the app is served on this machine only, nothing
when it can be reached from elsewhere), typed paths are resolved before the check, the page says which folders it
may read, and links inside a read folder are skipped."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

import db

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
FOLDER = "A folder on the machine running the app"
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


@pytest.fixture
def address() -> Iterator[None]:
    """Streamlit's server.address put back after the test (AppTest reads the process' config)."""
    before = config.get_option("server.address")
    yield
    config.set_option("server.address", before)


def _layout(root: Path, name: str = "legal") -> Path:
    legal = root / name
    (legal / "contract").mkdir(parents=True)
    (legal / "contract" / "contract_breach.json").write_text(json.dumps(
        [{"title": "Breach", "text": "A breach of contract happens when a party fails to perform."}]))
    return legal


def _folder_page() -> AppTest:
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.radio(key="imp_kind").set_value("topics").run()
    at.radio(key="imp_topic_from").set_value(FOLDER).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _plain(elements) -> list[str]:
    return [e.value.replace("\\", "") for e in elements]  # shown markdown-escaped


def test_served_beyond_this_machine_without_a_root_no_folder_is_read(tmp_path: Path, monkeypatch, address) -> None:
    """Streamlit listens on every interface by default: before, any browser user could have any folder the server
    can read imported (the administrator's home folder was scanned). Now the page says reading is off and why."""
    monkeypatch.delenv("MRAG_IMPORT_ROOT", raising=False)
    config.set_option("server.address", "")
    _layout(tmp_path)
    at = _folder_page()
    assert not [t for t in at.text_input if t.key == "imp_topic_path"]
    assert _plain(at.warning) == [
        "Reading folders on the machine running the app is off, as the app can be reached from other machines: an "
        "administrator can set MRAG_IMPORT_ROOT to the folder whose contents the app may read. Upload a ZIP "
        "instead."]
    assert not at.dataframe and not [b for b in at.button if b.key == "imp_go"]


def test_only_folders_under_the_import_root_are_read(tmp_path: Path, monkeypatch, address) -> None:
    root = tmp_path / "data"
    legal = _layout(root)
    private = _layout(tmp_path, "private")
    (root / "escape").symlink_to(private, target_is_directory=True)
    (legal / "contract" / "contract_secret.json").symlink_to(private / "contract" / "contract_breach.json")
    monkeypatch.setenv("MRAG_IMPORT_ROOT", str(root))
    config.set_option("server.address", "0.0.0.0")
    at = _folder_page()
    assert _plain(at.caption)[-1] == f"This app reads folders under {root} only (MRAG_IMPORT_ROOT)."
    for typed in (str(private), str(root / ".." / "private"), str(root / "escape"), "../private", "/etc"):
        at.text_input(key="imp_topic_path").set_value(typed).run()
        assert not at.exception
        errors = _plain(at.error)
        assert len(errors) == 1 and errors[0].endswith(
            f"is outside the folder this app may read: folders under {root} only (MRAG_IMPORT_ROOT)."), errors
        assert not at.dataframe and not [b for b in at.button if b.key == "imp_go"]
    at.text_input(key="imp_topic_path").set_value("legal").run()  # relative: under the root
    assert not at.exception and not at.error
    records, issues = at.dataframe[0].value, at.dataframe[1].value
    assert list(records["title"]) == ["Breach"]
    assert list(issues["severity"]) == ["warning"] and "contract/contract_secret.json: symbolic link skipped" in (
        issues["message"][0])
    at.text_input(key="imp_new_name").set_value("Legal").run()
    at.button(key="imp_go").click().run()
    assert "Imported 1 document into 'Legal'" in at.success[0].value
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.get_corpus_by_name(store, "Legal")
    assert [d.title for d in db.list_documents(store, corpus.id).items] == ["Breach"]
    store.close()


def test_served_on_this_machine_only_the_home_folder_is_the_root(tmp_path: Path, monkeypatch, address) -> None:
    home = tmp_path / "home"
    _layout(home)
    monkeypatch.delenv("MRAG_IMPORT_ROOT", raising=False)
    monkeypatch.setenv("HOME", str(home))
    config.set_option("server.address", "127.0.0.1")
    at = _folder_page()
    assert _plain(at.caption)[-1].startswith(f"This app reads folders under {home} only (the home folder of the user "
                                             "running the app, as it is served on this machine only; set "
                                             "MRAG_IMPORT_ROOT to choose another folder)")
    at.text_input(key="imp_topic_path").set_value("~/legal").run()
    assert not at.error and list(at.dataframe[0].value["title"]) == ["Breach"]
    at.text_input(key="imp_topic_path").set_value(str(tmp_path)).run()
    assert _plain(at.error)[0].startswith(f"{tmp_path} is outside the folder this app may read")
