"""What a Streamlit page's main area shows while it opens, sampled in a real browser (Playwright page): used by the
browser tests of the demo's waits and by ``bench/demo_waits.py``.

Every 100 ms :func:`watch` reads the main area: whether anything is drawn, the spinners' and progress bars' texts,
and whether the page's content (a JavaScript test on the main area ``m``) is there. It keeps when each first
happened and the longest stretches in which neither a spinner / progress bar nor the content was shown: what a user
watched without being told anything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

PROBE = """(content) => {
  const m = document.querySelector('[data-testid="stMain"]');
  if (!m) return {first: false, said: [], content: false, method: null};
  const visible = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const said = [...m.querySelectorAll('[data-testid="stSpinner"], [data-testid="stProgress"]')]
      .filter(visible).map(e => (e.innerText || '').replace(/\\(\\d+(\\.\\d+)? seconds?\\)/, '').trim() || '(no text)');
  const first = [...m.querySelectorAll('[data-testid="stElementContainer"]')].some(visible);
  const box = [...m.querySelectorAll('[data-testid="stSelectbox"]')]
      .find(e => (e.querySelector('[data-testid="stWidgetLabel"]')?.innerText || '').trim() === 'Method');
  const method = box ? (box.querySelector('input')?.value || '').trim() : null;
  return {first, said, content: eval(content), method};
}"""
"""Reads the main area; ``content`` is a JavaScript expression on ``m`` (the main area) that is true once the page's
content is shown. ``method``: the Maps page's Method box, as shown."""


@dataclass
class Waits:
    """What :func:`watch` saw, in seconds from its start: ``first`` anything drawn (the title counts), ``shown`` a
    spinner / progress bar or the content, ``content`` the content; ``blank`` the longest stretch with neither a
    spinner / progress bar nor the content, from the start; ``blank_after_shown`` the same from ``shown`` on (a
    page going quiet between two waits); ``said`` the spinners' texts, in order."""

    page: str
    first: float | None = None
    shown: float | None = None
    content: float | None = None
    blank: float = 0.0
    blank_after_shown: float = 0.0
    said: list[str] = field(default_factory=list)
    method: str | None = None


def watch(page: Any, name: str, content_js: str, timeout_s: float, t0: float | None = None) -> Waits:
    """Sample ``page``'s main area every 100 ms from ``t0`` (``time.perf_counter()``; default now) until
    ``content_js`` holds, or for ``timeout_s``."""
    t0 = time.perf_counter() if t0 is None else t0
    out = Waits(name)
    last_told = 0.0
    while True:
        try:
            s = page.evaluate(PROBE, content_js)
        except Exception:  # noqa: BLE001 - the page is still navigating
            s = {"first": False, "said": [], "content": False, "method": None}
        now = time.perf_counter() - t0
        if s["first"] and out.first is None:
            out.first = now
        for text in s["said"]:
            if text not in out.said:
                out.said.append(text)
        if s["said"] or s["content"]:
            if out.shown is None:
                out.shown = now
            last_told = now
        out.blank = max(out.blank, now - last_told)
        if out.shown is not None:
            out.blank_after_shown = max(out.blank_after_shown, now - last_told)
        if s["content"]:
            out.content = now
            out.method = s["method"]
            return out
        if now > timeout_s:
            return out
        time.sleep(0.1)
