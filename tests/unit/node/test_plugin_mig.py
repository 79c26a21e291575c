"""MIG instances on demand: capability minors, and NVML call sequences (with a fake NVML)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kubedra.node.mig import (
    MigError,
    MigInstance,
    MigPlacement,
    NvmlMigPartitioner,
    cap_minors,
    parse_mig_minors,
)

MINORS = """config 1
monitor 2
gpu0/gi3/access 30
gpu0/gi3/ci0/access 31
gpu0/gi4/access 39
garbage line
"""
PLACEMENT = MigPlacement(parent_uuid="GPU-1", parent_minor=0, profile_id=19, start=2, size=1)


def test_parse_and_look_up_minors() -> None:
    minors = parse_mig_minors(MINORS)
    assert minors == {"config": 1, "monitor": 2, "gpu0/gi3/access": 30,
                      "gpu0/gi3/ci0/access": 31, "gpu0/gi4/access": 39}
    assert cap_minors(minors, 0, 3, 0) == (30, 31)
    with pytest.raises(MigError, match=r"^the NVIDIA driver lists no capability minors for "
                       r"gpu0/gi4/access / gpu0/gi4/ci0/access$"):
        cap_minors(minors, 0, 4, 0)


class NVMLError(Exception):
    pass


class NVMLErrorNotFound(NVMLError):
    pass


def fake_nvml(calls: list[str], fail: str | None = None) -> Any:
    """Just enough of pynvml: one GPU, GPU instance 3, compute instance 0, MIG device slot 1."""

    def call(name: str, value: Any = None) -> Any:
        calls.append(name)
        if name == fail:
            raise NVMLError(f"{name} failed")
        return value

    info = SimpleNamespace
    return SimpleNamespace(
        NVMLError=NVMLError, NVMLError_NotFound=NVMLErrorNotFound,
        NVML_COMPUTE_INSTANCE_PROFILE_COUNT=3, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED=0,
        nvmlInit=lambda: call("init"),
        nvmlDeviceGetHandleByUUID=lambda uuid: call("handle", "gpu"),
        nvmlDeviceGetGpuInstanceProfileInfoById=lambda gpu, pid: call(
            "profile", info(sliceCount=1)),
        c_nvmlGpuInstancePlacement_t=lambda start, size: (start, size),
        nvmlDeviceCreateGpuInstanceWithPlacement=lambda gpu, pid, where: call("create gi", "gi"),
        nvmlGpuInstanceGetInfo=lambda gi: call("gi info", info(id=3)),
        nvmlGpuInstanceGetComputeInstanceProfileInfo=lambda gi, index, eng: call(
            f"ci profile {index}", info(sliceCount=index + 1, id=10 + index)),
        nvmlGpuInstanceCreateComputeInstance=lambda gi, pid: call(f"create ci {pid}", "ci"),
        nvmlComputeInstanceGetInfo=lambda ci: call("ci info", info(id=0)),
        nvmlDeviceGetMaxMigDeviceCount=lambda gpu: call("max", 2),
        nvmlDeviceGetMigDeviceHandleByIndex=lambda gpu, index: (
            call(f"mig {index}", f"mig{index}") if index == 1 else _not_found(calls, index)),
        nvmlDeviceGetGpuInstanceId=lambda mig: call("mig gi", 3),
        nvmlDeviceGetComputeInstanceId=lambda mig: call("mig ci", 0),
        nvmlDeviceGetUUID=lambda mig: call("uuid", "MIG-abc"),
        nvmlComputeInstanceDestroy=lambda ci: call("destroy ci"),
        nvmlGpuInstanceDestroy=lambda gi: call("destroy gi"),
        nvmlDeviceGetGpuInstanceById=lambda gpu, gi: call("gi by id", "gi"),
        nvmlGpuInstanceGetComputeInstanceById=lambda gi, ci: call("ci by id", "ci"),
    )


def _not_found(calls: list[str], index: int) -> Any:
    calls.append(f"mig {index}")
    raise NVMLErrorNotFound("empty slot")


@pytest.fixture
def minors_file(tmp_path: Path) -> Path:
    path = tmp_path / "mig-minors"
    path.write_text(MINORS)
    return path


def partitioner(monkeypatch: pytest.MonkeyPatch, calls: list[str], minors: Path,
                fail: str | None = None) -> NvmlMigPartitioner:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(calls, fail))
    return NvmlMigPartitioner(minors)


def test_create_makes_gpu_and_full_compute_instance(monkeypatch: pytest.MonkeyPatch,
                                                    minors_file: Path) -> None:
    calls: list[str] = []
    instance = partitioner(monkeypatch, calls, minors_file).create(PLACEMENT)
    assert instance == MigInstance(placement=PLACEMENT, uuid="MIG-abc", gpu_instance_id=3,
                                   compute_instance_id=0, gpu_instance_cap_minor=30,
                                   compute_instance_cap_minor=31)
    assert calls == ["init", "handle", "profile", "create gi", "gi info", "ci profile 0",
                     "create ci 10", "ci info", "max", "mig 0", "mig 1", "mig gi", "mig ci",
                     "uuid"]


def test_failed_creation_destroys_what_was_made(monkeypatch: pytest.MonkeyPatch,
                                                minors_file: Path) -> None:
    calls: list[str] = []
    with pytest.raises(MigError) as raised:
        partitioner(monkeypatch, calls, minors_file, fail="uuid").create(PLACEMENT)
    assert str(raised.value) == "creating MIG profile 19 at slice 2 on GPU-1: uuid failed"
    assert calls[-2:] == ["destroy ci", "destroy gi"]


def test_gpu_not_in_mig_mode_is_reported(monkeypatch: pytest.MonkeyPatch,
                                         minors_file: Path) -> None:
    calls: list[str] = []
    with pytest.raises(MigError) as raised:
        partitioner(monkeypatch, calls, minors_file, fail="create gi").create(PLACEMENT)
    assert str(raised.value) == "creating MIG profile 19 at slice 2 on GPU-1: create gi failed"
    assert "destroy gi" not in calls


def test_destroy(monkeypatch: pytest.MonkeyPatch, minors_file: Path) -> None:
    calls: list[str] = []
    p = partitioner(monkeypatch, calls, minors_file)
    instance = p.create(PLACEMENT)
    calls.clear()
    p.destroy(instance)
    assert calls == ["handle", "gi by id", "ci by id", "destroy ci", "destroy gi"]
