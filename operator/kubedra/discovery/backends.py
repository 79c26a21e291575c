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

from pathlib import Path

from pydantic import ValidationError

from kubedra.api.inventory import DiscoveryResult, DiscoverySettings
from kubedra.api.limits import (
    RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
    RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET,
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


def discover(backend: str, settings: DiscoverySettings,
             sysfs_root: Path = Path("/sys")) -> DiscoveryResult:
    """Run one discovery backend and return what it found.

    Args:
        backend: ``pci``, ``nvml``, ``snapshot:<folder>`` or ``static`` (module docstring).
        settings: the inventory's ``spec.discovery``: ``mig`` for the NVIDIA backends, ``pci``
            filters for the ``pci`` backend.
        sysfs_root: where sysfs is mounted (the ``pci`` and ``nvml`` backends).

    Returns:
        The devices and counter sets, every one within the API's limits: names and values by
        the models' own validation (:mod:`kubedra.api.names`), counts by :func:`check_limits`.

    Raises:
        DiscoveryError: unknown backend, unreadable or malformed source, or a result that would
            break an API limit (e.g. a product name longer than 64 characters).
    """
    try:
        result = _run(backend, settings, sysfs_root)
    except ValidationError as err:
        raise DiscoveryError(f"backend {backend} found a device the API would reject: {err}"
                             ) from err
    check_limits(result)
    return result


def _run(backend: str, settings: DiscoverySettings, sysfs_root: Path) -> DiscoveryResult:
    if backend == "pci":
        return pci_inventory(parse_pci_functions(LiveSysfs(sysfs_root).records()), settings.pci)
    if backend == "nvml":
        return nvidia_discovery(LiveNvml(), LiveSysfs(sysfs_root), settings.mig)
    if backend.startswith(SNAPSHOT_PREFIX) and backend != SNAPSHOT_PREFIX:
        folder = Path(backend.removeprefix(SNAPSHOT_PREFIX))
        return nvidia_discovery(RecordedNvml(folder), RecordedSysfs(folder), settings.mig)
    if backend == "static":
        return DiscoveryResult()
    raise DiscoveryError(
        f"unknown discovery backend {backend!r}: use pci, nvml, snapshot:<folder> or static")


def check_limits(result: DiscoveryResult) -> None:
    """Refuse a result the API server would reject in a ResourceSlice, for the limits the
    models do not check themselves.

    Checks (``k8s.io/api/resource/v1/types.go`` constants, ``validation.go`` rules): device
    names and counter-set names are unique; at most 32 attributes and capacities a device; at
    most 32 counters a set; a device consumes only counters that a counter set of the result
    has.

    Raises:
        DiscoveryError: naming the device or set and the rule it breaks.
    """
    sets = {counter_set.name: counter_set for counter_set in result.counter_sets}
    if len(sets) != len(result.counter_sets):
        raise DiscoveryError("counter set names are not unique")
    for counter_set in result.counter_sets:
        if len(counter_set.counters) > RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET:
            raise DiscoveryError(f"counter set {counter_set.name} has more than "
                                 f"{RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET} counters")
    names = [device.name for device in result.devices]
    if len(set(names)) != len(names):
        raise DiscoveryError("device names are not unique")
    for device in result.devices:
        entries = len(device.attributes) + len(device.capacity)
        if entries > RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
            raise DiscoveryError(f"device {device.name} has {entries} attributes and capacities")
        for consumption in device.consumes_counters or []:
            known = sets.get(consumption.counter_set)
            if known is None or not set(consumption.counters) <= set(known.counters):
                raise DiscoveryError(f"device {device.name} consumes counters that counter set "
                                     f"{consumption.counter_set} does not have")
