"""Recorded sources: a capture folder replayed through the same parsing as the live machine.

A capture folder (``../shared/hardware/nvidia-h200/`` is one; ``hack/nvml-live-check.py
capture`` writes more) holds:

- ``nvml.json``: the NVML document (:mod:`kubedra.discovery.nvml`);
- ``mig_placements.json``: ``{"name": <product>, "profiles": [{"id", "placements": [{start,
  size}]}, …]}``, the possible placements of every MIG profile of one GPU model. Placements
  written inline in ``nvml.json`` win; otherwise a device whose ``Name`` equals ``name`` takes
  its profiles' placements from here (the H200 capture records them only here);
- ``sysfs_pci.json``: the PCI function records (:mod:`kubedra.discovery.sysfs`);
- ``proc_nvidia.json``: ``/proc/driver/nvidia`` files by path, for people; nothing reads it,
  NVML reports the same facts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from kubedra.discovery.errors import DiscoveryError
from kubedra.discovery.nvml import Placement

NVML_FILE = "nvml.json"
MIG_PLACEMENTS_FILE = "mig_placements.json"
SYSFS_PCI_FILE = "sysfs_pci.json"
PROC_NVIDIA_FILE = "proc_nvidia.json"


def read_capture_file(folder: Path, name: str) -> Any:
    """The JSON content of ``folder/name``.

    Raises:
        DiscoveryError: the file is missing or not JSON.
    """
    path = folder / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DiscoveryError(f"cannot read capture file {path}: {err}") from err


class RecordedSysfs:
    """:class:`~kubedra.discovery.sysfs.PciSource` replaying ``sysfs_pci.json``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def records(self) -> list[dict[str, str]]:
        """The recorded PCI function records.

        Raises:
            DiscoveryError: the file is missing, not JSON, or not a list.
        """
        records = read_capture_file(self.folder, SYSFS_PCI_FILE)
        if not isinstance(records, list):
            raise DiscoveryError(f"{self.folder / SYSFS_PCI_FILE} must hold a JSON list")
        return records


class RecordedNvml:
    """:class:`~kubedra.discovery.nvml.NvmlSource` replaying ``nvml.json`` (and
    ``mig_placements.json`` where the placements are not inline)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def document(self) -> dict[str, Any]:
        """The recorded NVML document with placements inline.

        Raises:
            DiscoveryError: ``nvml.json`` is missing or not JSON, or ``mig_placements.json``
                exists and is not JSON or not of its shape (module docstring).
        """
        document: dict[str, Any] = read_capture_file(self.folder, NVML_FILE)
        if (self.folder / MIG_PLACEMENTS_FILE).exists():
            path = self.folder / MIG_PLACEMENTS_FILE
            try:
                placements = _PlacementsFile.model_validate(
                    read_capture_file(self.folder, MIG_PLACEMENTS_FILE))
            except ValidationError as err:
                raise DiscoveryError(f"malformed capture file {path}: {err}") from err
            _fill_placements(document, placements)
        return document


class _Profile(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int
    placements: list[Placement]


class _PlacementsFile(BaseModel):
    """``mig_placements.json``: the product name and its profiles' placements."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    profiles: list[_Profile]


def _fill_placements(document: Any, placements: _PlacementsFile) -> None:
    """Copy placements by profile id into the profiles of devices named ``placements.name``
    whose placements are not a list (the H200 capture recorded a call error there). Parts of
    ``document`` that are not of the ``nvml.json`` shape are left for
    :func:`~kubedra.discovery.nvml.parse_nvml` to report."""
    by_id = {profile.id: [p.model_dump() for p in profile.placements]
             for profile in placements.profiles}
    devices = document.get("devices") if isinstance(document, dict) else None
    for device in devices if isinstance(devices, list) else ():
        if not isinstance(device, dict) or device.get("Name") != placements.name:
            continue
        profiles = device.get("gpu_instance_profiles")
        for profile in profiles if isinstance(profiles, list) else ():
            if (isinstance(profile, dict) and not isinstance(profile.get("placements"), list)
                    and isinstance(profile.get("id"), int) and profile["id"] in by_id):
                profile["placements"] = by_id[profile["id"]]
