"""Writing a file whole or not at all (the exports, and the CLI's result files).

A temporary file beside the target, renamed over it; only over a regular file or at a new path (a folder, a symbolic
link, a FIFO or a device node is refused, never written through nor replaced), with the permissions the user's umask
gives a new file, or those of the regular file it replaces.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

__all__ = ["WriteError", "write_whole"]


class WriteError(ValueError):
    """A file cannot be written as asked; the message names it and why."""


def _what_is(mode: int) -> str:
    """What a file of ``mode`` (``os.lstat``'s) is, in words."""
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def write_whole(data: bytes, path: str | Path) -> Path:
    """Write ``data`` to ``path`` whole or not at all; returns the path.

    Only a new path or a regular file is written: anything else at ``path`` (a folder, a symbolic link, whatever it
    points at, a FIFO, a device node, a socket) is refused with :class:`WriteError` and left as it is. The bytes go
    to a new temporary file beside ``path`` (created with mode 0666, so the user's umask decides its permissions, as
    for any file the user creates), which is renamed over ``path`` at the end; it replaces a regular file with that
    file's permissions. An interrupted or failed write leaves ``path`` as it was and no temporary file."""
    p = Path(path)
    folder = p.parent
    if not folder.is_dir():
        raise WriteError(f"cannot write {p}: folder {folder} does not exist")
    try:
        before: os.stat_result | None = os.lstat(p)
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise WriteError(f"cannot write {p}: {exc.strerror or exc}") from exc
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise WriteError(f"cannot write {p}: it is {_what_is(before.st_mode)}, not a regular file; give a new "
                          "file name, or a regular file to replace")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = folder / f".{p.name}.{secrets.token_hex(6)}.part"
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise WriteError(f"cannot write {p}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            if before is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(before.st_mode))
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(f"cannot write {p}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p
