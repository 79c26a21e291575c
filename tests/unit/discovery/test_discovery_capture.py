"""Captures written from the live sources replay to the live inventory, and
``hack/nvml-live-check.py`` (run here over a pynvml that answers from the H200 capture and a
sysfs tree built from it) reports equal inventories, and differences when there are some."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from kubedra.api.inventory import DiscoverySettings, MigMode
from kubedra.discovery import discover
from kubedra.discovery.capture import differences, write_capture
from kubedra.discovery.nvml_live import LiveNvml
from kubedra.discovery.recorded import RecordedSysfs
from kubedra.discovery.sysfs import LiveSysfs
from tests.support.nvml_fake import RecordedPynvml
from tests.support.sysfs_tree import build_sysfs

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "hardware" / "nvidia-h200"
INFORMATION = "Model: \t\t NVIDIA H200\nBus Location: \t 0000:00:06.0\n"
VERSION = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n"


@pytest.fixture
def machine(tmp_path: Path) -> tuple[Path, Path]:
    """A sysfs and a procfs root laid out like the captured H200 machine."""
    sysfs = build_sysfs(tmp_path / "sys", RecordedSysfs(H200).records())
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia" / "gpus" / "0000:00:06.0").mkdir(parents=True)
    (proc / "driver" / "nvidia" / "version").write_text(VERSION)
    (proc / "driver" / "nvidia" / "gpus" / "0000:00:06.0" / "information").write_text(INFORMATION)
    return sysfs, proc


@pytest.fixture(scope="module")
def live_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nvml_live_check",
                                                  REPO / "hack" / "nvml-live-check.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("mig", ["none", "partitions"])
def test_a_fresh_capture_replays_to_the_h200_inventory(
        tmp_path: Path, machine: tuple[Path, Path], mig: MigMode) -> None:
    sysfs, proc = machine
    folder = tmp_path / "capture"
    written = write_capture(folder, LiveNvml(RecordedPynvml(H200)), LiveSysfs(sysfs), proc)
    assert sorted(path.name for path in written) == [
        "mig_placements.json", "nvml.json", "proc_nvidia.json", "sysfs_pci.json"]
    assert json.loads((folder / "proc_nvidia.json").read_text()) == {
        "/proc/driver/nvidia/version": VERSION,
        "/proc/driver/nvidia/gpus/0000:00:06.0/information": INFORMATION,
    }
    settings = DiscoverySettings(mig=mig)
    replay = discover(f"snapshot:{folder}", settings)
    assert replay == discover(f"snapshot:{H200}", settings)


def test_live_check_passes_against_the_h200_capture(
        live_check: ModuleType, machine: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sysfs, _ = machine
    code = live_check.main(["check", str(H200), "--sysfs-root", str(sysfs)],
                           nvml=RecordedPynvml(H200))
    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        f"mig=none: 1 devices, 0 counter sets live; equal (first: snapshot:{H200}, second: nvml)",
        f"mig=partitions: 26 devices, 1 counter sets live; equal "
        f"(first: snapshot:{H200}, second: nvml)",
    ]


def test_live_check_reports_each_difference(
        tmp_path: Path, live_check: ModuleType, machine: tuple[Path, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    sysfs, _ = machine
    folder = tmp_path / "changed"
    shutil.copytree(H200, folder)
    document = json.loads((folder / "nvml.json").read_text())
    document["devices"][0]["memory"]["total"] -= 2**20
    (folder / "nvml.json").write_text(json.dumps(document))
    code = live_check.main(["check", str(folder), "--sysfs-root", str(sysfs)],
                           nvml=RecordedPynvml(H200))
    assert code == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        f"mig=none: 1 devices, 0 counter sets live; 1 differences "
        f"(first: snapshot:{folder}, second: nvml)",
        "  devices.gpu-0.capacity.memory.value: '143770Mi' != '143771Mi'",
    ]


def test_live_check_capture_then_check(
        tmp_path: Path, live_check: ModuleType, machine: tuple[Path, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    sysfs, proc = machine
    folder = tmp_path / "capture"
    assert live_check.main(["capture", str(folder), "--sysfs-root", str(sysfs),
                            "--proc-root", str(proc)], nvml=RecordedPynvml(H200)) == 0
    assert live_check.main(["check", str(folder), "--sysfs-root", str(sysfs)],
                           nvml=RecordedPynvml(H200)) == 0
    assert capsys.readouterr().out.count("; equal (") == 2


def test_live_check_exits_2_when_nvml_cannot_start(
        live_check: ModuleType, machine: tuple[Path, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    class NoDriver(RecordedPynvml):
        def nvmlInit(self) -> None:
            raise self.NVMLError(9)

    sysfs, _ = machine
    assert live_check.main(["check", str(H200), "--sysfs-root", str(sysfs)],
                           nvml=NoDriver(H200)) == 2
    assert capsys.readouterr().err == (
        "discovery failed: NVML cannot be initialised: Driver Not Loaded\n")


def test_differences_match_devices_by_name() -> None:
    settings = DiscoverySettings(mig="partitions")
    first = discover(f"snapshot:{H200}", settings)
    second = first.model_copy(deep=True)
    second.devices.reverse()
    assert differences(first, second) == []
    del second.devices[0]  # the last partition in discovery order
    second.counter_sets[0].counters.pop("ofa-engines")
    assert differences(first, second) == [
        "counterSets.gpu-0-counters.counters.ofa-engines: only in the first",
        "devices.gpu-0-mig-1g35gb-s6: only in the first",
    ]
