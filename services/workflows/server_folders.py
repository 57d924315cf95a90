"""Which folders of the machine running the app a browser user may have the app read (the Corpus Import page's
"A folder on the machine running the app", the Index page's local model folder).

Anyone who can open the app can type a path; the app reads it with the server's permissions. So:

* ``MRAG_IMPORT_ROOT`` set: only folders (and archives) under that folder can be read, whoever asks.
* not set, and the app is served on this machine only (:func:`local_only`): folders under the home folder of the
  user running the app (what that user could open anyway, without the rest of the system: /etc, other users).
* not set, and the app can be reached from other machines: reading server folders is off.

A typed path is resolved before it is checked (:func:`resolve_inside`): ``~`` expanded, a relative path taken
under the root, every symbolic link and ``..`` resolved, so ``root/../etc`` or a link under the root pointing
elsewhere is refused. The readers then skip symbolic links inside the folder (``read_text_folder``, the topic
layout), so a link placed under the root cannot lead outside it either. Someone who can write inside the root and
swaps a checked folder for a link between the check and the read could still redirect one read: the root is for
folders such users do not control.

How the app knows it is served on this machine only (:func:`local_only`, given what Streamlit reports): the server
listens on a loopback address only (Streamlit's ``server.address`` is ``127.0.0.1``, ``::1`` or ``localhost``;
Streamlit's default, empty, listens on every interface), the connection comes from a loopback address, and the
request carries no proxy header (``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``, ``X-Forwarded-Host``): a
reverse proxy on this machine that forwards other machines' requests to 127.0.0.1 and sets none of them cannot be
told apart, so behind such a proxy set ``MRAG_IMPORT_ROOT``. No Streamlit here: ``ui.server_scope`` asks it.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENV_IMPORT_ROOT", "FolderAccess", "FolderRefused", "PROXY_HEADERS", "folder_access", "local_only",
           "resolve_inside"]

ENV_IMPORT_ROOT = "MRAG_IMPORT_ROOT"
PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip", "x-forwarded-host")
"""Request headers a reverse proxy adds: a request that has one came from elsewhere."""


class FolderRefused(ValueError):
    """A path the app will not read: outside the root, or reading server folders is off. The message says why."""


@dataclass(frozen=True)
class FolderAccess:
    """What may be read: folders under ``root`` (resolved), or nothing when ``root`` is None. ``why`` says it in
    words for the page (which root and where it comes from, or why reading is off and how to turn it on)."""

    root: Path | None
    why: str

    @property
    def allowed(self) -> bool:
        return self.root is not None


def _loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_only(server_address: str | None, client_ip: str | None, headers: Mapping[str, str] | Iterable[str]) -> bool:
    """Whether the app is served on this machine only: it listens on a loopback ``server_address`` (empty or
    None: every interface, not local), the connection's ``client_ip`` is loopback or unknown (Streamlit reports
    None for a loopback one), and none of the request's ``headers`` (names, any case) is a proxy's."""
    if not server_address or not _loopback(server_address):
        return False
    if client_ip is not None and not _loopback(client_ip):
        return False
    return not any(str(name).lower() in PROXY_HEADERS for name in headers)


def folder_access(is_local: bool, env: Mapping[str, str] | None = None, home: Path | None = None) -> FolderAccess:
    """The folders a browser user may have the app read (see the module docstring): ``env``'s
    ``MRAG_IMPORT_ROOT`` (default ``os.environ``) when set, else the home folder (``home``, default
    ``Path.home()``) when ``is_local``, else none."""
    env = os.environ if env is None else env
    configured = (env.get(ENV_IMPORT_ROOT) or "").strip()
    if configured:
        root = Path(configured).expanduser().resolve()
        if not root.is_dir():
            return FolderAccess(None, f"reading folders on the machine running the app is off: {ENV_IMPORT_ROOT} "
                                      f"({configured}) is not a folder there")
        return FolderAccess(root, f"folders under {root} only ({ENV_IMPORT_ROOT})")
    if is_local:
        root = (home or Path.home()).resolve()
        return FolderAccess(root, f"folders under {root} only (the home folder of the user running the app, as it "
                                  f"is served on this machine only; set {ENV_IMPORT_ROOT} to choose another folder)")
    return FolderAccess(None, "reading folders on the machine running the app is off, as the app can be reached "
                              f"from other machines: an administrator can set {ENV_IMPORT_ROOT} to the folder whose "
                              "contents the app may read")


def resolve_inside(access: FolderAccess, typed: str) -> Path:
    """The path ``typed`` (``~`` expanded; a relative path is taken under the root) with every symbolic link and
    ``..`` resolved, when it lies under ``access.root`` (or is the root); raises :class:`FolderRefused` saying why
    not. The path need not exist (the reader then says it is not found)."""
    if access.root is None:
        raise FolderRefused(access.why[:1].upper() + access.why[1:])
    path = Path(typed.strip()).expanduser()
    if not path.is_absolute():
        path = access.root / path
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise FolderRefused(f"{typed.strip()} cannot be resolved ({exc}).") from None
    if resolved != access.root and access.root not in resolved.parents:
        shown = typed.strip() if str(resolved) == typed.strip() else f"{typed.strip()} (that is, {resolved})"
        raise FolderRefused(f"{shown} is outside the folder this app may read: {access.why}.")
    return resolved
