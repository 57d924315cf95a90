"""Whether this Streamlit session is served on this machine only, and so which server folders it may read
(:mod:`services.workflows.server_folders` decides; this module only asks Streamlit)."""

from __future__ import annotations

import streamlit as st
from streamlit import config

from services.workflows.server_folders import FolderAccess, folder_access, local_only


def served_locally() -> bool:
    """This session's request came to a server that listens on a loopback address only, from a loopback address,
    without a proxy's headers (:func:`~services.workflows.server_folders.local_only`)."""
    try:
        headers = list(st.context.headers.keys())
        client_ip = st.context.ip_address
    except Exception:  # noqa: BLE001 - no request context (a bare script run): no request says otherwise
        headers, client_ip = [], None
    if not isinstance(client_ip, str):  # None: a loopback connection; anything else: no connection (AppTest)
        client_ip = None
    return local_only(config.get_option("server.address"), client_ip, headers)


def server_folder_access() -> FolderAccess:
    """The folders on the machine running the app that this session may have it read."""
    return folder_access(served_locally())
