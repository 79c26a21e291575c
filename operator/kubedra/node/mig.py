"""MIG partitions created on demand: a MIG placement device becomes a real MIG device at prepare.

With ``discovery.mig: partitions`` the agent publishes every MIG placement of a MIG-capable GPU
as a device that consumes the GPU's shared counters, so the scheduler never allocates
overlapping placements. Such a device does not exist on the GPU until a claim is prepared:
:class:`NvmlMigPartitioner` then creates the GPU instance at the allocated placement and one
compute instance spanning it, and destroys both on unprepare. The instance's identity
(:class:`MigInstance`) is kept in the checkpoint so unprepare works after an agent restart;
after a reboot the instances are gone and prepare creates them again.

A container gets a MIG device through the parent GPU's device node plus the two NVIDIA
capability nodes of the instance, ``/dev/nvidia-caps/nvidia-cap<minor>`` for the GPU instance
and for the compute instance; the minors are listed in ``/proc/driver/nvidia-caps/mig-minors``
(lines ``gpu<minor>/gi<id>/access <cap minor>`` and ``gpu<minor>/gi<id>/ci<id>/access <cap
minor>``). The GPU must already be in MIG mode (enabling it needs a GPU reset, which kubedra
never does); otherwise NVML refuses and prepare reports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from kubedra.api.base import KubeModel

DEFAULT_MIG_MINORS_PATH = Path("/proc/driver/nvidia-caps/mig-minors")


class MigError(Exception):
    """Creating, finding or destroying a MIG instance failed; the message says which and why."""


class MigPlacement(KubeModel):
    """A MIG placement device as published: parent GPU (UUID, and the minor of its device
    node), GPU-instance profile ID (NVML's, e.g. 19 for 1g.18gb on an H200) and placement
    start/size in memory slices."""

    parent_uuid: str = Field(alias="parentUUID")
    parent_minor: int
    profile_id: int = Field(alias="profileID")
    start: int
    size: int


class MigInstance(KubeModel):
    """A MIG device created for a claim: its UUID (``MIG-...``), the GPU-instance and
    compute-instance IDs, and the capability-device minors that grant access to them."""

    placement: MigPlacement
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    gpu_instance_cap_minor: int
    compute_instance_cap_minor: int


class MigPartitioner(Protocol):
    """Creates and destroys MIG instances (NVML on a node; a fake in tests)."""

    def create(self, placement: MigPlacement) -> MigInstance:
        """Create the GPU instance at ``placement`` and a compute instance spanning it.

        Raises:
            MigError: the GPU is not in MIG mode, the placement is taken, NVML failed.
        """
        ...

    def destroy(self, instance: MigInstance) -> None:
        """Destroy the compute and GPU instance; an instance that no longer exists is fine.

        Raises:
            MigError: NVML refused (e.g. the instance is in use).
        """
        ...


def parse_mig_minors(text: str) -> dict[str, int]:
    """Parse ``/proc/driver/nvidia-caps/mig-minors``: ``{"gpu0/gi1/access": 12, ...}``.

    Lines that are not ``<name> <integer>`` are skipped.
    """
    minors: dict[str, int] = {}
    for line in text.splitlines():
        name, _, minor = line.strip().partition(" ")
        if minor.strip().isdigit():
            minors[name] = int(minor)
    return minors


def cap_minors(minors: dict[str, int], gpu_minor: int, gi: int, ci: int) -> tuple[int, int]:
    """Capability minors ``(gpu instance, compute instance)`` of GPU ``gpu_minor``'s GI/CI.

    Raises:
        MigError: the driver does not list them (no such instance, or not a MIG-capable driver).
    """
    gi_key = f"gpu{gpu_minor}/gi{gi}/access"
    ci_key = f"gpu{gpu_minor}/gi{gi}/ci{ci}/access"
    if gi_key not in minors or ci_key not in minors:
        raise MigError(f"the NVIDIA driver lists no capability minors for {gi_key} / {ci_key}")
    return minors[gi_key], minors[ci_key]


class NvmlMigPartitioner:
    """:class:`MigPartitioner` on NVML (nvidia-ml-py). Calls block; run them in a thread.

    ``mig_minors_path`` is read after each creation (default
    :data:`DEFAULT_MIG_MINORS_PATH`).
    """

    def __init__(self, mig_minors_path: Path = DEFAULT_MIG_MINORS_PATH) -> None:
        import pynvml  # imported here: only nodes with NVIDIA GPUs have libnvidia-ml

        self._nvml: Any = pynvml
        self._minors_path = mig_minors_path
        pynvml.nvmlInit()

    def create(self, placement: MigPlacement) -> MigInstance:
        """See :meth:`MigPartitioner.create`. Whatever was created is destroyed again when a
        later step fails."""
        nv = self._nvml
        what = (f"MIG profile {placement.profile_id} at slice {placement.start} on "
                f"{placement.parent_uuid}")
        try:
            gpu = nv.nvmlDeviceGetHandleByUUID(placement.parent_uuid)
            profile = nv.nvmlDeviceGetGpuInstanceProfileInfoById(gpu, placement.profile_id)
            where = nv.c_nvmlGpuInstancePlacement_t(placement.start, placement.size)
            gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, placement.profile_id, where)
        except nv.NVMLError as err:
            raise MigError(f"creating {what}: {err}") from err
        ci = None
        try:
            gi_id = nv.nvmlGpuInstanceGetInfo(gi).id
            ci_profile = self._full_compute_profile(gi, profile.sliceCount)
            ci = nv.nvmlGpuInstanceCreateComputeInstance(gi, ci_profile)
            ci_id = nv.nvmlComputeInstanceGetInfo(ci).id
            uuid = self._mig_uuid(gpu, gi_id, ci_id)
            minors = parse_mig_minors(self._minors_path.read_text())
            gi_cap, ci_cap = cap_minors(minors, placement.parent_minor, gi_id, ci_id)
        except (nv.NVMLError, MigError, OSError) as err:
            if ci is not None:
                nv.nvmlComputeInstanceDestroy(ci)
            nv.nvmlGpuInstanceDestroy(gi)
            raise MigError(f"creating {what}: {err}") from err
        return MigInstance(placement=placement, uuid=uuid, gpu_instance_id=gi_id,
                           compute_instance_id=ci_id, gpu_instance_cap_minor=gi_cap,
                           compute_instance_cap_minor=ci_cap)

    def destroy(self, instance: MigInstance) -> None:
        """See :meth:`MigPartitioner.destroy`."""
        nv = self._nvml
        try:
            gpu = nv.nvmlDeviceGetHandleByUUID(instance.placement.parent_uuid)
            gi = nv.nvmlDeviceGetGpuInstanceById(gpu, instance.gpu_instance_id)
        except nv.NVMLError_NotFound:
            return
        except nv.NVMLError as err:
            raise MigError(f"finding MIG device {instance.uuid}: {err}") from err
        try:
            try:
                ci = nv.nvmlGpuInstanceGetComputeInstanceById(gi, instance.compute_instance_id)
                nv.nvmlComputeInstanceDestroy(ci)
            except nv.NVMLError_NotFound:
                pass
            nv.nvmlGpuInstanceDestroy(gi)
        except nv.NVMLError as err:
            raise MigError(f"destroying MIG device {instance.uuid}: {err}") from err

    def _full_compute_profile(self, gi: Any, slices: int) -> int:
        """ID of the compute-instance profile that spans all ``slices`` of GPU instance ``gi``."""
        nv = self._nvml
        for index in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            try:
                info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, index, nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            except nv.NVMLError:
                continue
            if info.sliceCount == slices:
                return int(info.id)
        raise MigError(f"no compute-instance profile spans {slices} slices")

    def _mig_uuid(self, gpu: Any, gi_id: int, ci_id: int) -> str:
        """UUID of the MIG device of ``gpu`` with GPU instance ``gi_id`` / compute ``ci_id``."""
        nv = self._nvml
        for index in range(nv.nvmlDeviceGetMaxMigDeviceCount(gpu)):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, index)
            except nv.NVMLError_NotFound:
                continue
            if (nv.nvmlDeviceGetGpuInstanceId(mig) == gi_id
                    and nv.nvmlDeviceGetComputeInstanceId(mig) == ci_id):
                return str(nv.nvmlDeviceGetUUID(mig))
        raise MigError(f"NVML lists no MIG device for GPU instance {gi_id}, compute {ci_id}")
