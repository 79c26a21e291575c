"""The ``pci`` backend: every PCI function that passes the vendor and class filters.

Device names are DNS labels made from the address: ``0000:00:06.0`` becomes
``pci-0000-00-06-0``. Attributes (unqualified names belong to the inventory's driver,
``pci.kubedra.io``): ``vendorID``, ``deviceID``, ``classCode``, ``subsystemVendorID``,
``subsystemDeviceID``, ``revision`` (sysfs' hex text, e.g. ``0x10de``), ``driver`` (the bound
kernel driver; absent when none is bound), ``iommuGroup`` (int, when the kernel has one), and
the standard ``resource.kubernetes.io/pciBusID``, ``pcieRoot`` and ``numaNode``
(:func:`~kubedra.discovery.sysfs.standard_attributes`). No capacity, no counters.
"""

from __future__ import annotations

from pydantic import ValidationError

from kubedra.api.inventory import DiscoveryResult, InventoryDevice, PCIDiscovery
from kubedra.api.resource import DeviceAttribute
from kubedra.api.validation import model_rejections
from kubedra.discovery.sysfs import PciFunction, standard_attributes

_HEX_ATTRIBUTES = {
    "vendorID": "vendor",
    "deviceID": "device",
    "classCode": "class_code",
    "subsystemVendorID": "subsystem_vendor",
    "subsystemDeviceID": "subsystem_device",
    "revision": "revision",
}


def pci_device_name(address: str) -> str:
    """The device name for a PCI address: ``pci-`` and the address with ``:``/``.`` as ``-``."""
    return "pci-" + address.lower().replace(":", "-").replace(".", "-")


def _hex_id(text: str) -> str:
    """``10DE`` or ``0x10de`` → ``0x10de``: how sysfs writes IDs."""
    text = text.strip().lower()
    return text if text.startswith("0x") else "0x" + text


def matches(function: PciFunction, settings: PCIDiscovery | None) -> bool:
    """Whether a function passes the filters: its vendor is one of ``vendors`` and its class
    starts with one of ``classes`` (hex, ``0x`` optional, any case); an empty filter passes all.
    """
    if settings is None:
        return True
    if settings.vendors and _hex_id(function.vendor) not in {_hex_id(v) for v in settings.vendors}:
        return False
    return not settings.classes or any(
        _hex_id(function.class_code).startswith(_hex_id(prefix)) for prefix in settings.classes)


def pci_device(function: PciFunction) -> InventoryDevice:
    """The inventory device for one PCI function (attributes in the module docstring)."""
    attributes: dict[str, DeviceAttribute] = {}
    for name, field in _HEX_ATTRIBUTES.items():
        value = getattr(function, field)
        if value is not None:
            attributes[name] = DeviceAttribute(string_value=value)
    if function.driver is not None:
        attributes["driver"] = DeviceAttribute(string_value=function.driver)
    if function.iommu_group is not None:
        attributes["iommuGroup"] = DeviceAttribute(int_value=function.iommu_group)
    attributes.update(standard_attributes(function.address, function))
    return InventoryDevice(name=pci_device_name(function.address), attributes=attributes)


def pci_inventory(functions: list[PciFunction], settings: PCIDiscovery | None) -> DiscoveryResult:
    """The ``pci`` backend's result: one device per function that :func:`matches`, in address
    order; no counter sets. A function whose device the models refuse is left out, in
    ``rejected``."""
    result = DiscoveryResult()
    for function in functions:
        if not matches(function, settings):
            continue
        try:
            result.devices.append(pci_device(function))
        except ValidationError as err:  # one function's bad value never costs the others
            result.rejected += model_rejections(pci_device_name(function.address), err)
    return result
