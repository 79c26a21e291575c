"""PCI functions as Linux sysfs shows them, read live or replayed from a capture.

Both the ``pci`` backend and the NVIDIA backends read PCI facts through one narrow interface,
:class:`PciSource`: it returns one *record* per PCI function, a flat ``dict[str, str]`` in the
format of a capture's ``sysfs_pci.json`` (keys are sysfs file names, values are the files'
stripped text). :class:`LiveSysfs` builds the records from a sysfs root;
:class:`kubedra.discovery.recorded.RecordedSysfs` loads them from a capture. Everything after
that (:func:`parse_pci_functions` and :class:`PciFunction`) is the same code for both.

The standard attributes follow ``k8s.io/dynamic-resource-allocation/deviceattribute``
(v0.37.2): ``pci_linux.go`` (pciBusID, pcieRoot) and ``numa_linux.go`` (numaNode).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kubedra.api.resource import DeviceAttribute
from kubedra.discovery.errors import DiscoveryError

PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
"""Standard attribute: the extended BDF address ``dddd:bb:dd.f`` (``deviceattribute``)."""
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
"""Standard attribute: the PCIe root complex ``pci<domain>:<bus>`` (``deviceattribute``)."""
NUMA_NODE = "resource.kubernetes.io/numaNode"
"""Standard attribute: the physical NUMA node; never published for ``numa_node`` -1."""

SYSFS_MOUNT = "/sys"
"""Where ``real_path`` in a record is rooted, whatever sysfs root it was read from."""

# upstream's verifyPCIBDFFormat: lower-case hex, four-digit domain
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")
_VALUE_FILES = ("vendor", "device", "class", "subsystem_vendor", "subsystem_device", "revision",
                "numa_node")
_LINK_FILES = ("driver", "iommu_group")


class PciSource(Protocol):
    """Where PCI function records come from (live sysfs or a capture)."""

    def records(self) -> list[dict[str, str]]:
        """One record per PCI function, keyed as in ``sysfs_pci.json``.

        Raises:
            DiscoveryError: the source cannot be read.
        """
        ...


class PciFunction(BaseModel):
    """One PCI function, parsed from a record.

    ``vendor``, ``device`` and ``class_code`` keep sysfs' text (``0x10de``, ``0x030200``);
    ``real_path`` is the function's directory under ``/sys/devices`` (the resolved link
    ``/sys/bus/pci/devices/<address>``), absent if it could not be read.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    address: str
    vendor: str
    device: str
    class_code: str = Field(alias="class")
    subsystem_vendor: str | None = None
    subsystem_device: str | None = None
    revision: str | None = None
    numa_node: int | None = None
    driver: str | None = None
    iommu_group: int | None = None
    real_path: str | None = None

    def numa(self) -> int | None:
        """The NUMA node, or ``None`` when sysfs says -1 (no affinity) or nothing."""
        if self.numa_node is None or self.numa_node < 0:
            return None
        return self.numa_node

    def pcie_root(self) -> str | None:
        """The PCIe root complex (``pci0000:00``), or ``None`` if the path does not show one.

        Rule of ``resolvePCIeRoot`` in upstream ``deviceattribute/pci_linux.go``: the function's
        path must be ``/sys/devices/pci<root>/…/<address>``; the root is the first component
        below ``/sys/devices``.
        """
        prefix = f"{SYSFS_MOUNT}/devices/"
        if self.real_path is None or not self.real_path.startswith(prefix + "pci"):
            return None
        parts = self.real_path[len(prefix):].split("/")
        return parts[0] if parts[-1] == self.address else None


def standard_attributes(address: str, function: PciFunction | None) -> dict[str, DeviceAttribute]:
    """``resource.kubernetes.io/`` pciBusID, pcieRoot and numaNode of a PCI address.

    pciBusID needs only the address; pcieRoot and numaNode need its sysfs record
    (``function``), each where known. Nothing for an address that is not extended BDF
    (upstream's helpers refuse those).
    """
    if _BDF.match(address) is None:
        return {}
    attributes = {PCI_BUS_ID: DeviceAttribute(string_value=address)}
    root = function.pcie_root() if function is not None else None
    if root is not None:
        attributes[PCIE_ROOT] = DeviceAttribute(string_value=root)
    numa = function.numa() if function is not None else None
    if numa is not None:
        attributes[NUMA_NODE] = DeviceAttribute(int_value=numa)
    return attributes


def parse_pci_functions(records: list[dict[str, str]]) -> list[PciFunction]:
    """Parse records from a :class:`PciSource`, sorted by address.

    Raises:
        DiscoveryError: a record lacks ``address``, ``vendor``, ``device`` or ``class``, or its
            ``numa_node`` or ``iommu_group`` is not an integer.
    """
    try:
        functions = [PciFunction.model_validate(record) for record in records]
    except ValidationError as err:
        raise DiscoveryError(f"malformed PCI function record: {err}") from err
    return sorted(functions, key=lambda function: function.address)


class LiveSysfs:
    """PCI function records read from ``<root>/bus/pci/devices`` (root ``/sys`` on a node).

    Each record holds the value files in ``_VALUE_FILES`` that exist, the base names of the
    ``driver`` and ``iommu_group`` links, and ``real_path``: the device link resolved the way
    upstream's ``resolvePCIeRoot`` does (read the link, join it to ``bus/pci/devices``), written
    as seen from ``/sys`` so that a capture taken with any root reads the same.
    """

    def __init__(self, root: Path = Path(SYSFS_MOUNT)) -> None:
        self.root = root

    def records(self) -> list[dict[str, str]]:
        """Records of every PCI function, in directory order sorted by address.

        A function that disappears while being read (hot unplug) is left out.

        Raises:
            DiscoveryError: ``<root>/bus/pci/devices`` cannot be listed.
        """
        devices = self.root / "bus" / "pci" / "devices"
        try:
            addresses = sorted(os.listdir(devices))
        except OSError as err:
            raise DiscoveryError(f"cannot list PCI functions in {devices}: {err}") from err
        records = []
        for address in addresses:
            record = self._record(devices, address)
            if record is not None:
                records.append(record)
        return records

    @staticmethod
    def _record(devices: Path, address: str) -> dict[str, str] | None:
        try:
            target = os.readlink(devices / address)
        except OSError:
            return None
        joined = os.path.normpath(os.path.join("bus", "pci", "devices", target))
        record = {"address": address,
                  "real_path": joined if os.path.isabs(joined) else f"{SYSFS_MOUNT}/{joined}"}
        for name in _VALUE_FILES:
            try:
                record[name] = (devices / address / name).read_text().strip()
            except OSError:
                continue
        for name in _LINK_FILES:
            try:
                record[name] = os.path.basename(os.readlink(devices / address / name))
            except OSError:
                continue
        return record
