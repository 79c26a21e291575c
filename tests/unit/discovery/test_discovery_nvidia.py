"""NVIDIA discovery on the real H200 capture: exact devices, the live code path equals the
replay, normalisation of NVML's values, health, and the paths where NVML refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.inventory import DiscoverySettings, MigMode
from kubedra.api.quantity import Quantity
from kubedra.discovery import DiscoveryError, discover
from kubedra.discovery.nvidia import (
    cuda_version,
    nvidia_discovery,
    nvidia_inventory,
    pci_address,
    semantic_version,
)
from kubedra.discovery.nvml import parse_nvml
from kubedra.discovery.nvml_live import LiveNvml
from kubedra.discovery.recorded import RecordedNvml, RecordedSysfs
from kubedra.discovery.sysfs import parse_pci_functions
from tests.support.h200 import H200_GPU0
from tests.support.nvml_fake import RecordedPynvml

H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"

H200_GPU = H200_GPU0


def h200_document() -> dict[str, Any]:
    """The H200 NVML document with placements inline, as the replay reads it."""
    return RecordedNvml(H200).document()


def inventory(document: dict[str, Any], mig: MigMode = "none") -> dict[str, Any]:
    functions = parse_pci_functions(RecordedSysfs(H200).records())
    return nvidia_inventory(parse_nvml(document), functions, mig).to_api()


def test_h200_snapshot_is_exactly_one_gpu() -> None:
    result = discover(f"snapshot:{H200}", DiscoverySettings())
    assert result.to_api() == {"devices": [H200_GPU], "counterSets": [], "rejected": []}
    memory = result.devices[0].capacity["memory"].value
    assert memory.value == 150754820096
    assert str(memory) == "143771Mi"


@pytest.mark.parametrize("mig", ["none", "partitions"])
def test_live_nvml_code_path_gives_the_replayed_inventory(mig: MigMode) -> None:
    """The nvml backend's code (LiveNvml calling pynvml) over a pynvml that answers from the
    capture equals the snapshot replay of the same capture."""
    fake = RecordedPynvml(H200)
    live = nvidia_discovery(LiveNvml(fake), RecordedSysfs(H200), mig)
    replay = nvidia_discovery(RecordedNvml(H200), RecordedSysfs(H200), mig)
    assert live.to_api() == replay.to_api()
    assert len(live.devices) == (1 if mig == "none" else 26)
    assert fake.calls == ["nvmlInit", "nvmlShutdown"]


def test_live_document_reads_only_stable_facts() -> None:
    document = LiveNvml(RecordedPynvml(H200)).document()
    device = document["devices"][0]
    assert document["driver"] == "580.159.04"
    assert document["cuda_driver"] == 13000
    assert device["memory"] == {"total": 150754820096}
    assert device["pci"] == {"busId": "00000000:00:06.0"}
    assert device["RetiredPagesPendingStatus"] == {
        "error": "NVMLError_NotSupported: Not Supported"}
    assert "Temperature" not in device
    profiles = [p for p in device["gpu_instance_profiles"] if "error" not in p]
    assert [(p["name"], len(p["placements"])) for p in profiles] == [
        ("MIG 1g.18gb", 7), ("MIG 2g.35gb", 3), ("MIG 3g.71gb", 2), ("MIG 4g.71gb", 1),
        ("MIG 7g.141gb", 1), ("MIG 1g.18gb+me", 7), ("MIG 1g.35gb", 4)]


@pytest.mark.parametrize(("text", "version"), [
    ("580.159.04", "580.159.4"),
    ("535.104.05", "535.104.5"),
    ("537.13", "537.13.0"),
    ("550.00.00", "550.0.0"),
    ("580", None),
    ("580.159.04-beta", None),
    ("1.2.3.4", None),
])
def test_driver_version_as_semver(text: str, version: str | None) -> None:
    assert semantic_version(text) == version


@pytest.mark.parametrize(("value", "version"), [(13000, "13.0.0"), (12040, "12.4.0"),
                                                (11080, "11.8.0")])
def test_cuda_driver_version(value: int, version: str) -> None:
    assert cuda_version(value) == version


@pytest.mark.parametrize(("bus_id", "address"), [
    ("00000000:00:06.0", "0000:00:06.0"),
    ("00000000:3B:00.0", "0000:3b:00.0"),
    ("0000:c1:00.1", "0000:c1:00.1"),
    ("00010000:01:00.0", "10000:01:00.0"),
    ("not-a-bus-id", None),
])
def test_nvml_bus_id_as_sysfs_address(bus_id: str, address: str | None) -> None:
    assert pci_address(bus_id) == address


@pytest.mark.parametrize(("rows", "pending_pages", "health", "message"), [
    ([0, 0, 0, 0], None, "Healthy", None),
    ([3, 1, 0, 0], None, "Healthy", None),
    ([0, 1, 1, 0], None, "Unhealthy", "row remapping pending: the GPU needs a reset"),
    ([0, 5, 0, 1], None, "Unhealthy",
     "row remapping failed (NVML RemappedRows failureOccurred)"),
    ([0, 0, 0, 0], 1, "Unhealthy", "page retirement pending: the GPU needs a reset"),
])
def test_health_from_remapped_rows_and_retired_pages(
        rows: list[int], pending_pages: int | None, health: str, message: str | None) -> None:
    document = h200_document()
    document["devices"][0]["RemappedRows"] = rows
    if pending_pages is not None:
        document["devices"][0]["RetiredPagesPendingStatus"] = pending_pages
    result = inventory(document, "partitions")
    assert {device.get("health") for device in result["devices"]} == {health}
    assert {device.get("healthMessage") for device in result["devices"]} == {message}


def test_gpu_without_handle_is_unhealthy_and_bare() -> None:
    document = h200_document()
    document["devices"].append({"index": 1, "error": "NVMLError_GpuIsLost: GPU is lost"})
    devices = inventory(document)["devices"]
    assert devices[1] == {"name": "gpu-1", "attributes": {}, "capacity": {}, "health": "Unhealthy",
                          "healthMessage": "NVML has no handle for GPU 1: "
                                           "NVMLError_GpuIsLost: GPU is lost"}


def test_multiprocessors_only_for_known_compute_capabilities() -> None:
    document = h200_document()
    device = document["devices"][0]
    device["CudaComputeCapability"], device["NumGpuCores"] = [8, 0], 6912  # A100: 108 SMs
    assert inventory(document)["devices"][0]["capacity"]["multiprocessors"] == {"value": "108"}
    device["CudaComputeCapability"] = [99, 0]
    assert "multiprocessors" not in inventory(document)["devices"][0]["capacity"]


def test_gpu_without_mig_gets_no_partitions() -> None:
    document = h200_document()
    device = document["devices"][0]
    device["MigMode"] = {"error": "NVMLError_NotSupported: Not Supported"}
    del device["gpu_instance_profiles"]
    result = inventory(document, "partitions")
    expected = copy.deepcopy(H200_GPU)
    expected["attributes"]["migCapable"] = {"bool": False}
    del expected["attributes"]["migEnabled"]
    assert result == {"devices": [expected], "counterSets": [], "rejected": []}


def test_mig_capable_gpu_without_placements_gets_no_partitions() -> None:
    document = json.loads((H200 / "nvml.json").read_text())  # placements recorded as errors
    assert inventory(document, "partitions") == {
        "devices": [H200_GPU], "counterSets": [], "rejected": []}


def test_gpu_missing_from_sysfs_keeps_only_its_bus_id() -> None:
    result = nvidia_inventory(parse_nvml(h200_document()), [], "none").to_api()
    attributes = result["devices"][0]["attributes"]
    assert attributes["resource.kubernetes.io/pciBusID"] == {"string": "0000:00:06.0"}
    assert "resource.kubernetes.io/pcieRoot" not in attributes


def test_two_gpus_have_their_own_counter_sets() -> None:
    document = h200_document()
    second = copy.deepcopy(document["devices"][0])
    second.update(index=1, UUID="GPU-00000000-0000-0000-0000-000000000001", MinorNumber=1)
    document["devices"].append(second)
    result = inventory(document, "partitions")
    assert [s["name"] for s in result["counterSets"]] == ["gpu-0-counters", "gpu-1-counters"]
    by_name = {device["name"]: device for device in result["devices"]}
    assert len(by_name) == 52
    partition = by_name["gpu-1-mig-1g18gb-s2"]
    assert partition["consumesCounters"][0]["counterSet"] == "gpu-1-counters"
    assert partition["attributes"]["parentUUID"] == {
        "string": "GPU-00000000-0000-0000-0000-000000000001"}
    assert by_name["gpu-1"]["consumesCounters"][0]["counterSet"] == "gpu-1-counters"


def test_nvml_that_cannot_start_is_a_discovery_error() -> None:
    class NoDriver(RecordedPynvml):
        def nvmlInit(self) -> None:
            raise self.NVMLError(9)  # NVML_ERROR_DRIVER_NOT_LOADED

    with pytest.raises(DiscoveryError, match="NVML cannot be initialised: Driver Not Loaded"):
        LiveNvml(NoDriver(H200)).document()


def test_nvml_is_shut_down_when_listing_fails() -> None:
    class CannotCount(RecordedPynvml):
        def nvmlDeviceGetCount(self) -> int:
            raise self.NVMLError(15)  # NVML_ERROR_GPU_IS_LOST

    fake = CannotCount(H200)
    with pytest.raises(DiscoveryError, match="NVML cannot list its devices: GPU is lost"):
        LiveNvml(fake).document()
    assert fake.calls == ["nvmlInit", "nvmlShutdown"]


def test_malformed_capture_is_a_discovery_error(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="cannot read capture file"):
        discover(f"snapshot:{tmp_path}", DiscoverySettings())
    (tmp_path / "nvml.json").write_text(json.dumps({"devices": [{"index": "zero"}]}))
    (tmp_path / "sysfs_pci.json").write_text("[]")
    with pytest.raises(DiscoveryError, match="malformed NVML document"):
        discover(f"snapshot:{tmp_path}", DiscoverySettings())


def test_h200_capture_memory_matches_nvidia_smi() -> None:
    """Cross-check with the capture's nvidia-smi: 143771 MiB total."""
    smi = json.loads((H200 / "nvidia_smi.json").read_text())["query_csv"]["stdout"]
    assert "143771 MiB" in smi
    assert Quantity("143771Mi").value == 150754820096
