"""``python -m mrag_core``: the engine's ``bench`` (:mod:`mrag_core.bench_cli`); the app's other commands say where
they went (``mrag-studio``)."""

import sys

from mrag_core.bench_cli import main

if __name__ == "__main__":
    sys.exit(main())
