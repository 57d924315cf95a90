"""``python -m mrag_core``: the headless CLI."""

import sys

from mrag_core.cli import main

if __name__ == "__main__":
    sys.exit(main())
