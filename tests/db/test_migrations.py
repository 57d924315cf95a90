"""Schema migrations: upgrade path from 0001 with data, models == migrations, downgrade (on every backend)."""

from __future__ import annotations

import numpy as np
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

import db
from db.engine import Store, alembic_config
from db.models import Base


def _store_at(url: str, revision: str) -> Store:
    store = db.open_store(url, migrate=False)
    assert store.schema_revision() is None
    store.upgrade(revision)
    return store


def _explicit_ids_done(store: Store) -> None:
    """After rows were inserted with explicit ids: move PostgreSQL's id sequences past them (SQLite and
    MySQL take the next id from the table itself), as a database that got those rows normally would be."""
    if not store.is_postgresql:
        return
    with store.engine.begin() as conn:
        for table in inspect(conn).get_table_names():
            if "id" in {c["name"] for c in inspect(conn).get_columns(table)}:
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false) "
                                  f"WHERE pg_get_serial_sequence('{table}', 'id') IS NOT NULL"))


def _fill_0001(store: Store) -> np.ndarray:
    """Insert data with plain SQL matching the 0001 schema; returns the saved vector."""
    vec = np.arange(8, dtype=np.float32) / 7
    heads = np.arange(8, dtype=np.float32).reshape(2, 4)
    now = "2026-01-02 03:04:05.000000"
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO corpora (id, name, description, created_at, updated_at, version) "
                "VALUES (1, 'Old corpus', 'from 0001', :now, :now, 7)"
            ),
            {"now": now},
        )
        conn.execute(text("INSERT INTO categories (id, corpus_id, name, description) VALUES (1, 1, 'sport', '')"))
        for i in (1, 2):
            conn.execute(
                text(
                    "INSERT INTO documents (id, corpus_id, title, text, source, content_hash, "
                    "version, created_at) VALUES (:id, 1, :t, :x, 's', :h, :v, :now)"
                ),
                {"id": i, "t": f"T{i}", "x": f"text {i}", "h": f"{i:064d}", "v": i, "now": now},
            )
        conn.execute(
            text(
                "INSERT INTO suggestions (id, document_id, category_id, status, agent, "
                "model_version, score, reason, error, created_at) "
                "VALUES (1, 1, 1, 'ok', 'llm', 'v1', 0.5, 'because', '', :now)"
            ),
            {"now": now},
        )
        conn.execute(
            text(
                "INSERT INTO decisions (id, document_id, category_id, annotator, created_at, "
                "based_on_version, suggestion_id, note) VALUES (1, 2, 1, 'ann', :now, 1, NULL, '')"
            ),
            {"now": now},
        )
        conn.execute(
            text(
                "INSERT INTO embedding_runs (id, corpus_id, corpus_version, model_name, model_path, "
                "layer, pooling, n_docs, n_heads, head_dim, dim, status, timings, importance, "
                "error, created_at) VALUES (1, 1, 7, 'm', '', -1, 'last', 2, 2, 4, 8, 'done', "
                "'{}', NULL, '', :now)"
            ),
            {"now": now},
        )
        conn.execute(
            text(
                "INSERT INTO embedding_vectors (run_id, document_id, standard, heads) "
                "VALUES (1, 1, :s, :h)"
            ),
            {"s": vec.tobytes(), "h": heads.tobytes()},
        )
    return vec


def test_upgrade_from_0001_keeps_data(empty_url: str) -> None:
    url = empty_url
    old = _store_at(url, "0001")
    assert old.schema_revision() == "0001"
    assert "projections" not in inspect(old.engine).get_table_names()
    vec = _fill_0001(old)
    _explicit_ids_done(old)
    old.close()

    with db.open_store(url) as store:
        assert store.schema_revision() == db.head_revision() == "0010"
        info = db.get_corpus(store, 1)
        assert (info.name, info.description, info.version) == ("Old corpus", "from 0001", 7)
        assert info.labels_version == 1  # new column filled by the server default
        assert info.n_documents == 2 and info.n_categories == 1
        page = db.list_documents(store, 1)
        assert [(d.title, d.label, d.label_source) for d in page.items] == [
            ("T1", "sport", "suggestion"),
            ("T2", "sport", "decision"),
        ]
        assert db.decide_label(store, 2, 1, "new", expected_version=2) == 3
        ids, std, heads = db.load_vectors(store, 1)
        assert ids.tolist() == [1]
        assert std[0].tobytes() == vec.tobytes()
        assert heads.shape == (1, 2, 4)
        assert not db.is_stale(store, 1)
        # The new table and index of 0002 exist and work.
        proj = db.save_projection(store, 1, "standard", "pca", np.zeros((1, 2)), [1])
        assert db.load_projection(store, proj.id).doc_ids == [1]
        index_names = {ix["name"] for ix in inspect(store.engine).get_indexes("suggestions")}
        assert "ix_suggestions_doc_agent" in index_names
        assert "ix_suggestions_document_id" not in index_names


def test_upgrade_from_0002_adds_chunk_links_and_keeps_documents(empty_url: str) -> None:
    url = empty_url
    old = _store_at(url, "0002")
    assert old.schema_revision() == "0002"
    columns = {c["name"] for c in inspect(old.engine).get_columns("documents")}
    assert "chunk_of" not in columns and "chunk_count" not in columns
    _fill_0001(old)  # the 0001 rows are valid 0002 rows too
    with old.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO documents (id, corpus_id, title, text, source, content_hash, "
                "chunk_index, version, created_at) VALUES (3, 1, 'T3 (part 1/2)', 'part', 's', "
                ":h, 0, 1, '2026-01-02 03:04:05.000000')"
            ),
            {"h": "3" * 64},
        )
    _explicit_ids_done(old)
    old.close()

    with db.open_store(url) as store:
        assert store.schema_revision() == db.head_revision()
        rows = db.list_documents(store, 1).items
        assert [(d.title, d.chunk_index, d.chunk_of, d.chunk_count) for d in rows] == [
            ("T1", None, None, None),
            ("T2", None, None, None),
            ("T3 (part 1/2)", 0, None, None),
        ]
        assert [d.label for d in rows[:2]] == ["sport", "sport"]
        assert db.load_vectors(store, 1)[0].tolist() == [1]
        assert not db.is_stale(store, 1)
        (new_id,) = db.add_documents(
            store, 1, [{"text": "chunk", "chunk_of": "Long", "chunk_index": 1, "chunk_count": 2}]
        ).document_ids
        assert db.get_document(store, new_id).chunk_label == "chunk 2 of 2 of 'Long'"
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0002")
        assert store.schema_revision() == "0002"
        columns = {c["name"] for c in inspect(store.engine).get_columns("documents")}
        assert "chunk_of" not in columns and "chunk_count" not in columns
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM documents")).scalar_one() == 4


def test_upgrade_from_0003_records_the_text_hash_of_current_vectors(empty_url: str) -> None:
    url = empty_url
    old = _store_at(url, "0003")
    assert "content_hash" not in {c["name"] for c in inspect(old.engine).get_columns("embedding_vectors")}
    vec = _fill_0001(old)  # run 1 (corpus version 7 = the corpus' version): document 1's vectors
    heads = np.zeros((2, 4), dtype=np.float32)
    with old.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO embedding_runs (id, corpus_id, corpus_version, model_name, model_path, layer, pooling, "
            "n_docs, n_heads, head_dim, dim, status, timings, importance, error, created_at) VALUES "
            "(2, 1, 6, 'm', '', -1, 'last', 2, 2, 4, 8, 'done', '{}', NULL, '', '2026-01-01 00:00:00.000000')"))
        conn.execute(text("INSERT INTO embedding_vectors (run_id, document_id, standard, heads) VALUES (2, 2, :s, :h)"),
                     {"s": vec.tobytes(), "h": heads.tobytes()})
    _explicit_ids_done(old)
    old.close()

    with db.open_store(url) as store:
        assert store.schema_revision() == db.head_revision()
        with store.engine.connect() as conn:
            hashes = dict(conn.execute(text("SELECT run_id, content_hash FROM embedding_vectors")).all())
        assert hashes == {1: f"{1:064d}", 2: None}  # run 2 is stale (version 6): its text is unknown
        # A new run of the same settings takes document 1's vectors from run 1, never document 2's from run 2.
        new = db.create_embedding_run(store, 1, model_name="m", layer=-1, pooling="last", n_heads=2, head_dim=4, dim=8)
        assert db.reuse_candidates(store, new.id) == [2, 1]
        assert [db.copy_unchanged_vectors(store, r, new.id) for r in (2, 1)] == [0, 1]
        assert db.missing_documents(store, new.id) == [2]
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0003")
        assert "content_hash" not in {c["name"] for c in inspect(store.engine).get_columns("embedding_vectors")}
        with store.engine.connect() as conn:  # the vectors themselves stay
            assert conn.execute(text("SELECT COUNT(*) FROM embedding_vectors")).scalar_one() == 3


def test_upgrade_from_0004_marks_the_demo_corpus_and_its_query_set(empty_url: str) -> None:
    from services.demo.store import demo_corpus_id, ensure_demo_corpus

    url = empty_url
    old = _store_at(url, "0004")
    now = "2026-01-02 03:04:05.000000"
    with old.engine.begin() as conn:
        for cid, name in ((1, "Mine"), (2, "MRAG Studio demo")):
            conn.execute(
                text(
                    "INSERT INTO corpora (id, name, description, created_at, updated_at, version, "
                    "labels_version) VALUES (:id, :n, '', :now, :now, 5, 1)"
                ),
                {"id": cid, "n": name, "now": now},
            )
        for sid, cid, name in ((1, 1, "Demo queries"), (2, 2, "Other"), (3, 2, "Demo queries")):
            conn.execute(
                text(
                    "INSERT INTO query_sets (id, corpus_id, name, description, source, params, created_at) "
                    "VALUES (:id, :c, :n, '', 'manual', '{}', :now)"
                ),
                {"id": sid, "c": cid, "n": name, "now": now},
            )
    _explicit_ids_done(old)
    old.close()

    with db.open_store(url) as store:
        assert store.schema_revision() == db.head_revision()
        assert (db.get_marker(store, "demo_corpus"), db.get_marker(store, "demo_queries")) == ("2", "3")
        assert demo_corpus_id(store) == 2
        status = ensure_demo_corpus(store)  # the existing demo is kept as it is (version 5: the user's)
        assert (status.corpus_id, status.query_set_id, status.added_documents) == (2, 3, 0)
        assert db.get_marker(store, "demo_corpus") == f"2@{db.get_corpus(store, 2).created_at.isoformat()}"
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0004")
        assert "app_markers" not in inspect(store.engine).get_table_names()
        with store.engine.connect() as conn:  # plain SQL: the code of today reads columns 0004 lacks
            assert conn.execute(text("SELECT COUNT(*) FROM corpora")).scalar_one() == 2


def test_upgrade_from_0005_marks_existing_runs_float32(empty_url: str) -> None:
    url = empty_url
    old = _store_at(url, "0005")
    assert "precision" not in {c["name"] for c in inspect(old.engine).get_columns("embedding_runs")}
    _fill_0001(old)  # corpus 1 with run 1 (layer -1, pooling 'last') holding document 1's vectors
    _explicit_ids_done(old)
    old.close()

    with db.open_store(url) as store:
        assert store.schema_revision() == db.head_revision()
        assert db.get_embedding_run(store, 1).precision == "float32"
        half = db.create_embedding_run(store, 1, model_name="m", layer=-1, pooling="last", n_heads=2, head_dim=4,
                                       dim=8, precision="float16")
        full = db.create_embedding_run(store, 1, model_name="m", layer=-1, pooling="last", n_heads=2, head_dim=4,
                                       dim=8)
        assert db.reuse_candidates(store, half.id) == [] and db.reuse_candidates(store, full.id) == [1]
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0005")
        assert "precision" not in {c["name"] for c in inspect(store.engine).get_columns("embedding_runs")}
        with store.engine.connect() as conn:  # the runs and their vectors stay
            assert conn.execute(text("SELECT COUNT(*) FROM embedding_runs")).scalar_one() == 3
            assert conn.execute(text("SELECT COUNT(*) FROM embedding_vectors")).scalar_one() == 1


def test_upgrade_from_0006_leaves_runs_without_owner_and_interrupted(empty_url: str) -> None:
    url = empty_url
    old = _store_at(url, "0006")
    _fill_0001(old)  # corpus 1 with run 1 ('done')
    with old.engine.begin() as conn:  # and an index left 'running' by a process that is gone
        conn.execute(text(
            "INSERT INTO embedding_runs (id, corpus_id, corpus_version, model_name, model_path, layer, pooling, "
            "n_docs, n_heads, head_dim, dim, status, timings, importance, error, created_at) "
            "VALUES (2, 1, 7, 'm', '', -1, 'last', 2, 2, 4, 8, 'running', '{}', NULL, '', :now)"),
            {"now": "2026-01-02 03:04:05.000000"})
    _explicit_ids_done(old)
    old.close()

    with db.open_store(url) as store:
        assert store.schema_revision() == db.head_revision() == "0010"
        run = db.get_embedding_run(store, 2)
        assert (run.owner, run.heartbeat_at, run.live) == ("", None, False)
        assert db.claim_embedding_run(store, 2, "box pid 1 #a").live  # resumable at once
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0006")
        for table in ("embedding_runs", "eval_runs"):
            assert not {"owner", "heartbeat_at"} & {c["name"] for c in inspect(store.engine).get_columns(table)}
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM embedding_runs")).scalar_one() == 2


def test_models_match_migrations(store: Store) -> None:
    with store.engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        assert compare_metadata(context, Base.metadata) == []


def test_downgrade_to_0001_and_back_keeps_corpora(store: Store) -> None:
    db.create_corpus(store, "survivor")
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0001")
    assert store.schema_revision() == "0001"
    assert "labels_version" not in {c["name"] for c in inspect(store.engine).get_columns("corpora")}
    assert not {"app_markers", "projections"} & set(inspect(store.engine).get_table_names())
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT name FROM corpora")).all() == [("survivor",)]
    store.upgrade()
    assert [c.name for c in db.list_corpora(store)] == ["survivor"]


def test_upgrade_from_0008_keeps_corpora_visible_and_downgrade_drops_unpublished_imports(empty_url: str) -> None:
    """0009 adds ``corpora.import_owner``: corpora stored before it are finished ones (NULL, listed as before); going
    back to 0008 deletes corpora an import was still writing (they would turn into finished ones)."""
    old = _store_at(empty_url, "0008")
    _fill_0001(old)  # corpus 1 'Old corpus' with two documents
    _explicit_ids_done(old)
    old.close()
    with db.open_store(empty_url) as store:
        assert store.schema_revision() == "0010"
        assert [(c.name, c.n_documents) for c in db.list_corpora(store)] == [("Old corpus", 2)]
        hidden = db.begin_import(store, "Half written", "box pid 1 #a")
        db.add_import_documents(store, hidden, "box pid 1 #a", [{"text": "a document"}])
        assert [c.name for c in db.list_corpora(store)] == ["Old corpus"]
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0008")
        assert "import_owner" not in {c["name"] for c in inspect(store.engine).get_columns("corpora")}
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT name FROM corpora")).all() == [("Old corpus",)]
            assert conn.execute(text("SELECT COUNT(*) FROM documents")).scalar_one() == 2


def test_upgrade_from_0009_tells_how_old_decisions_were_made_and_downgrade_drops_teams(empty_url: str) -> None:
    """0010 fills ``decisions.method`` from what the code before it wrote: the import's annotator, the note
    find-similar writes, and suggestions accepted in one transaction with others (one timestamp) as bulk; a
    suggestion accepted alone and a plain decision as review. No old decision is blind."""
    old = _store_at(empty_url, "0009")
    _fill_0001(old)  # corpus 1, category 1, documents 1 and 2, suggestion 1 (of document 1), decision 1 by 'ann'
    rows = [  # (id, document, annotator, created_at, suggestion, note)
        (2, 1, "import", "2026-01-02 03:04:06.000000", None, ""),
        (3, 1, "ann", "2026-01-02 03:04:07.000000", None, "labelled with neighbours"),
        (4, 1, "ann", "2026-01-02 03:04:08.000000", 1, ""),  # bulk: with 5
        (5, 2, "ann", "2026-01-02 03:04:08.000000", 1, ""),
        (6, 2, "bob", "2026-01-02 03:04:08.000000", 1, ""),  # same time, another annotator, alone: review
        (7, 2, "ann", "2026-01-02 03:04:09.000000", 1, ""),  # accepted alone: review
    ]
    with old.engine.begin() as conn:
        for id_, doc, who, at, sug, note in rows:
            conn.execute(text(
                "INSERT INTO decisions (id, document_id, category_id, annotator, created_at, based_on_version, "
                "suggestion_id, note) VALUES (:id, :doc, 1, :who, :at, 1, :sug, :note)"),
                {"id": id_, "doc": doc, "who": who, "at": at, "sug": sug, "note": note})
    _explicit_ids_done(old)
    old.close()
    with db.open_store(empty_url) as store:
        assert store.schema_revision() == "0010"
        with store.engine.connect() as conn:
            got = conn.execute(text("SELECT id, method, blind FROM decisions ORDER BY id")).all()
        assert [(i, m, bool(b)) for i, m, b in got] == [
            (1, "review", False), (2, "import", False), (3, "neighbours", False), (4, "bulk", False),
            (5, "bulk", False), (6, "review", False), (7, "review", False)]
        db.save_team(store, 1, ["ann", "bob"], overlap_percent=100.0, per_shared=2)
        db.add_assignments(store, 1, {1: ["ann", "bob"]})
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0009")
        assert not {"annotation_teams", "team_members", "assignments"} & set(inspect(store.engine).get_table_names())
        assert not {"method", "blind"} & {c["name"] for c in inspect(store.engine).get_columns("decisions")}
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM decisions")).scalar_one() == 7
