"""`mrag-studio index`: build, update, resume and list a stored corpus' index, against a real store."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
import services.workflows.indexing as indexing  # noqa: E402
from services.cli.index import run_settings  # noqa: E402
from services.cli.main import build_parser, main  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    u, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    return u


def _index(url: str, *extra: str) -> int:
    return main(["index", "--corpus", "Mini", "--database", url, "--threads", "1", *extra])


def test_build_reuse_update_and_list(url: str, capsys) -> None:
    assert _index(url) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("index #1: done, 4 documents (4 embedded) in ") and out.endswith(
        "; minilm, layer 5, pooling mean")
    assert _index(url) == 0
    assert capsys.readouterr().out.strip() == ("index #1: up to date, 4 documents (minilm, layer 5, pooling mean); "
                                               "nothing to embed")
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    db.add_documents(store, corpus.id, [{"title": "Tea", "text": "Green tea steeps in hot water.", "label": "food"}])
    assert _index(url) == 0
    assert capsys.readouterr().out.startswith(
        "index #2: done, 5 documents (1 embedded, 4 unchanged copied from earlier indexes) in ")
    # The copied vectors are the ones of index #1, bit for bit; the app finds index #2 for these settings.
    ids1, std1, heads1 = db.load_vectors(store, 1)
    ids2, std2, heads2 = db.load_vectors(store, 2)
    assert ids2.tolist()[:4] == ids1.tolist() and std2[:4].tobytes() == std1.tobytes()
    assert heads2[:4].tobytes() == heads1.tobytes()
    assert indexing.run_state(store, indexing.find_run(store, corpus.id, "minilm", 5, "mean")) == "done"
    run = db.get_embedding_run(store, 2)
    assert run_settings(run) == "minilm, layer 5, pooling mean"  # float32, the default, goes unsaid
    assert run_settings(dataclasses.replace(run, precision="float16")) == "minilm, layer 5, pooling mean, float16"
    store.close()
    assert _index(url, "--list") == 0
    rows = [line.split() for line in capsys.readouterr().out.strip().splitlines()]
    assert rows[0] == ["index", "model", "layer", "pooling", "precision", "state", "documents", "size", "MB",
                       "evaluations"]
    assert [r[:7] for r in rows[1:]] == [["#2", "minilm", "5", "mean", "float32", "current", "5"],
                                         ["#1", "minilm", "5", "mean", "float32", "superseded", "4"]]
    assert float(rows[1][7]) == pytest.approx(5 * (384 + 12 * 32) * 4 / 1e6, abs=0.05)


def _ctrl_c_in_the_first_batch(monkeypatch) -> None:
    """Make the next build's first batch end with a Ctrl+C (SIGINT to this process), as a user pressing it."""
    real = indexing.embed_texts
    calls: list[int] = []

    def embed_then_interrupt(lm, texts, **kw):
        calls.append(len(texts))
        out = real(lm, texts, **kw)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(indexing, "embed_texts", embed_then_interrupt)


def test_ctrl_c_stops_after_the_batch_and_the_next_call_resumes(url: str, capsys, monkeypatch) -> None:
    real = indexing.embed_texts
    _ctrl_c_in_the_first_batch(monkeypatch)
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN when pytest runs as a background job
    assert _index(url, "--batch-size", "1") == 1
    captured = capsys.readouterr()
    assert "stopping after the current batch" in captured.err
    assert (
        captured.out.strip() == "index #1: cancelled with 1 of 4 documents saved; run the same command again to resume"
    )
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
    monkeypatch.setattr(indexing, "embed_texts", real)
    assert _index(url, "--batch-size", "2") == 0
    assert capsys.readouterr().out.startswith("index #1: done, 4 documents (3 embedded) in ")
    store = db.open_store(url)
    ids, std, _ = db.load_vectors(store, 1)
    store.close()
    assert len(ids) == 4 and np.isfinite(std).all()


def test_bad_input_is_one_line(url: str, capsys, tmp_path: Path) -> None:
    assert main(["index", "--corpus", "Nope", "--database", url]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: unknown corpus 'Nope' (corpora: 'Mini')"
    assert _index(url, "--layer", "9") == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == ("error: layer 9 is out of range: this model has 6 layers "
                                            "(0..5, or -6..-1 counted from the last)")
    assert "Loading weights" not in err  # refused from the model's config, before its weights were loaded
    missing = tmp_path / "no-such-model"
    assert _index(url, "--model", str(missing)) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: unknown model '{missing}': not a registry name (minilm, smollm2) and not an existing folder")
    store = db.open_store(url)
    assert db.list_embedding_runs(store) == []  # nothing half-written
    empty = db.create_corpus(store, "Empty")
    store.close()
    assert main(["index", "--corpus", empty.name, "--database", url]) == 2
    assert capsys.readouterr().err.strip() == "error: corpus 'Empty' has no documents"
    assert "index" in build_parser().format_help()


def test_an_index_another_process_builds_is_left_alone(url: str, capsys, monkeypatch) -> None:
    real = indexing.embed_texts
    _ctrl_c_in_the_first_batch(monkeypatch)
    assert _index(url, "--batch-size", "1") == 1  # index #1 stopped after one document
    monkeypatch.setattr(indexing, "embed_texts", real)
    capsys.readouterr()
    store = db.open_store(url)
    db.claim_embedding_run(store, 1, "gpu-box pid 4242 #0badc0de")  # the app's server on the GPU box resumed it
    store.close()
    assert _index(url) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: Index 1 is running in another process (gpu-box pid 4242; last heard from ")
    assert err.endswith("once it has been silent for 30 s it counts as interrupted and can be resumed here.")
    store = db.open_store(url)
    run = db.get_embedding_run(store, 1)
    store.close()
    assert (run.n_saved, run.owner, run.status) == (1, "gpu-box pid 4242 #0badc0de", "running")


def test_backend_milvus_builds_and_updates_the_collections(url: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MRAG_MILVUS_URI", str(tmp_path / "milvus.db"))
    assert _index(url, "--backend", "milvus") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("index #1: done, 4 documents")
    assert lines[1].startswith("index #1: milvus collections ready, 4 documents (4 written, 0 rows deleted) in ")
    assert _index(url, "--backend", "milvus") == 0
    assert capsys.readouterr().out.strip().splitlines()[1] == "index #1: milvus collections up to date, 4 documents"
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    db.add_documents(store, corpus.id, [{"title": "Fifth", "text": "a fifth document about glaciers"}])
    store.close()
    assert _index(url, "--backend", "milvus") == 0
    last = capsys.readouterr().out.strip().splitlines()[1]
    assert last.startswith("index #2: milvus collections ready, 5 documents (1 written, 0 rows deleted, updated from "
                           "index #1's) in ")
    # --list says where the collections stand: #2 took #1's over (renamed, only the new document written)
    assert _index(url, "--list") == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].split()[-1] == "milvus"
    col = table[0].index("milvus")
    assert [(line.split()[0], line[col:].strip()) for line in table[1:]] == [("#2", "milvus ready"), ("#1", "-")]
    monkeypatch.setenv("MRAG_MILVUS_URI", "http://127.0.0.1:9")  # nothing listens there
    assert _index(url, "--list") == 0
    out, err = capsys.readouterr()
    assert "milvus" not in out.splitlines()[0] and err.startswith("note: the Milvus state is not shown: Milvus at ")


def test_backend_milvus_unreachable_is_refused_before_embedding(url: str, monkeypatch, capsys) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MRAG_MILVUS_URI", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("MRAG_MILVUS_TOKEN", "root:s3cret")
    assert _index(url, "--backend", "milvus") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: Milvus at http://127.0.0.1:{port} cannot be reached") and "s3cret" not in err
    store = db.open_store(url)
    assert db.list_embedding_runs(store) == []  # nothing was embedded
    store.close()
