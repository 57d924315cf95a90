"""``python -m services``: the services' command line, the same as ``mrag-studio`` (:mod:`services.cli.main`)."""

import sys

from services.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
