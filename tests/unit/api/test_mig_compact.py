"""The compact form of MIG GPUs in ``status.discovered`` (kubedra.api.mig): on the H200 capture
it publishes byte-for-byte the slices the full form publishes, and so does the full form an
agent of the previous version writes.

``tests/unit/data/h200-mig/`` was recorded with kubedra at commit 2851131 (before the compact
form): ``discovered-explicit.json`` is that agent's report of the capture with
``discovery.mig: partitions`` and ``slices.json`` the slices it published from it
(``bench.scale.published_slices``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bench.scale import h200_node, published_slices
from kubedra.api.inventory import (
    DeviceInventory,
    DiscoveredDevice,
    DiscoveredState,
    DiscoveryResult,
    DiscoverySettings,
    MigModel,
    Rejection,
)
from kubedra.api.mig import compact, expand, partition_names
from kubedra.discovery import discover
from kubedra.publishing.pool import build_pool

H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"
RECORDED = Path(__file__).resolve().parents[2] / "unit" / "data" / "h200-mig"


@pytest.fixture(scope="module")
def h200() -> DiscoveryResult:
    return discover(f"snapshot:{H200}", DiscoverySettings(mig="partitions"))


def _recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


def _bytes(slices: list[dict[str, Any]]) -> bytes:
    return json.dumps(slices).encode()


def test_the_capture_reports_one_gpu_and_one_model(h200: DiscoveryResult) -> None:
    report = compact(h200).to_api()
    assert [(d["name"], d["migModel"], "consumesCounters" in d) for d in report["devices"]] == [
        ("gpu-0", "nvidia-h200", False)]
    assert "counterSets" not in report
    [model] = report["migModels"]
    assert model["name"] == "nvidia-h200"
    assert [(p["name"], p["id"], [(x["start"], x["size"]) for x in p["placements"]])
            for p in model["profiles"]] == [
        ("MIG 1g.18gb", 19, [(s, 1) for s in range(7)]),
        ("MIG 2g.35gb", 14, [(0, 2), (2, 2), (4, 2)]),
        ("MIG 3g.71gb", 9, [(0, 4), (4, 4)]),
        ("MIG 4g.71gb", 5, [(0, 4)]),
        ("MIG 7g.141gb", 0, [(0, 8)]),
        ("MIG 1g.18gb+me", 20, [(s, 1) for s in range(7)]),
        ("MIG 1g.35gb", 15, [(0, 2), (2, 2), (4, 2), (6, 2)]),
    ]
    assert len(json.dumps(report)) == 2866
    assert len(json.dumps(_recorded("discovered-explicit.json"))) == 28279


def test_the_compact_form_publishes_the_recorded_slices_byte_for_byte(
        h200: DiscoveryResult) -> None:
    report = compact(h200).to_api()
    assert _bytes(published_slices("mig-h200", report)) == _bytes(_recorded("slices.json"))


def test_the_previous_agents_full_form_publishes_the_same_slices() -> None:
    explicit = _recorded("discovered-explicit.json")
    assert _bytes(published_slices("mig-h200", explicit)) == _bytes(_recorded("slices.json"))


def test_expanding_gives_back_what_discovery_found(h200: DiscoveryResult) -> None:
    back = expand(compact(h200))
    assert [d.to_api() for d in back.devices] == [d.to_api() for d in h200.devices]
    assert [c.to_api() for c in back.counter_sets] == [c.to_api() for c in h200.counter_sets]


@pytest.mark.parametrize("mig", [True, False])
def test_an_8_gpu_node_publishes_the_same_slices_in_both_forms(mig: bool) -> None:
    explicit, compacted = h200_node(7, mig, "explicit"), h200_node(7, mig, "compact")
    assert _bytes(published_slices("n", compacted)) == _bytes(published_slices("n", explicit))
    assert len(json.dumps(compacted)) < (8_000 if mig else len(json.dumps(explicit)) + 1)
    if mig:
        assert len(compacted["devices"]) == 8
        assert len(compacted["migModels"]) == 1
        assert len(json.dumps(explicit)) > 220_000


def test_a_gpu_whose_partitions_differ_from_its_model_stays_listed(
        h200: DiscoveryResult) -> None:
    changed = [d.model_copy(update={"health_transition_time": "2026-12-01T00:00:00Z"})
               if d.name == "gpu-0-mig-1g18gb-s3" else d for d in h200.devices]
    report = compact(h200.model_copy(update={"devices": changed}))
    assert report.mig_models is None
    assert [d.name for d in report.devices] == [d.name for d in changed]
    assert [d.to_api() for d in expand(report).devices] == [d.to_api() for d in changed]
    assert [c.to_api() for c in report.counter_sets or []] == [
        c.to_api() for c in h200.counter_sets]


def test_a_gpu_missing_a_partition_stays_listed(h200: DiscoveryResult) -> None:
    fewer = [d for d in h200.devices if d.name != "gpu-0-mig-7g141gb-s0"]
    report = compact(h200.model_copy(update={"devices": fewer}))
    assert (report.mig_models, [d.name for d in report.devices]) == (
        None, [d.name for d in fewer])


def test_a_partition_keeps_the_gpus_health(h200: DiscoveryResult) -> None:
    sick = [d.model_copy(update={"health": "Unhealthy", "health_message": "row remapping pending",
                                 "health_transition_time": "2026-12-01T00:00:00Z"})
            for d in h200.devices]
    report = compact(h200.model_copy(update={"devices": sick}))
    assert [d.name for d in report.devices] == ["gpu-0"]
    assert {(d.health, d.health_message, d.health_transition_time)
            for d in expand(report).devices} == {
        ("Unhealthy", "row remapping pending", "2026-12-01T00:00:00Z")}


def test_a_gpu_naming_no_model_is_published_alone_and_said_why(h200: DiscoveryResult) -> None:
    report = compact(h200).model_copy(update={"mig_models": [MigModel(name="other",
                                                                      profiles=[])]})
    back = expand(report)
    assert [d.name for d in back.devices] == ["gpu-0"]
    assert back.devices[0].consumes_counters is None
    assert back.counter_sets == []
    assert back.rejected == [Rejection(name="gpu-0",
                                       field="status.discovered.devices[gpu-0].migModel",
                                       message="no migModels entry 'nvidia-h200'")]


def test_partition_names_reads_the_json_as_expand_does(h200: DiscoveryResult) -> None:
    report = h200_node(3, True, "compact")
    names = partition_names(report)
    assert sorted(names) == [f"gpu-{i}" for i in range(8)]
    full = expand(DiscoveredState.from_api(report))
    assert sorted(n for listed in names.values() for n in listed) == sorted(
        d.name for d in full.devices if "-mig-" in d.name)


def test_a_gpu_naming_no_model_is_in_the_pools_left_out(h200: DiscoveryResult) -> None:
    report = compact(h200).model_copy(update={"mig_models": []})
    inventory = DeviceInventory.from_api({
        "metadata": {"name": "n-gpu.kubedra.io"},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "n"},
        "status": {"discovered": report.to_api()}})
    pool = build_pool(inventory)
    assert [d.name for d in pool.devices] == ["gpu-0"]
    assert pool.left_out == [Rejection(name="gpu-0",
                                       field="status.discovered.devices[gpu-0].migModel",
                                       message="no migModels entry 'nvidia-h200'")]


def test_a_report_expanding_past_the_device_limit_is_cut_before_it_is_built(
        h200: DiscoveryResult) -> None:
    """A buggy or hostile agent: 4,000 GPUs naming a model of 32 profiles of 64 placements would
    be 8 million partitions; the first GPU past the limit and every later one stay alone."""
    wide = MigModel.model_validate({"name": "wide", "profiles": [
        {**compact(h200).to_api()["migModels"][0]["profiles"][0], "name": f"MIG {i}g.1gb",
         "placements": [{"start": s, "size": 1} for s in range(64)]} for i in range(32)]})
    gpus = [DiscoveredDevice(name=f"gpu-{i}", mig_model="wide") for i in range(4000)]
    started = time.process_time()
    back = expand(DiscoveredState(devices=gpus, mig_models=[wide]))
    assert time.process_time() - started < 10
    assert len(back.devices) == 4000  # every GPU, no partition: 4000 + 2048 > 4096
    assert len(back.rejected) == 4000
    assert back.rejected[0] == Rejection(
        name="gpu-0", field="status.discovered.devices[gpu-0].migModel",
        message="its 2048 partitions would take the pool past 4096 devices")


def test_a_gpu_whose_partitions_cannot_be_named_is_in_the_pools_left_out() -> None:
    """A GPU name of 55 characters is a DNS label, but its counter set's name and its
    partitions' would be longer than 63: the GPU is published alone, said why, and the
    other GPUs with their partitions (the decision raised before, on every reconcile)."""
    report = h200_node(0, True)
    long_name = "g" * 55
    report["devices"][0]["name"] = long_name
    inventory = DeviceInventory.from_api({
        "metadata": {"name": "n-gpu.kubedra.io"},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "n"},
        "status": {"discovered": report}})
    pool = build_pool(inventory)
    alone = [d for d in pool.devices if d.name.startswith("g" * 5)]
    assert [(d.name, d.consumes_counters) for d in alone] == [(long_name, None)]
    assert len(pool.devices) == 1 + 7 * 26  # 7 GPUs with their 25 partitions each
    assert f"{long_name}-counters" not in {c.name for c in pool.counter_sets}
    assert pool.left_out == [Rejection(
        name=long_name, field=f"status.discovered.devices[{long_name}].migModel",
        message=f"its partitions cannot be named: '{long_name}-counters': String should have "
                "at most 63 characters")]


def test_gpus_of_two_models_differing_in_one_value_get_each_their_own_partitions() -> None:
    """The values of a model's partitions are built once per distinct list of profiles
    (``kubedra.api.mig._layout``): a second model equal but for one profile's memory gives its
    GPU that memory, and the first model's GPU keeps its own, in either order."""
    report = h200_node(0, True)
    model = report["migModels"][0]
    other = {**json.loads(json.dumps(model)), "name": "other"}
    other["profiles"][0]["memorySizeMB"] += 1024
    report["devices"][1]["migModel"] = "other"
    first = model["profiles"][0]
    label = first["name"].removeprefix("MIG ")  # 1g.18gb
    start = first["placements"][0]["start"]
    for models in ([model, other], [other, model]):
        back = expand(DiscoveredState.from_api({**report, "migModels": models}))
        mib = {d.name: d.capacity["memory"].value.value / 2**20 for d in back.devices}
        assert mib[f"gpu-0-mig-{label.replace('.', '')}-s{start}"] == first["memorySizeMB"]
        assert mib[f"gpu-1-mig-{label.replace('.', '')}-s{start}"] == (
            first["memorySizeMB"] + 1024)
        assert mib[f"gpu-2-mig-{label.replace('.', '')}-s{start}"] == first["memorySizeMB"]
