"""Hypothesis strategies for capture variants: the real H200 capture (hardware/nvidia-h200)
mutated the ways a different machine, another driver version or a broken capture could
differ — fields missing, odd values of every JSON type, NVML errors where values were, many
GPUs, MIG switched on, MIG profiles and placements changed, files missing or not JSON.

A variant is a dict of file name to content (:data:`GARBAGE` for bytes that are not JSON,
absent for a missing file); :func:`write_variant` writes it as a capture folder for the
``snapshot:<folder>`` discovery backend (issue 13, item 4).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.support.h200 import H200_CAPTURE

CAPTURE_FILES = ("nvml.json", "mig_placements.json", "sysfs_pci.json")
GARBAGE = b"\xff{not json"
"""The content of a capture file that is not JSON (e.g. cut short while copying)."""

ORIGINAL: dict[str, Any] = {name: json.loads((H200_CAPTURE / name).read_text())
                            for name in CAPTURE_FILES}

odd_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, -1, 1, 2**64]),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=80),
    st.sampled_from(["", "x" * 300, "00000000:zz:06.0", "MIG 7g.141gb", "GPU-é"]),
    st.just({"error": "NVMLError_NotSupported: Not Supported"}), st.just({}), st.just([]),
    st.lists(st.integers(-3, 9), max_size=5))
"""Values a field may hold in a broken or unexpected capture."""


def _mutate(record: Any, draw: st.DrawFn, changes: int) -> None:
    """Delete or replace up to ``changes`` keys of ``record`` (a dict) with odd values."""
    if not isinstance(record, dict) or not record:
        return
    for _ in range(draw(st.integers(0, changes))):  # hypothesis favours 0 changes
        key = draw(st.sampled_from(sorted(record)))
        if draw(st.booleans()):
            del record[key]
        else:
            record[key] = draw(odd_values)
        if not record:
            return


@st.composite
def capture_variants(draw: st.DrawFn) -> dict[str, Any]:
    """A capture variant (module docstring): file name to content."""
    nvml = copy.deepcopy(ORIGINAL["nvml.json"])
    placements = copy.deepcopy(ORIGINAL["mig_placements.json"])
    gpu = nvml["devices"][0]
    count = draw(st.sampled_from([0, 1, 1, 2, 8, 40]))
    devices = []
    for index in range(count):
        device = copy.deepcopy(gpu)
        device.update(index=draw(st.sampled_from([index, index, 0, -1, 10**6])),
                      UUID=f"GPU-{index:08d}-fuzz", MinorNumber=index)
        if draw(st.booleans()):
            device["MigMode"] = [1, 1]
        _mutate(device, draw, 2)
        devices.append(device)
    nvml["devices"] = devices
    _mutate(nvml, draw, 1)
    for profile in placements["profiles"]:
        if draw(st.integers(0, 9)) == 9:
            _mutate(profile, draw, 2)
        if draw(st.integers(0, 4)) == 4 and isinstance(profile.get("placements"), list):
            profile["placements"] = draw(st.lists(st.fixed_dictionaries(
                {"start": st.integers(-2, 70), "size": st.integers(-1, 9)}), max_size=4))
    if draw(st.integers(0, 9)) == 9:
        _mutate(placements, draw, 1)
    files: dict[str, Any] = {"nvml.json": nvml, "mig_placements.json": placements,
                             "sysfs_pci.json": copy.deepcopy(ORIGINAL["sysfs_pci.json"])}
    for name in CAPTURE_FILES:
        fate = draw(st.integers(0, 49))  # hypothesis favours 0: no change
        if fate == 49:
            del files[name]
        elif fate == 48:
            files[name] = GARBAGE
        elif fate == 47:
            files[name] = draw(odd_values)
    return files


def write_variant(folder: Path, variant: dict[str, Any]) -> Path:
    """Write ``variant`` as capture folder ``folder`` (created); returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in variant.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(json.dumps(content))
    return folder
