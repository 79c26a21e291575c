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

from kubedra.discovery.errors import DiscoveryError

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
                exists and is not JSON.
        """
        document: dict[str, Any] = read_capture_file(self.folder, NVML_FILE)
        if (self.folder / MIG_PLACEMENTS_FILE).exists():
            _fill_placements(document, read_capture_file(self.folder, MIG_PLACEMENTS_FILE))
        return document


def _fill_placements(document: dict[str, Any], placements: dict[str, Any]) -> None:
    """Copy placements by profile id into the profiles of devices named ``placements["name"]``
    whose placements are not a list (the H200 capture recorded a call error there)."""
    by_id = {profile["id"]: profile["placements"] for profile in placements.get("profiles", [])}
    for device in document.get("devices", []):
        if device.get("Name") != placements.get("name"):
            continue
        for profile in device.get("gpu_instance_profiles", []):
            if not isinstance(profile.get("placements"), list) and profile.get("id") in by_id:
                profile["placements"] = by_id[profile["id"]]
