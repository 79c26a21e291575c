"""Atomic file replacement for the node agent's CDI specs and checkpoint."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str, mode: int) -> None:
    """Replace ``path`` with ``text`` so that readers see the old or the new file, never a part:
    write a hidden temporary file (``.<name>.*.tmp``) in the same directory, fsync it, set
    ``mode`` (e.g. ``0o644``), rename it over ``path``. Creates the directory (0755).

    Raises:
        OSError: the directory or file cannot be written (the temporary file is removed).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
