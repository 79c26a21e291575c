"""The live :class:`~kubedra.discovery.nvml.NvmlSource`: NVML read through nvidia-ml-py.

:class:`LiveNvml` writes what it reads into the ``nvml.json`` format, so the capture written by
``hack/nvml-live-check.py capture`` is exactly what this source saw. The pynvml module is a
constructor argument: the real ``pynvml`` on a node, a recorded stand-in in unit tests.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kubedra.discovery.errors import DiscoveryError

# nvmlDeviceGet<Key> calls that take only the device handle and return plain values
DEVICE_VALUE_KEYS = (
    "Name", "UUID", "Architecture", "CudaComputeCapability", "MinorNumber", "MigMode",
    "EccMode", "RemappedRows", "RetiredPagesPendingStatus", "NumGpuCores",
)
# fields of nvmlGpuInstanceProfileInfo_v2_t that kubedra.discovery.nvml.GpuInstanceProfile reads
PROFILE_FIELDS = (
    "id", "name", "sliceCount", "instanceCount", "multiprocessorCount", "copyEngineCount",
    "decoderCount", "encoderCount", "jpegCount", "ofaCount", "memorySizeMB",
)


def _refusal(err: Exception) -> dict[str, str]:
    """How a refused call is recorded: ``{"error": "NVMLError_NotSupported: Not Supported"}``."""
    return {"error": f"{type(err).__name__}: {err}"}


def _plain(value: Any) -> Any:
    """A pynvml return value as JSON: tuples as lists, C strings as text."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value


class LiveNvml:
    """NVML on this machine, through ``pynvml`` (nvidia-ml-py) or a module shaped like it.

    Each :meth:`document` call initialises NVML, reads every GPU and shuts NVML down again, so
    the agent holds no NVML state between scans. It only reads; it never changes MIG mode or
    any other setting.
    """

    def __init__(self, nvml: ModuleType | Any = None) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        self.nvml = nvml

    def _call(self, function: str, *args: Any,
              read: Callable[[Any], Any] = lambda result: result) -> Any:
        """``read(pynvml.<function>(*args))`` as JSON, or the refusal when NVML refuses."""
        try:
            return _plain(read(getattr(self.nvml, function)(*args)))
        except self.nvml.NVMLError as err:
            return _refusal(err)

    def document(self) -> dict[str, Any]:
        """Read every GPU (see :class:`kubedra.discovery.nvml.NvmlSource`).

        Raises:
            DiscoveryError: NVML cannot be initialised (no driver, no library) or cannot count
                its devices.
        """
        nvml = self.nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            raise DiscoveryError(f"NVML cannot be initialised: {err}") from err
        try:
            count = nvml.nvmlDeviceGetCount()
            return {
                "driver": self._call("nvmlSystemGetDriverVersion"),
                "cuda_driver": self._call("nvmlSystemGetCudaDriverVersion"),
                "count": count,
                "devices": [self._device(index) for index in range(count)],
            }
        except nvml.NVMLError as err:
            raise DiscoveryError(f"NVML cannot list its devices: {err}") from err
        finally:
            nvml.nvmlShutdown()

    def _device(self, index: int) -> dict[str, Any]:
        nvml = self.nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except nvml.NVMLError as err:
            return {"index": index, **_refusal(err)}
        record: dict[str, Any] = {"index": index}
        for key in DEVICE_VALUE_KEYS:
            record[key] = self._call("nvmlDeviceGet" + key, handle)
        record["memory"] = self._call(
            "nvmlDeviceGetMemoryInfo", handle, read=lambda memory: {"total": memory.total})
        record["pci"] = self._call(
            "nvmlDeviceGetPciInfo", handle, read=lambda pci: {"busId": _plain(pci.busId)})
        # profiles exist only where MIG does (MigMode answers); they do not need MIG enabled
        if not isinstance(record["MigMode"], dict):
            record["gpu_instance_profiles"] = [
                self._profile(handle, profile_index)
                for profile_index in range(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT)]
        return record

    def _profile(self, handle: Any, profile_index: int) -> dict[str, Any]:
        nvml = self.nvml
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile_index)
        except nvml.NVMLError as err:
            return {"profile_index": profile_index, **_refusal(err)}
        profile = {field: _plain(getattr(info, field)) for field in PROFILE_FIELDS}
        profile["profile_index"] = profile_index
        profile["placements"] = self._placements(handle, profile["id"])
        return profile

    def _placements(self, handle: Any, profile_id: int) -> Any:
        """``nvmlDeviceGetGpuInstancePossiblePlacements_v2``: first the count (placements
        NULL), then the array. Placements are not bounded by ``instanceCount``: a profile with
        one instance (``1g.18gb+me``) may sit at any of seven starts."""
        nvml = self.nvml
        count = ctypes.c_uint(0)
        try:
            nvml.nvmlDeviceGetGpuInstancePossiblePlacements(
                handle, profile_id, None, ctypes.pointer(count))
            placements = (nvml.c_nvmlGpuInstancePlacement_t * count.value)()
            nvml.nvmlDeviceGetGpuInstancePossiblePlacements(
                handle, profile_id, placements, ctypes.pointer(count))
        except nvml.NVMLError as err:
            return _refusal(err)
        return [{"start": p.start, "size": p.size} for p in placements[:count.value]]
