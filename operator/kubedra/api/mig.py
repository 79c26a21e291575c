"""MIG partitions of a GPU as partitionable devices that share the GPU's counters (KEP-4815).

For a MIG-capable GPU ``gpu-N`` and ``mig: partitions``, every possible placement of every
GPU-instance profile becomes a device, and all of them, with the whole GPU, draw from one
counter set ``gpu-N-counters``. kube-scheduler allocates a device only if, for every counter,
the sum over the allocated devices stays within the set's value (``checkAvailableCounters`` in
``k8s.io/dynamic-resource-allocation/structured/internal/stable/allocator_stable.go``).

Counters (names are DNS labels, as ``validateCounterName`` in
``pkg/apis/resource/validation/validation.go`` requires):

- ``memory-slice-0`` … ``memory-slice-<M-1>``, value 1 each, M = the highest
  ``start + size`` of any placement (8 on the H200). A placement consumes the slices
  ``start … start+size-1``, so two placements that overlap can never both be allocated;
- ``compute-slices``: the largest profile's ``sliceCount`` (7); a profile consumes its own;
- ``copy-engines``, ``decoders``, ``encoders``, ``jpeg-engines``, ``ofa-engines``: the largest
  count any profile has (the full-GPU profile holds every engine MIG exposes); a profile
  consumes its own counts. Counters whose total is 0 (``encoders`` on the H200) are left out.
  ``ofa-engines`` is 1 on the H200, so only one ``1g.18gb+me`` is ever allocated.

The whole GPU consumes every counter in full, so it excludes every partition and any
partition excludes it. A partition consumes from one counter set only (limit: 2).

Partition names: ``<gpu>-mig-<profile>-s<start>``, the profile lower-cased with ``+`` written
``-`` and other characters that a DNS label cannot hold dropped: ``1g.18gb`` at start 3 of
``gpu-0`` is ``gpu-0-mig-1g18gb-s3``, ``1g.18gb+me`` at 0 is ``gpu-0-mig-1g18gb-me-s0``.

Partition attributes: what the parent lends (:data:`INHERITED`, and ``parentUUID`` = its
``uuid``), ``type`` = ``mig``, ``profile``
(``1g.18gb``), ``profileID`` (NVML's id, 19), ``placementStart``, ``placementSize`` (memory
slices). Capacities: ``memory`` (bytes), ``multiprocessors``, ``copyEngines``, ``decoders``,
``encoders``, ``jpegEngines``, ``ofaEngines`` (all present, zero included, so selectors need
no ``has()``). A partition is as healthy as its GPU (health, message, transition time).

The compact form (``status.discovered``): a MIG-capable GPU's partitions, its counter set and
what the whole GPU consumes are all functions of the GPU device and its profiles, and every GPU
of one model shares the profiles. So the agent reports such a GPU with ``migModel`` naming a
``migModels`` entry (the profiles as NVML gives them) instead of its 25 partitions
(:func:`compact`), and the operator rebuilds them with the same function the agent models them
with (:func:`expand`, :func:`mig_partitions`): the published slices are the same either way. A
MIG node's inventory shrinks from 397 KB to a few (``bench/RESULTS.md``, round 5). What the
GPUs of one kind share besides (product name, versions, memory) is written once too, in
``deviceModels`` (:mod:`kubedra.api.device_models`): :func:`compact` folds it last and
:func:`expand` writes it out first.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kubedra.api.device_models import fold, model_name, unfold
from kubedra.api.inventory import (
    MAX_DEVICES,
    DiscoveredDevice,
    DiscoveredState,
    DiscoveryResult,
    InventoryDevice,
    MigModel,
    MigProfile,
    Rejection,
)
from kubedra.api.quantity import BINARY_SI, DECIMAL_SI, Quantity
from kubedra.api.resource import (
    Counter,
    CounterSet,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)

TYPE = "type"
"""Attribute telling whole GPUs (``gpu``) from MIG partitions (``mig``); DeviceClasses use it."""
WHOLE_GPU = "gpu"
PARTITION = "mig"

INHERITED = ("productName", "architecture", "cudaComputeCapability", "driverVersion",
             "cudaDriverVersion", "resource.kubernetes.io/pcieRoot",
             "resource.kubernetes.io/numaNode")
"""Attributes a partition copies from its GPU, where the GPU has them, in this order."""
PARENT_UUID = "parentUUID"

COMPUTE_SLICES = "compute-slices"
MIB = 2**20


def memory_slice(index: int) -> str:
    """The counter of memory slice ``index``: ``memory-slice-<index>``."""
    return f"memory-slice-{index}"


@dataclass(frozen=True)
class Engine:
    """An engine kind a MIG profile holds: its counter, its capacity name, its count."""

    counter: str
    capacity: str
    count: Callable[[MigProfile], int]


ENGINES = (
    Engine("copy-engines", "copyEngines", lambda profile: profile.copy_engine_count),
    Engine("decoders", "decoders", lambda profile: profile.decoder_count),
    Engine("encoders", "encoders", lambda profile: profile.encoder_count),
    Engine("jpeg-engines", "jpegEngines", lambda profile: profile.jpeg_count),
    Engine("ofa-engines", "ofaEngines", lambda profile: profile.ofa_count),
)


def profile_label(name: str) -> str:
    """NVML's profile name without its ``MIG`` prefix: ``MIG 1g.18gb`` → ``1g.18gb``."""
    return name.removeprefix("MIG").strip()


def partition_name(gpu: str, profile: str, start: int) -> str:
    """The device name of a placement (scheme in the module docstring)."""
    label = re.sub(r"[^a-z0-9-]", "", profile.lower().replace("+", "-"))
    return f"{gpu}-mig-{label}-s{start}"


def counter_set_name(gpu: str) -> str:
    """The counter set of a GPU: ``<gpu>-counters``."""
    return f"{gpu}-counters"


@dataclass(frozen=True)
class MigPartitions:
    """A GPU's counter set, what the whole GPU consumes from it, and its partition devices."""

    counter_set: CounterSet
    whole_gpu: DeviceCounterConsumption
    devices: list[InventoryDevice]


@functools.lru_cache(maxsize=1024)
def _quantity(value: int, fmt: str = DECIMAL_SI) -> Quantity:
    """A quantity of ``value`` (quantities are immutable, so one serves every device: the
    operator expands hundreds of partitions per node from a few distinct values)."""
    return Quantity.from_value(value, fmt)


def _counts(values: dict[str, int]) -> dict[str, Counter]:
    return {name: Counter(value=_quantity(value)) for name, value in values.items()}


def _placed(profiles: Sequence[MigProfile]) -> list[MigProfile]:
    return [profile for profile in profiles if profile.placements]


def _totals(profiles: list[MigProfile]) -> dict[str, int]:
    """Counter values of the GPU (rules in the module docstring)."""
    slices = max(p.start + p.size for profile in profiles for p in profile.placements)
    totals = {memory_slice(index): 1 for index in range(slices)}
    totals[COMPUTE_SLICES] = max(profile.slice_count for profile in profiles)
    for engine in ENGINES:
        total = max(engine.count(profile) for profile in profiles)
        if total > 0:
            totals[engine.counter] = total
    return totals


def _consumption(profile: MigProfile, start: int, size: int) -> dict[str, int]:
    consumed = {memory_slice(index): 1 for index in range(start, start + size)}
    consumed[COMPUTE_SLICES] = profile.slice_count
    for engine in ENGINES:
        if engine.count(profile) > 0:
            consumed[engine.counter] = engine.count(profile)
    return consumed


def _capacity(profile: MigProfile) -> dict[str, DeviceCapacity]:
    capacity = {
        "memory": DeviceCapacity(value=_quantity(profile.memory_size_mb * MIB, BINARY_SI)),
        "multiprocessors": DeviceCapacity(value=_quantity(profile.multiprocessor_count)),
    }
    for engine in ENGINES:
        capacity[engine.capacity] = DeviceCapacity(value=_quantity(engine.count(profile)))
    return capacity


def inherited_attributes(gpu: InventoryDevice) -> dict[str, DeviceAttribute]:
    """What a partition of ``gpu`` copies from it: :data:`INHERITED`, then ``parentUUID``."""
    attributes = {name: gpu.attributes[name] for name in INHERITED if name in gpu.attributes}
    uuid = gpu.attributes.get("uuid")
    if uuid is not None:
        attributes[PARENT_UUID] = uuid
    return attributes


@dataclass(frozen=True)
class _Placement:
    """What the partition of one placement is on any GPU of its profiles: its name's label
    and start, its own attributes (after the inherited ones), capacities and counters."""

    label: str
    start: int
    attributes: dict[str, DeviceAttribute]
    capacity: dict[str, DeviceCapacity]
    counters: dict[str, Counter]


@dataclass(frozen=True)
class _Layout:
    """The partitions of a list of profiles, less what each GPU gives them (name, inherited
    attributes, counter set, health), and the counter set's values."""

    placements: tuple[_Placement, ...]
    totals: dict[str, Counter]


_PROFILE_VALUES = operator.attrgetter(*(field for field in MigProfile.model_fields
                                         if field != "placements"))
"""Every field of a :class:`MigProfile` but its placements, as a tuple."""


def _profiles_key(profiles: Sequence[MigProfile]) -> tuple[Any, ...]:
    """Every value of ``profiles`` (placements as ``(start, size)``), hashable."""
    return tuple((_PROFILE_VALUES(profile), tuple((p.start, p.size) for p in profile.placements))
                 for profile in profiles)


_LAYOUTS: dict[tuple[Any, ...], _Layout | None] = {}
_LAYOUTS_KEPT = 64
"""Layouts remembered by :func:`_layout` (a fleet has a few GPU models; past this many, all
are forgotten and built again)."""


def _layout(profiles: Sequence[MigProfile]) -> _Layout | None:
    """The layout of ``profiles``, or None if no profile has placements. Remembered by value
    (:func:`_profiles_key`): every GPU of a model and every node of a fleet has the same
    profiles, and building each partition's values was 26.5 % of a MIG node's expansion
    (bench/RESULTS.md, scale, round 16). What it holds is shared by every partition built
    from it, so nothing may change it in place; no reader does (a pool's device copies the
    maps, and a change of what a device consumes replaces its list)."""
    key = _profiles_key(profiles)
    if key not in _LAYOUTS:
        if len(_LAYOUTS) >= _LAYOUTS_KEPT:
            _LAYOUTS.clear()
        _LAYOUTS[key] = _build_layout(profiles)
    return _LAYOUTS[key]


def _build_layout(profiles: Sequence[MigProfile]) -> _Layout | None:
    placed = _placed(profiles)
    if not placed:
        return None
    placements = []
    for profile in placed:
        label = profile_label(profile.name)
        capacity = _capacity(profile)
        for placement in profile.placements:
            placements.append(_Placement(
                label=label, start=placement.start,
                attributes={
                    TYPE: DeviceAttribute(string_value=PARTITION),
                    "profile": DeviceAttribute(string_value=label),
                    "profileID": DeviceAttribute(int_value=profile.id),
                    "placementStart": DeviceAttribute(int_value=placement.start),
                    "placementSize": DeviceAttribute(int_value=placement.size),
                },
                capacity=capacity,
                counters=_counts(_consumption(profile, placement.start, placement.size))))
    return _Layout(placements=tuple(placements), totals=_counts(_totals(placed)))


def mig_partitions(gpu: InventoryDevice, profiles: Sequence[MigProfile]) -> MigPartitions | None:
    """Model the MIG partitions of GPU device ``gpu`` (rules in the module docstring).

    Args:
        gpu: the whole GPU as discovered (its name, attributes and health are read).
        profiles: its GPU-instance profiles; those without placements are skipped.

    Returns:
        ``None`` if no profile has placements, else the counter set, the whole GPU's
        consumption and one device per placement, in profile then start order.

    Raises:
        pydantic.ValidationError: a partition's name or the counter set's is not a DNS label
            (the GPU's name or a profile's is too long).

    What the profiles give every partition is built once per distinct list of profiles and
    shared (:func:`_layout`). Names clashing between profiles and more than 32 counters are
    left out later, by :func:`kubedra.discovery.backends.screen` (the agent) or
    :func:`kubedra.publishing.pool.build_pool` (the operator).
    """
    layout = _layout(profiles)
    if layout is None:
        return None
    inherited = inherited_attributes(gpu)
    counter_set = counter_set_name(gpu.name)
    devices = [InventoryDevice(
        name=partition_name(gpu.name, placement.label, placement.start),
        attributes={**inherited, **placement.attributes},
        capacity=placement.capacity,
        consumes_counters=[DeviceCounterConsumption(counter_set=counter_set,
                                                    counters=placement.counters)],
        health=gpu.health,
        health_message=gpu.health_message,
        health_transition_time=gpu.health_transition_time,
    ) for placement in layout.placements]
    return MigPartitions(
        counter_set=CounterSet(name=counter_set, counters=layout.totals),
        whole_gpu=DeviceCounterConsumption(counter_set=counter_set, counters=layout.totals),
        devices=devices,
    )


def expand(discovered: DiscoveredState) -> DiscoveryResult:
    """The agent's report with every GPU in the compact form written out: each device with
    ``migModel`` followed by its partitions (:func:`mig_partitions` of the model's profiles,
    the GPU consuming the whole counter set), its counter set after the listed ones.

    Devices naming a ``deviceModels`` entry are written out first
    (:func:`kubedra.api.device_models.unfold`), so partitions inherit the whole attributes.

    A report in the full form (an agent of an earlier version) comes back as it is. A
    ``migModel`` naming no ``migModels`` entry, one whose partitions would take the pool
    past :data:`~kubedra.api.inventory.MAX_DEVICES`, or one whose partitions' or counter set's
    names would not be DNS labels (a long GPU name), publishes the GPU alone and is in
    ``rejected`` with the field ``status.discovered.devices[<gpu>].migModel``; what the
    agent left out is in ``rejected`` first, then the devices whose ``deviceModel`` cannot
    be written out.
    """
    models = {model.name: model for model in discovered.mig_models or []}
    devices: list[InventoryDevice] = []
    counter_sets = list(discovered.counter_sets or [])
    unfolded, refused = unfold(discovered)
    rejected = [*(discovered.rejected or []), *refused]
    total = len(unfolded)
    for reported in unfolded:
        gpu = InventoryDevice(**{field: getattr(reported, field)
                                 for field in InventoryDevice.model_fields})
        devices.append(gpu)
        if reported.mig_model is None:
            continue
        field = f"status.discovered.devices[{reported.name}].migModel"
        model = models.get(reported.mig_model)
        placements = sum(len(p.placements) for p in model.profiles) if model is not None else 0
        if total + placements > MAX_DEVICES:  # counted before any is built
            rejected.append(Rejection(name=reported.name, field=field, message=(
                f"its {placements} partitions would take the pool past {MAX_DEVICES} devices")))
            continue
        try:
            partitions = mig_partitions(gpu, model.profiles) if model is not None else None
        except ValidationError as err:  # a name past 63 characters, from a long GPU name
            first = err.errors()[0]
            rejected.append(Rejection(name=reported.name, field=field, message=(
                f"its partitions cannot be named: {first['input']!r}: {first['msg']}")))
            continue
        if partitions is None:
            why = (f"no migModels entry {reported.mig_model!r}" if model is None
                   else f"migModels[{reported.mig_model}] has no profile with placements")
            rejected.append(Rejection(name=reported.name, field=field, message=why))
            continue
        total += len(partitions.devices)
        gpu.consumes_counters = [partitions.whole_gpu]
        devices += partitions.devices
        counter_sets.append(partitions.counter_set)
    return DiscoveryResult(devices=devices, counter_sets=counter_sets, rejected=rejected)


def _api(items: Sequence[InventoryDevice | CounterSet]) -> dict[str, dict[str, Any]]:
    return {item.name: item.to_api() for item in items}


def compact(result: DiscoveryResult) -> DiscoveredState:
    """The report of ``result`` in the compact form: each GPU of ``result.mig_profiles`` whose
    partitions, counter set and whole-GPU consumption are exactly what :func:`mig_partitions`
    builds from its profiles (and whose counter set no other device consumes) is listed with
    ``migModel`` instead, GPUs with equal profiles sharing one ``migModels`` entry; every other
    device and counter set stays listed.

    Lossless by construction: the result is returned in the full form unless :func:`expand`
    gives back exactly the devices and counter sets of ``result``. Then devices sharing
    attributes and capacities are folded into ``deviceModels``
    (:func:`kubedra.api.device_models.fold`, lossless too). Only ``devices``,
    ``counterSets``, ``migModels``, ``deviceModels`` and ``rejected`` are set.
    """
    full = DiscoveredState(devices=[DiscoveredDevice.model_validate(d.to_api())
                                    for d in result.devices],
                           counter_sets=result.counter_sets or None,
                           rejected=result.rejected or None)
    devices = {d.name: d for d in result.devices}
    listed = _api(result.devices)
    sets = _api(result.counter_sets)
    consumers: dict[str, set[str]] = {}
    for device in result.devices:
        for use in device.consumes_counters or []:
            consumers.setdefault(use.counter_set, set()).add(device.name)
    models: dict[str, MigModel] = {}
    refs: dict[str, str] = {}
    folded: set[str] = set()
    for name, profiles in result.mig_profiles.items():
        gpu = devices.get(name)
        partitions = (mig_partitions(gpu.model_copy(update={"consumes_counters": None}),
                                     profiles) if gpu is not None else None)
        if gpu is None or partitions is None:
            continue
        counter_set = partitions.counter_set.name
        built = {d.name for d in partitions.devices}
        if (_api([gpu.model_copy(update={"consumes_counters": [partitions.whole_gpu]})])
                != {name: listed[name]} or sets.get(counter_set) != partitions.counter_set.to_api()
                or consumers.get(counter_set) != built | {name}
                or any(listed.get(d.name) != d.to_api() for d in partitions.devices)):
            continue
        model = MigModel(name=model_name(gpu.attributes, "gpu"), profiles=list(profiles))
        base, suffix = model.name, 1
        while model.name in models and models[model.name].to_api() != model.to_api():
            suffix += 1
            model = model.model_copy(update={"name": f"{base[:60]}-{suffix}"})
        models[model.name] = model
        refs[name] = model.name
        folded |= built | {counter_set}
    if not refs:
        return fold(full)
    state = DiscoveredState(
        devices=[DiscoveredDevice.model_validate({
            **{k: v for k, v in listed[d.name].items() if k != "consumesCounters"},
            "migModel": refs[d.name]}) if d.name in refs else DiscoveredDevice.model_validate(
                listed[d.name]) for d in result.devices if d.name not in folded],
        counter_sets=[c for c in result.counter_sets if c.name not in folded] or None,
        mig_models=list(models.values()),
        rejected=result.rejected or None)
    back = expand(state)
    if _api(back.devices) != listed or _api(back.counter_sets) != sets:
        return fold(full)
    return fold(state)


def partition_names(discovered: Mapping[str, Any]) -> dict[str, list[str]]:
    """GPU name → the names of its partitions in the compact form, read from the JSON of
    ``status.discovered`` without decoding it (for the operator's fast path, which reads the
    health of each device); what is malformed is skipped (:func:`expand` reports it)."""
    models = {m.get("name"): m for m in discovered.get("migModels") or []
              if isinstance(m, Mapping)}
    names: dict[str, list[str]] = {}
    for device in discovered.get("devices") or []:
        model = models.get(device.get("migModel")) if isinstance(device, Mapping) else None
        if model is None:
            continue
        names[str(device.get("name"))] = [
            partition_name(str(device.get("name")), profile_label(str(profile.get("name"))),
                           int(placement.get("start", 0)))
            for profile in model.get("profiles") or [] if isinstance(profile, Mapping)
            for placement in profile.get("placements") or [] if isinstance(placement, Mapping)]
    return names
