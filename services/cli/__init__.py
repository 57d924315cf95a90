"""The command line, ``mrag-studio`` (or ``python -m services``): one module per command group,
:mod:`services.cli.main` builds the parser and dispatches, :mod:`services.cli.common` holds what
the commands share (the store option and opening, Ctrl+C, progress, the LLM endpoint).
"""
