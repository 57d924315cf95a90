"""ZIP archives built in memory for the import tests."""

from __future__ import annotations

import io
import zipfile


def make_zip(entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A ZIP archive of ``entries`` (member name -> bytes), each name kept exactly as given."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)  # ZipInfo keeps the name as given
            info.compress_type = compression
            zf.writestr(info, data)
    return buf.getvalue()
