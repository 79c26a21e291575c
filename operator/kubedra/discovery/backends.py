"""The one entry point of discovery: :func:`discover`, a backend name to a DiscoveryResult.

Backends:

- ``pci``: reads ``<sysfs_root>/bus/pci/devices``; one device per PCI function that passes
  ``settings.pci`` (driver ``pci.kubedra.io``).
- ``nvml``: reads NVML through pynvml, and ``<sysfs_root>``; NVIDIA GPUs and, with
  ``settings.mig`` = ``partitions``, their MIG partitions (driver ``gpu.kubedra.io``).
- ``snapshot:<folder>``: as ``nvml``, replayed from a capture folder (``nvml.json``,
  ``sysfs_pci.json``, …; :mod:`kubedra.discovery.recorded`).
- ``static``: reads nothing and finds nothing. Devices an admin declares in ``spec.devices``
  are already in the inventory; the operator publishes them as they are.

``nvml`` and ``snapshot:<folder>`` run the same code on different sources
(:func:`kubedra.discovery.nvidia.nvidia_discovery`), so a capture of a machine replays to the
inventory that machine reports live.
"""

from __future__ import annotations

import re
from pathlib import Path

from kubedra.api.inventory import DiscoveryResult, DiscoverySettings
from kubedra.api.limits import (
    DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH,
    RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
    RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET,
    RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE,
)
from kubedra.discovery.errors import DiscoveryError
from kubedra.discovery.nvidia import nvidia_discovery
from kubedra.discovery.nvml_live import LiveNvml
from kubedra.discovery.pci import pci_inventory
from kubedra.discovery.recorded import RecordedNvml, RecordedSysfs
from kubedra.discovery.sysfs import LiveSysfs, parse_pci_functions

SNAPSHOT_PREFIX = "snapshot:"
GPU_DRIVER = "gpu.kubedra.io"
PCI_DRIVER = "pci.kubedra.io"

# validateDeviceName / validateCounterName in pkg/apis/resource/validation/validation.go
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def discover(backend: str, settings: DiscoverySettings,
             sysfs_root: Path = Path("/sys")) -> DiscoveryResult:
    """Run one discovery backend and return what it found.

    Args:
        backend: ``pci``, ``nvml``, ``snapshot:<folder>`` or ``static`` (module docstring).
        settings: the inventory's ``spec.discovery``: ``mig`` for the NVIDIA backends, ``pci``
            filters for the ``pci`` backend.
        sysfs_root: where sysfs is mounted (the ``pci`` and ``nvml`` backends).

    Returns:
        The devices and counter sets, every one within the API's per-device and per-set limits
        (:func:`check_limits`).

    Raises:
        DiscoveryError: unknown backend, unreadable or malformed source, or a result that would
            break an API limit.
    """
    if backend == "pci":
        result = pci_inventory(parse_pci_functions(LiveSysfs(sysfs_root).records()),
                               settings.pci)
    elif backend == "nvml":
        result = nvidia_discovery(LiveNvml(), LiveSysfs(sysfs_root), settings.mig)
    elif backend.startswith(SNAPSHOT_PREFIX) and backend != SNAPSHOT_PREFIX:
        folder = Path(backend.removeprefix(SNAPSHOT_PREFIX))
        result = nvidia_discovery(RecordedNvml(folder), RecordedSysfs(folder), settings.mig)
    elif backend == "static":
        result = DiscoveryResult()
    else:
        raise DiscoveryError(
            f"unknown discovery backend {backend!r}: use pci, nvml, snapshot:<folder> or static")
    check_limits(result)
    return result


def check_limits(result: DiscoveryResult) -> None:
    """Refuse a result the API server would reject in a ResourceSlice.

    Checks (``k8s.io/api/resource/v1/types.go`` constants, ``validation.go`` rules): device and
    counter names are DNS labels and unique; at most 32 attributes and capacities a device;
    string and version values at most 64 characters; at most 2 consumesCounters entries a
    device, each naming a counter set of the result and only its counters; at most 32 counters
    a set.

    Raises:
        DiscoveryError: naming the device or set and the rule it breaks.
    """
    sets = {counter_set.name: counter_set for counter_set in result.counter_sets}
    if len(sets) != len(result.counter_sets):
        raise DiscoveryError("counter set names are not unique")
    for counter_set in result.counter_sets:
        for name in [counter_set.name, *counter_set.counters]:
            if not _DNS_LABEL.match(name):
                raise DiscoveryError(f"counter (set) name {name!r} is not a DNS label")
        if len(counter_set.counters) > RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET:
            raise DiscoveryError(f"counter set {counter_set.name} has more than "
                                 f"{RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET} counters")
    names = [device.name for device in result.devices]
    if len(set(names)) != len(names):
        raise DiscoveryError("device names are not unique")
    for device in result.devices:
        if not _DNS_LABEL.match(device.name):
            raise DiscoveryError(f"device name {device.name!r} is not a DNS label")
        entries = len(device.attributes) + len(device.capacity)
        if entries > RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
            raise DiscoveryError(f"device {device.name} has {entries} attributes and capacities")
        for name, attribute in device.attributes.items():
            text = attribute.string_value or attribute.version_value or ""
            if len(text) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
                raise DiscoveryError(f"attribute {name} of device {device.name} is longer than "
                                     f"{DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH} characters")
        consumptions = device.consumes_counters or []
        if len(consumptions) > RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE:
            raise DiscoveryError(f"device {device.name} consumes from too many counter sets")
        for consumption in consumptions:
            known = sets.get(consumption.counter_set)
            if known is None or not set(consumption.counters) <= set(known.counters):
                raise DiscoveryError(f"device {device.name} consumes counters that counter set "
                                     f"{consumption.counter_set} does not have")
