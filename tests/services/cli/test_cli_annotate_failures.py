"""`mrag-studio annotate` stopped by the endpoint says how many documents the same command asks again
(the failed one too: it said one fewer than the Resume count) and names failures by title, id in brackets."""

from __future__ import annotations

from pathlib import Path

import pytest

import db
from services.cli.main import main
from tests.support.mini_corpus import mini_store
from tests.support.openai_server import Reply, fake_openai

__all__ = ["fake_openai"]


def test_a_stopped_run_counts_the_failed_document_as_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys,
                                                          fake_openai) -> None:
    url, store, corpus_id, ids = mini_store(tmp_path, monkeypatch)
    db.add_categories(store, corpus_id, ["space", "food"])
    first = db.get_document(store, ids[0])
    store.close()
    server = fake_openai(lambda body: Reply.error(401, "Incorrect API key provided"))
    server.set_env(monkeypatch)
    assert main(["annotate", "--corpus", "Mini", "--database", url, "--batch-size", "1"]) == 1
    err = capsys.readouterr().err
    assert f"failed: document '{first.title}' (id {first.id}): " in err and "HTTP 401" in err
    assert err.strip().splitlines()[-1].startswith(f"stopped with {len(ids)} documents left; ")
