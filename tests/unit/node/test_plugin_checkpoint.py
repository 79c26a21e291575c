"""The checkpoint file: round trip, atomic replacement, and every way it can be unusable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kubedra.node.checkpoint import (
    CheckpointData,
    CheckpointError,
    PreparedClaim,
    PreparedDevice,
    _checksum,
    load_checkpoint,
    read_boot_id,
    save_checkpoint,
)
from kubedra.node.mig import MigInstance, MigPlacement

CLAIM = PreparedClaim(
    uid="9c1e", namespace="ns", name="c", state="PrepareCompleted", boot_id="boot-1",
    prepared_at="2026-11-30T10:00:00Z", devices=[
        PreparedDevice(request_names=["gpu"], pool_name="node-1", device_name="gpu-0",
                       cdi_device_ids=["gpu.kubedra.io/claim=9c1e-gpu-0"]),
        PreparedDevice(request_names=["slice"], pool_name="node-1", device_name="mig-2",
                       cdi_device_ids=["gpu.kubedra.io/claim=9c1e-mig-2"], share_id="s1",
                       mig=MigInstance(placement=MigPlacement(
                           parent_uuid="GPU-1", parent_minor=0, profile_id=19, start=2, size=1),
                           uuid="MIG-1", gpu_instance_id=3, compute_instance_id=0,
                           gpu_instance_cap_minor=30, compute_instance_cap_minor=31))])


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert load_checkpoint(tmp_path / "checkpoint.json") == CheckpointData()


def test_round_trip_and_file_shape(tmp_path: Path) -> None:
    path = tmp_path / "plugin" / "checkpoint.json"
    data = CheckpointData(claims={CLAIM.uid: CLAIM})
    save_checkpoint(path, data)
    assert load_checkpoint(path) == data
    assert os.listdir(path.parent) == ["checkpoint.json"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    document = json.loads(path.read_text())
    assert document["checksum"].startswith("sha256:")
    assert document["data"]["version"] == 1
    assert document["data"]["claims"]["9c1e"]["devices"][1]["shareID"] == "s1"
    assert document["data"]["claims"]["9c1e"]["bootID"] == "boot-1"


def corrupt(path: Path, how: str) -> None:
    save_checkpoint(path, CheckpointData(claims={CLAIM.uid: CLAIM}))
    document = json.loads(path.read_text())
    if how == "truncated":
        path.write_text(path.read_text()[:40])
    elif how == "tampered":
        document["data"]["claims"]["9c1e"]["name"] = "other"
        path.write_text(json.dumps(document))
    elif how == "version":
        document["data"]["version"] = 2
        document["checksum"] = _checksum(document["data"])
        path.write_text(json.dumps(document))
    elif how == "shape":
        path.write_text(json.dumps(["not", "a", "checkpoint"]))
    elif how == "directory":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize(("how", "message"), [
    ("truncated", "not a kubedra checkpoint: Unterminated string"),
    ("tampered", "checksum mismatch"),
    ("version", "version 2, want 1"),
    ("shape", "not a kubedra checkpoint: list indices must be integers or slices, not str"),
    ("directory", "cannot read"),
])
def test_unusable_checkpoint_raises(tmp_path: Path, how: str, message: str) -> None:
    path = tmp_path / "checkpoint.json"
    corrupt(path, how)
    with pytest.raises(CheckpointError) as raised:
        load_checkpoint(path)
    assert message in str(raised.value)


def test_boot_id_is_stripped(tmp_path: Path) -> None:
    (tmp_path / "boot_id").write_text("0f2d6c1e-1111-2222-3333-444455556666\n")
    assert read_boot_id(tmp_path / "boot_id") == "0f2d6c1e-1111-2222-3333-444455556666"
