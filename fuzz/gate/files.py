"""Report files written atomically (temp file in the same folder, fsync, rename), so a CI job that reads a
report never sees half of one, and a gate killed mid-write leaves the previous report intact."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically, with the mode a plain ``open`` would give (0o666 less the umask)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def check_writable(folder: Path) -> str | None:
    """``None`` if reports can be written into ``folder`` (created if missing), else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"cannot create {folder}: {e.strerror or e}"
    if not folder.is_dir():
        return f"{folder} is not a directory"
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".kvwindow-gate-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"cannot write into {folder}: {e.strerror or e}"
    return None
