"""Build the desired pool of one DeviceInventory: the devices and counter sets to publish.

The pool holds the admin's statically declared devices and counter sets (``spec``) and what the
node agent discovered (``status.discovered``), with ``spec.overrides`` applied. Devices that are
reported unhealthy are published with a ``NoSchedule`` taint (KEP-5055 device taints), so the
scheduler stops choosing them while ``kubectl describe`` still shows them; a device keeps the
taint for a hold-down time after it is healthy again (``healthTransitionTime``), so that one
transient fault does not send claims to a GPU that fails again at once, nor take it out until a
restart (NVIDIA dra-driver#904, k8s-device-plugin#234). A device or counter
set that would make the API server reject a slice, or the allocator ignore the pool, is left
out (``DesiredPool.left_out`` names the field and why); the others are published.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from kubedra.api.inventory import (
    NODE_LOCAL_BINDING,
    DeviceInventory,
    DiscoveryResult,
    InventoryDevice,
    Rejection,
)
from kubedra.api.limits import (
    DEVICE_TAINTS_MAX_LENGTH,
    OPERATOR_TAINTS_MAX,
    OVERRIDE_TAINTS_MAX_LENGTH,
)
from kubedra.api.mig import expand
from kubedra.api.resource import (
    CounterSet,
    Device,
    DeviceTaint,
    NodeAllocatableOverhead,
    NodeAllocatableResource,
    NodeSelector,
)
from kubedra.api.time import parse_timestamp
from kubedra.api.validation import (
    FieldError,
    binding_condition_errors,
    consumption_errors,
    counter_set_errors,
    device_errors,
    taint_errors,
)

UNHEALTHY_TAINT_KEY = "kubedra.io/unhealthy"
"""Taint key put on devices the agent reports ``Unhealthy``; its value is the health message."""
RECOVERED_TAINT_VALUE = "recovered-hold-down"
"""The taint's value while a device that is healthy again waits out the hold-down time."""

_TAINT_VALUE_MAX = 63

NO_NODE_OPERATIONS = ("NodePrepareResources", "NodeUnprepareResources")
"""``skipNodeOperations`` of a pool that needs no node work: the kubelet calls neither gRPC
for a claim whose devices of the driver all skip them (KEP-5945; ``SkipNodeOperations`` in
k8s.io/api/resource/v1/types.go). Both, as ``NodePrepareResources`` may not be skipped alone
(``validateSkipNodeOperations`` in pkg/apis/resource/validation/validation.go)."""


@dataclass(frozen=True)
class DesiredPool:
    """What one inventory publishes: ``driver``/``name`` identify the pool; exactly one of
    ``node_name``, ``node_selector``, ``all_nodes`` says where it is available; ``devices`` are
    sorted by name and ``counter_sets`` by name."""

    driver: str
    name: str
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    devices: list[Device] = field(default_factory=list)
    counter_sets: list[CounterSet] = field(default_factory=list)
    disabled: dict[str, Device] = field(default_factory=dict)
    """Devices of the inventory that an override disables (not in ``devices``), by name."""
    left_out: list[Rejection] = field(default_factory=list)
    """Devices and counter sets left out because the API server would refuse them (or the
    allocator would ignore the pool for them), each with the field and why; those the agent
    left out of its report come first."""
    held_until: datetime | None = None
    """When the first hold-down of a recovered device ends (the pool changes then), or None."""
    skip_node_operations: tuple[str, ...] = ()
    """The slices' ``spec.skipNodeOperations`` (KEP-5945): :data:`NO_NODE_OPERATIONS` for a
    pool without node (no agent prepares its devices), else empty."""
    node_allocatable_overhead: dict[str, NodeAllocatableOverhead] = field(default_factory=dict)
    """What every device carries as ``nodeAllocatableResources`` overhead (KEP-5517), by node
    resource (``memory``): the inventory's ``spec.nodeAllocatableOverhead``, or empty."""
    withheld: tuple[str, ...] = ()
    """What the inventory asks for that is published without, as this cluster does not keep it
    (the devices are published): one sentence each, for the condition."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels every slice of the pool carries besides the operator's own: the inventory's
    labels of the keys of the process's pool selector (:func:`kubedra.api.selector.pool_labels`),
    so that the slices match the selector the inventory does."""


def pool_name(inventory: DeviceInventory) -> str:
    """The name of the inventory's pool (see :func:`name_pool`)."""
    spec = inventory.spec
    return name_pool(spec.pool, spec.node_name, inventory.metadata.name or "")


def name_pool(pool: str | None, node_name: str | None, inventory_name: str) -> str:
    """A pool's name: ``spec.pool``, else the node name for a node-local pool, else the
    inventory name (upstream's resourceslice controller names a node-local pool after its
    node)."""
    return pool or node_name or inventory_name


def hold_down_end(device: InventoryDevice, now: datetime, hold_down: float) -> datetime | None:
    """When the hold-down of ``device`` ends, if it is ``Healthy`` and its health changed less
    than ``hold_down`` seconds before ``now``; else None."""
    if device.health != "Healthy" or not device.health_transition_time or hold_down <= 0:
        return None
    end = parse_timestamp(device.health_transition_time) + timedelta(seconds=hold_down)
    return end if end > now else None


def binding_errors(device: InventoryDevice, node_name: str | None) -> list[FieldError]:
    """Binding conditions (KEP-5007) as the API validates them
    (:func:`~kubedra.api.validation.binding_condition_errors`), on network-attached pools
    only: the operator's attach step serves them (:mod:`kubedra.binding`), and a node-local
    device is attached by its node (kubedra's rule; the CRD refuses it in ``spec.devices``)."""
    conditions = device.binding_conditions or []
    failures = device.binding_failure_conditions or []
    if node_name and (conditions or failures or device.binds_to_node):
        return [FieldError("bindingConditions", NODE_LOCAL_BINDING)]
    return binding_condition_errors(conditions, failures)


def discovered_devices(inventory: DeviceInventory) -> DiscoveryResult | None:
    """What the agent reported, in the full form (:func:`kubedra.api.mig.expand`), or None
    before its first report."""
    discovered = inventory.status.discovered if inventory.status else None
    return expand(discovered) if discovered is not None else None


def build_pool(inventory: DeviceInventory, *, now: datetime | None = None,
               hold_down: float = 0.0, discovered: DiscoveryResult | None = None
               ) -> DesiredPool:
    """Merge declared and discovered devices, apply overrides, and leave out what cannot be
    published.

    ``hold_down`` (seconds) keeps the unhealthy taint on a device that turned ``Healthy``
    less than that long before ``now`` (default: the current time), with the value
    :data:`RECOVERED_TAINT_VALUE`; ``held_until`` of the result says when to build again.
    Binding conditions that break a rule of :func:`binding_errors` leave the device out too.
    A pool without node (``spec.nodeSelector`` or ``spec.allNodes``: no agent serves it) skips
    the node operations (:data:`NO_NODE_OPERATIONS`).
    Every device carries ``spec.nodeAllocatableOverhead`` as its ``nodeAllocatableResources``
    overhead (KEP-5517: the scheduler charges it to the node's allocatable resources and the
    kubelet adds it to the pod's cgroups, per pod and per container using the claim).

    A value the API server refuses in a slice must not cost the devices that do not depend on
    it, so nothing here raises: a counter set whose name is taken already or that breaks a
    rule of :func:`~kubedra.api.validation.counter_set_errors` is left out, and so is a device
    whose name is taken already (the declared one wins), that breaks a rule of
    :func:`~kubedra.api.validation.device_errors`, that consumes a counter set or counter the
    pool lacks (or more than it holds), or whose override taint is not a valid taint. Each is
    in ``left_out`` with the field (``spec.devices[1].attributes[model].string``) and why,
    after what the agent left out of its report (``status.discovered.rejected``). The
    agent's report is read in the full form (:func:`discovered_devices`): a GPU in the compact
    form publishes the same devices as one listing its partitions. A caller that has it already
    passes it as ``discovered``, so that one reconcile writes a report out once (a MIG node's
    expansion was 47 % of the operator's publish CPU when done four times: bench/RESULTS.md,
    scale, round 16).
    """
    spec = inventory.spec
    discovered = discovered if discovered is not None else discovered_devices(inventory)
    sources: list[tuple[str, InventoryDevice]] = [
        (f"spec.devices[{i}]", d) for i, d in enumerate(spec.devices or [])]
    if discovered:
        # a device by its place in the report (a device left out for its deviceModel, or a
        # GPU's partitions written out after it, shift the written-out list's index); a
        # partition written out from migModels, which the report does not list, by its name
        report = inventory.status.discovered if inventory.status else None
        place = {d.name: i for i, d in enumerate(report.devices)} if report else {}
        sources += [(f"status.discovered.devices[{place.get(d.name, d.name)}]", d)
                    for d in discovered.devices]
    counter_sources = [(f"spec.counterSets[{i}]", c) for i, c in enumerate(spec.counter_sets or [])]
    if discovered:
        counter_sources += [(f"status.discovered.counterSets[{i}]", c)
                            for i, c in enumerate(discovered.counter_sets)]
    left_out = list(discovered.rejected) if discovered else []

    counter_sets: dict[str, CounterSet] = {}
    for path, counter_set in counter_sources:
        errors = ([FieldError("name", f"counter set {counter_set.name!r} is declared twice")]
                  if counter_set.name in counter_sets else counter_set_errors(counter_set))
        left_out += _rejections(counter_set.name, path, errors)
        if not errors:
            counter_sets[counter_set.name] = counter_set

    now = now or datetime.now(UTC)
    held_until: datetime | None = None
    costs = dict(sorted((spec.node_allocatable_overhead or {}).items())) if spec.node_name else {}
    overhead = {name: NodeAllocatableResource(overhead=cost) for name, cost in costs.items()}
    overrides = {o.device: (i, o) for i, o in enumerate(spec.overrides or [])}
    seen: set[str] = set()
    disabled: dict[str, Device] = {}
    devices: list[Device] = []
    for path, device in sources:
        if device.name in seen:
            left_out += _rejections(device.name, path, [FieldError(
                "name", f"device {device.name!r} is listed twice")])
            continue
        seen.add(device.name)
        index, override = overrides.get(device.name, (0, None))
        taints = list(override.taints or []) if override else []
        errors = (device_errors(device) + consumption_errors(device, counter_sets)
                  + binding_errors(device, spec.node_name))
        left_out += _rejections(device.name, path, errors)
        taint_problems = [FieldError(f"taints[{i}].{e.field}", e.message)
                          for i, t in enumerate(taints) for e in taint_errors(t)]
        if len(taints) > OVERRIDE_TAINTS_MAX_LENGTH:  # stored before the CRD refused it
            taint_problems.append(FieldError("taints", (
                f"{len(taints)} taints: at most {OVERRIDE_TAINTS_MAX_LENGTH}, since the operator "
                f"may add {OPERATOR_TAINTS_MAX} of its own (kubedra.io/unhealthy, "
                "kubedra.io/draining) and a device carries at most "
                f"{DEVICE_TAINTS_MAX_LENGTH}")))
        left_out += _rejections(device.name, f"spec.overrides[{index}]", taint_problems)
        if errors or taint_problems:
            continue
        if device.health == "Unhealthy":
            reason = _taint_value(device.health_message or "reported unhealthy")
            taints.append(DeviceTaint(key=UNHEALTHY_TAINT_KEY, value=reason or None,
                                      effect="NoSchedule"))
        elif (end := hold_down_end(device, now, hold_down)) is not None:
            taints.append(DeviceTaint(key=UNHEALTHY_TAINT_KEY, value=RECOVERED_TAINT_VALUE,
                                      effect="NoSchedule"))
            held_until = min(held_until or end, end)
        built = Device(
            name=device.name,
            attributes=dict(device.attributes) or None,
            capacity=dict(device.capacity) or None,
            consumes_counters=device.consumes_counters or None,
            taints=taints or None,
            binds_to_node=device.binds_to_node,
            binding_conditions=device.binding_conditions or None,
            binding_failure_conditions=device.binding_failure_conditions or None,
            node_allocatable_resources=overhead or None,
        )
        if override and override.disabled:
            disabled[device.name] = built
        else:
            devices.append(built)
    return DesiredPool(
        driver=spec.driver,
        name=pool_name(inventory),
        node_name=spec.node_name,
        node_selector=spec.node_selector,
        all_nodes=bool(spec.all_nodes),
        devices=sorted(devices, key=lambda d: d.name),
        counter_sets=[counter_sets[name] for name in sorted(counter_sets)],
        disabled=disabled,
        left_out=left_out,
        held_until=held_until,
        skip_node_operations=() if spec.node_name else NO_NODE_OPERATIONS,
        node_allocatable_overhead=costs,
    )


def _rejections(name: str, path: str, errors: list[FieldError]) -> list[Rejection]:
    return [Rejection(name=name, field=f"{path}.{e.field}", message=e.message) for e in errors]


def _taint_value(text: str) -> str:
    """A taint value must be a label value: ASCII letters and digits, '-', '_', '.', at most
    63 characters (``validateDeviceTaint``); anything else becomes '-'."""
    cleaned = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "-" for c in text)
    return cleaned.strip("-_.")[:_TAINT_VALUE_MAX].strip("-_.")


DRAINING_TAINT_KEY = "kubedra.io/draining"
"""Taint key of a device that is still published but no longer offered; its value says why:
``disabled`` by an override, ``gone`` (no longer reported), ``withdrawn`` (the pool is
withdrawn) or ``deleted`` (its inventory is deleted)."""


def draining_since(device: Device) -> datetime | None:
    """When ``device`` was tainted ``kubedra.io/draining`` (its ``timeAdded``, which the API
    server sets when a taint is written without one: ``SetDefaults_DeviceTaint`` in
    pkg/apis/resource/v1/defaults.go), or None when it has no such taint or no valid time."""
    for taint in device.taints or []:
        if taint.key == DRAINING_TAINT_KEY and taint.time_added:
            try:
                return parse_timestamp(taint.time_added)
            except ValueError:
                return None
    return None


def drain_deadlines(pool: DesiredPool, published: Sequence[Device], held: set[str],
                    now: datetime, grace: float) -> dict[str, datetime]:
    """When each device that leaves the pool may be taken out of its slices.

    A device is never taken out of a published pool in one step. kube-scheduler allocates
    from its informer's copy of the slices, which lags the API server: a device dropped while
    no claim holds it (in the operator's view) may still be allocated from a copy that shows
    it, and until the operator sees that allocation and publishes the device again, its
    shared counters are free in the published pool, so an overlapping partition can be handed
    out too (``counter .../memory-slice-2: 2 used of 1`` in the fault suite, issue 13). So a
    device that is published but no longer in the pool, and that no claim holds, is first
    published with the ``NoSchedule`` taint :data:`DRAINING_TAINT_KEY` — kube-scheduler
    allocates no device with a taint the claim does not tolerate (KEP-5055; DRADeviceTaints is
    GA in v1.37) — and taken out only ``grace`` seconds after that taint's ``timeAdded``, once
    every scheduler has seen it. The time comes from the published slices, not the
    operator's memory, so a restart or a new leader keeps the same deadline.

    Args:
        pool: the pool built from the inventory (the devices offered).
        published: the devices in the pool's slices now.
        held: names of devices that allocated claims hold (kept until released, not here).
        now: the current time.
        grace: seconds between tainting a leaving device and taking it out (0: at once).

    Returns:
        Device name → when its grace ends, for each leaving device whose grace has not
        ended (one not tainted yet: ``now`` + ``grace``).
    """
    offered = {d.name for d in pool.devices}
    ends: dict[str, datetime] = {}
    for device in published:
        if device.name in offered or device.name in held or device.name in ends:
            continue
        end = (draining_since(device) or now) + timedelta(seconds=grace)
        if end > now:
            ends[device.name] = end
    return ends


def keep_dropped_devices(pool: DesiredPool, keep: set[str], previous: Sequence[Device],
                         previous_counter_sets: Sequence[CounterSet], *, dropped: str = "gone"
                         ) -> tuple[DesiredPool, dict[str, str]]:
    """Keep publishing devices that left the pool but must stay: those claims still hold, and
    those within their drain grace (:func:`drain_deadlines`).

    A device that leaves the pool while allocated would also free its shared counters, and the
    scheduler would then hand out a partition that overlaps it (the allocator counts the
    consumption of allocated devices only for devices it can see in a slice; see
    ``checkAvailableCounters`` in k8s.io/dynamic-resource-allocation structured/internal).
    So such a device stays with a ``NoSchedule`` taint ``kubedra.io/draining`` until its claims
    release it: a disabled one as the inventory describes it, one that is no longer reported as
    last published. The counter sets it consumes stay too, and so does every other device's
    consumption of those sets as last published — when MIG partitions are switched off while
    one is allocated, the whole GPU must still exclude it.

    Args:
        pool: the pool built from the inventory.
        keep: names of this pool's devices to keep though the pool dropped them.
        previous: the devices last published in this pool (where dropped devices come from).
        previous_counter_sets: the counter sets last published in this pool.
        dropped: why a kept device missing from the pool is kept (the taint's value):
            ``gone`` (no longer reported), ``withdrawn`` or ``deleted``.

    Returns:
        The pool with those devices added, and device name → ``disabled`` or ``dropped`` for
        each.
    """
    published = {d.name for d in pool.devices}
    missing = keep - published
    if not missing:
        return pool, {}
    before = {d.name: d for d in previous}
    known_sets = {c.name: c for c in previous_counter_sets}
    kept_sets = {c.name: c for c in pool.counter_sets}
    devices = {d.name: d for d in pool.devices}
    draining: dict[str, str] = {}
    for name in sorted(missing):
        device = pool.disabled.get(name) or before.get(name)
        if device is None:
            continue
        reason = "disabled" if name in pool.disabled else dropped
        taints = [t for t in device.taints or [] if t.key != DRAINING_TAINT_KEY]
        taints.append(DeviceTaint(key=DRAINING_TAINT_KEY, value=reason, effect="NoSchedule"))
        devices[name] = device.model_copy(update={"taints": taints})
        draining[name] = reason
        for use in device.consumes_counters or []:
            if use.counter_set not in kept_sets and use.counter_set in known_sets:
                kept_sets[use.counter_set] = known_sets[use.counter_set]
    carried = set(kept_sets) - {c.name for c in pool.counter_sets}
    for name, device in list(devices.items()):
        if name in draining or name not in before:
            continue
        uses = list(device.consumes_counters or [])
        used = {u.counter_set for u in uses}
        uses += [u for u in before[name].consumes_counters or []
                 if u.counter_set in carried and u.counter_set not in used]
        if len(uses) != len(device.consumes_counters or []):
            devices[name] = device.model_copy(update={"consumes_counters": uses[:2]})
    kept = replace(pool, devices=[devices[n] for n in sorted(devices)],
                   counter_sets=[kept_sets[n] for n in sorted(kept_sets)])
    return kept, draining
