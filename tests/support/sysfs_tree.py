"""Build a sysfs tree on disk (files and relative links, as the kernel lays them out) from
PCI function records, so that tests drive the LIVE sysfs reader."""

from __future__ import annotations

import os
from pathlib import Path

VALUE_FILES = ("vendor", "device", "class", "subsystem_vendor", "subsystem_device", "revision",
               "numa_node")


def build_sysfs(root: Path, records: list[dict[str, str]]) -> Path:
    """Create ``root/devices/…/<address>`` directories with the records' value files, the
    ``root/bus/pci/devices/<address>`` links to them, and ``driver`` and ``iommu_group`` links.

    ``real_path`` (``/sys/devices/…``) says where a function's directory goes; records without
    it go under ``devices/pci0000:00``. Returns ``root``.
    """
    bus = root / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)
    for record in records:
        address = record["address"]
        relative = record.get("real_path", f"/sys/devices/pci0000:00/{address}")
        directory = root / relative.removeprefix("/sys/")
        directory.mkdir(parents=True)
        for name in VALUE_FILES:
            if name in record:
                (directory / name).write_text(record[name] + "\n")
        if "driver" in record:
            driver = root / "bus" / "pci" / "drivers" / record["driver"]
            driver.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(driver, directory), directory / "driver")
        if "iommu_group" in record:
            group = root / "kernel" / "iommu_groups" / record["iommu_group"]
            group.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(group, directory), directory / "iommu_group")
        os.symlink(os.path.relpath(directory, bus), bus / address)
    return root
