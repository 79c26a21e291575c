"""The ``DeviceInventory`` custom resource (``kubedra.io/v1alpha1``), defined once here.

One inventory per node and driver (or one per network-attached pool). The admin writes ``spec``;
the node agent writes ``status.discovered`` (field manager ``kubedra-agent``); the operator writes
the rest of ``status`` (field manager ``kubedra-operator``). See ``shared/DESIGN.md``,
"Who writes what". The CRD YAML in ``crds/`` is generated from these models
(:mod:`kubedra.api.crd`), including the API limits of ``resource.k8s.io/v1`` that a device must
respect to be publishable.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
)
from pydantic.config import JsonDict

from kubedra.api.base import KubeModel
from kubedra.api.limits import (
    BINDING_CONDITIONS_MAX_SIZE,
    BINDING_CONDITIONS_NEED_FAILURES,
    BINDING_FAILURE_CONDITIONS_MAX_SIZE,
    BINDING_FAILURES_NEED_CONDITIONS,
    BINDING_OVERLAP,
    DEVICE_TAINTS_MAX_LENGTH,
    OVERRIDE_TAINTS_MAX_LENGTH,
)
from kubedra.api.limits import (
    RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE as MAX_ENTRIES,
)
from kubedra.api.names import (
    DNSLabel,
    DNSSubdomain,
    DriverName,
    LabelName,
    NodeAllocatableResourceName,
    PoolName,
    QualifiedName,
)
from kubedra.api.resource import (
    Condition,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    NodeAllocatableOverhead,
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
OPERATOR_COMPONENT = OPERATOR_FIELD_MANAGER
"""The component (Event source) of the operator's Events: the same name as its field manager."""

MAX_DEVICES = 4096
"""Devices one inventory may list; the operator splits them into slices of 128 (or 64)."""
MAX_COUNTER_SETS = 32
"""Counter sets one inventory may list (in ``spec`` and in ``status.discovered`` each)."""
MAX_DEVICE_MODELS = 32
"""``status.discovered.deviceModels`` entries one report may list (one per kind of device:
an 8-GPU node needs one, a node of GPUs and NICs a few)."""
MAX_NODE_ALLOCATABLE_RESOURCES = 8
"""Node resources ``spec.nodeAllocatableOverhead`` may name (cpu, memory and hugepages sizes)."""

Health = Literal["Healthy", "Unhealthy", "Unknown"]
MigMode = Literal["none", "partitions"]

_LIST_BY_NAME: JsonDict = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
_ENTRIES_RULE: JsonDict = {
    "rule": (f"(has(self.attributes) ? size(self.attributes) : 0) + "
             f"(has(self.capacity) ? size(self.capacity) : 0) <= {MAX_ENTRIES}"),
    "message": f"a device may have at most {MAX_ENTRIES} attributes and capacities together",
    "fieldPath": ".attributes",
}

_HAS_CONDITIONS = "has(self.bindingConditions) && size(self.bindingConditions) > 0"
_HAS_FAILURES = "has(self.bindingFailureConditions) && size(self.bindingFailureConditions) > 0"
_BINDING_RULES: list[JsonDict] = [
    {"rule": f"!({_HAS_FAILURES}) || {_HAS_CONDITIONS}",
     "message": BINDING_FAILURES_NEED_CONDITIONS, "fieldPath": ".bindingConditions"},
    {"rule": f"!({_HAS_CONDITIONS}) || {_HAS_FAILURES}",
     "message": BINDING_CONDITIONS_NEED_FAILURES, "fieldPath": ".bindingFailureConditions"},
    {"rule": ("!has(self.bindingConditions) || !has(self.bindingFailureConditions) || "
              "!self.bindingFailureConditions.exists(c, c in self.bindingConditions)"),
     "message": BINDING_OVERLAP, "fieldPath": ".bindingFailureConditions"},
]
"""The rules of ``validateDeviceBindingParameters`` (k8s.io/kubernetes v1.37.2
``pkg/apis/resource/validation/validation.go``) that span both lists, with upstream's words
(:func:`kubedra.api.validation.binding_condition_errors` checks them when publishing). A name
twice in one list is refused by ``x-kubernetes-list-type: set`` (``Duplicate value``, the item's
path, as upstream's ``field.Duplicate``), which costs no CEL."""
_BINDING_LIST: JsonDict = {"x-kubernetes-list-type": "set"}

NODE_LOCAL_BINDING = ("binding conditions and bindsToNode are for network-attached pools "
                      "(spec.nodeSelector or spec.allNodes), not a node's own devices")
"""kubedra's rule, not the API's: the operator's attach step serves binding conditions
(:mod:`kubedra.binding`), and a node-local device is attached by its node."""
_BINDS = ("(has(d.bindingConditions) && size(d.bindingConditions) > 0) || "
          "(has(d.bindingFailureConditions) && size(d.bindingFailureConditions) > 0) || "
          "(has(d.bindsToNode) && d.bindsToNode)")

Attributes = Annotated[dict[QualifiedName, DeviceAttribute],
                       Field(json_schema_extra={"maxProperties": MAX_ENTRIES})]
"""A device's (or a device model's) attributes by qualified name, at most 32 entries."""
Capacities = Annotated[dict[QualifiedName, DeviceCapacity],
                       Field(json_schema_extra={"maxProperties": MAX_ENTRIES})]
"""A device's (or a device model's) capacities by qualified name, at most 32 entries."""


def _without_empty_entries(data: Any) -> Any:
    """``data`` (a serialised device or device model) without an empty ``attributes`` or
    ``capacity`` map."""
    if isinstance(data, dict):
        for key in ("attributes", "capacity"):
            if data.get(key) == {}:
                del data[key]
    return data


class InventoryDevice(KubeModel):
    """A device as discovered on the node or declared by the admin.

    The same shape as a ResourceSlice ``Device`` (name, attributes, capacity, consumed counters),
    plus its health. Unqualified attribute and capacity names belong to the driver's domain.
    """

    model_config = ConfigDict(json_schema_extra={
        "x-kubernetes-validations": [_ENTRIES_RULE, *_BINDING_RULES]})

    name: DNSLabel = Field(description="Device name, a DNS label unique in the pool (e.g. gpu-0).")
    attributes: Attributes = Field(
        default_factory=dict,
        description="Attributes by qualified name; exactly one of int, bool, string, version each.")
    capacity: Capacities = Field(
        default_factory=dict,
        description="Capacities by qualified name, as quantities (e.g. memory: 143771Mi).")
    consumes_counters: list[DeviceCounterConsumption] | None = Field(
        default=None, max_length=2,
        description="Shared counters this device takes when allocated (at most 2 counter sets).")
    health: Health = Field(default="Healthy", description="Healthy, Unhealthy or Unknown.")
    health_message: str | None = Field(default=None, description="Why the device is not healthy.")
    binds_to_node: bool | None = Field(
        default=None, description="Network-attached pools: the allocation is pinned to the node "
        "the scheduler chose (KEP-5007).")
    binding_conditions: list[LabelName] | None = Field(
        default=None, max_length=BINDING_CONDITIONS_MAX_SIZE, json_schema_extra=_BINDING_LIST,
        description="Network-attached pools: conditions the operator's attach step sets on the "
        "claim's status.devices before kube-scheduler binds the pod (KEP-5007); at most 4, "
        "each once, none also a failure condition; set with bindingFailureConditions.")
    binding_failure_conditions: list[LabelName] | None = Field(
        default=None, max_length=BINDING_FAILURE_CONDITIONS_MAX_SIZE,
        json_schema_extra=_BINDING_LIST,
        description="Network-attached pools: a True one sends the pod back to scheduling; at "
        "most 4, each once; set with bindingConditions.")
    health_transition_time: str | None = Field(
        default=None, description="When discovery last saw the health change (RFC 3339); unset "
        "until it changes. The operator keeps a recovered device tainted for a hold-down time "
        "after it.")


class DiscoveredDevice(InventoryDevice):
    """A device of the agent's report: an :class:`InventoryDevice`, or a MIG-capable GPU in
    the compact form, naming the ``migModels`` entry its partitions come from."""

    mig_model: DNSLabel | None = Field(default=None, description=(
        "MIG-capable GPUs: the status.discovered.migModels entry whose profiles the operator "
        "expands into this GPU's partitions and counter set (<gpu>-counters), and into what "
        "the whole GPU consumes from it (kubedra.api.mig). Unset: the report lists them."))
    device_model: DNSLabel | None = Field(default=None, description=(
        "The status.discovered.deviceModels entry whose attributes and capacity this device "
        "has too: the operator publishes the model's entries with this device's own in their "
        "place (the device's value wins on a name; kubedra.api.device_models). Unset: the "
        "device lists all of its own."))

    @model_serializer(mode="wrap")
    def _without_empty_maps(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A device naming a ``deviceModel`` whose own attributes or capacity are empty is
        written without them (the report of an 8-GPU node is about 30 B per device smaller)."""
        data = handler(self)
        return _without_empty_entries(data) if self.device_model is not None else data


class DeviceModel(KubeModel):
    """Attributes and capacities that devices of one kind share, listed once for the devices
    naming it (``deviceModel``): the compact form of whole devices (kubedra.api.device_models).
    """

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_ENTRIES_RULE]})

    name: DNSLabel = Field(description="e.g. nvidia-h200 (from the product name).")
    attributes: Attributes = Field(
        default_factory=dict,
        description="Attributes by qualified name, in the order devices publish them.")
    capacity: Capacities = Field(
        default_factory=dict,
        description="Capacities by qualified name, in the order devices publish them.")

    @model_serializer(mode="wrap")
    def _without_empty_maps(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A model without attributes or without capacity is written without the empty map
        (as :func:`kubedra.api.device_models.fold` counts its bytes)."""
        return _without_empty_entries(handler(self))


class MigPlacement(KubeModel):
    """Where a GPU instance of a profile can sit, in memory slices (NVML's placement)."""

    start: int = Field(ge=0, le=64)
    size: int = Field(ge=1, le=64)


class MigProfile(KubeModel):
    """A MIG GPU-instance profile as NVML reports it (``nvmlGpuInstanceProfileInfo_v2_t``) and
    its possible placements: what every GPU of one model shares."""

    id: int = Field(ge=0, description="NVML's profile id (19 for 1g.18gb on the H200).")
    name: str = Field(max_length=64, description="NVML's name, e.g. MIG 1g.18gb.")
    slice_count: int = Field(ge=0, description="Compute slices.")
    multiprocessor_count: int = Field(ge=0)
    copy_engine_count: int = Field(ge=0)
    decoder_count: int = Field(ge=0)
    encoder_count: int = Field(ge=0)
    jpeg_count: int = Field(ge=0)
    ofa_count: int = Field(ge=0)
    memory_size_mb: int = Field(ge=0, alias="memorySizeMB", description="Memory in MiB.")
    placements: list[MigPlacement] = Field(default_factory=list, max_length=64)


class MigModel(KubeModel):
    """The MIG profiles every GPU of one model shares, named for the GPUs that refer to it."""

    name: DNSLabel = Field(description="e.g. nvidia-h200 (from the product name).")
    profiles: list[MigProfile] = Field(max_length=32)


PciVendorId = Annotated[str, StringConstraints(pattern=r"^(0[xX])?[0-9a-fA-F]{1,4}$")]
"""A PCI vendor ID in hex, ``0x`` optional (16 bits: ``0x10de``)."""
PciClassPrefix = Annotated[str, StringConstraints(pattern=r"^(0[xX])?[0-9a-fA-F]{1,6}$")]
"""The start of a PCI class code in hex, ``0x`` optional (the code is 24 bits: class,
subclass, programming interface; ``0x03`` display controllers, ``0x0302`` 3D controllers)."""


class PCIDiscovery(KubeModel):
    """Which PCI functions the ``pci`` backend reports (hex, as sysfs writes them: another
    value would match no function)."""

    vendors: list[PciVendorId] | None = Field(
        default=None, description="PCI vendor IDs to report, e.g. 0x10de; empty = all.")
    classes: list[PciClassPrefix] | None = Field(
        default=None, description="PCI class prefixes to report, e.g. 0x0302; empty = all.")


class DiscoverySettings(KubeModel):
    """How the node agent discovers devices for this inventory."""

    mig: MigMode = Field(default="none", description=(
        "none: publish whole GPUs; partitions: also publish every MIG placement of MIG-capable "
        "GPUs as partitionable devices sharing counters."))
    pci: PCIDiscovery | None = Field(default=None, description="Filters for the pci backend.")


class DeviceOverride(KubeModel):
    """An admin's change to one device, applied by the operator before publishing."""

    device: DNSLabel = Field(description="Name of the device this override applies to.")
    disabled: bool = Field(default=False, description="Do not publish this device.")
    # The CRD refuses more than OVERRIDE_TAINTS_MAX_LENGTH (the operator adds up to two of its
    # own and a slice's device carries at most 16); the model reads up to 16, so that one stored
    # before leaves its device out (publishing.pool) instead of failing the whole inventory.
    taints: list[DeviceTaint] | None = Field(
        default=None, max_length=DEVICE_TAINTS_MAX_LENGTH,
        json_schema_extra={"maxItems": OVERRIDE_TAINTS_MAX_LENGTH},
        description=f"Taints to publish on the device (at most {OVERRIDE_TAINTS_MAX_LENGTH}: the "
                    "operator may add kubedra.io/unhealthy and kubedra.io/draining).")


class DeviceInventorySpec(KubeModel):
    """What the admin declares: the driver, where the pool is available, how to discover."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": ("(has(self.nodeName) ? 1 : 0) + (has(self.nodeSelector) ? 1 : 0) + "
                 "(has(self.allNodes) && self.allNodes ? 1 : 0) == 1"),
        "message": "exactly one of nodeName, nodeSelector or allNodes: true must be set",
    }, {
        "rule": f"!has(self.nodeName) || !has(self.devices) || !self.devices.exists(d, {_BINDS})",
        "message": NODE_LOCAL_BINDING, "fieldPath": ".devices",
    }, {
        "rule": "!has(self.nodeAllocatableOverhead) || has(self.nodeName)",
        "message": ("nodeAllocatableOverhead needs nodeName: the API server accepts the "
                    "overhead only for nodes whose kubelet declares DRANodeAllocatableResources, "
                    "so kubedra publishes it for node-local pools only"),
    }]})

    driver: DriverName = Field(
        description="Driver name (DNS subdomain, at most 63 characters), e.g. gpu.kubedra.io.",
        json_schema_extra={"x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "driver is immutable"}]})
    node_name: DNSSubdomain | None = Field(default=None, description=(
        "Node whose agent discovers this inventory; the pool is node-local and named after it."),
        json_schema_extra={"x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "nodeName is immutable"}]})
    node_selector: NodeSelector | None = Field(default=None, description=(
        "Nodes that can reach a network-attached pool (no agent); exactly one term."),
        json_schema_extra={"x-kubernetes-validations": [
            {"rule": "size(self.nodeSelectorTerms) == 1",
             "message": "must have exactly one term: the API server refuses a ResourceSlice "
                        "(and from Kubernetes 1.38 a device) whose node selector has more"}]})
    all_nodes: bool | None = Field(
        default=None, description="The pool is reachable from every node.")
    pool: PoolName | None = Field(default=None, description=(
        "Pool name; defaults to the node name, or to the inventory name without a node."))
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)
    devices: list[InventoryDevice] | None = Field(
        default=None, max_length=MAX_DEVICES, json_schema_extra=_LIST_BY_NAME,
        description="Statically declared devices, published as they are.")
    counter_sets: list[CounterSet] | None = Field(
        default=None, max_length=MAX_COUNTER_SETS, json_schema_extra=_LIST_BY_NAME,
        description="Statically declared shared counter sets.")
    node_allocatable_overhead: dict[NodeAllocatableResourceName, NodeAllocatableOverhead] | None = (
        Field(default=None, max_length=MAX_NODE_ALLOCATABLE_RESOURCES, description=(
            "Host resources (cpu, memory, hugepages-<size>) that a pod using a device of this "
            "pool costs besides the device, e.g. the pinned host memory of a CUDA context: "
            "perPod once per pod, perContainer once per container referencing the claim. "
            "Published as each device's nodeAllocatableResources overhead (KEP-5517), where "
            "the cluster keeps that field (feature gate DRANodeAllocatableResources); none "
            "by default.")))
    overrides: list[DeviceOverride] | None = Field(
        default=None, max_length=MAX_DEVICES, description="Per-device changes: disable, taint.",
        json_schema_extra={"x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["device"]})


class Rejection(KubeModel):
    """A device or counter set left out of a report or a pool, and why."""

    name: str = Field(description="The device or counter set left out.")
    field: str = Field(description=(
        "Path of the value the API server would refuse, e.g. "
        "devices[gpu-1].attributes[productName].string."))
    message: str = Field(description="What is wrong with it.")


class DiscoveredState(KubeModel):
    """What the node agent last found (field manager kubedra-agent), applied as a whole."""

    # An atomic map for server-side apply: the agent applies its whole report every time, so
    # its managedFields entry names f:discovered once instead of every field of every device
    # (5.9 of an 8-H200 inventory's 13.0 KB as listed, which the API server, etcd and every
    # watcher of inventories carry: bench/RESULTS.md, scale, round 13). The lists inside keep
    # their list-map keys, so device names stay unique.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    devices: list[DiscoveredDevice] = Field(
        default_factory=list, max_length=MAX_DEVICES, json_schema_extra=_LIST_BY_NAME)

    @field_validator("devices", mode="before")
    @classmethod
    def _full_form(cls, devices: Any) -> Any:
        """Devices as the backends return them (:class:`InventoryDevice`) are taken as they
        are: the full form."""
        if isinstance(devices, list):
            return [DiscoveredDevice(**{f: getattr(d, f) for f in InventoryDevice.model_fields})
                    if type(d) is InventoryDevice else d for d in devices]
        return devices

    counter_sets: list[CounterSet] | None = Field(
        default=None, max_length=MAX_COUNTER_SETS, json_schema_extra=_LIST_BY_NAME)
    mig_models: list[MigModel] | None = Field(default=None, max_length=MAX_COUNTER_SETS,
                                              json_schema_extra=_LIST_BY_NAME, description=(
        "MIG profiles shared by the GPUs whose migModel names them: the compact form of their "
        "partitions. An agent of an earlier version lists every partition in devices instead, "
        "which the operator publishes the same."))
    device_models: list[DeviceModel] | None = Field(
        default=None, max_length=MAX_DEVICE_MODELS, json_schema_extra=_LIST_BY_NAME,
        description=(
            "Attributes and capacities shared by the devices whose deviceModel names them: the "
            "compact form of whole devices. An agent of an earlier version lists every entry in "
            "each device instead, which the operator publishes the same."))
    rejected: list[Rejection] | None = Field(default=None, max_length=MAX_DEVICES, description=(
        "Devices and counter sets the backend found but left out of this report, each with the "
        "value the API server would refuse (the other devices are reported)."))
    backend: str | None = Field(default=None, description="Discovery backend, e.g. nvml, pci.")
    kubelet_plugin_apis: dict[str, str] | None = Field(
        default=None, alias="kubeletPluginAPIs", max_length=4, description=(
            "The kubelet plugin API version the node's kubelet chose for each service, as its "
            "calls show (DRAPlugin: v1 or v1beta1; DRAResourceHealth: v1 or v1alpha1); a "
            "service appears once the kubelet called it (DRAPlugin at the first prepare)."))
    agent_version: str | None = None
    boot_id: str | None = Field(default=None, alias="bootID")
    observed_time: str | None = Field(default=None, description="When the agent last scanned.")


class DeviceAllocation(KubeModel):
    """One device held by one claim (written by the operator)."""

    device: str
    claim: str = Field(description="<namespace>/<name> of the claim.")
    claim_uid: str = Field(alias="claimUID")
    request: str


class RetainedDevices(KubeModel):
    """Devices that claims hold, as last published, kept while the pool is withdrawn.

    The operator writes this when it withdraws a pool (the agent's Lease expired) whose devices
    claims still hold: the devices, every other device consuming the same counter sets, and
    those counter sets. When the pool is published again without them (the agent came back
    without a MIG partition, say), the held ones are published from here, tainted, so that the
    scheduler keeps counting their counters — across an operator restart or a leader change,
    since the record is in the API, not in memory. Cleared once the pool is published again.
    """

    devices: list[Device] = Field(default_factory=list)
    shared_counters: list[CounterSet] = Field(default_factory=list)


class PublishedFrom(KubeModel):
    """What the operator last published the pool from (written by the operator): a restarted
    operator that finds the same inputs and the same slices knows the pool is as published
    without decoding it (see kubedra.controller.fingerprint)."""

    inputs: str = Field(description=(
        "Digest of the inventory's generation, spec, the agent's report (but its scan time), "
        "status.retained, and the operator's version and settings that shape the pool."))
    slices: dict[str, str] = Field(
        default_factory=dict, description="Name to resourceVersion of every published slice.")


class DeviceInventoryStatus(KubeModel):
    """Status: ``discovered`` by the agent, the rest by the operator."""

    discovered: DiscoveredState | None = None
    conditions: list[Condition] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-list-type": "map",
                                         "x-kubernetes-list-map-keys": ["type"]})
    observed_generation: int | None = None
    pool: ResourcePool | None = Field(default=None, description="The pool as last published.")
    slices: list[str] | None = Field(default=None, description="Names of the published slices.")
    device_count: int | None = Field(default=None, description="Devices published.")
    allocated_count: int | None = Field(default=None, description="Devices held by claims.")
    allocations: list[DeviceAllocation] | None = None
    retained: RetainedDevices | None = Field(
        default=None, json_schema_extra={"x-kubedra-free-form": True},
        description="Devices claims hold, kept while the pool is withdrawn (written by the "
                    "operator; its schema is the operator's, not checked at admission: a "
                    "second copy of the device schema's CEL rules would exceed the CRD's "
                    "validation cost budget).")
    published_from: PublishedFrom | None = None


class DeviceInventory(KubeModel):
    """A DeviceInventory object."""

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceInventorySpec
    status: DeviceInventoryStatus | None = None


class DiscoveryResult(KubeModel):
    """What a discovery backend returns: devices and the counter sets they consume, and what
    it left out because the API server would refuse it; ``mig_profiles`` maps each GPU whose
    partitions are among the devices to the profiles they were built from (the agent reports
    those GPUs in the compact form, :func:`kubedra.api.mig.compact`)."""

    devices: list[InventoryDevice] = Field(default_factory=list)
    counter_sets: list[CounterSet] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
    mig_profiles: dict[str, list[MigProfile]] = Field(default_factory=dict, exclude=True)


AGENT_LEASE_PREFIX = "kubedra-agent-"


def agent_lease_name(node_name: str) -> str:
    """Name of the Lease the node agent on ``node_name`` renews, in the operator's namespace."""
    return f"{AGENT_LEASE_PREFIX}{node_name}"
