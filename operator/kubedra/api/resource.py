"""The subset of ``resource.k8s.io/v1`` that kubedra reads and writes, as pydantic models.

Field names and shapes follow ``k8s.io/api/resource/v1/types.go`` (v0.37.2); see
``shared/reference/dra-api.md`` section 1. Every model parses what the API server returns
(unknown fields are ignored) and :meth:`KubeModel.to_api` writes camelCase JSON without unset
fields. Quantities are :class:`~kubedra.api.quantity.Quantity` and compare by value.

Every field of those v1 types that the allocator or a driver can meet is modelled, the alpha
ones too (``compatibilityGroups``, ``derivedAttributes``, ``partitionTypeAttribute``,
``skipNodeOperations``, ``nodeAllocatableResources``), so that a rule upstream applies while
their feature gate is off is not lost with the field: an ignored field would silently change
the allocator's verdict. Where kubedra's allocator reads such a field, its docstring says how.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from kubedra.api.base import KubeModel
from kubedra.api.limits import DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH as MAX_VALUE_BYTES
from kubedra.api.limits import RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE
from kubedra.api.names import (
    LABEL_KEY_SCHEMA,
    LABEL_VALUE_MAX_LENGTH,
    LABEL_VALUE_PATTERN,
    DNSLabel,
)
from kubedra.api.quantity import Quantity
from kubedra.api.time import TIME_PATTERN

SEMVER_PATTERN = (r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                  r"(-((0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
                  r"(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                  r"(\+([0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*))?$")
"""Semantic Versioning 2.0.0, the format of ``version`` attributes."""

AttributeString = Annotated[str, Field(json_schema_extra={
    "maxLength": MAX_VALUE_BYTES,
    "x-kubernetes-validations": [{"rule": f"size(bytes(self)) <= {MAX_VALUE_BYTES}",
                                  "message": f"may not be more than {MAX_VALUE_BYTES} bytes"}]})]
"""A string attribute value: at most 64 bytes of UTF-8, as the API server counts
(``validateDeviceAttributeStringValue``: Go ``len``), so "é" counts 2. The limit is in the
schema (the CRD) and in :func:`kubedra.api.validation.device_errors`, not enforced when a model
is built, so that discovery can report the one bad value instead of failing on it."""

_LIST: JsonDict = {"minItems": 1, "maxItems": RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE}
"""A list attribute has at least one value ("must not be empty if specified") and at most 48,
the values of a whole device (``ResourceSliceMaxAttributeValuesPerDevice``)."""

GROUP = "resource.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"


# --- metadata and core/v1 pieces --------------------------------------------------------------

class OwnerReference(KubeModel):
    """``metav1.OwnerReference``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """The parts of ``metav1.ObjectMeta`` kubedra uses."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class NodeSelectorRequirement(KubeModel):
    """``core/v1.NodeSelectorRequirement``: operator In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str
    operator: str
    values: list[str] | None = None


class NodeSelectorTerm(KubeModel):
    """``core/v1.NodeSelectorTerm``: all requirements must hold (AND)."""

    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(KubeModel):
    """``core/v1.NodeSelector``: any term may hold (OR)."""

    node_selector_terms: list[NodeSelectorTerm]


class Condition(KubeModel):
    """``metav1.Condition``; ``status`` is ``True``, ``False`` or ``Unknown``."""

    type: str
    status: str
    reason: str
    message: str = ""
    last_transition_time: str
    observed_generation: int | None = None


# --- ResourceSlice ----------------------------------------------------------------------------

class DeviceAttribute(KubeModel):
    """Exactly one of the value fields is set (``int``, ``bool``, ``string``, ``version`` or a
    list form, the latter behind the alpha gate ``DRAListTypeAttributes``)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": " + ".join(f"(has(self.{f}) ? 1 : 0)" for f in (
            "int", "bool", "string", "version", "ints", "bools", "strings", "versions")) + " == 1",
        "message": "exactly one of int, bool, string, version (or ints, bools, strings, "
                   "versions) must be set"}]})

    int_value: int | None = Field(default=None, alias="int")
    bool_value: bool | None = Field(default=None, alias="bool")
    string_value: AttributeString | None = Field(default=None, alias="string")
    version_value: str | None = Field(default=None, alias="version", pattern=SEMVER_PATTERN,
                                      json_schema_extra={"maxLength": MAX_VALUE_BYTES})
    int_values: list[int] | None = Field(default=None, alias="ints", json_schema_extra=_LIST)
    bool_values: list[bool] | None = Field(default=None, alias="bools", json_schema_extra=_LIST)
    string_values: list[Annotated[str, Field(json_schema_extra={"maxLength": MAX_VALUE_BYTES})]
                        ] | None = Field(default=None, alias="strings", json_schema_extra=_LIST)
    """Each item at most 64 bytes too; the CRD checks characters only (a byte rule per item
    would exceed the CRD's CEL cost budget), :mod:`kubedra.api.validation` checks bytes."""
    version_values: list[str] | None = Field(default=None, alias="versions",
                                             json_schema_extra=_LIST)

    def set_fields(self) -> list[str]:
        """Wire names of the value fields that are set (valid attributes have exactly one)."""
        return [alias for name, alias in _ATTRIBUTE_FIELDS if getattr(self, name) is not None]

    def value(self) -> int | bool | str | list[Any] | None:
        """The single value that is set, whatever its type (``None`` if none is)."""
        for name in type(self).model_fields:
            found = getattr(self, name)
            if found is not None:
                return found  # type: ignore[no-any-return]
        return None


_ATTRIBUTE_FIELDS = tuple((name, field.alias or name)
                          for name, field in DeviceAttribute.model_fields.items())
"""The value fields of :class:`DeviceAttribute`: (Python name, wire name), in order."""


class CapacityRequestPolicyRange(KubeModel):
    """``validRange`` of a request policy."""

    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(KubeModel):
    """How a shared device's capacity may be requested (``DRAConsumableCapacity``)."""

    default: Quantity | None = None
    valid_values: list[Quantity] | None = None
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(KubeModel):
    """One capacity of a device: a quantity, and a request policy for shared devices."""

    value: Quantity
    request_policy: CapacityRequestPolicy | None = None


class Counter(KubeModel):
    """A counter value (``resource.Quantity``)."""

    value: Quantity


_COUNTERS: JsonDict = {"maxProperties": 32, "minProperties": 1}
"""At least one counter and at most 32 (``validateCounterSet``,
``validateDeviceCounterConsumption``: an empty map is "Required value")."""


def _schema_requires_counters(schema: JsonDict) -> None:
    required = schema.setdefault("required", [])
    assert isinstance(required, list)
    required.append("counters")


_COUNTERS_REQUIRED = ConfigDict(json_schema_extra=_schema_requires_counters)
"""``counters`` is required by the schema (the CRD: "Required value", as the API server), but
a model without it parses, as an empty map, so that the allocator decides on such a slice as
upstream's does (its pool is invalid: a consumed counter is unknown) and
:mod:`kubedra.api.validation` names the field."""


class CounterSet(KubeModel):
    """A named set of shared counters that partitionable devices consume (KEP-4815)."""

    model_config = _COUNTERS_REQUIRED

    name: DNSLabel
    counters: dict[DNSLabel, Counter] = Field(default_factory=dict, json_schema_extra=_COUNTERS)


class DeviceCounterConsumption(KubeModel):
    """What one device takes from one counter set when it is allocated."""

    model_config = _COUNTERS_REQUIRED

    counter_set: DNSLabel
    counters: dict[DNSLabel, Counter] = Field(default_factory=dict, json_schema_extra=_COUNTERS)
    compatibility_groups: SkipJsonSchema[list[str] | None] = None
    """Alpha (gate ``DRADeviceCompatibilityGroups``, KEP-5963): devices on one counter set may
    be co-allocated only when their groups intersect. Left out of the DeviceInventory schema
    (kubedra does not publish it). While the gate is off, upstream's allocator ignores every
    slice in which a device declares groups, which makes that slice's pool incomplete
    (``sliceUsesCompatibilityGroups`` in
    ``structured/internal/incubating/compatibility_groups.go``); so does kubedra's
    (:mod:`kubedra.allocation.pools`)."""


DEVICE_TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")
"""The effects a device taint may have (``validDeviceTaintEffects`` in
k8s.io/kubernetes/pkg/apis/resource/validation/validation.go, v1.37.2)."""


class DeviceTaint(KubeModel):
    """A taint on a device; ``effect`` is ``None``, ``NoSchedule`` or ``NoExecute`` (KEP-5055)."""

    # The schema (the DeviceInventory CRD's spec.overrides[].taints) states what
    # validateDeviceTaint in k8s.io/kubernetes/pkg/apis/resource/validation/validation.go
    # (v1.37.2) requires, so that the API server refuses a taint no ResourceSlice could carry:
    # the key a label key (ValidateLabelName), the value empty or a label value
    # (IsLabelValue), the effect one of validDeviceTaintEffects, timeAdded a metav1.Time
    # (kubedra.api.time.TIME_PATTERN). Python does not check them: a
    # taint stored before the CRD did is read, and the operator reports it
    # (kubedra.api.validation.taint_errors) instead of failing on the whole inventory.
    key: str = Field(json_schema_extra=LABEL_KEY_SCHEMA)
    value: str | None = Field(default=None, json_schema_extra={
        "pattern": LABEL_VALUE_PATTERN, "maxLength": LABEL_VALUE_MAX_LENGTH})
    effect: str = Field(json_schema_extra={"enum": list(DEVICE_TAINT_EFFECTS)})
    time_added: str | None = Field(default=None, json_schema_extra={"pattern": TIME_PATTERN})


class NodeAllocatableMapping(KubeModel):
    """How an allocation maps to a node resource: consumed capacity ``capacity_key`` times
    ``capacity_multiplier``, or the device count times ``device_multiplier``."""

    capacity_key: str | None = None
    capacity_multiplier: Quantity | None = None
    device_multiplier: Quantity | None = None


class NodeAllocatableOverhead(KubeModel):
    """Node resources an allocation costs besides the device: once per pod and per container
    referencing the claim. At least one is set, neither negative
    (``validateNodeAllocatableOverheadMapping`` in pkg/apis/resource/validation)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        {"rule": "has(self.perPod) || has(self.perContainer)",
         "message": "at least one of perPod or perContainer must be set"},
        {"rule": ("(!has(self.perPod) || !string(self.perPod).startsWith('-')) && "
                  "(!has(self.perContainer) || !string(self.perContainer).startsWith('-'))"),
         "message": "perPod and perContainer must not be negative"}]})

    per_pod: Quantity | None = None
    per_container: Quantity | None = None


class NodeAllocatableResource(KubeModel):
    """One node resource a device's allocation accounts for (KEP-5517)."""

    mapping: NodeAllocatableMapping | None = None
    overhead: NodeAllocatableOverhead | None = None


class Device(KubeModel):
    """One device in a ResourceSlice; its identity is ``<driver>/<pool>/<name>``."""

    name: str
    attributes: dict[str, DeviceAttribute] | None = None
    capacity: dict[str, DeviceCapacity] | None = None
    consumes_counters: list[DeviceCounterConsumption] | None = None
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] | None = None
    binds_to_node: bool | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    allow_multiple_allocations: bool | None = None
    node_allocatable_resources: dict[str, NodeAllocatableResource] | None = None
    """Alpha (gate ``DRANodeAllocatableResources``, KEP-5517): node resources (cpu, memory)
    an allocation of the device takes. The structured allocator never reads it (the scheduler
    plugin and the kubelet do), so it does not change kubedra's verdict."""


class ResourcePool(KubeModel):
    """The pool a slice belongs to; consumers use only the highest ``generation``."""

    name: str
    generation: int
    resource_slice_count: int


class ResourceSliceSpec(KubeModel):
    """``ResourceSliceSpec``: exactly one of nodeName, nodeSelector, allNodes,
    perDeviceNodeSelection; devices XOR sharedCounters (since 1.35)."""

    driver: str
    pool: ResourcePool
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] | None = None
    shared_counters: list[CounterSet] | None = None
    partition_type_attribute: str | None = None
    """Alpha (gate ``DRAPartitionableDevicesType``): the attribute naming a device's partition
    type. Upstream's incubating allocator never reads it; nor does kubedra's."""
    skip_node_operations: list[str] | None = None
    """Alpha (gate ``DRAOptionalNodeOperations``, KEP-5945): node operations
    (``NodePrepareResources``, ``NodeUnprepareResources``, ``*``) the devices need not. Up to
    1.37 only upstream's experimental allocator reads it (copied into allocation results with
    its feature on); from 1.38 (v0.38.0-beta.0) the incubating one does too, and with the
    feature off (kubedra's case) the slice's devices are not allocatable
    (:data:`kubedra.allocation.versions.SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE`)."""


class ResourceSlice(KubeModel):
    """A ResourceSlice object."""

    api_version: str = API_VERSION
    kind: str = "ResourceSlice"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec


# --- DeviceClass and ResourceClaim ------------------------------------------------------------

class CELDeviceSelector(KubeModel):
    """A CEL expression over the ``device`` variable that must evaluate to a bool."""

    expression: str


class DeviceSelector(KubeModel):
    """A selector; ``cel`` is the only kind today."""

    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(KubeModel):
    """Driver-specific parameters (at most 10 KiB of JSON)."""

    driver: str
    parameters: Any = None


class DeviceClassConfiguration(KubeModel):
    """A configuration entry of a DeviceClass."""

    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(KubeModel):
    """``DeviceClassSpec``: selectors all devices of the class must pass, and configuration."""

    selectors: list[DeviceSelector] | None = None
    config: list[DeviceClassConfiguration] | None = None
    extended_resource_name: str | None = None


class DeviceClass(KubeModel):
    """A DeviceClass object."""

    api_version: str = API_VERSION
    kind: str = "DeviceClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


class DeviceToleration(KubeModel):
    """A toleration of a device taint; ``operator`` is ``Equal`` (default) or ``Exists``."""

    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class DeviceDerivedAttribute(KubeModel):
    """An attribute a request computes per device with CEL, for its constraints (alpha, gate
    ``DRADerivedAttributes``, KEP-6080)."""

    name: str
    expression: str


class CapacityRequirements(KubeModel):
    """Capacity a request consumes from a shared device (``DRAConsumableCapacity``)."""

    requests: dict[str, Quantity] | None = None


class DeviceSubRequest(KubeModel):
    """One alternative of a ``firstAvailable`` request (``DRAPrioritizedList``)."""

    name: str
    device_class_name: str
    selectors: list[DeviceSelector] | None = None
    allocation_mode: str | None = None
    count: int | None = None
    tolerations: list[DeviceToleration] | None = None
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DeviceDerivedAttribute] | None = None
    """Alpha (gate ``DRADerivedAttributes``). Upstream's incubating allocator cannot handle
    them: a request that has any is an error for the whole attempt (``validateDeviceRequest``
    in ``structured/internal/incubating/allocator_incubating.go``), and so it is in kubedra's
    (:mod:`kubedra.allocation.requests`)."""


class ExactDeviceRequest(KubeModel):
    """A request for devices of one class; ``allocationMode`` is ``ExactCount`` or ``All``."""

    device_class_name: str
    selectors: list[DeviceSelector] | None = None
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] | None = None
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DeviceDerivedAttribute] | None = None
    """Alpha (gate ``DRADerivedAttributes``). Upstream's incubating allocator cannot handle
    them: a request that has any is an error for the whole attempt (``validateDeviceRequest``
    in ``structured/internal/incubating/allocator_incubating.go``), and so it is in kubedra's
    (:mod:`kubedra.allocation.requests`)."""


class DeviceRequest(KubeModel):
    """A named request: exactly one of ``exactly`` or ``firstAvailable``."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] | None = None


class DeviceConstraint(KubeModel):
    """``matchAttribute`` or ``distinctAttribute`` over some (or, if empty, all) requests."""

    requests: list[str] | None = None
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(KubeModel):
    """Configuration in a claim for some (or, if empty, all) requests."""

    requests: list[str] | None = None
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(KubeModel):
    """``spec.devices`` of a claim."""

    requests: list[DeviceRequest] | None = None
    constraints: list[DeviceConstraint] | None = None
    config: list[DeviceClaimConfiguration] | None = None


class ResourceClaimSpec(KubeModel):
    """``ResourceClaimSpec`` (immutable once created)."""

    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(KubeModel):
    """One allocated device; ``request`` is ``<request>`` or ``<request>/<subrequest>``."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    share_id: str | None = Field(default=None, alias="shareID")
    consumed_capacity: dict[str, Quantity] | None = None
    skip_node_operations: list[str] | None = None
    """Copied from the slice by upstream's experimental allocator only (alpha,
    ``DRAOptionalNodeOperations``)."""


class DeviceAllocationConfiguration(KubeModel):
    """Configuration copied into an allocation; ``source`` is ``FromClass`` or ``FromClaim``."""

    source: str
    requests: list[str] | None = None
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(KubeModel):
    """The devices of an allocation and their configuration."""

    results: list[DeviceRequestAllocationResult] | None = None
    config: list[DeviceAllocationConfiguration] | None = None


class AllocationResult(KubeModel):
    """``status.allocation``, written by kube-scheduler; ``nodeSelector`` None = everywhere."""

    devices: DeviceAllocationResult | None = None
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(KubeModel):
    """An entry of ``status.reservedFor``."""

    api_group: str | None = None
    resource: str
    name: str
    uid: str


class NetworkDeviceData(KubeModel):
    """Network data a driver reports for a device."""

    interface_name: str | None = None
    ips: list[str] | None = None
    hardware_address: str | None = None


class AllocatedDeviceStatus(KubeModel):
    """An entry of ``status.devices``, keyed by (driver, pool, device, shareID); written by
    drivers (KEP-4817)."""

    driver: str
    pool: str
    device: str
    share_id: str | None = Field(default=None, alias="shareID")
    conditions: list[Condition] | None = None
    data: Any = None
    network_data: NetworkDeviceData | None = None


class ResourceClaimStatus(KubeModel):
    """``ResourceClaimStatus``."""

    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] | None = None
    devices: list[AllocatedDeviceStatus] | None = None


class ResourceClaim(KubeModel):
    """A ResourceClaim object."""

    api_version: str = API_VERSION
    kind: str = "ResourceClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)


class DeviceTaintSelector(KubeModel):
    """Which devices a DeviceTaintRule taints; unset fields match all."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(KubeModel):
    """``DeviceTaintRuleSpec``: the selector and the taint to add."""

    device_selector: DeviceTaintSelector | None = None
    taint: DeviceTaint


class DeviceTaintRuleStatus(KubeModel):
    """``DeviceTaintRuleStatus``: conditions such as ``EvictionInProgress``."""

    conditions: list[Condition] | None = None


class DeviceTaintRule(KubeModel):
    """A DeviceTaintRule object (``resource.k8s.io/v1`` since 1.37)."""

    api_version: str = API_VERSION
    kind: str = "DeviceTaintRule"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceTaintRuleSpec
    status: DeviceTaintRuleStatus | None = None


AllocationMode = Literal["ExactCount", "All"]
