"""Values past the limits of a database's plain column types come back unchanged on every backend
(MySQL's ``TEXT`` and ``BLOB`` stop at 64 KB and its ``DATETIME`` drops microseconds; see
:mod:`db.column_types`)."""

from __future__ import annotations

import hashlib

import numpy as np

import db
from db import Store

KB64 = 64 * 1024


def test_a_document_longer_than_64_kb_round_trips(store: Store) -> None:
    corpus = db.create_corpus(store, "Long reads")
    text = "".join(f"Paragraph {i}: ünïcödé 😀 and a trailing space \n" for i in range(3000))
    assert len(text.encode("utf-8")) > 2 * KB64
    [doc_id] = db.add_documents(store, corpus.id, [{"title": "T" * 5000, "text": text}]).document_ids
    got = db.get_document(store, doc_id)
    assert (got.text, got.title) == (text, "T" * 5000)


def test_a_projection_and_a_model_blob_over_64_kb_round_trip(store: Store) -> None:
    corpus = db.create_corpus(store, "Map")
    ids = db.add_documents(store, corpus.id, [{"text": f"document {i}"} for i in range(10_000)]).document_ids
    run = db.create_embedding_run(store, corpus.id, model_name="m", layer=-1, pooling="mean", n_heads=2,
                                  head_dim=2, dim=4)
    coords = np.random.default_rng(0).standard_normal((10_000, 2)).astype(np.float32)  # 80 KB
    blob = bytes(range(256)) * 1024  # 256 KB
    info = db.save_projection(store, run.id, "standard", "pca", coords, ids, model_blob=blob)
    data = db.load_projection(store, info.id)
    assert data.coords.tobytes() == coords.tobytes() and data.doc_ids == ids and data.model_blob == blob


def test_a_long_llm_answer_and_timestamps_keep_every_character_and_microsecond(store: Store) -> None:
    answer = "{" + ", ".join(f'"q{i}": "{"x" * 40}"' for i in range(3000)) + "}"
    assert len(answer) > 2 * KB64
    key = hashlib.sha256(b"long").hexdigest()
    db.llm_cache_put(store, key, model="m", kind="subqueries", request={"n": 1}, response_text=answer)
    cached = db.llm_cache_get(store, key)
    assert cached is not None and cached.response_text == answer
    corpus = db.create_corpus(store, "stamped")
    assert db.get_corpus(store, corpus.id).created_at == corpus.created_at  # to the microsecond
    assert corpus.created_at.tzinfo is not None
