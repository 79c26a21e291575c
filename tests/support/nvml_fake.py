"""A pynvml stand-in that answers from a capture, for driving the LIVE NVML code in tests.

:class:`RecordedPynvml` has the pynvml functions :class:`kubedra.discovery.nvml_live.LiveNvml`
calls, with pynvml's calling conventions (handles, ctypes out-parameters for placements,
structs with attribute access, ``NVMLError_*`` exceptions), and answers each call from a
capture's ``nvml.json`` and ``mig_placements.json``. A call the capture recorded as refused
raises the same ``NVMLError`` subclass the real library raised.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml


def nvml_error(recorded: str) -> pynvml.NVMLError:
    """The exception a capture recorded as ``NVMLError_NotSupported: Not Supported``."""
    return getattr(pynvml, recorded.split(":")[0])()


class RecordedPynvml:
    """pynvml, as far as kubedra uses it, replaying a capture folder."""

    NVMLError = pynvml.NVMLError
    NVML_GPU_INSTANCE_PROFILE_COUNT = pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
    c_nvmlGpuInstancePlacement_t = pynvml.c_nvmlGpuInstancePlacement_t

    def __init__(self, folder: Path) -> None:
        self.document = json.loads((folder / "nvml.json").read_text())
        self.placements = {profile["id"]: profile["placements"] for profile in json.loads(
            (folder / "mig_placements.json").read_text())["profiles"]}
        self.calls: list[str] = []
        self.initialised = False

    def _answer(self, value: Any) -> Any:
        if isinstance(value, dict) and "error" in value:
            raise nvml_error(value["error"])
        return value

    def _device(self, handle: SimpleNamespace) -> dict[str, Any]:
        assert self.initialised, "NVML call before nvmlInit"
        device: dict[str, Any] = self.document["devices"][handle.index]
        return device

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._answer(self.document["driver"]))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self._answer(self.document["cuda_driver"]))

    def nvmlDeviceGetCount(self) -> int:
        return len(self.document["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(index=index)

    def __getattr__(self, name: str) -> Any:
        """``nvmlDeviceGet<Key>(handle)`` for the plain-value keys of a device record."""
        if not name.startswith("nvmlDeviceGet"):
            raise AttributeError(name)
        key = name.removeprefix("nvmlDeviceGet")

        def call(handle: SimpleNamespace) -> Any:
            value = self._answer(self._device(handle)[key])
            # pynvml returns these two as tuples, the others as lists or scalars
            return tuple(value) if key in {"CudaComputeCapability", "RemappedRows"} else value

        return call

    def nvmlDeviceGetMemoryInfo(self, handle: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(**self._answer(self._device(handle)["memory"]))

    def nvmlDeviceGetPciInfo(self, handle: SimpleNamespace) -> SimpleNamespace:
        pci = self._answer(self._device(handle)["pci"])
        return SimpleNamespace(busId=pci["busId"].encode())  # C char array: bytes

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: SimpleNamespace,
                                            profile_index: int) -> SimpleNamespace:
        for profile in self._device(handle)["gpu_instance_profiles"]:
            if profile["profile_index"] == profile_index:
                self._answer(profile)
                return SimpleNamespace(**{k: v for k, v in profile.items() if k != "placements"})
        raise pynvml.NVMLError_InvalidArgument()

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle: SimpleNamespace, profile_id: int,
                                                   placements_ref: Any, count_ref: Any) -> int:
        """The C convention: NULL placements asks for the count; else fill the array."""
        self._device(handle)
        placements = self.placements[profile_id]
        if placements_ref is not None:
            assert len(placements_ref) >= len(placements), "placement array too small"
            for slot, placement in zip(placements_ref, placements, strict=False):
                slot.start, slot.size = placement["start"], placement["size"]
        count_ref.contents.value = len(placements)
        return int(pynvml.NVML_SUCCESS)
