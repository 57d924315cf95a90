"""A hand-written query in Japanese that names each ground-truth title is ``ok``, not flagged as missing them
(titles inside a sentence of a script written without spaces)."""

from __future__ import annotations

import pytest

import db
from services.workflows import querysets as qw


@pytest.mark.every_backend
def test_hand_written_japanese_query_naming_both_titles_is_ok(store: db.Store) -> None:
    corpus = db.create_corpus(store, "日本")
    db.add_documents(store, corpus.id, [
        {"title": "東京", "text": "東京は日本の首都である。人口が多い大都市だ。", "label": "首都"},
        {"title": "富士山", "text": "富士山は日本で最も高い山である。標高は3776メートル。", "label": "山"},
    ])
    ids = [d.id for d in db.list_documents(store, corpus.id, limit=None).items]
    qs = db.create_query_set(store, corpus.id, "手書き")
    row = qw.add_manual_query(store, qs.id, text="東京から富士山へ行く方法と、富士山の標高を教えて。", ground_truth=ids)
    assert (row.status, row.error) == ("ok", "")
