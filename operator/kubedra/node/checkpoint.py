"""The plugin's checkpoint: which claims this node prepared, kept on disk across restarts.

The kubelet may call NodeUnprepareResources after the agent restarted, or after the claim was
deleted, so everything unprepare needs (CDI spec, MIG instances) is recorded at prepare time in
``<plugin data dir>/checkpoint.json``. Each claim records the boot it was prepared in (from
``/proc/sys/kernel/random/boot_id``): after a reboot ``/var/run/cdi`` is empty and MIG
instances are gone, so a repeated prepare does the work again instead of answering from the
checkpoint. A claim is ``PrepareStarted`` before any side effect and ``PrepareCompleted`` when
its CDI spec and status are written, so a crash in between is redone on the next call.

File format (JSON)::

    {"checksum": "sha256:<hex of the canonical JSON of data>",
     "data": {"version": 1, "claims": {"<claim UID>": PreparedClaim, ...}}}

A file that cannot be read, parsed or whose checksum does not match raises
:class:`CheckpointError`; the caller rebuilds the state (see :mod:`kubedra.node.prepare`).
Writes are atomic (temporary file, fsync, rename).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from kubedra.api.base import KubeModel
from kubedra.node.files import write_atomically
from kubedra.node.mig import MigInstance
from kubedra.settings import DEFAULT_BOOT_ID_PATH

CHECKPOINT_VERSION = 1
CHECKPOINT_FILE = "checkpoint.json"

ClaimState = Literal["PrepareStarted", "PrepareCompleted"]


class CheckpointError(Exception):
    """The checkpoint file is unreadable, not JSON, of another version, or fails its checksum."""


class PreparedDevice(KubeModel):
    """One device prepared for a claim, as returned to the kubelet, plus its MIG instance."""

    request_names: list[str]
    pool_name: str
    device_name: str
    cdi_device_ids: list[str] = Field(alias="cdiDeviceIDs")
    share_id: str | None = Field(default=None, alias="shareID")
    mig: MigInstance | None = None


class PreparedClaim(KubeModel):
    """A claim this node prepared (or began to prepare) in boot ``boot_id``."""

    uid: str
    namespace: str
    name: str
    state: ClaimState
    boot_id: str = Field(alias="bootID")
    devices: list[PreparedDevice] = Field(default_factory=list)
    prepared_at: str | None = Field(default=None, description="RFC 3339 time of completion.")


class CheckpointData(KubeModel):
    """The checksummed content of the file."""

    version: int = CHECKPOINT_VERSION
    claims: dict[str, PreparedClaim] = Field(default_factory=dict)


def read_boot_id(path: Path = DEFAULT_BOOT_ID_PATH) -> str:
    """The kernel's boot ID (a UUID that changes on every boot).

    Raises:
        OSError: the file cannot be read.
    """
    return path.read_text().strip()


def _checksum(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def load_checkpoint(path: Path) -> CheckpointData:
    """Read the checkpoint at ``path``; a missing file is an empty checkpoint.

    Raises:
        CheckpointError: unreadable, not JSON, wrong shape or version, or checksum mismatch.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return CheckpointData()
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err}") from err
    try:
        document = json.loads(raw)
        data = document["data"]
        if document["checksum"] != _checksum(data):
            raise CheckpointError(f"{path}: checksum mismatch")
        checkpoint = CheckpointData.from_api(data)
    except (ValueError, KeyError, TypeError) as err:
        reason = err.errors()[0]["msg"] if isinstance(err, ValidationError) else str(err)
        raise CheckpointError(f"{path}: not a kubedra checkpoint: {reason}") from err
    if checkpoint.version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: version {checkpoint.version}, want {CHECKPOINT_VERSION}")
    return checkpoint


def save_checkpoint(path: Path, checkpoint: CheckpointData) -> None:
    """Write ``checkpoint`` atomically (0600), creating the directory.

    Raises:
        OSError: the file cannot be written.
    """
    data = checkpoint.to_api()
    document = json.dumps({"checksum": _checksum(data), "data": data}, sort_keys=True)
    write_atomically(path, document, 0o600)
