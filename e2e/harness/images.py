"""Container images for a real node without a registry: OCI image-layout archives.

No registry is reachable from the test machines, so the node's images are written here and
imported into its containerd (``ctr -n k8s.io images import``). Both images share one layer:
a static busybox (Debian's ``busybox-static``, installed by ``hack/build-node-binaries.sh``)
as ``/bin/busybox`` with links for the applets the tests use.

- :data:`PAUSE_IMAGE` is containerd's sandbox ("pause") image: ``sleep`` forever (containerd
  stops a sandbox with SIGKILL, so PID 1 needs no signal handling).
- :data:`TEST_IMAGE` runs whatever command a pod gives it, with a shell.

Pods use ``imagePullPolicy: Never``; the names use the reserved ``.invalid`` domain so nothing
could ever be pulled for them. Archive layout (OCI image-layout 1.0.0): ``oci-layout``,
``index.json`` (one manifest per image, named by the ``io.containerd.image.name`` and
``org.opencontainers.image.ref.name`` annotations) and ``blobs/sha256/<digest>`` (uncompressed
layer tar, image config, manifest). Everything is deterministic: the same busybox gives the
same digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUSYBOX = Path("/bin/busybox")
"""Where Debian's busybox-static puts its binary."""
PAUSE_IMAGE = "kubedra.invalid/pause:busybox"
TEST_IMAGE = "kubedra.invalid/shell:busybox"
APPLETS = ("sh", "sleep", "cat", "ls", "env", "echo", "grep", "sort", "stat", "test", "true",
           "tr", "cut", "date")
"""The busybox applets linked into ``/bin``."""
_MEDIA = "application/vnd.oci.image"


@dataclass(frozen=True)
class Image:
    """One image of an archive: its name, entrypoint and environment."""

    name: str
    entrypoint: list[str]
    env: tuple[str, ...] = ("PATH=/bin",)


def busybox_layer(busybox: Path = BUSYBOX) -> bytes:
    """An uncompressed layer tar: ``/bin/busybox``, its applet links, and empty ``/dev``,
    ``/proc``, ``/sys``, ``/etc``, ``/tmp`` (modes as on a Linux root; owner root; mtime 0).

    Raises:
        FileNotFoundError: ``busybox`` does not exist (install ``busybox-static``).
    """
    data = busybox.read_bytes()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mode in (("bin", 0o755), ("dev", 0o755), ("etc", 0o755), ("proc", 0o555),
                           ("sys", 0o555), ("tmp", 0o1777)):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(link)
    return out.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": digest, "size": len(data)}


def write_oci_archive(path: Path, images: list[Image], layer: bytes) -> None:
    """Write ``images``, each of the single ``layer``, as one OCI image-layout tar at ``path``
    (amd64, linux).

    Raises:
        OSError: ``path`` cannot be written.
    """
    blobs: dict[str, bytes] = {}
    layer_ref = _blob(blobs, layer) | {"mediaType": f"{_MEDIA}.layer.v1.tar"}
    manifests = []
    for image in images:
        config = {"architecture": "amd64", "os": "linux",
                  "config": {"Entrypoint": image.entrypoint, "Env": list(image.env),
                             "WorkingDir": "/"},
                  "rootfs": {"type": "layers", "diff_ids": [layer_ref["digest"]]}}
        manifest = {"schemaVersion": 2, "mediaType": f"{_MEDIA}.manifest.v1+json",
                    "config": _blob(blobs, _json(config)) | {
                        "mediaType": f"{_MEDIA}.config.v1+json"},
                    "layers": [layer_ref]}
        manifests.append(_blob(blobs, _json(manifest)) | {
            "mediaType": f"{_MEDIA}.manifest.v1+json",
            "annotations": {"io.containerd.image.name": image.name,
                            "org.opencontainers.image.ref.name": image.name.rsplit(":", 1)[1]}})
    index = {"schemaVersion": 2, "mediaType": f"{_MEDIA}.index.v1+json", "manifests": manifests}
    files = {"oci-layout": _json({"imageLayoutVersion": "1.0.0"}), "index.json": _json(index)}
    files |= {f"blobs/sha256/{d.removeprefix('sha256:')}": data for d, data in blobs.items()}
    with tarfile.open(path, "w") as tar:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_node_images(path: Path, busybox: Path = BUSYBOX) -> list[str]:
    """Write the pause and test images (:data:`PAUSE_IMAGE`, :data:`TEST_IMAGE`) to the
    archive ``path``; returns their names.

    Raises:
        FileNotFoundError: no static busybox at ``busybox``.
    """
    images = [Image(PAUSE_IMAGE, ["/bin/sleep", "2147483647"]),
              Image(TEST_IMAGE, ["/bin/sh", "-c"])]
    write_oci_archive(path, images, busybox_layer(busybox))
    return [image.name for image in images]
