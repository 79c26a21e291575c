"""The NVML view of a machine's NVIDIA GPUs, as one JSON document, and its parsed form.

The NVIDIA backends read NVML through one narrow interface, :class:`NvmlSource`, whose single
method returns an *NVML document*: the format of a capture's ``nvml.json``. Keys of a device
record are NVML's ``nvmlDeviceGet<Key>`` names (``Name``, ``UUID``, ``MigMode`` …); a call that
failed is recorded as ``{"error": "NVMLError_NotSupported: Not Supported"}``.
:class:`kubedra.discovery.nvml_live.LiveNvml` builds the document with pynvml,
:class:`kubedra.discovery.recorded.RecordedNvml` loads it from a capture, and
:func:`parse_nvml` (this module) turns either into the typed :class:`NvmlDocument` that
:mod:`kubedra.discovery.nvidia` models devices from.

Only facts that do not change while the machine runs are read: no temperatures, clocks, power
or free/used memory, so a live read and a replay of the same machine's capture agree.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kubedra.discovery.errors import DiscoveryError

T = TypeVar("T")


class NvmlSource(Protocol):
    """Where the NVML document comes from (pynvml on the machine, or a capture)."""

    def document(self) -> dict[str, Any]:
        """The NVML document (the ``nvml.json`` format), with MIG placements inline.

        Raises:
            DiscoveryError: NVML cannot be initialised, or the capture cannot be read.
        """
        ...


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class NvmlError(_Record):
    """A call NVML refused, e.g. ``NVMLError_NotSupported: Not Supported``."""

    error: str


def ok(value: T | NvmlError) -> T | None:
    """``value`` unless NVML refused the call, then ``None``."""
    return None if isinstance(value, NvmlError) else value


class Placement(_Record):
    """Where a GPU instance can sit: ``start`` and ``size`` count memory slices."""

    start: int
    size: int


class GpuInstanceProfile(_Record):
    """A MIG GPU-instance profile (``nvmlGpuInstanceProfileInfo_v2_t``) and its placements.

    ``memory_size_mb`` is in MiB, as NVML reports it (16384 for ``1g.18gb``);
    ``slice_count`` counts compute slices.
    """

    id: int
    name: str
    slice_count: int = Field(alias="sliceCount")
    multiprocessor_count: int = Field(alias="multiprocessorCount")
    copy_engine_count: int = Field(alias="copyEngineCount")
    decoder_count: int = Field(alias="decoderCount")
    encoder_count: int = Field(alias="encoderCount")
    jpeg_count: int = Field(alias="jpegCount")
    ofa_count: int = Field(alias="ofaCount")
    memory_size_mb: int = Field(alias="memorySizeMB")
    placements: list[Placement] | NvmlError | None = None


class MemoryInfo(_Record):
    """``nvmlDeviceGetMemoryInfo``: only ``total`` (bytes), the one that does not change."""

    total: int


class PciInfo(_Record):
    """``nvmlDeviceGetPciInfo``: ``busId`` as NVML writes it (``00000000:00:06.0``)."""

    bus_id: str = Field(alias="busId")


class NvmlDevice(_Record):
    """One GPU's record. ``error`` is set (and nothing else) when NVML has no handle for it.

    Pairs are ``[current, pending]`` (``MigMode``, ``EccMode``); ``RemappedRows`` is
    ``[correctable, uncorrectable, pending, failure]``; ``Architecture`` is the
    ``nvmlDeviceArchitecture_t`` enum.
    """

    index: int
    error: str | None = None
    name: str | NvmlError | None = Field(default=None, alias="Name")
    uuid: str | NvmlError | None = Field(default=None, alias="UUID")
    architecture: int | NvmlError | None = Field(default=None, alias="Architecture")
    cuda_compute_capability: tuple[int, int] | NvmlError | None = Field(
        default=None, alias="CudaComputeCapability")
    minor_number: int | NvmlError | None = Field(default=None, alias="MinorNumber")
    mig_mode: tuple[int, int] | NvmlError | None = Field(default=None, alias="MigMode")
    ecc_mode: tuple[int, int] | NvmlError | None = Field(default=None, alias="EccMode")
    remapped_rows: tuple[int, int, int, int] | NvmlError | None = Field(
        default=None, alias="RemappedRows")
    retired_pages_pending_status: int | NvmlError | None = Field(
        default=None, alias="RetiredPagesPendingStatus")
    num_gpu_cores: int | NvmlError | None = Field(default=None, alias="NumGpuCores")
    memory: MemoryInfo | NvmlError | None = None
    pci: PciInfo | NvmlError | None = None
    gpu_instance_profiles: list[GpuInstanceProfile | NvmlError] = Field(default_factory=list)

    def profiles(self) -> list[GpuInstanceProfile]:
        """The GPU-instance profiles NVML reported (the refused profile indexes left out)."""
        return [p for p in self.gpu_instance_profiles if isinstance(p, GpuInstanceProfile)]


class NvmlDocument(_Record):
    """The whole document: driver version text, CUDA driver version (``13000`` = 13.0),
    devices."""

    driver: str | NvmlError | None = None
    cuda_driver: int | NvmlError | None = None
    devices: list[NvmlDevice] = Field(default_factory=list)


def parse_nvml(document: dict[str, Any]) -> NvmlDocument:
    """Parse an NVML document from any :class:`NvmlSource`.

    Raises:
        DiscoveryError: the document does not have the ``nvml.json`` shape.
    """
    try:
        return NvmlDocument.model_validate(document)
    except ValidationError as err:
        raise DiscoveryError(f"malformed NVML document: {err}") from err
