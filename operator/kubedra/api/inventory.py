"""The ``DeviceInventory`` custom resource (``kubedra.io/v1alpha1``), defined once here.

One inventory per node and driver (or one per network-attached pool). The admin writes ``spec``;
the node agent writes ``status.discovered`` (field manager ``kubedra-agent``); the operator writes
the rest of ``status`` (field manager ``kubedra-operator``). See ``shared/DESIGN.md``,
"Who writes what". The CRD YAML in ``crds/`` is generated from these models
(:mod:`kubedra.api.crd`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kubedra.api.base import KubeModel
from kubedra.api.resource import (
    Condition,
    CounterSet,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    NodeSelector,
    ObjectMeta,
    ResourcePool,
)

GROUP = "kubedra.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DeviceInventory"
PLURAL = "deviceinventories"
SINGULAR = "deviceinventory"
SHORT_NAMES = ["dinv"]

AGENT_FIELD_MANAGER = "kubedra-agent"
OPERATOR_FIELD_MANAGER = "kubedra-operator"

Health = Literal["Healthy", "Unhealthy", "Unknown"]
MigMode = Literal["none", "partitions"]


class InventoryDevice(KubeModel):
    """A device as discovered on the node or declared by the admin.

    The same shape as a ResourceSlice ``Device`` (name, attributes, capacity, consumed counters),
    plus its health. Unqualified attribute and capacity names belong to the driver's domain.
    """

    name: str = Field(description="Device name, a DNS label unique in the pool (e.g. gpu-0).")
    attributes: dict[str, DeviceAttribute] = Field(
        default_factory=dict, description="Attributes by qualified name; exactly one value each.")
    capacity: dict[str, DeviceCapacity] = Field(
        default_factory=dict, description="Capacities by qualified name, as quantities.")
    consumes_counters: list[DeviceCounterConsumption] | None = Field(
        default=None, description="Shared counters this device takes when allocated.")
    health: Health = Field(default="Healthy", description="Healthy, Unhealthy or Unknown.")
    health_message: str | None = Field(default=None, description="Why the device is not healthy.")


class PCIDiscovery(KubeModel):
    """Which PCI functions the ``pci`` backend reports."""

    vendors: list[str] | None = Field(
        default=None, description="PCI vendor IDs to report, e.g. 0x10de; empty = all.")
    classes: list[str] | None = Field(
        default=None, description="PCI class prefixes to report, e.g. 0x0302; empty = all.")


class DiscoverySettings(KubeModel):
    """How the node agent discovers devices for this inventory."""

    mig: MigMode = Field(default="none", description=(
        "none: publish whole GPUs; partitions: also publish every MIG placement of MIG-capable "
        "GPUs as partitionable devices sharing counters."))
    pci: PCIDiscovery | None = Field(default=None, description="Filters for the pci backend.")


class DeviceOverride(KubeModel):
    """An admin's change to one device, applied by the operator before publishing."""

    device: str = Field(description="Name of the device this override applies to.")
    disabled: bool = Field(default=False, description="Do not publish this device.")
    taints: list[DeviceTaint] | None = Field(
        default=None, description="Taints to publish on the device.")


class DeviceInventorySpec(KubeModel):
    """What the admin declares: the driver, where the pool is available, how to discover."""

    driver: str = Field(description="Driver name (DNS subdomain), e.g. gpu.kubedra.io.")
    node_name: str | None = Field(default=None, description=(
        "Node whose agent discovers this inventory; the pool is node-local and named after it."))
    node_selector: NodeSelector | None = Field(default=None, description=(
        "Nodes that can reach a network-attached pool (no agent)."))
    all_nodes: bool | None = Field(
        default=None, description="The pool is reachable from every node.")
    pool: str | None = Field(default=None, description=(
        "Pool name; defaults to the node name, or to the inventory name without a node."))
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)
    devices: list[InventoryDevice] | None = Field(
        default=None, description="Statically declared devices, published as they are.")
    counter_sets: list[CounterSet] | None = Field(
        default=None, description="Statically declared shared counter sets.")
    overrides: list[DeviceOverride] | None = Field(
        default=None, description="Per-device changes: disable, taint.")


class DiscoveredState(KubeModel):
    """What the node agent last found (field manager ``kubedra-agent``)."""

    devices: list[InventoryDevice] = Field(default_factory=list)
    counter_sets: list[CounterSet] | None = None
    backend: str | None = Field(default=None, description="Discovery backend, e.g. nvml, pci.")
    agent_version: str | None = None
    boot_id: str | None = Field(default=None, alias="bootID")
    observed_time: str | None = Field(default=None, description="When the agent last scanned.")


class DeviceAllocation(KubeModel):
    """One device held by one claim (written by the operator)."""

    device: str
    claim: str = Field(description="<namespace>/<name> of the claim.")
    claim_uid: str = Field(alias="claimUID")
    request: str


class DeviceInventoryStatus(KubeModel):
    """Status: ``discovered`` by the agent, the rest by the operator."""

    discovered: DiscoveredState | None = None
    conditions: list[Condition] | None = None
    observed_generation: int | None = None
    pool: ResourcePool | None = Field(default=None, description="The pool as last published.")
    slices: list[str] | None = Field(default=None, description="Names of the published slices.")
    device_count: int | None = Field(default=None, description="Devices published.")
    allocated_count: int | None = Field(default=None, description="Devices held by claims.")
    allocations: list[DeviceAllocation] | None = None


class DeviceInventory(KubeModel):
    """A DeviceInventory object."""

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceInventorySpec
    status: DeviceInventoryStatus | None = None


class DiscoveryResult(KubeModel):
    """What a discovery backend returns: devices and the counter sets they consume."""

    devices: list[InventoryDevice] = Field(default_factory=list)
    counter_sets: list[CounterSet] = Field(default_factory=list)
