"""The real node's OCI image archives (e2e/harness/images.py): a valid OCI image layout whose
blobs match their digests, named for containerd, with the busybox layer the images run."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from e2e.harness.images import (
    APPLETS,
    PAUSE_IMAGE,
    TEST_IMAGE,
    busybox_layer,
    write_node_images,
)


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()  # type: ignore[union-attr]
                if m.isfile()}


def _blob(files: dict[str, bytes], ref: dict[str, Any]) -> bytes:
    data = files[f"blobs/sha256/{ref['digest'].removeprefix('sha256:')}"]
    assert len(data) == ref["size"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == ref["digest"]
    return data


def test_archive_is_an_oci_layout_with_both_images(tmp_path: Path) -> None:
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"\x7fELF fake busybox")
    archive = tmp_path / "images.tar"
    assert write_node_images(archive, busybox) == [PAUSE_IMAGE, TEST_IMAGE]
    files = _members(archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads(files["index.json"])
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    images = {}
    for entry in index["manifests"]:
        assert entry["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        name = entry["annotations"]["io.containerd.image.name"]
        assert entry["annotations"]["org.opencontainers.image.ref.name"] == "busybox"
        manifest = json.loads(_blob(files, entry))
        config = json.loads(_blob(files, manifest["config"]))
        [layer] = manifest["layers"]
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar"
        assert config["rootfs"] == {"type": "layers", "diff_ids": [layer["digest"]]}
        assert (config["os"], config["architecture"]) == ("linux", "amd64")
        images[name] = (config["config"]["Entrypoint"], _blob(files, layer))
    assert images[PAUSE_IMAGE][0] == ["/bin/sleep", "2147483647"]
    assert images[TEST_IMAGE][0] == ["/bin/sh", "-c"]
    assert images[PAUSE_IMAGE][1] == images[TEST_IMAGE][1] == busybox_layer(busybox)


def test_layer_holds_busybox_and_its_applets(tmp_path: Path) -> None:
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"binary")
    layer = busybox_layer(busybox)
    assert layer == busybox_layer(busybox)  # deterministic: same digest every time
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile(members["bin/busybox"]).read() == b"binary"  # type: ignore[union-attr]
    assert members["bin/busybox"].mode == 0o755
    assert {n: m.linkname for n, m in members.items() if m.issym()} == {
        f"bin/{applet}": "busybox" for applet in APPLETS}
    assert {n for n, m in members.items() if m.isdir()} == {
        "bin", "dev", "etc", "proc", "sys", "tmp"}
    assert {m.mtime for m in members.values()} == {0}
