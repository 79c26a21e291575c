"""The compact form of whole devices (``status.discovered.deviceModels``,
kubedra.api.device_models): the slices published from it are byte-for-byte those of the full
form, for the 8-H200 node of the capture (with and without MIG), the recorded MIG slices and a
node of NICs (the pci backend); the device's own values win on a name; a device that cannot be
written out is left out, naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.scale import h200_node, published_slices
from kubedra.api.crd import inventory_crd
from kubedra.api.device_models import fold, model_name, unfold
from kubedra.api.inventory import (
    DeviceInventory,
    DiscoveredState,
    DiscoverySettings,
    Rejection,
)
from kubedra.api.mig import compact, expand
from kubedra.controller.compact import Compactor
from kubedra.controller.inventories import inventory_devices, left_out_message
from kubedra.discovery import discover
from kubedra.node.agent import Agent
from kubedra.publishing.pool import build_pool
from kubedra.settings import Settings
from tests.support.sysfs_tree import build_sysfs

RECORDED = Path(__file__).resolve().parents[2] / "unit" / "data" / "h200-mig"
H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"


def _bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def _nic(address: str, root: str, numa: str) -> dict[str, str]:
    """A ConnectX-6 Dx port (``0x15b3:0x101d``) at ``address`` under PCIe root ``root``."""
    bus = address.split(":")[1]
    return {"address": address, "vendor": "0x15b3", "device": "0x101d", "class": "0x020000",
            "subsystem_vendor": "0x15b3", "subsystem_device": "0x0043", "revision": "0x00",
            "numa_node": numa, "driver": "mlx5_core", "iommu_group": str(40 + int(bus, 16)),
            "real_path": f"/sys/devices/{root}/{root[3:]}:02.0/{address}"}


NICS = [_nic("0000:3b:00.0", "pci0000:3a", "0"), _nic("0000:3b:00.1", "pci0000:3a", "0"),
        _nic("0000:86:00.0", "pci0000:85", "1"), _nic("0000:86:00.1", "pci0000:85", "1")]
AUDIO = {"address": "0000:00:1f.3", "vendor": "0x8086", "device": "0x7a50", "class": "0x040300",
         "numa_node": "-1"}


def test_an_8_h200_node_reports_one_model_and_what_each_gpu_has_of_its_own() -> None:
    compacted, explicit = h200_node(3, False, "compact"), h200_node(3, False, "explicit")
    [model] = compacted["deviceModels"]
    assert model["name"] == "nvidia-h200"
    assert list(model["attributes"]) == list(explicit["devices"][0]["attributes"])
    assert model["capacity"] == {"memory": {"value": "143771Mi"},
                                 "multiprocessors": {"value": "132"}}
    assert compacted["devices"][0] == {"name": "gpu-0", "health": "Healthy",
                                       "deviceModel": "nvidia-h200"}
    assert compacted["devices"][5] == {
        "name": "gpu-5", "health": "Healthy", "deviceModel": "nvidia-h200", "attributes": {
            "uuid": {"string": "GPU-00000003-0000-4000-8000-000000000005"},
            "minor": {"int": 5},
            "resource.kubernetes.io/pciBusID": {"string": "0000:06:00.0"}}}
    assert (len(json.dumps(compacted)), len(json.dumps(explicit))) == (2453, 5509)


@pytest.mark.parametrize("mig", [False, True])
def test_an_8_h200_node_publishes_the_same_slices_from_both_forms(mig: bool) -> None:
    compacted, explicit = h200_node(5, mig, "compact"), h200_node(5, mig, "explicit")
    assert [m["name"] for m in compacted["deviceModels"]] == ["nvidia-h200"]
    assert _bytes(published_slices("n", compacted)) == _bytes(published_slices("n", explicit))
    full = DiscoveredState.from_api(explicit)
    assert [d.to_api() for d in expand(DiscoveredState.from_api(compacted)).devices] == [
        d.to_api() for d in expand(full).devices]


def test_listed_partitions_fold_and_publish_the_recorded_slices_byte_for_byte() -> None:
    """The report of an agent before the MIG compact form (every partition listed, recorded
    at 2851131) folded into device models publishes the slices recorded then."""
    explicit = DiscoveredState.from_api(json.loads(
        (RECORDED / "discovered-explicit.json").read_text()))
    folded = fold(explicit).to_api()
    assert [(m["name"], len(m.get("attributes", {}))) for m in folded["deviceModels"]] == [
        ("nvidia-h200", 12)]
    assert (len(json.dumps(folded)), len(json.dumps(explicit.to_api()))) == (15616, 28279)
    recorded = json.loads((RECORDED / "slices.json").read_text())
    assert _bytes(published_slices("mig-h200", folded)) == _bytes(recorded)


def test_a_node_of_nics_publishes_the_same_slices_from_both_forms(tmp_path: Path) -> None:
    found = discover("pci", DiscoverySettings(), build_sysfs(tmp_path, [AUDIO, *NICS]))
    report = compact(found).to_api()
    assert [(d["name"], d.get("deviceModel")) for d in report["devices"]] == [
        ("pci-0000-00-1f-3", None), ("pci-0000-3b-00-0", "pci-15b3-101d"),
        ("pci-0000-3b-00-1", "pci-15b3-101d"), ("pci-0000-86-00-0", "pci-15b3-101d"),
        ("pci-0000-86-00-1", "pci-15b3-101d")]
    assert report["devices"][4]["attributes"] == {
        "iommuGroup": {"int": 174}, "resource.kubernetes.io/pciBusID": {"string": "0000:86:00.1"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:85"},
        "resource.kubernetes.io/numaNode": {"int": 1}}
    full = DiscoveredState(devices=found.devices).to_api()
    assert _bytes(published_slices("nics", report)) == _bytes(published_slices("nics", full))
    assert len(json.dumps(report)) < len(json.dumps(full))


def test_one_device_of_a_kind_stays_listed() -> None:
    one_gpu = discover(f"snapshot:{H200}", DiscoverySettings())
    assert compact(one_gpu).to_api() == DiscoveredState(devices=one_gpu.devices).to_api()


def _state(model: dict[str, Any], *devices: dict[str, Any]) -> DiscoveredState:
    return DiscoveredState.from_api({"deviceModels": [model], "devices": list(devices)})


def test_the_devices_own_value_wins_in_the_models_place() -> None:
    state = _state({"name": "m", "attributes": {"a": {"int": 1}, "b": {"int": 2}},
                    "capacity": {"memory": {"value": "1Gi"}}},
                   {"name": "d", "deviceModel": "m",
                    "attributes": {"c": {"int": 4}, "b": {"int": 3}},
                    "capacity": {"memory": {"value": "2Gi"}}})
    [device], rejected = unfold(state)
    assert (device.to_api(), rejected) == ({
        "name": "d", "attributes": {"a": {"int": 1}, "b": {"int": 3}, "c": {"int": 4}},
        "capacity": {"memory": {"value": "2Gi"}}, "health": "Healthy"}, [])


def _inventory(discovered: DiscoveredState) -> DeviceInventory:
    return DeviceInventory.from_api({
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": "n-gpu.kubedra.io"},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "n"},
        "status": {"discovered": discovered.to_api()}})


def test_a_device_past_32_entries_with_its_model_is_left_out_naming_the_field() -> None:
    """The CRD checks the model and the device alone (at most 32 each); together they must
    hold too, as the device the API server takes in a slice."""
    model = {"name": "m", "attributes": {f"shared{i}": {"int": i} for i in range(20)}}
    state = _state(model, {"name": "ok", "deviceModel": "m",
                           "attributes": {f"own{i}": {"int": i} for i in range(12)}},
                   {"name": "big", "deviceModel": "m",
                    "attributes": {f"own{i}": {"int": i} for i in range(12)},
                    "capacity": {"memory": {"value": "1Gi"}}})
    pool = build_pool(_inventory(state))
    assert [d.name for d in pool.devices] == ["ok"]
    assert len(pool.devices[0].attributes) == 32
    refused = Rejection(name="big", field="status.discovered.devices[big].deviceModel", message=(
        "with deviceModels[m] the device has 33 attributes and capacities; a device may have "
        "at most 32"))
    assert pool.left_out == [refused]
    assert left_out_message(pool) == (
        "left out, as the API server would refuse them: big (status.discovered.devices[big]."
        "deviceModel: with deviceModels[m] the device has 33 attributes and capacities; a "
        "device may have at most 32)")


def test_a_device_naming_no_model_is_left_out_naming_the_field() -> None:
    state = _state({"name": "m", "attributes": {"a": {"int": 1}}},
                   {"name": "d0", "deviceModel": "m"}, {"name": "d1", "deviceModel": "other"})
    pool = build_pool(_inventory(state))
    assert [d.name for d in pool.devices] == ["d0"]
    assert pool.left_out == [Rejection(name="d1", field="status.discovered.devices[d1].deviceModel",
                                       message="no deviceModels entry 'other'")]


def test_the_status_views_read_the_devices_written_out() -> None:
    compacted, explicit = h200_node(2, False, "compact"), h200_node(2, False, "explicit")
    assert [d.to_api() for d in inventory_devices(_inventory(DiscoveredState.from_api(
        compacted)))] == [d.to_api() for d in inventory_devices(_inventory(
            DiscoveredState.from_api(explicit)))]


def test_devices_listing_their_names_in_another_order_are_not_one_kind() -> None:
    a = {"name": "a", "attributes": {"x": {"int": 1}, "y": {"string": "long value " * 4}}}
    b = {"name": "b", "attributes": {"y": {"string": "long value " * 4}, "x": {"int": 1}}}
    state = DiscoveredState.from_api({"devices": [a, b, {**a, "name": "c"}]})
    folded = fold(state).to_api()
    assert [d.get("deviceModel") for d in folded["devices"]] == ["device", None, "device"]
    assert [d.to_api() for d in expand(DiscoveredState.from_api(folded)).devices] == [
        d.to_api() for d in state.devices]


def test_model_names() -> None:
    found = discover(f"snapshot:{H200}", DiscoverySettings())
    assert model_name(found.devices[0].attributes, "device") == "nvidia-h200"
    nic = discover(f"snapshot:{H200}", DiscoverySettings()).devices[0].attributes
    assert model_name({k: v for k, v in nic.items() if k != "productName"}, "gpu") == "gpu"


def test_the_crd_checks_a_models_entries_and_names_it_by_its_name() -> None:
    schema = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    discovered = schema["properties"]["status"]["properties"]["discovered"]["properties"]
    models = discovered["deviceModels"]
    assert (models["maxItems"], models["x-kubernetes-list-map-keys"]) == (32, ["name"])
    assert models["items"]["x-kubernetes-validations"][0]["message"] == (
        "a device may have at most 32 attributes and capacities together")
    assert discovered["devices"]["items"]["properties"]["deviceModel"]["maxLength"] == 63


def test_the_operators_cache_shares_the_models_values_across_inventories() -> None:
    compactor = Compactor()
    held = [compactor.copy({"metadata": {"name": f"n{i}", "resourceVersion": str(i)},
                            "status": {"discovered": h200_node(i, False)}}) for i in range(2)]
    first, second = (h["status"]["discovered"]["deviceModels"][0] for h in held)
    assert first["attributes"]["productName"] is second["attributes"]["productName"]
    assert first["capacity"]["memory"] is second["capacity"]["memory"]


async def test_the_agent_reports_the_compact_form_and_serves_the_full_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(node_name="n", backend="pci", sysfs_root=build_sysfs(tmp_path, NICS),
                        boot_id_path=tmp_path / "boot_id")
    agent = Agent(settings, api=None)  # type: ignore[arg-type]
    applied: list[dict[str, Any]] = []

    async def get_inventory(api: Any, name: str) -> dict[str, Any]:
        return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                "metadata": {"name": name}, "spec": {"driver": "gpu.kubedra.io",
                                                     "nodeName": "n"}}

    async def apply_discovered(api: Any, name: str, discovered: dict[str, Any]) -> None:
        applied.append(discovered)

    monkeypatch.setattr("kubedra.kube.get_inventory", get_inventory)
    monkeypatch.setattr("kubedra.kube.apply_discovered", apply_discovered)
    assert await agent.scan()
    [report] = applied
    assert [m["name"] for m in report["deviceModels"]] == ["pci-15b3-101d"]
    assert {d["deviceModel"] for d in report["devices"]} == {"pci-15b3-101d"}
    found = discover("pci", DiscoverySettings(), settings.sysfs_root)
    assert [d.to_api() for d in agent.devices().values()] == [d.to_api() for d in found.devices]
