"""Capturing a machine into a capture folder, and comparing two inventories.

:func:`write_capture` writes what the live sources read, in the format that
:mod:`kubedra.discovery.recorded` replays, so ``snapshot:<folder>`` of a fresh capture is the
machine's inventory by construction; a capture taken earlier (or elsewhere) checks that the
live NVML code and the replay still agree. ``hack/nvml-live-check.py`` drives both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubedra.api.inventory import DiscoveryResult
from kubedra.discovery.nvml import NvmlSource
from kubedra.discovery.recorded import (
    MIG_PLACEMENTS_FILE,
    NVML_FILE,
    PROC_NVIDIA_FILE,
    SYSFS_PCI_FILE,
)
from kubedra.discovery.sysfs import PciSource


def _proc_nvidia(proc_root: Path) -> dict[str, str]:
    """``/proc/driver/nvidia/version`` and every ``gpus/*/information``, by ``/proc`` path."""
    base = proc_root / "driver" / "nvidia"
    files = [base / "version", *sorted(base.glob("gpus/*/information"))]
    return {"/proc/" + str(path.relative_to(proc_root)): path.read_text()
            for path in files if path.is_file()}


def _mig_placements(document: dict[str, Any]) -> dict[str, Any] | None:
    """``mig_placements.json`` for the first GPU with MIG profiles (the H200 capture's
    format: product name and its profiles with placements), ``None`` if no GPU has any."""
    for device in document.get("devices", []):
        profiles = [profile for profile in device.get("gpu_instance_profiles", [])
                    if "error" not in profile]
        if profiles:
            return {"name": device.get("Name"), "profiles": profiles}
    return None


def write_capture(folder: Path, nvml: NvmlSource, pci: PciSource,
                  proc_root: Path = Path("/proc")) -> list[Path]:
    """Write a capture folder from the sources (only reads the machine).

    Files: ``nvml.json`` (placements inline), ``mig_placements.json`` (when a GPU has MIG
    profiles), ``sysfs_pci.json``, ``proc_nvidia.json`` (empty object without the NVIDIA
    kernel module). The folder is created if needed; files in it are replaced.

    Returns:
        The paths written.

    Raises:
        DiscoveryError: a source cannot be read. OSError: the folder cannot be written.
    """
    document = nvml.document()
    contents: dict[str, Any] = {
        NVML_FILE: document,
        SYSFS_PCI_FILE: pci.records(),
        PROC_NVIDIA_FILE: _proc_nvidia(proc_root),
    }
    placements = _mig_placements(document)
    if placements is not None:
        contents[MIG_PLACEMENTS_FILE] = placements
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in contents.items():
        path = folder / name
        path.write_text(json.dumps(content, indent=1) + "\n")
        written.append(path)
    return written


def differences(expected: DiscoveryResult, actual: DiscoveryResult) -> list[str]:
    """Where two inventories differ, one line each, e.g.
    ``devices.gpu-0.capacity.memory.value: '143771Mi' != '140Gi'``; empty when equal.
    Devices and counter sets are matched by name, so their order does not matter.
    """
    found: list[str] = []
    _compare("", _by_name(expected.to_api()), _by_name(actual.to_api()), found)
    return found


def _by_name(result: dict[str, Any]) -> dict[str, Any]:
    return {key: {item["name"]: item for item in result.get(key, [])}
            for key in ("devices", "counterSets")}


def _compare(path: str, expected: Any, actual: Any, found: list[str]) -> None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual), key=str):
            child = f"{path}.{key}" if path else str(key)
            if key not in actual:
                found.append(f"{child}: only in the first")
            elif key not in expected:
                found.append(f"{child}: only in the second")
            else:
                _compare(child, expected[key], actual[key], found)
    elif expected != actual:
        found.append(f"{path}: {expected!r} != {actual!r}")
