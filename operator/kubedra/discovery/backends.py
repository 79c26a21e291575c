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

from kubedra.api.inventory import (
    MAX_COUNTER_SETS,
    MAX_DEVICES,
    DiscoveryResult,
    DiscoverySettings,
    InventoryDevice,
    Rejection,
)
from kubedra.api.resource import CounterSet
from kubedra.api.validation import (
    FieldError,
    consumption_errors,
    counter_set_errors,
    device_errors,
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
        The devices and counter sets the API server accepts in a ResourceSlice
        (:func:`screen`); each one it would refuse is in ``rejected`` with the field and why,
        so that one bad value of one device never costs the node's other devices.

    Raises:
        DiscoveryError: unknown backend, unreadable or malformed source.
    """
    try:
        result = _run(backend, settings, sysfs_root)
    except ValidationError as err:
        raise DiscoveryError(f"backend {backend} found a device the API would reject: {err}"
                             ) from err
    return screen(result)


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


def screen(result: DiscoveryResult) -> DiscoveryResult:
    """Split ``result`` into what the API server accepts and what it would refuse.

    A counter set is left out when its name is taken already, it breaks a rule of
    :func:`~kubedra.api.validation.counter_set_errors`, or :data:`MAX_COUNTER_SETS` are kept
    already (a DeviceInventory lists no more); a device when its name is taken
    already, it breaks a rule of :func:`~kubedra.api.validation.device_errors`, it
    consumes a counter set or counter that is not in the result (or was left out), or
    :data:`MAX_DEVICES` are kept already. Each is reported in ``rejected`` with the field
    (``devices[<name>].…`` or ``counterSets[<name>].…``) and why, the first
    :data:`MAX_DEVICES` of them; everything else is kept in order.
    """
    rejected = list(result.rejected)
    sets: dict[str, CounterSet] = {}
    for counter_set in result.counter_sets:
        where = f"counterSets[{counter_set.name}]"
        errors = ([FieldError("name", "the name is used twice")]
                  if counter_set.name in sets else counter_set_errors(counter_set))
        if not errors and len(sets) == MAX_COUNTER_SETS:
            errors = [FieldError("", f"a DeviceInventory lists at most {MAX_COUNTER_SETS} "
                                     "counter sets")]
        rejected += [Rejection(name=counter_set.name, field=_path(where, e.field),
                               message=e.message) for e in errors]
        if not errors:
            sets[counter_set.name] = counter_set
    devices: dict[str, InventoryDevice] = {}
    for device in result.devices:
        errors = ([FieldError("name", "the name is used twice")] if device.name in devices
                  else device_errors(device) + consumption_errors(device, sets))
        if not errors and len(devices) == MAX_DEVICES:
            errors = [FieldError("", f"a DeviceInventory lists at most {MAX_DEVICES} devices")]
        rejected += [Rejection(name=device.name, field=_path(f"devices[{device.name}]", e.field),
                               message=e.message) for e in errors]
        if not errors:
            devices[device.name] = device
    return DiscoveryResult(devices=list(devices.values()), counter_sets=list(sets.values()),
                           rejected=rejected[:MAX_DEVICES], mig_profiles=result.mig_profiles)


def _path(where: str, field: str) -> str:
    """``where.field``, or ``where`` for an error about the whole item."""
    return f"{where}.{field}" if field else where
