"""Split a desired pool into the contents of its ResourceSlices.

Rules (``k8s.io/api/resource/v1/types.go`` and the 1.35+ validation in
``pkg/apis/resource/validation/validation.go``): a slice holds either shared counters or
devices, never both; at most 8 counter sets a slice; at most 128 devices a slice, or 64 when any
device in that slice has taints, consumes counters or has list attributes. Counter slices come
first, then device slices in device-name order, so the same pool always gives the same slices.
Devices are packed greedily, so a change to one device only moves the slices from it onwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubedra.api.limits import (
    RESOURCE_SLICE_MAX_COUNTER_SETS,
    RESOURCE_SLICE_MAX_DEVICES,
    RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES,
)
from kubedra.api.resource import CounterSet, Device
from kubedra.publishing.pool import DesiredPool


@dataclass(frozen=True)
class SliceContent:
    """What one slice carries: devices or counter sets (one list is empty)."""

    devices: tuple[Device, ...] = ()
    counter_sets: tuple[CounterSet, ...] = ()


def uses_advanced_features(device: Device) -> bool:
    """True if the device lowers its slice's limit to 64 devices (taints, consumed counters, or
    list-type attributes: ``ResourceSliceMaxDevicesWithAdvancedFeatures``)."""
    if device.taints or device.consumes_counters:
        return True
    return any(a.int_values is not None or a.bool_values is not None or
               a.string_values is not None or a.version_values is not None
               for a in (device.attributes or {}).values())


def split_pool(pool: DesiredPool) -> list[SliceContent]:
    """The slice contents of ``pool`` in publishing order.

    An empty pool still gets one (empty) slice: an empty pool is different from no pool
    (``resourceslice`` controller in k8s.io/dynamic-resource-allocation).
    """
    per_slice = RESOURCE_SLICE_MAX_COUNTER_SETS
    contents = [SliceContent(counter_sets=tuple(pool.counter_sets[i:i + per_slice]))
                for i in range(0, len(pool.counter_sets), per_slice)]
    chunk: list[Device] = []
    advanced = False
    for device in pool.devices:
        device_advanced = uses_advanced_features(device)
        limit = (RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES if advanced or device_advanced
                 else RESOURCE_SLICE_MAX_DEVICES)
        if len(chunk) + 1 > limit:
            contents.append(SliceContent(devices=tuple(chunk)))
            chunk, advanced = [], False
        chunk.append(device)
        advanced = advanced or device_advanced
    if chunk or not contents:
        contents.append(SliceContent(devices=tuple(chunk)))
    return contents
