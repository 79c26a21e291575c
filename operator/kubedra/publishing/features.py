"""What the cluster's API server keeps of a ResourceSlice, and the pool cut to fit it.

A feature gate that is off makes the API server drop its fields from a written slice without an
error (``dropDisabledFields`` in pkg/registry/resource/resourceslice/strategy.go): on
Kubernetes 1.34 and 1.35 ``DRADeviceTaints`` and ``DRAPartitionableDevices`` are alpha and off
(see ../shared/reference/dra-api.md, section 6), so a published ``kubedra.io/unhealthy`` taint
would vanish and the device be allocated; counters would vanish and MIG partitions of one GPU be
allocated together. The operator therefore learns what survives a write (a server-side dry-run
create of :func:`probe_slice`, compared by :func:`served_from_probe`) and :func:`fit_pool` leaves
out, with the reason, what the cluster cannot carry, instead of publishing it stripped.

``skipNodeOperations`` (KEP-5945, gate ``DRAOptionalNodeOperations``: alpha and off by default
in 1.37) is only an optimisation: where the cluster does not keep it, a pool is published
without it (the kubelet then calls the driver as before), and the detected set says so, as
upstream's resourceslice controller reports the gate ``DRAOptionalNodeOperations`` disabled
when a written slice comes back without it (k8s.io/dynamic-resource-allocation
resourceslice/resourceslicecontroller.go).

``nodeAllocatableResources`` (KEP-5517, gate ``DRANodeAllocatableResources``: alpha and off by
default in 1.36 and 1.37, unknown before; ``dropDisabledDRANodeAllocatableResourcesFields`` in
pkg/registry/resource/resourceslice/strategy.go) carries the host overhead an inventory
declares (``spec.nodeAllocatableOverhead``). Where the cluster does not keep it, the devices are
published without it and the condition says so (:data:`OVERHEAD_OFF`): the scheduler then
does not charge the overhead, as before the field existed.

A device taint with the effect ``None`` (a taint that only informs) is not a gate's field: the
API server of 1.34 refuses it, and with it the whole slice (``validDeviceTaintEffects`` in
pkg/apis/resource/validation/validation.go: NoSchedule and NoExecute in v1.34.4; v1.35.4 adds
None, with no gate). Where a dry-run of :func:`probe_effect_none_slice` is refused, a device
with such a taint (an override's) is left out, with the reason (:data:`EFFECT_NONE_REFUSED`),
and the rest of its pool is published.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kubedra.api.inventory import Rejection
from kubedra.api.resource import Device
from kubedra.publishing.pool import NO_NODE_OPERATIONS, DesiredPool

PROBE_SLICE_NAME = "kubedra-feature-probe"
"""Name of the slice the operator dry-run creates to learn what the API server keeps."""


@dataclass(frozen=True)
class ServedFeatures:
    """What the cluster serves that publishing depends on.

    Attributes:
        device_taints: ``devices[].taints`` survives a write (gate ``DRADeviceTaints``).
        partitionable_devices: ``sharedCounters`` and ``devices[].consumesCounters`` survive
            (gate ``DRAPartitionableDevices``).
        device_taint_rules: the API serves DeviceTaintRule in ``resource.k8s.io/v1``.
        skip_node_operations: ``spec.skipNodeOperations`` survives a write (gate
            ``DRAOptionalNodeOperations``). False until a probe shows it, unlike the others
            (on by default where they exist): a slice written with a field the server drops
            differs from its stored copy, and would be written again on every reconcile.
        node_allocatable_resources: ``devices[].nodeAllocatableResources`` survives a write
            (gate ``DRANodeAllocatableResources``). False until a probe shows it, as
            ``skip_node_operations``.
        taint_effect_none: the API server takes a device taint with the effect None (from
            1.35; no gate); probed only where ``device_taints``.
        resource_versions: the served versions of ``resource.k8s.io``, preferred first.
        server_version: the API server's ``gitVersion`` (``v1.37.2``), or "" when unknown.
    """

    device_taints: bool = True
    partitionable_devices: bool = True
    device_taint_rules: bool = True
    skip_node_operations: bool = False
    node_allocatable_resources: bool = False
    taint_effect_none: bool = True
    resource_versions: tuple[str, ...] = ("v1",)
    server_version: str = ""

    @property
    def off(self) -> tuple[str, ...]:
        """The feature gates, by upstream name, whose fields this cluster does not keep."""
        gates = (("DRADeviceTaints", self.device_taints),
                 ("DRAPartitionableDevices", self.partitionable_devices),
                 ("DRADeviceTaintRules", self.device_taint_rules),
                 ("DRAOptionalNodeOperations", self.skip_node_operations),
                 ("DRANodeAllocatableResources", self.node_allocatable_resources))
        return tuple(name for name, on in gates if not on)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form for ``/healthz`` and the inventory's condition."""
        return {"serverVersion": self.server_version,
                "resourceVersions": list(self.resource_versions),
                "deviceTaints": self.device_taints,
                "partitionableDevices": self.partitionable_devices,
                "deviceTaintRules": self.device_taint_rules,
                "skipNodeOperations": self.skip_node_operations,
                "nodeAllocatableResources": self.node_allocatable_resources,
                "taintEffectNone": self.taint_effect_none,
                "off": list(self.off)}


PROBE_OVERHEAD = {"memory": {"overhead": {"perPod": "1"}}}
"""The probe device's ``nodeAllocatableResources``."""
PROBE_NODE_SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "kubedra.io/feature-probe", "operator": "In", "values": ["no-node"]}]}]}
"""The probe slice's node selector: a label no node has."""


def probe_slice(driver: str) -> dict[str, Any]:
    """The ResourceSlice body the operator dry-run creates (never stored) to learn whether the
    server keeps device taints, ``nodeAllocatableResources`` and ``skipNodeOperations``: one
    device with one taint and a memory overhead of one byte per pod, skipping
    :data:`~kubedra.publishing.pool.NO_NODE_OPERATIONS` (a server without a field drops it as
    unknown: field validation ``Warn`` is the default), for the nodes of
    :data:`PROBE_NODE_SELECTOR`, none: the API server refuses the overhead for any node its
    slice may be used on that does not declare :data:`NODE_ALLOCATABLE_FEATURE`."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": PROBE_SLICE_NAME},
        "spec": {"driver": driver, "nodeSelector": PROBE_NODE_SELECTOR,
                 "skipNodeOperations": list(NO_NODE_OPERATIONS),
                 "pool": {"name": PROBE_SLICE_NAME, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "probe", "taints": [
                     {"key": "kubedra.io/probe", "effect": "NoSchedule"}],
                     "nodeAllocatableResources": PROBE_OVERHEAD}]},
    }


def probe_counter_slice(driver: str) -> dict[str, Any]:
    """The counter half of the probe: a slice of one shared counter set only (valid on every
    version: from 1.35 counter sets live in slices of their own)."""
    body = probe_slice(driver)
    body["spec"].pop("devices")
    body["spec"]["sharedCounters"] = [{"name": "probe", "counters": {"c": {"value": "1"}}}]
    return body


def probe_effect_none_slice(driver: str) -> dict[str, Any]:
    """The probe whose dry-run create the API server refuses where it does not know the taint
    effect None (1.34): one device with one taint of that effect, for no node."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": PROBE_SLICE_NAME},
        "spec": {"driver": driver, "nodeSelector": PROBE_NODE_SELECTOR,
                 "pool": {"name": PROBE_SLICE_NAME, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "probe", "taints": [
                     {"key": "kubedra.io/probe", "effect": "None"}]}]},
    }


def served_from_probe(returned_taints: dict[str, Any], returned_counters: dict[str, Any], *,
                      resource_versions: tuple[str, ...], device_taint_rules: bool,
                      server_version: str = "",
                      taint_effect_none: bool = True) -> ServedFeatures:
    """The features, from what the API server returned for the dry-run creates of
    :func:`probe_slice` and :func:`probe_counter_slice` (a dropped field is absent), and
    whether it took :func:`probe_effect_none_slice` (``taint_effect_none``)."""
    spec = returned_taints.get("spec") or {}
    devices = spec.get("devices") or [{}]
    return ServedFeatures(
        device_taints=bool(devices[0].get("taints")),
        skip_node_operations=spec.get("skipNodeOperations") == list(NO_NODE_OPERATIONS),
        node_allocatable_resources=devices[0].get("nodeAllocatableResources") == PROBE_OVERHEAD,
        partitionable_devices=bool((returned_counters.get("spec") or {}).get("sharedCounters")),
        device_taint_rules=device_taint_rules,
        taint_effect_none=taint_effect_none,
        resource_versions=resource_versions,
        server_version=server_version,
    )


TAINTS_OFF = ("this cluster does not keep device taints (feature gate "
              "DRADeviceTaints is off), so the device would be published without its taint "
              "and be allocated")
COUNTERS_OFF = ("this cluster does not keep shared counters (feature gate "
                "DRAPartitionableDevices is off), so partitions sharing a device could be "
                "allocated together")
EFFECT_NONE_REFUSED = ("this cluster's API server refuses the device taint effect None "
                       "(Kubernetes 1.34 knows only NoSchedule and NoExecute), and with it the "
                       "whole ResourceSlice: give the taint NoSchedule or NoExecute, or upgrade "
                       "to 1.35")
OVERHEAD_OFF = ("published without spec.nodeAllocatableOverhead: this cluster does not keep "
                "nodeAllocatableResources (feature gate DRANodeAllocatableResources is off), so "
                "pods are not charged for it")
NODE_ALLOCATABLE_FEATURE = "DRANodeAllocatableResources"
"""The feature a kubelet declares (``Node.status.declaredFeatures``, KEP-5328) when it accounts
for ``nodeAllocatableResources``: the API server refuses a slice whose devices carry the field
for a node that does not declare it (admission plugin ``NodeDeclaredFeatureValidator``,
plugin/pkg/admission/nodedeclaredfeatures/admission.go)."""


def overhead_undeclared(node: str) -> str:
    """Why a pool of ``node`` is published without its overhead on a cluster that keeps it."""
    return (f"published without spec.nodeAllocatableOverhead: node {node} does not declare "
            f"the feature {NODE_ALLOCATABLE_FEATURE} (its kubelet has the feature gate off), "
            "and the API server refuses a slice with the overhead for such a node")


def pool_off(served: ServedFeatures, node_features: frozenset[str] | None) -> tuple[str, ...]:
    """What a pool's decision depends on of the cluster's features, for its fingerprint:
    ``served.off``, and ``<feature> undeclared`` where the cluster keeps the overhead but the
    pool's node (``node_features``: what its kubelet declares; None for a pool without node)
    does not declare :data:`NODE_ALLOCATABLE_FEATURE`, and ``taint effect None refused``
    where the cluster keeps taints but refuses that effect."""
    off = served.off
    if served.device_taints and not served.taint_effect_none:
        off = (*off, "taint effect None refused")
    if (served.node_allocatable_resources and node_features is not None
            and NODE_ALLOCATABLE_FEATURE not in node_features):
        return (*off, f"{NODE_ALLOCATABLE_FEATURE} undeclared")
    return off


def overhead_blocker(pool: DesiredPool, served: ServedFeatures,
                     node_features: frozenset[str]) -> str | None:
    """Why ``pool``'s ``nodeAllocatableResources`` overhead cannot be published (one sentence),
    or None when it can or there is none: the cluster must keep the field and the pool's node
    (``node_features``: what its kubelet declares) declare :data:`NODE_ALLOCATABLE_FEATURE`.
    A pool without node never has overhead (the CRD refuses it)."""
    if not pool.node_allocatable_overhead:
        return None
    if not served.node_allocatable_resources:
        return OVERHEAD_OFF
    if pool.node_name and NODE_ALLOCATABLE_FEATURE not in node_features:
        return overhead_undeclared(pool.node_name)
    return None


def fit_pool(pool: DesiredPool, served: ServedFeatures,
             node_features: frozenset[str] = frozenset()) -> DesiredPool:
    """``pool`` without what ``served`` cannot carry, each in ``left_out`` with why: with
    device taints off, every tainted device (unhealthy, recovering, draining, or an override's
    taint); where the effect None is refused, every device with a taint of it; with
    partitionable devices off, every counter set and every device that consumes counters but
    the :func:`sole_consumers`, published without ``consumesCounters`` (a GPU with MIG
    partitions on is published whole, its partitions left out). Unchanged when the cluster
    serves all three. Without ``skipNodeOperations`` served, the pool is published without
    it (nothing is left out: the kubelet calls the driver as it would without the field).
    Where the overhead cannot be published (:func:`overhead_blocker`, ``node_features`` what
    the pool's node declares), the devices are published without it, and ``withheld`` says
    why."""
    if pool.skip_node_operations and not served.skip_node_operations:
        pool = replace(pool, skip_node_operations=())
    blocker = overhead_blocker(pool, served, node_features)
    if blocker:
        pool = replace(pool, node_allocatable_overhead={}, withheld=(*pool.withheld, blocker),
                       devices=[d.model_copy(update={"node_allocatable_resources": None})
                                for d in pool.devices])
    left_out: list[Rejection] = []
    devices = []
    sole = {} if served.partitionable_devices else sole_consumers(pool)
    for device in pool.devices:
        if device.taints and not served.device_taints:
            left_out.append(Rejection(name=device.name, field=f"devices[{device.name}].taints",
                                      message=TAINTS_OFF))
        elif not served.taint_effect_none and any(t.effect == "None" for t in device.taints or []):
            left_out.append(Rejection(name=device.name, field=f"devices[{device.name}].taints",
                                      message=EFFECT_NONE_REFUSED))
        elif device.name in sole:
            devices.append(sole[device.name])
        elif device.consumes_counters and not served.partitionable_devices:
            left_out.append(Rejection(name=device.name,
                                      field=f"devices[{device.name}].consumesCounters",
                                      message=COUNTERS_OFF))
        else:
            devices.append(device)
    counter_sets = pool.counter_sets if served.partitionable_devices else []
    left_out += [Rejection(name=c.name, field=f"counterSets[{c.name}]", message=COUNTERS_OFF)
                 for c in pool.counter_sets if not served.partitionable_devices]
    if not left_out:
        return pool
    return replace(pool, devices=devices, counter_sets=counter_sets,
                   left_out=[*pool.left_out, *left_out])


def sole_consumers(pool: DesiredPool) -> dict[str, Device]:
    """The devices of ``pool`` that a cluster without shared counters may still be given, with
    their ``consumesCounters`` removed (the API server would drop it anyway): for each counter
    set, the first device by name that consumes that set only, every counter of it in full
    (a MIG-capable GPU, whose whole device consumes its entire counter set). While it is
    allocated nothing else of the set could be, so published alone, with every other consumer
    of the set left out, it can never be allocated together with an overlapping device.
    Returns device name → the device to publish."""
    sets = {c.name: c.counters for c in pool.counter_sets}
    chosen: dict[str, Device] = {}
    for device in sorted(pool.devices, key=lambda d: d.name):
        if len(device.consumes_counters or []) != 1:
            continue
        [use] = device.consumes_counters or []
        full = sets.get(use.counter_set)
        if full is None or use.counter_set in chosen or use.counters.keys() != full.keys():
            continue
        if all(use.counters[k].value >= counter.value for k, counter in full.items()):
            chosen[use.counter_set] = device.model_copy(update={"consumes_counters": None})
    return {d.name: d for d in chosen.values()}
