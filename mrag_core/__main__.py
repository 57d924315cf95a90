"""``python -m mrag_core``: the headless CLI."""

import sys

from services.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
