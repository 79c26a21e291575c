"""Container edits per prepared device: which device nodes and environment a container gets.

The device's type and identity come from the attributes discovery published for it (names in
the driver's domain; an inventory may use them unqualified):

=========== =================================================================================
type        attributes read, and what the container gets
=========== =================================================================================
``gpu``     ``uuid``, ``minor``: ``/dev/nvidia<minor>``, ``/dev/nvidiactl``, ``/dev/nvidia-uvm``,
            ``/dev/nvidia-uvm-tools``; ``NVIDIA_VISIBLE_DEVICES=<uuid>``
``mig``     ``parentUUID``, ``profileID``, ``placementStart``, ``placementSize`` (and the
            ``minor`` of the node's ``gpu`` device with that UUID): the instance is created
            at prepare (:mod:`kubedra.node.mig`); the parent's ``/dev/nvidia<minor>``, the
            three control nodes above and ``/dev/nvidia-caps/nvidia-cap<minor>`` for its GPU
            and compute instance; ``NVIDIA_VISIBLE_DEVICES=<MIG-uuid>``
``pci``     ``resource.kubernetes.io/pciBusID``, ``driver`` (the bound kernel driver),
            ``iommuGroup``: bound to ``vfio-pci``: ``/dev/vfio/vfio`` and
            ``/dev/vfio/<iommuGroup>``; any driver: ``KUBEDRA_PCI_BUS_IDS=<bus ID>``
``plain``   nothing: no device node; ``KUBEDRA_DEVICES=<device name>``
=========== =================================================================================

These are the names :mod:`kubedra.discovery` publishes. A device without ``type`` is ``pci``
when it has a PCI bus ID (the ``pci`` backend sets no type), else ``plain``: a device an admin
declares in the inventory's ``spec.devices`` (``nic-0`` with its own attributes) is prepared
too, and the container learns which devices it got from ``KUBEDRA_DEVICES``. Device node
paths are those of the host (the capture in ``shared/hardware/nvidia-h200`` lists ``/dev/nvidia0``,
``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools`` and ``/dev/nvidia-caps``);
the runtime reads type, major and minor from the host node when the container starts.

Environment variables name *all* devices of the same base request: a container is given every
device of each request it uses, and CDI env edits of the same name replace each other, so each
device of request ``gpus`` with two GPUs sets ``NVIDIA_VISIBLE_DEVICES=<uuid0>,<uuid1>``. (A
container that uses several requests of one claim sees the value of the last one applied.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kubedra.api.inventory import InventoryDevice
from kubedra.api.resource import DeviceAttribute
from kubedra.node.cdi import ContainerEdits, DeviceNode
from kubedra.node.config import (
    DEVICES_ENV,
    DRIVER_CAPABILITIES_ENV,
    PCI_BUS_IDS_ENV,
    VISIBLE_DEVICES_ENV,
    EffectiveConfig,
)
from kubedra.node.mig import MigInstance, MigPlacement

DeviceType = Literal["gpu", "mig", "pci", "plain"]
_DEVICE_TYPES: dict[str, DeviceType] = {"gpu": "gpu", "mig": "mig", "pci": "pci"}

TYPE = "type"
UUID = "uuid"
MINOR = "minor"
PARENT_UUID = "parentUUID"
PROFILE_ID = "profileID"
PLACEMENT_START = "placementStart"
PLACEMENT_SIZE = "placementSize"
KERNEL_DRIVER = "driver"
IOMMU_GROUP = "iommuGroup"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
"""Attribute names read here (unqualified ones are in the driver's domain)."""

NVIDIA_CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
VFIO_CONTAINER_NODE = "/dev/vfio/vfio"
VFIO_DRIVER = "vfio-pci"


class DeviceError(ValueError):
    """A device lacks the attributes its type needs; the message names device and attribute."""


def attribute(device: InventoryDevice, driver: str, name: str) -> DeviceAttribute | None:
    """The attribute ``name`` of ``device``: a qualified name as is, an unqualified one as
    ``<driver>/<name>`` or plain ``<name>`` (inventories may leave the driver domain out)."""
    if "/" in name:
        return device.attributes.get(name)
    return device.attributes.get(f"{driver}/{name}") or device.attributes.get(name)


def _optional_string(device: InventoryDevice, driver: str, name: str) -> str | None:
    attr = attribute(device, driver, name)
    return attr.string_value if attr is not None else None


def _string(device: InventoryDevice, driver: str, name: str) -> str:
    attr = attribute(device, driver, name)
    if attr is None or attr.string_value is None:
        raise DeviceError(f"device {device.name} has no string attribute {name}")
    return attr.string_value


def _int(device: InventoryDevice, driver: str, name: str) -> int:
    attr = attribute(device, driver, name)
    if attr is None or attr.int_value is None:
        raise DeviceError(f"device {device.name} has no int attribute {name}")
    return attr.int_value


def device_type(device: InventoryDevice, driver: str) -> DeviceType:
    """``gpu``, ``mig`` or ``pci`` from the ``type`` attribute, else ``pci`` with a PCI bus ID,
    else ``plain``.

    Raises:
        DeviceError: a ``type`` other than gpu, mig, pci.
    """
    kind = _optional_string(device, driver, TYPE)
    if kind is None:
        return "pci" if attribute(device, driver, PCI_BUS_ID) is not None else "plain"
    if kind in _DEVICE_TYPES:
        return _DEVICE_TYPES[kind]
    raise DeviceError(f"device {device.name} has type {kind!r}; kubedra prepares gpu, mig, pci")


def mig_placement(device: InventoryDevice, driver: str,
                  devices: Mapping[str, InventoryDevice]) -> MigPlacement:
    """The placement a ``mig`` device stands for; its parent is the ``gpu`` device in
    ``devices`` (the node's) whose ``uuid`` is the partition's ``parentUUID``.

    Raises:
        DeviceError: an attribute is missing, or the node has no such parent GPU.
    """
    parent_uuid = _string(device, driver, PARENT_UUID)
    parent = next((d for d in devices.values() if d.name != device.name
                   and _optional_string(d, driver, TYPE) == "gpu"
                   and _optional_string(d, driver, UUID) == parent_uuid), None)
    if parent is None:
        raise DeviceError(f"MIG device {device.name}: this node has no GPU {parent_uuid}")
    return MigPlacement(
        parent_uuid=parent_uuid,
        parent_minor=_int(parent, driver, MINOR),
        profile_id=_int(device, driver, PROFILE_ID),
        start=_int(device, driver, PLACEMENT_START),
        size=_int(device, driver, PLACEMENT_SIZE))


@dataclass
class ResolvedDevice:
    """One allocated device made concrete: its base request, type, the ID its environment
    variable lists (GPU or MIG UUID, PCI bus ID) and the host device nodes it needs."""

    request: str
    name: str
    type: DeviceType
    visible_id: str
    nodes: list[str] = field(default_factory=list)


def resolve_device(device: InventoryDevice, driver: str, request: str,
                   mig: MigInstance | None = None) -> ResolvedDevice:
    """Resolve ``device`` allocated for ``request`` (``<request>[/<subrequest>]``); a ``mig``
    device needs the instance created for it.

    Raises:
        DeviceError: attributes missing (see the module table), or a mig device without
            instance.
    """
    base = request.split("/", 1)[0]
    kind = device_type(device, driver)
    if kind == "gpu":
        minor = _int(device, driver, MINOR)
        return ResolvedDevice(base, device.name, kind, _string(device, driver, UUID),
                              [f"/dev/nvidia{minor}", *NVIDIA_CONTROL_NODES])
    if kind == "mig":
        if mig is None:
            raise DeviceError(f"MIG device {device.name} has no MIG instance")
        return ResolvedDevice(base, device.name, kind, mig.uuid, [
            f"/dev/nvidia{mig.placement.parent_minor}", *NVIDIA_CONTROL_NODES,
            f"/dev/nvidia-caps/nvidia-cap{mig.gpu_instance_cap_minor}",
            f"/dev/nvidia-caps/nvidia-cap{mig.compute_instance_cap_minor}"])
    if kind == "plain":
        return ResolvedDevice(base, device.name, kind, device.name)
    bus_id = _string(device, driver, PCI_BUS_ID)
    kernel_driver = attribute(device, driver, KERNEL_DRIVER)
    nodes: list[str] = []
    if kernel_driver is not None and kernel_driver.string_value == VFIO_DRIVER:
        nodes = [VFIO_CONTAINER_NODE, f"/dev/vfio/{_int(device, driver, IOMMU_GROUP)}"]
    return ResolvedDevice(base, device.name, kind, bus_id, nodes)


HOST_ROOT = Path("/")


def host_device_node(path: str, device_root: Path = HOST_ROOT) -> DeviceNode:
    """The CDI device node for container path ``path`` (e.g. ``/dev/nvidia0``): the host's
    node at the same path, or with a ``device_root`` other than ``/`` the one at
    ``<device_root>/<path>`` (``hostPath``), e.g. stand-ins for replayed hardware."""
    if device_root == HOST_ROOT:
        return DeviceNode(path=path)
    return DeviceNode(path=path, host_path=str(device_root / path.lstrip("/")))


def container_edits(devices: list[ResolvedDevice], configs: list[EffectiveConfig],
                    device_root: Path = HOST_ROOT) -> list[ContainerEdits]:
    """The CDI container edits of each of a claim's ``devices`` (same order), with
    ``configs[i]`` the merged opaque config of ``devices[i]``; env entries sorted by name;
    device nodes from the host's ``device_root`` (see :func:`host_device_node`)."""
    visible: dict[tuple[str, str], list[str]] = {}
    for d in devices:
        group = "nvidia" if d.type in ("gpu", "mig") else d.type
        visible.setdefault((d.request, group), []).append(d.visible_id)
    result = []
    for d, config in zip(devices, configs, strict=True):
        env = dict(config.env)
        if d.type == "pci":
            env[PCI_BUS_IDS_ENV] = ",".join(visible[(d.request, "pci")])
        elif d.type == "plain":
            env[DEVICES_ENV] = ",".join(visible[(d.request, "plain")])
        else:
            env[VISIBLE_DEVICES_ENV] = ",".join(visible[(d.request, "nvidia")])
            if config.driver_capabilities is not None:
                env[DRIVER_CAPABILITIES_ENV] = ",".join(config.driver_capabilities)
        result.append(ContainerEdits(
            env=[f"{k}={v}" for k, v in sorted(env.items())],
            device_nodes=[host_device_node(p, device_root) for p in d.nodes] or None))
    return result
