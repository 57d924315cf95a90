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

from tests.support.demo_index import copy_demo_index

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = ROOT / "test-artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AppServer:
    """``streamlit run app.py`` on a free port, its database and caches under ``folder``, no LLM endpoint unless
    ``env`` sets one (``MRAG_LLM_*``). Stopping and starting again on the same folder is an app restart with the
    data kept."""

    def __init__(self, folder: Path, env: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> str:
        port = _free_port()
        env = {**os.environ, "MRAG_DATABASE_URL": f"sqlite:///{self.folder / 't.db'}",
               "MRAG_CACHE_DIR": str(self.folder / "cache"), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
        for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
            env.pop(name, None)
        env.update(self.env)
        log_path = self.folder / "streamlit.log"
        with open(log_path, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
                 str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early:\n{log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return self.url
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError("streamlit did not become healthy in 90 s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc = None


def wait_idle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the script run that the last navigation or interaction started has finished (Streamlit
    shows its status widget while a run is in progress). Widgets drawn by a run still in progress can be
    redrawn under the pointer, losing a click or the text typed into a select box."""
    page.wait_for_timeout(300)
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(state="attached",
                                                                                       timeout=timeout_ms)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=timeout_ms)


def wait_until(read, done, timeout_s: float = 30.0, every_s: float = 0.25):
    """Read ``read()`` until ``done(value)`` holds or ``timeout_s`` has passed, and return the last value read (the
    caller asserts on it, so a failure shows what the page last showed). For what a page draws after its script run
    has ended as far as :func:`wait_idle` can tell: a grid laid out again after a resize, a box drawn late under
    load."""
    deadline = time.monotonic() + timeout_s
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(every_s)
        value = read()
    return value


@pytest.fixture(scope="module")
def app_instance(tmp_path_factory):
    """A headless Streamlit server running this app on an empty temporary database (restartable)."""
    server = AppServer(tmp_path_factory.mktemp("browser"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def demo_app_instance(tmp_path_factory, demo_index_db):
    """:func:`app_instance` on a copy of the session's demo index: the demo corpus and query set with a finished
    MiniLM index (tests/support/demo_index.py), for tests that need the index only to exist."""
    folder = tmp_path_factory.mktemp("browser-demo")
    copy_demo_index(demo_index_db, folder / "t.db")
    server = AppServer(folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def app_server(app_instance):
    """Base URL of :func:`app_instance`."""
    return app_instance.url


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
