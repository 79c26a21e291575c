"""Write the image names of a ``docker save`` archive in full: ``python3 qualify-archive.py TAR``.

``docker save`` writes Docker Hub names short (``kindest/kindnetd:v1``), but ``kind build
node-image`` compares the archive's names with the full ones it needs
(``docker.io/kindest/kindnetd:v1``) and pulls those it does not find. Rewrites
``manifest.json``'s ``RepoTags`` (and ``repositories``) in place, in full
(``docker.io/`` and, for one-part names, ``library/``).
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path


def qualified(name: str) -> str:
    """``name`` with Docker Hub's domain (and ``library/``) when it has no registry."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return name
    return f"docker.io/{name}" if rest else f"docker.io/library/{name}"


def main(path: Path) -> None:
    """Rewrite the archive at ``path`` (see the module docstring)."""
    with tarfile.open(path) as archive:
        members = [(m, archive.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
                   for m in archive.getmembers()]
    out = path.with_suffix(".qualified")
    with tarfile.open(out, "w") as archive:
        for member, data in members:
            if member.name == "manifest.json" and data is not None:
                manifest = json.loads(data)
                for entry in manifest:
                    entry["RepoTags"] = [qualified(t) for t in entry.get("RepoTags") or []]
                data = json.dumps(manifest).encode()
            elif member.name == "repositories" and data is not None:
                data = json.dumps({qualified(k): v for k, v in json.loads(data).items()}).encode()
            if data is not None:
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
            else:
                archive.addfile(member)
    out.replace(path)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
