"""Pre-annotation against a slow, off-list local model, this tree and (``--old-root``) another side by side.

    python bench/preannotate_slow_llm.py [--docs 41] [--old-root /tmp/old-worktree]

Issue 36: SmolLM2-135M-Instruct behind a small OpenAI-compatible server gave a suggestion to 6 of 41 documents,
and Cancel took 17 s. The server here (``tests.support.small_model.SmallModel`` on a real HTTP server on
127.0.0.1, run by this process from this tree) answers like it: one request at a time (one slot), 0.5 s each, 60%
of first answers off the category list, JSON-schema output ignored. The client side runs in a child process
whose ``sys.path`` starts with the tree measured (so ``--old-root`` measures old code against the same server):

* ``run``: one pre-annotation of a new SQLite corpus of ``--docs`` unlabelled documents (``workflows.annotation.
  preannotate`` with the LLM annotator, as the page's Start button), timeout 1.5 s, 4 requests at once, 2
  retries: four requests at once make the fourth wait 2 s, past the timeout. Counts the suggestions stored ok.
* ``cancel``: the server hangs (each answer takes 4 s); the run is cancelled 1 s in, with requests in flight;
  timeout 30 s. Measures the seconds from setting ``cancel`` to ``preannotate`` returning.

Ends with one line per tree: ``RESULT tree=new ok=X of=N run_s=X cancel_s=X``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]

DELAY_S, HANG_S = 0.5, 4.0
RUN = {"timeout_s": 1.5, "concurrency": 4, "max_retries": 2}
CANCEL = {"timeout_s": 30.0, "concurrency": 4, "max_retries": 2}
CANCEL_AFTER_S = 1.0


def client(args: argparse.Namespace) -> None:
    """The child: pre-annotate with the tree at ``args.root`` against ``args.url``; prints one JSON line."""
    sys.path.insert(0, args.root)
    import db

    try:
        from services.llm.client import LLMClient
        from services.llm.config import LLMConfig
        from services.workflows import annotation as aw
    except ImportError:  # a tree from before the services layout (issue 34)
        from mrag_core.llm.client import LLMClient
        from mrag_core.llm.config import LLMConfig
        from mrag_core.workflows import annotation as aw

    spec = json.loads(sys.stdin.read())
    settings = RUN if args.phase == "run" else CANCEL
    cfg = LLMConfig(base_url=args.url, model="fake-model", api_key="bench-key", **settings)
    with tempfile.TemporaryDirectory() as folder:
        store = db.open_store(f"sqlite:///{Path(folder) / 'b.db'}")
        corpus = db.create_corpus(store, "Bench")
        db.add_categories(store, corpus.id, spec["categories"])
        db.add_documents(store, corpus.id, spec["docs"])
        annotator = aw.LLMAnnotator(LLMClient(cfg))
        cancel = threading.Event()
        set_at: list[float] = []
        if args.phase == "cancel":
            def stop() -> None:
                set_at.append(time.monotonic())
                cancel.set()
            threading.Timer(CANCEL_AFTER_S, stop).start()
        started = time.monotonic()
        summary = aw.preannotate(store, corpus.id, annotator, batch_size=32, cancel=cancel)
        ended = time.monotonic()
        ok = sum(any(s.status == "ok" for s in db.list_suggestions(store, d))
                 for d in db.document_ids(store, corpus.id))
        store.close()
    print(json.dumps({"ok": ok, "of": len(spec["docs"]), "seconds": round(ended - started, 2),
                      "cancel_s": round(ended - set_at[0], 2) if set_at else None,
                      "failed": summary.failed, "errors": summary.errors[-1:]}))


def measure(root: str, phase: str, url: str, spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--client", url, "--root", root, "--phase", phase],
                         input=json.dumps(spec), capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{phase} on {root} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=41)
    ap.add_argument("--old-root", default=None, help="another checkout (e.g. a worktree of the old commit)")
    ap.add_argument("--client", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    ap.add_argument("--phase", default="run", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client is not None:
        args.url = args.client
        client(args)
        return
    sys.path.insert(0, str(ROOT))
    from tests.support.openai_server import FakeOpenAIServer
    from tests.support.small_model import SmallModel
    from tests.support.topic_corpus import CATEGORIES, topic_docs, truth

    spec = {"categories": [{"name": c.name, "description": c.description} for c in CATEGORIES],
            "docs": [{"title": d.title, "text": d.text} for d in topic_docs(args.docs)]}
    trees = [("new", str(ROOT))] + ([("old", str(Path(args.old_root).resolve()))] if args.old_root else [])
    lines = []
    for name, root in trees:
        result = {}
        for phase in ("run", "cancel"):
            model = SmallModel(truth, delay_s=DELAY_S, hang_s=HANG_S)
            if phase == "cancel":
                model.hang.set()
            server = FakeOpenAIServer(model, slots=1).start()
            try:
                result[phase] = measure(root, phase, server.base_url, spec)
            finally:
                server.stop()
            print(f"{name} {phase}: {json.dumps(result[phase])}", flush=True)
        run, cancel = result["run"], result["cancel"]
        lines.append(f"RESULT tree={name} ok={run['ok']} of={run['of']} run_s={run['seconds']} "
                     f"cancel_s={cancel['cancel_s']}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
