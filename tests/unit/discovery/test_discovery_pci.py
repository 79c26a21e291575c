"""The pci backend: live sysfs reading (a built tree and this machine's own /sys), the H200
capture replayed through the same parsing, filters, and the standard attributes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubedra.api.inventory import DiscoverySettings, PCIDiscovery
from kubedra.discovery import DiscoveryError, discover
from kubedra.discovery.pci import pci_device_name, pci_inventory
from kubedra.discovery.recorded import RecordedSysfs
from kubedra.discovery.sysfs import LiveSysfs, PciFunction, parse_pci_functions
from tests.support.sysfs_tree import build_sysfs

H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"
SYS = Path("/sys")

NIC = {"address": "0000:3b:00.1", "vendor": "0x15b3", "device": "0x101d", "class": "0x020000",
       "subsystem_vendor": "0x15b3", "subsystem_device": "0x0043", "revision": "0x00",
       "numa_node": "1", "driver": "mlx5_core", "iommu_group": "42",
       "real_path": "/sys/devices/pci0000:3a/0000:3a:02.0/0000:3b:00.1"}
UNBOUND = {"address": "0000:00:1f.3", "vendor": "0x8086", "device": "0x7a50",
           "class": "0x040300", "numa_node": "-1"}


def test_live_sysfs_reads_what_the_kernel_lays_out(tmp_path: Path) -> None:
    root = build_sysfs(tmp_path, [NIC, UNBOUND])
    assert LiveSysfs(root).records() == [
        {**UNBOUND, "real_path": "/sys/devices/pci0000:00/0000:00:1f.3"},
        NIC,
    ]


def test_pci_devices_from_a_live_tree(tmp_path: Path) -> None:
    result = discover("pci", DiscoverySettings(), build_sysfs(tmp_path, [NIC, UNBOUND]))
    assert result.to_api() == {"devices": [
        {"name": "pci-0000-00-1f-3",
         "attributes": {
             "vendorID": {"string": "0x8086"},
             "deviceID": {"string": "0x7a50"},
             "classCode": {"string": "0x040300"},
             "resource.kubernetes.io/pciBusID": {"string": "0000:00:1f.3"},
             "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
         },
         "capacity": {}, "health": "Healthy"},
        {"name": "pci-0000-3b-00-1",
         "attributes": {
             "vendorID": {"string": "0x15b3"},
             "deviceID": {"string": "0x101d"},
             "classCode": {"string": "0x020000"},
             "subsystemVendorID": {"string": "0x15b3"},
             "subsystemDeviceID": {"string": "0x0043"},
             "revision": {"string": "0x00"},
             "driver": {"string": "mlx5_core"},
             "iommuGroup": {"int": 42},
             "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.1"},
             "resource.kubernetes.io/pcieRoot": {"string": "pci0000:3a"},
             "resource.kubernetes.io/numaNode": {"int": 1},
         },
         "capacity": {}, "health": "Healthy"},
    ], "counterSets": [], "rejected": []}


def test_h200_capture_replays_through_the_same_parsing(tmp_path: Path) -> None:
    """The recorded records and a tree built from them give the same devices."""
    records = RecordedSysfs(H200).records()
    settings = PCIDiscovery(vendors=["10DE"])
    replay = pci_inventory(parse_pci_functions(records), settings)
    live = discover("pci", DiscoverySettings(pci=settings), build_sysfs(tmp_path, records))
    assert replay == live
    assert replay.to_api()["devices"] == [{
        "name": "pci-0000-00-06-0",
        "attributes": {
            "vendorID": {"string": "0x10de"},
            "deviceID": {"string": "0x2335"},
            "classCode": {"string": "0x030200"},
            "subsystemVendorID": {"string": "0x10de"},
            "subsystemDeviceID": {"string": "0x18bf"},
            "revision": {"string": "0xa1"},
            "driver": {"string": "nvidia"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:00:06.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
        },
        "capacity": {}, "health": "Healthy"}]


@pytest.mark.parametrize(("settings", "names"), [
    (None, ["00-00-0", "00-01-0", "00-02-0", "00-03-0", "00-04-0", "00-05-0", "00-06-0"]),
    (PCIDiscovery(), ["00-00-0", "00-01-0", "00-02-0", "00-03-0", "00-04-0", "00-05-0",
                      "00-06-0"]),
    (PCIDiscovery(vendors=["0x1af4"]), ["00-01-0", "00-02-0", "00-03-0", "00-04-0", "00-05-0"]),
    (PCIDiscovery(classes=["0x03"]), ["00-06-0"]),
    (PCIDiscovery(classes=["0XFFFF", "0200"]), ["00-03-0", "00-04-0", "00-05-0"]),
    (PCIDiscovery(vendors=["0x1af4"], classes=["0x0180"]), ["00-01-0", "00-02-0"]),
    (PCIDiscovery(vendors=["0x15b3"]), []),
])
def test_vendor_and_class_filters(settings: PCIDiscovery | None, names: list[str]) -> None:
    functions = parse_pci_functions(RecordedSysfs(H200).records())
    result = pci_inventory(functions, settings)
    assert [device.name for device in result.devices] == [f"pci-0000-{n}" for n in names]


@pytest.mark.parametrize(("real_path", "root"), [
    ("/sys/devices/pci0000:00/0000:00:06.0", "pci0000:00"),
    ("/sys/devices/pci0000:3a/0000:3a:02.0/0000:3b:00.1", None),  # last part is not the address
    ("/sys/devices/platform/0000:00:06.0", None),
    (None, None),
])
def test_pcie_root_follows_upstream_rule(real_path: str | None, root: str | None) -> None:
    function = PciFunction.model_validate({
        "address": "0000:00:06.0", "vendor": "0x10de", "device": "0x2335", "class": "0x030200",
        "real_path": real_path})
    assert function.pcie_root() == root


def test_address_that_is_not_bdf_gets_no_standard_attributes(tmp_path: Path) -> None:
    vmd = {"address": "10000:01:00.0", "vendor": "0x144d", "device": "0xa808",
           "class": "0x010802", "real_path": "/sys/devices/pci10000:00/10000:01:00.0"}
    result = discover("pci", DiscoverySettings(), build_sysfs(tmp_path, [vmd]))
    assert result.to_api()["devices"] == [{
        "name": "pci-10000-01-00-0",
        "attributes": {"vendorID": {"string": "0x144d"}, "deviceID": {"string": "0xa808"},
                       "classCode": {"string": "0x010802"}},
        "capacity": {}, "health": "Healthy"}]


def test_device_name_is_a_dns_label() -> None:
    assert pci_device_name("0000:C1:00.7") == "pci-0000-c1-00-7"


def test_unreadable_or_malformed_sysfs_is_a_discovery_error(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="cannot list PCI functions"):
        discover("pci", DiscoverySettings(), tmp_path)
    with pytest.raises(DiscoveryError, match="malformed PCI function record"):
        parse_pci_functions([{"address": "0000:00:06.0", "vendor": "0x10de"}])


def _first_below_devices(path: str) -> str:
    return os.path.relpath(path, "/sys/devices").split(os.sep)[0]


@pytest.mark.skipif(not (SYS / "bus" / "pci" / "devices").is_dir(), reason="no PCI in /sys")
def test_this_machines_own_sysfs() -> None:
    """Real hardware nobody described: what the backend reports matches what the kernel says,
    read here independently of the backend's code."""
    bus = SYS / "bus" / "pci" / "devices"
    addresses = sorted(os.listdir(bus))
    result = discover("pci", DiscoverySettings())
    assert [device.name for device in result.devices] == [pci_device_name(a) for a in addresses]
    for address, device in zip(addresses, result.devices, strict=True):
        attributes = device.attributes
        assert attributes["resource.kubernetes.io/pciBusID"].string_value == address
        assert attributes["vendorID"].string_value == (bus / address / "vendor").read_text().strip()
        assert attributes["classCode"].string_value == (bus / address / "class").read_text().strip()
        resolved = os.path.realpath(bus / address)
        assert attributes["resource.kubernetes.io/pcieRoot"].string_value == (
            _first_below_devices(resolved))
        driver = bus / address / "driver"
        if driver.exists():
            assert attributes["driver"].string_value == os.path.basename(os.path.realpath(driver))
        else:
            assert "driver" not in attributes
        numa = int((bus / address / "numa_node").read_text())
        assert ("resource.kubernetes.io/numaNode" in attributes) == (numa >= 0)
    some_vendor = min(str(d.attributes["vendorID"].string_value) for d in result.devices)
    only = discover("pci", DiscoverySettings(pci=PCIDiscovery(vendors=[some_vendor])))
    assert {d.attributes["vendorID"].string_value for d in only.devices} == {some_vendor}
    assert len(only.devices) == sum(
        (bus / a / "vendor").read_text().strip() == some_vendor for a in addresses)
