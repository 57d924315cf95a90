"""Real-browser fixtures: a ``streamlit run app.py`` subprocess on a free port with a temporary
database and cache, and Debian's Chromium driven by Playwright (never ``playwright install``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = ROOT / "test-artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    """Base URL of a headless Streamlit server running this app on an empty temporary database."""
    tmp = tmp_path_factory.mktemp("browser")
    port = _free_port()
    env = {**os.environ, "MRAG_DATABASE_URL": f"sqlite:///{tmp / 't.db'}", "MRAG_CACHE_DIR": str(tmp / "cache"),
           "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.pop(name, None)
    log = open(tmp / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early:\n{(tmp / 'streamlit.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("streamlit did not become healthy in 90 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser_page():
    """A Playwright page in Debian's Chromium; skipped with a reason when it is not available."""
    if not CHROMIUM.exists():
        pytest.skip("Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1100})
        try:
            yield page
        finally:
            browser.close()
