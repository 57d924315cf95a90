#!/usr/bin/env bash
# Install everything into .venv and run the test suite (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# Debian chromium drives the browser tests (Playwright uses it by path; nothing is downloaded), and
# Debian postgresql and mariadb-server give the store and workflow tests throwaway servers
# (tests/support/postgres.py, tests/support/mariadb.py).
missing=""
command -v chromium >/dev/null 2>&1 || missing="chromium"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
command -v mariadb-install-db >/dev/null 2>&1 || missing="$missing mariadb-server"
if [ -n "$missing" ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null) \
    || echo "warning: could not install$missing; those tests will be skipped"
fi
bash scripts/install.sh --dev
# Test caches and databases live in a throwaway folder.
export MRAG_CACHE_DIR="${MRAG_CACHE_DIR:-$(mktemp -d)}"
# Two workers (pytest-xdist; MRAG_TEST_WORKERS=0 runs in one process): most tests wait on a page's script
# thread, a database server, a browser or a child process, so two run side by side on the two cores.
.venv/bin/python -m pytest -q -n "${MRAG_TEST_WORKERS:-2}" --dist worksteal "$@"
