"""Container edits per device type, built from the attributes discovery publishes.

GPU values are those of the captured H200 (shared/hardware/nvidia-h200: nvml.json UUID and
MinorNumber 0; nvidia_smi.json lists /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm,
/dev/nvidia-uvm-tools and /dev/nvidia-caps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.api.inventory import InventoryDevice
from kubedra.api.resource import DeviceAttribute
from kubedra.node.cdi import ContainerEdits, DeviceNode
from kubedra.node.config import EffectiveConfig
from kubedra.node.edits import (
    DeviceError,
    container_edits,
    device_type,
    host_device_node,
    mig_placement,
    resolve_device,
)
from kubedra.node.mig import MigInstance, MigPlacement

DRIVER = "gpu.kubedra.io"
H200_UUID = "GPU-3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d"


def s(value: str) -> DeviceAttribute:
    return DeviceAttribute(string_value=value)


def i(value: int) -> DeviceAttribute:
    return DeviceAttribute(int_value=value)


def gpu(name: str, uuid: str, minor: int, qualified: bool = False) -> InventoryDevice:
    prefix = f"{DRIVER}/" if qualified else ""
    return InventoryDevice(name=name, attributes={
        f"{prefix}type": s("gpu"), f"{prefix}uuid": s(uuid), f"{prefix}minor": i(minor),
        "resource.kubernetes.io/pciBusID": s("0000:00:06.0")})


MIG = MigInstance(placement=MigPlacement(parent_uuid=H200_UUID, parent_minor=0, profile_id=19,
                                         start=2, size=1),
                  uuid="MIG-5b1a7d0e-0000-4000-8000-000000000001", gpu_instance_id=3,
                  compute_instance_id=0, gpu_instance_cap_minor=30,
                  compute_instance_cap_minor=31)
# named and attributed as kubedra.discovery publishes a partition of gpu-0
MIG_DEVICE = InventoryDevice(name="gpu-0-mig-1g18gb-s2", attributes={
    "type": s("mig"), "parentUUID": s(H200_UUID), "profile": s("1g.18gb"), "profileID": i(19),
    "placementStart": i(2), "placementSize": i(1)})


def nodes(*paths: str) -> list[DeviceNode]:
    return [DeviceNode(path=p) for p in paths]


def test_h200_gpu_gets_its_nodes_and_uuid() -> None:
    resolved = resolve_device(gpu("gpu-0", H200_UUID, 0), DRIVER, "gpu")
    assert container_edits([resolved], [EffectiveConfig()]) == [ContainerEdits(
        env=[f"NVIDIA_VISIBLE_DEVICES={H200_UUID}"],
        device_nodes=nodes("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm",
                           "/dev/nvidia-uvm-tools"))]


def test_qualified_attribute_names_work_too() -> None:
    resolved = resolve_device(gpu("gpu-3", "GPU-3", 3, qualified=True), DRIVER, "gpu")
    assert resolved.visible_id == "GPU-3"
    assert resolved.nodes[0] == "/dev/nvidia3"


def test_devices_of_one_request_share_the_visible_list_per_base_request() -> None:
    devices = [resolve_device(gpu("gpu-0", "GPU-A", 0), DRIVER, "train/big"),
               resolve_device(gpu("gpu-1", "GPU-B", 1), DRIVER, "train/big"),
               resolve_device(gpu("gpu-2", "GPU-C", 2), DRIVER, "infer")]
    edits = container_edits(devices, [EffectiveConfig()] * 3)
    assert [e.env for e in edits] == [["NVIDIA_VISIBLE_DEVICES=GPU-A,GPU-B"],
                                      ["NVIDIA_VISIBLE_DEVICES=GPU-A,GPU-B"],
                                      ["NVIDIA_VISIBLE_DEVICES=GPU-C"]]
    assert [d.request for d in devices] == ["train", "train", "infer"]


def test_mig_device_gets_parent_node_and_capability_nodes() -> None:
    resolved = resolve_device(MIG_DEVICE, DRIVER, "slice", MIG)
    assert container_edits([resolved], [EffectiveConfig()]) == [ContainerEdits(
        env=[f"NVIDIA_VISIBLE_DEVICES={MIG.uuid}"],
        device_nodes=nodes("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm",
                           "/dev/nvidia-uvm-tools", "/dev/nvidia-caps/nvidia-cap30",
                           "/dev/nvidia-caps/nvidia-cap31"))]


def test_mig_device_without_instance_is_an_error() -> None:
    with pytest.raises(DeviceError, match=r"^MIG device gpu-0-mig-1g18gb-s2 has no MIG instance$"):
        resolve_device(MIG_DEVICE, DRIVER, "slice")


def test_pci_device_bound_to_vfio_gets_group_node() -> None:
    vfio = InventoryDevice(name="nic-0", attributes={
        "resource.kubernetes.io/pciBusID": s("0000:3b:00.1"), "driver": s("vfio-pci"),
        "iommuGroup": i(42)})
    other = InventoryDevice(name="nic-1", attributes={
        "resource.kubernetes.io/pciBusID": s("0000:3b:00.2"), "driver": s("ixgbe"),
        "iommuGroup": i(43)})
    devices = [resolve_device(vfio, "pci.kubedra.io", "nics"),
               resolve_device(other, "pci.kubedra.io", "nics")]
    assert container_edits(devices, [EffectiveConfig()] * 2) == [
        ContainerEdits(env=["KUBEDRA_PCI_BUS_IDS=0000:3b:00.1,0000:3b:00.2"],
                       device_nodes=nodes("/dev/vfio/vfio", "/dev/vfio/42")),
        ContainerEdits(env=["KUBEDRA_PCI_BUS_IDS=0000:3b:00.1,0000:3b:00.2"])]


def test_config_adds_capabilities_and_env_sorted() -> None:
    resolved = resolve_device(gpu("gpu-0", H200_UUID, 0), DRIVER, "gpu")
    config = EffectiveConfig(kind="GpuConfig", env={"Z_LAST": "z", "A_FIRST": "a"},
                             driver_capabilities=["compute", "utility"])
    assert container_edits([resolved], [config])[0].env == [
        "A_FIRST=a", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        f"NVIDIA_VISIBLE_DEVICES={H200_UUID}", "Z_LAST=z"]


@pytest.mark.parametrize(("device", "message"), [
    (InventoryDevice(name="x", attributes={"type": s("fpga")}),
     "device x has type 'fpga'; kubedra prepares gpu, mig, pci"),
    (InventoryDevice(name="x", attributes={"type": s("gpu"), "minor": i(0)}),
     "device x has no string attribute uuid"),
    (InventoryDevice(name="x", attributes={"type": s("gpu"), "uuid": s("GPU-1")}),
     "device x has no int attribute minor"),
    (InventoryDevice(name="x", attributes={"type": s("pci"), "driver": s("vfio-pci"),
                                           "resource.kubernetes.io/pciBusID": s("0000:01:00.0")}),
     "device x has no int attribute iommuGroup"),
])
def test_missing_attributes_are_named(device: InventoryDevice, message: str) -> None:
    with pytest.raises(DeviceError) as raised:
        resolve_device(device, DRIVER, "r")
    assert str(raised.value) == message


def test_mig_placement_takes_the_minor_of_the_parent_gpu() -> None:
    node = {"gpu-0": gpu("gpu-0", H200_UUID, 0), "gpu-7": gpu("gpu-7", "GPU-7", 7),
            MIG_DEVICE.name: MIG_DEVICE}
    assert mig_placement(MIG_DEVICE, DRIVER, node) == MigPlacement(
        parent_uuid=H200_UUID, parent_minor=0, profile_id=19, start=2, size=1)
    del node["gpu-0"]
    with pytest.raises(DeviceError) as raised:
        mig_placement(MIG_DEVICE, DRIVER, node)
    assert str(raised.value) == f"MIG device gpu-0-mig-1g18gb-s2: this node has no GPU {H200_UUID}"


def test_a_declared_device_without_type_or_bus_id_is_plain() -> None:
    """A device an admin declares (``nic-0`` with attributes of its own) is prepared: no
    device node, its name in ``KUBEDRA_DEVICES`` with the other devices of its request."""
    nics = [InventoryDevice(name=n, attributes={"speed": s("100G")}) for n in ("nic-0", "nic-1")]
    assert device_type(nics[0], DRIVER) == "plain"
    resolved = [resolve_device(n, DRIVER, "nics/fast") for n in nics]
    assert container_edits(resolved, [EffectiveConfig()] * 2) == [
        ContainerEdits(env=["KUBEDRA_DEVICES=nic-0,nic-1"])] * 2


def test_type_defaults_to_pci_with_bus_id() -> None:
    device = InventoryDevice(name="x", attributes={
        "resource.kubernetes.io/pciBusID": s("0000:01:00.0")})
    assert device_type(device, DRIVER) == "pci"


def test_device_root_names_stand_ins_as_host_paths() -> None:
    assert host_device_node("/dev/nvidia0") == DeviceNode(path="/dev/nvidia0")
    assert host_device_node("/dev/nvidia0", Path("/")) == DeviceNode(path="/dev/nvidia0")
    assert host_device_node("/dev/nvidia-caps/nvidia-cap1", Path("/srv/node")) == DeviceNode(
        path="/dev/nvidia-caps/nvidia-cap1", host_path="/srv/node/dev/nvidia-caps/nvidia-cap1")
    resolved = resolve_device(gpu("gpu-2", H200_UUID, 2), DRIVER, "gpu")
    [edits] = container_edits([resolved], [EffectiveConfig()], Path("/n"))
    assert [(n.path, n.host_path) for n in edits.device_nodes or []] == [
        ("/dev/nvidia2", "/n/dev/nvidia2"), ("/dev/nvidiactl", "/n/dev/nvidiactl"),
        ("/dev/nvidia-uvm", "/n/dev/nvidia-uvm"), ("/dev/nvidia-uvm-tools",
                                                  "/n/dev/nvidia-uvm-tools")]
