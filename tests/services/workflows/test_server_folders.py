"""Which server folders a browser user may have the app read: local or not, the configured root, and typed paths
resolved (links, ``..``) and checked to lie under the root."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.workflows.server_folders import FolderRefused, folder_access, local_only, resolve_inside


@pytest.mark.parametrize("address, ip, headers, local", [
    ("127.0.0.1", None, {}, True),
    ("localhost", None, {"Host": "localhost:8501"}, True),
    ("::1", "::1", [], True),
    ("[::1]", None, [], True),
    ("127.0.0.2", "127.0.0.1", [], True),
    ("", None, {}, False),  # Streamlit's default: every interface
    (None, None, {}, False),
    ("0.0.0.0", None, {}, False),
    ("192.168.1.5", None, {}, False),
    ("my-host.example", None, {}, False),
    ("127.0.0.1", "10.0.0.7", {}, False),  # a remote connection after all
    ("127.0.0.1", None, {"X-Forwarded-For": "203.0.113.9"}, False),  # a reverse proxy on this machine
    ("127.0.0.1", None, ["forwarded"], False),
    ("127.0.0.1", None, ["X-Real-IP"], False),
])
def test_local_only_needs_a_loopback_listener_a_loopback_client_and_no_proxy(address, ip, headers, local) -> None:
    assert local_only(address, ip, headers) is local


def test_folder_access_rules(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "data"
    root.mkdir()
    configured = folder_access(False, {"MRAG_IMPORT_ROOT": str(root)}, home)
    assert configured.root == root and configured.why == f"folders under {root} only (MRAG_IMPORT_ROOT)"
    assert folder_access(True, {"MRAG_IMPORT_ROOT": str(root)}, home).root == root  # set: the root, local or not
    local = folder_access(True, {}, home)
    assert local.root == home and "served on this machine only" in local.why
    off = folder_access(False, {"MRAG_IMPORT_ROOT": "  "}, home)
    assert off.root is None and not off.allowed
    assert off.why.startswith("reading folders on the machine running the app is off, as the app can be reached "
                              "from other machines: an administrator can set MRAG_IMPORT_ROOT")
    missing = folder_access(True, {"MRAG_IMPORT_ROOT": str(tmp_path / "nope")}, home)
    assert missing.root is None and "is not a folder there" in missing.why


def test_typed_paths_are_resolved_and_must_stay_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "legal" / "contract").mkdir(parents=True)
    (tmp_path / "private").mkdir()
    (root / "escape").symlink_to(tmp_path / "private", target_is_directory=True)
    (root / "inside").symlink_to(root / "legal", target_is_directory=True)
    access = folder_access(False, {"MRAG_IMPORT_ROOT": str(root)})
    assert resolve_inside(access, str(root / "legal")) == root / "legal"
    assert resolve_inside(access, "legal") == root / "legal"  # relative: under the root
    assert resolve_inside(access, str(root)) == root
    assert resolve_inside(access, str(root / "inside")) == root / "legal"  # a link that stays inside
    assert resolve_inside(access, str(root / "legal" / "not-yet")) == root / "legal" / "not-yet"
    for typed, resolved in ((str(root / ".." / "private"), tmp_path / "private"),
                            (str(root / "escape"), tmp_path / "private"),
                            ("../private", tmp_path / "private"),
                            ("/etc", Path("/etc").resolve()),
                            (str(tmp_path / "data-other"), tmp_path / "data-other")):
        with pytest.raises(FolderRefused) as exc:
            resolve_inside(access, typed)
        assert str(exc.value).endswith(f"is outside the folder this app may read: folders under {root} only "
                                       "(MRAG_IMPORT_ROOT).")
        assert str(resolved) in str(exc.value)
    off = folder_access(False, {})
    with pytest.raises(FolderRefused, match="^Reading folders on the machine running the app is off"):
        resolve_inside(off, str(root / "legal"))
