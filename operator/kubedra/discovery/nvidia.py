"""NVIDIA GPUs (and their MIG partitions) as inventory devices, from NVML and sysfs.

The ``nvml`` backend (pynvml and ``/sys``) and the ``snapshot:<folder>`` backend (a capture)
both end in :func:`nvidia_discovery`; only their sources differ.

A GPU is the device ``gpu-<NVML index>`` (driver ``gpu.kubedra.io``). Attributes, each only
when NVML answers:

- ``type`` = ``gpu`` (MIG partitions say ``mig``; see :mod:`kubedra.api.mig`);
- ``productName`` (``NVIDIA H200``), ``uuid``;
- ``architecture``: the ``nvmlDeviceArchitecture_t`` enum by nvidia-smi's names (9 →
  ``Hopper``);
- ``cudaComputeCapability`` (version ``9.0.0``), ``cudaDriverVersion`` (version; NVML's
  13000 → ``13.0.0``);
- ``driverVersion`` (version): NVML's text made semantic-version 2.0.0, whose numbers carry no
  leading zeros: ``580.159.04`` → ``580.159.4``; a two-part version gets ``.0`` appended;
  anything else is not published;
- ``minor`` (int, the ``/dev/nvidia<minor>`` node), ``migCapable``, ``migEnabled`` (current
  mode, MIG-capable GPUs only), ``eccEnabled``;
- ``resource.kubernetes.io/pciBusID`` (NVML's ``00000000:00:06.0`` → ``0000:00:06.0``),
  ``resource.kubernetes.io/pcieRoot`` and ``resource.kubernetes.io/numaNode`` from sysfs.

Capacities: ``memory``, NVML's total in bytes (H200: 150754820096 = ``143771Mi``), and
``multiprocessors``. NVML has no SM count for a GPU outside MIG (``nvmlDeviceGetAttributes``
answers only for MIG devices, and the H200 capture shows it refused), and the full-GPU MIG
profile is no substitute (A100: 98 SMs in ``7g.40gb`` of 108). So it is
``nvmlDeviceGetNumGpuCores`` divided by the FP32 cores per SM of the compute capability (the
table ``_CORES_PER_SM``, from the CUDA C++ Programming Guide's arithmetic-throughput table):
H200 16896 / 128 = 132. Compute capabilities not in the table get no ``multiprocessors``.

Health: ``Unhealthy`` when NVML has no handle for the GPU, when row remapping failed or is
pending (the GPU needs a reset), or when page retirement is pending; else ``Healthy``.
Nothing volatile (temperature, clocks, free memory) is read or published.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from kubedra.api.inventory import (
    DiscoveryResult,
    Health,
    InventoryDevice,
    MigMode,
    MigProfile,
)
from kubedra.api.mig import TYPE, WHOLE_GPU, mig_partitions
from kubedra.api.quantity import BINARY_SI, Quantity
from kubedra.api.resource import DeviceAttribute, DeviceCapacity
from kubedra.api.validation import model_rejections
from kubedra.discovery.nvml import NvmlDevice, NvmlDocument, NvmlSource, ok, parse_nvml
from kubedra.discovery.sysfs import (
    PciFunction,
    PciSource,
    parse_pci_functions,
    standard_attributes,
)
from kubedra.logging import get_logger

log = get_logger(__name__)

ARCHITECTURES = {
    2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
    8: "Ada Lovelace", 9: "Hopper", 10: "Blackwell",
}
"""``nvmlDeviceArchitecture_t`` values (nvml.h) by the names ``nvidia-smi -q`` prints."""

_CORES_PER_SM = {
    (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
    (9, 0): 128,
}
_ENABLED = 1  # NVML_FEATURE_ENABLED, NVML_DEVICE_MIG_ENABLE
_NVML_BUS_ID = re.compile(r"^([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


def gpu_name(index: int) -> str:
    """The device name of the GPU with NVML index ``index``: ``gpu-<index>``."""
    return f"gpu-{index}"


def semantic_version(text: str) -> str | None:
    """A dotted numeric version as semver 2.0.0: ``580.159.04`` → ``580.159.4``,
    ``535.104`` → ``535.104.0``; ``None`` for anything else."""
    parts = text.strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        return None
    return ".".join(str(int(part)) for part in [*parts, "0"][:3])


def cuda_version(value: int) -> str:
    """NVML's CUDA driver version number as semver: 13000 → ``13.0.0``, 12040 → ``12.4.0``."""
    return f"{value // 1000}.{value % 1000 // 10}.0"


def pci_address(nvml_bus_id: str) -> str | None:
    """NVML's bus id as sysfs writes the address: ``00000000:00:06.0`` → ``0000:00:06.0``
    (domain at least four lower-case hex digits); ``None`` if it is not a bus id."""
    match = _NVML_BUS_ID.match(nvml_bus_id.strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def gpu_health(device: NvmlDevice) -> tuple[Health, str | None]:
    """The GPU's health and, when unhealthy, why (rules in the module docstring)."""
    if device.error is not None:
        return "Unhealthy", f"NVML has no handle for GPU {device.index}: {device.error}"
    rows = ok(device.remapped_rows)
    if rows is not None and rows[3]:
        return "Unhealthy", "row remapping failed (NVML RemappedRows failureOccurred)"
    if rows is not None and rows[2]:
        return "Unhealthy", "row remapping pending: the GPU needs a reset"
    if ok(device.retired_pages_pending_status) == _ENABLED:
        return "Unhealthy", "page retirement pending: the GPU needs a reset"
    return "Healthy", None


def multiprocessors(device: NvmlDevice) -> int | None:
    """Streaming multiprocessors of the whole GPU (source in the module docstring)."""
    cores, capability = ok(device.num_gpu_cores), ok(device.cuda_compute_capability)
    per_sm = _CORES_PER_SM.get(capability) if capability is not None else None
    if cores is None or per_sm is None or cores % per_sm:
        return None
    return cores // per_sm


def _system_attributes(document: NvmlDocument) -> dict[str, DeviceAttribute]:
    """Attributes of the driver, the same on every GPU of the machine."""
    attributes = {}
    driver = ok(document.driver)
    version = semantic_version(driver) if driver is not None else None
    if version is not None:
        attributes["driverVersion"] = DeviceAttribute(version_value=version)
    cuda = ok(document.cuda_driver)
    if cuda is not None:
        attributes["cudaDriverVersion"] = DeviceAttribute(version_value=cuda_version(cuda))
    return attributes


def _model_attributes(device: NvmlDevice) -> dict[str, DeviceAttribute]:
    """What the GPU is: product, architecture, compute capability."""
    attributes = {}
    product = ok(device.name)
    if product is not None:
        attributes["productName"] = DeviceAttribute(string_value=product)
    architecture = ok(device.architecture)
    if architecture in ARCHITECTURES:
        attributes["architecture"] = DeviceAttribute(string_value=ARCHITECTURES[architecture])
    capability = ok(device.cuda_compute_capability)
    if capability is not None:
        attributes["cudaComputeCapability"] = DeviceAttribute(
            version_value=f"{capability[0]}.{capability[1]}.0")
    return attributes


def _topology(device: NvmlDevice, functions: dict[str, PciFunction]) -> dict[str, DeviceAttribute]:
    """pciBusID, pcieRoot and numaNode: from the GPU's PCI function in sysfs, or only the bus
    id when sysfs does not list it."""
    pci = ok(device.pci)
    address = pci_address(pci.bus_id) if pci is not None else None
    if address is None:
        return {}
    function = functions.get(address)
    if function is None:
        log.warning("GPU's PCI function not in sysfs; no pcieRoot or numaNode",
                    gpu=gpu_name(device.index), address=address)
    return standard_attributes(address, function)


def _gpu_state(device: NvmlDevice) -> dict[str, DeviceAttribute]:
    """Device node, MIG and ECC state."""
    attributes = {}
    minor = ok(device.minor_number)
    if minor is not None:
        attributes["minor"] = DeviceAttribute(int_value=minor)
    mig_mode = ok(device.mig_mode)
    attributes["migCapable"] = DeviceAttribute(bool_value=mig_mode is not None)
    if mig_mode is not None:
        attributes["migEnabled"] = DeviceAttribute(bool_value=mig_mode[0] == _ENABLED)
    ecc = ok(device.ecc_mode)
    if ecc is not None:
        attributes["eccEnabled"] = DeviceAttribute(bool_value=ecc[0] == _ENABLED)
    return attributes


def _gpu_capacity(device: NvmlDevice) -> dict[str, DeviceCapacity]:
    capacity = {}
    memory = ok(device.memory)
    if memory is not None:
        capacity["memory"] = DeviceCapacity(value=Quantity.from_value(memory.total, BINARY_SI))
    sms = multiprocessors(device)
    if sms is not None:
        capacity["multiprocessors"] = DeviceCapacity(value=Quantity.from_value(sms))
    return capacity


def nvidia_inventory(document: NvmlDocument, functions: list[PciFunction],
                     mig: MigMode) -> DiscoveryResult:
    """Devices and counter sets of every GPU in ``document``.

    Args:
        document: the parsed NVML document.
        functions: the machine's PCI functions (for pcieRoot and numaNode).
        mig: ``none`` publishes whole GPUs only; ``partitions`` adds, for each MIG-capable GPU
            with profile placements, its partitions and counter set, and makes the whole GPU
            consume the full set (:mod:`kubedra.api.mig`).

    Returns:
        Per GPU in NVML index order: the whole GPU, then its partitions; counter sets in the
        same order.

    A GPU whose model cannot be built from what NVML reported (a value the models refuse)
    is left out, in ``rejected`` with the field; values the models accept but the API server
    would refuse (a product name over 64 bytes) are left out later by
    :func:`kubedra.discovery.backends.screen`.
    """
    by_address = {function.address: function for function in functions}
    system = _system_attributes(document)
    result = DiscoveryResult()
    for device in document.devices:
        try:
            found = _gpu_devices(device, by_address, system, mig)
        except ValidationError as err:  # one GPU's bad value never costs the others
            result.rejected += model_rejections(gpu_name(device.index), err)
            continue
        result.devices += found.devices
        result.counter_sets += found.counter_sets
        result.mig_profiles.update(found.mig_profiles)
    return result


def _gpu_devices(device: NvmlDevice, by_address: dict[str, PciFunction],
                 system: dict[str, DeviceAttribute], mig: MigMode) -> DiscoveryResult:
    """One GPU: the whole GPU, then its partitions and counter set (``nvidia_inventory``)."""
    name = gpu_name(device.index)
    health, health_message = gpu_health(device)
    if device.error is not None:
        return DiscoveryResult(devices=[InventoryDevice(
            name=name, health=health, health_message=health_message)])
    model = {**_model_attributes(device), **system}
    topology = _topology(device, by_address)
    uuid = ok(device.uuid)
    identity = {"uuid": DeviceAttribute(string_value=uuid)} if uuid is not None else {}
    gpu = InventoryDevice(
        name=name,
        attributes={TYPE: DeviceAttribute(string_value=WHOLE_GPU), **model, **identity,
                    **_gpu_state(device), **topology},
        capacity=_gpu_capacity(device),
        health=health,
        health_message=health_message,
    )
    result = DiscoveryResult(devices=[gpu])
    if mig == "none" or ok(device.mig_mode) is None:
        return result
    profiles = [MigProfile.model_validate(profile.model_dump(by_alias=True))
                for profile in device.profiles()
                if isinstance(profile.placements, list) and profile.placements]
    partitions = mig_partitions(gpu, profiles)
    if partitions is None:
        log.warning("MIG-capable GPU without profile placements; no partitions", gpu=name)
        return result
    gpu.consumes_counters = [partitions.whole_gpu]
    result.devices.extend(partitions.devices)
    result.counter_sets.append(partitions.counter_set)
    result.mig_profiles[name] = profiles
    return result


def nvidia_discovery(nvml: NvmlSource, pci: PciSource, mig: MigMode) -> DiscoveryResult:
    """Read both sources and model the GPUs: the ``nvml`` and ``snapshot`` backends.

    Raises:
        DiscoveryError: a source cannot be read or is malformed.
    """
    return nvidia_inventory(parse_nvml(nvml.document()), parse_pci_functions(pci.records()), mig)
