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

Partition attributes: what the parent lends (``inherited``), ``type`` = ``mig``, ``profile``
(``1g.18gb``), ``profileID`` (NVML's id, 19), ``placementStart``, ``placementSize`` (memory
slices). Capacities: ``memory`` (bytes), ``multiprocessors``, ``copyEngines``, ``decoders``,
``encoders``, ``jpegEngines``, ``ofaEngines`` (all present, zero included, so selectors need
no ``has()``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kubedra.api.inventory import Health, InventoryDevice
from kubedra.api.quantity import BINARY_SI, Quantity
from kubedra.api.resource import (
    Counter,
    CounterSet,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)
from kubedra.discovery.nvml import GpuInstanceProfile, Placement

TYPE = "type"
"""Attribute telling whole GPUs (``gpu``) from MIG partitions (``mig``); DeviceClasses use it."""
WHOLE_GPU = "gpu"
PARTITION = "mig"

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
    count: Callable[[GpuInstanceProfile], int]


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


def _counts(values: dict[str, int]) -> dict[str, Counter]:
    return {name: Counter(value=Quantity.from_value(value)) for name, value in values.items()}


def _totals(profiles: list[tuple[GpuInstanceProfile, list[Placement]]]) -> dict[str, int]:
    """Counter values of the GPU (rules in the module docstring)."""
    slices = max(p.start + p.size for _, placements in profiles for p in placements)
    totals = {memory_slice(index): 1 for index in range(slices)}
    totals[COMPUTE_SLICES] = max(profile.slice_count for profile, _ in profiles)
    for engine in ENGINES:
        total = max(engine.count(profile) for profile, _ in profiles)
        if total > 0:
            totals[engine.counter] = total
    return totals


def _consumption(profile: GpuInstanceProfile, placement: Placement) -> dict[str, int]:
    consumed = {memory_slice(index): 1
                for index in range(placement.start, placement.start + placement.size)}
    consumed[COMPUTE_SLICES] = profile.slice_count
    for engine in ENGINES:
        if engine.count(profile) > 0:
            consumed[engine.counter] = engine.count(profile)
    return consumed


def _capacity(profile: GpuInstanceProfile) -> dict[str, DeviceCapacity]:
    capacity = {
        "memory": DeviceCapacity(
            value=Quantity.from_value(profile.memory_size_mb * MIB, BINARY_SI)),
        "multiprocessors": DeviceCapacity(value=Quantity.from_value(profile.multiprocessor_count)),
    }
    for engine in ENGINES:
        capacity[engine.capacity] = DeviceCapacity(value=Quantity.from_value(engine.count(profile)))
    return capacity


def mig_partitions(gpu: str, profiles: list[GpuInstanceProfile],
                   inherited: dict[str, DeviceAttribute], health: Health,
                   health_message: str | None) -> MigPartitions | None:
    """Model the MIG partitions of GPU device ``gpu``.

    Args:
        gpu: the whole GPU's device name (``gpu-0``).
        profiles: its GPU-instance profiles; those without a placement list are skipped.
        inherited: attributes every partition copies from the parent (parentUUID,
            productName, architecture, versions, pcieRoot, numaNode).
        health, health_message: the parent's; a partition is as healthy as its GPU.

    Returns:
        ``None`` if no profile has placements, else the counter set, the whole GPU's
        consumption and one device per placement, in profile then start order.

    Names clashing between profiles and more than 32 counters are left out later, by
    :func:`kubedra.discovery.backends.screen`.
    """
    placed = [(profile, profile.placements) for profile in profiles
              if isinstance(profile.placements, list) and profile.placements]
    if not placed:
        return None
    totals = _totals(placed)
    counter_set = counter_set_name(gpu)
    devices = []
    for profile, placements in placed:
        label = profile_label(profile.name)
        for placement in placements:
            devices.append(InventoryDevice(
                name=partition_name(gpu, label, placement.start),
                attributes={
                    **inherited,
                    TYPE: DeviceAttribute(string_value=PARTITION),
                    "profile": DeviceAttribute(string_value=label),
                    "profileID": DeviceAttribute(int_value=profile.id),
                    "placementStart": DeviceAttribute(int_value=placement.start),
                    "placementSize": DeviceAttribute(int_value=placement.size),
                },
                capacity=_capacity(profile),
                consumes_counters=[DeviceCounterConsumption(
                    counter_set=counter_set, counters=_counts(_consumption(profile, placement)))],
                health=health,
                health_message=health_message,
            ))
    return MigPartitions(
        counter_set=CounterSet(name=counter_set, counters=_counts(totals)),
        whole_gpu=DeviceCounterConsumption(counter_set=counter_set, counters=_counts(totals)),
        devices=devices,
    )
