"""The DeviceClasses under manifests/deviceclasses/ select exactly their devices: whole GPUs
and MIG partitions never cross, PCI functions are their own class. Selectors are evaluated with
CEL over the discovered devices, laid out as the DRA ``device`` variable (attributes by domain,
unqualified names in the driver's domain)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from cel_expr_python import cel

from kubedra.api.inventory import DiscoveryResult, DiscoverySettings, InventoryDevice
from kubedra.api.resource import DeviceClass
from kubedra.discovery import GPU_DRIVER, PCI_DRIVER, discover
from kubedra.discovery.pci import pci_inventory
from kubedra.discovery.recorded import RecordedSysfs
from kubedra.discovery.sysfs import parse_pci_functions

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "hardware" / "nvidia-h200"
CLASSES = REPO / "manifests" / "deviceclasses"


def load_class(name: str) -> DeviceClass:
    device_class = DeviceClass.from_api(yaml.safe_load((CLASSES / f"{name}.yaml").read_text()))
    assert device_class.metadata.name == name
    return device_class


def cel_device(driver: str, device: InventoryDevice) -> dict[str, Any]:
    """The ``device`` variable (versions as plain strings: no selector here compares them)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attribute in device.attributes.items():
        domain, _, identifier = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[identifier] = attribute.value()
    return {"driver": driver, "attributes": attributes}


def matching(device_class: DeviceClass, driver: str, result: DiscoveryResult) -> list[str]:
    env = cel.NewEnv(variables={"device": cel.Type.DYN})
    selectors = [env.compile(s.cel.expression) for s in device_class.spec.selectors or []
                 if s.cel is not None]
    assert selectors
    return [device.name for device in result.devices
            if all(s.eval(env.Activation({"device": cel_device(driver, device)})).value() is True
                   for s in selectors)]


@pytest.fixture(scope="module")
def gpus() -> DiscoveryResult:
    return discover(f"snapshot:{H200}", DiscoverySettings(mig="partitions"))


@pytest.fixture(scope="module")
def pcis() -> DiscoveryResult:
    return pci_inventory(parse_pci_functions(RecordedSysfs(H200).records()), None)


def test_every_manifest_is_one_device_class_and_all_are_installed() -> None:
    classes = ["gpu.kubedra.io.yaml", "mig.gpu.kubedra.io.yaml", "pci.kubedra.io.yaml"]
    assert sorted(path.name for path in CLASSES.iterdir()) == sorted(
        [*classes, "kustomization.yaml"])
    kustomization = yaml.safe_load((CLASSES / "kustomization.yaml").read_text())
    assert kustomization["resources"] == classes


def test_gpu_class_selects_whole_gpus_only(gpus: DiscoveryResult, pcis: DiscoveryResult) -> None:
    device_class = load_class("gpu.kubedra.io")
    assert matching(device_class, GPU_DRIVER, gpus) == ["gpu-0"]
    assert matching(device_class, PCI_DRIVER, pcis) == []


def test_mig_class_selects_partitions_only(gpus: DiscoveryResult, pcis: DiscoveryResult) -> None:
    device_class = load_class("mig.gpu.kubedra.io")
    assert matching(device_class, GPU_DRIVER, gpus) == [
        device.name for device in gpus.devices if device.name != "gpu-0"]
    assert len(matching(device_class, GPU_DRIVER, gpus)) == 25
    assert matching(device_class, PCI_DRIVER, pcis) == []


def test_pci_class_selects_pci_functions_only(gpus: DiscoveryResult,
                                             pcis: DiscoveryResult) -> None:
    device_class = load_class("pci.kubedra.io")
    assert matching(device_class, PCI_DRIVER, pcis) == [d.name for d in pcis.devices]
    assert len(pcis.devices) == 7
    assert matching(device_class, GPU_DRIVER, gpus) == []


def test_gpu_classes_skip_a_device_without_type() -> None:
    """A statically declared device without ``type`` is not selected (no CEL error)."""
    bare = DiscoveryResult(devices=[InventoryDevice(name="gpu-9")])
    assert matching(load_class("gpu.kubedra.io"), GPU_DRIVER, bare) == []
    assert matching(load_class("mig.gpu.kubedra.io"), GPU_DRIVER, bare) == []
