"""Hostile cases for the compact form of whole devices (kubedra.api.device_models): odd models,
odd devices, model names from odd product names, and a fold/unfold round trip."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubedra.api.crd import inventory_crd
from kubedra.api.device_models import fold, model_name, unfold
from kubedra.api.inventory import DeviceAttribute, DiscoveredState, DiscoveryResult, Rejection
from kubedra.api.mig import compact, expand
from kubedra.node.health import stamp_health_transitions

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _state(models: list[dict[str, Any]], *devices: dict[str, Any],
           **rest: Any) -> DiscoveredState:
    return DiscoveredState.from_api({"deviceModels": models, "devices": list(devices), **rest})


def _api(devices: Any) -> list[dict[str, Any]]:
    return [d.to_api() for d in devices]


def _long(text: str) -> dict[str, str]:
    return {"string": text}


def _gpu(name: str, product: str = "NVIDIA H200", **own: Any) -> dict[str, Any]:
    """A device with enough shared attributes that folding pays."""
    return {"name": name, "attributes": {
        "productName": _long(product), "driverVersion": {"version": "570.124.6"},
        "architecture": _long("Hopper"), "uuid": _long(f"GPU-{name}-0000-4000-8000"), **own},
        "capacity": {"memory": {"value": "143771Mi"}}}


# --- the CRD ----------------------------------------------------------------------------


def test_the_crd_keys_models_and_devices_by_name_so_duplicates_are_refused() -> None:
    schema = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    discovered = schema["properties"]["status"]["properties"]["discovered"]
    assert discovered["x-kubernetes-map-type"] == "atomic"
    for field in ("deviceModels", "devices"):
        listed = discovered["properties"][field]
        assert (listed["x-kubernetes-list-type"], listed["x-kubernetes-list-map-keys"]) == (
            "map", ["name"]), field
        assert listed["items"]["required"] == ["name"]


# --- unfold -----------------------------------------------------------------------------


def test_duplicate_model_names_in_memory_take_the_last_one() -> None:
    """The API server refuses them (a list map); in memory unfold does not crash."""
    state = _state([{"name": "m", "attributes": {"a": {"int": 1}}},
                    {"name": "m", "attributes": {"a": {"int": 2}}}],
                   {"name": "d", "deviceModel": "m"})
    [device], rejected = unfold(state)
    assert (device.attributes["a"].int_value, rejected) == (2, [])


def test_a_model_with_capacity_only() -> None:
    state = _state([{"name": "m", "capacity": {"memory": {"value": "1Gi"}}}],
                   {"name": "d", "deviceModel": "m", "attributes": {"a": {"int": 1}}})
    [device], rejected = unfold(state)
    assert rejected == []
    assert device.to_api() == {"name": "d", "attributes": {"a": {"int": 1}},
                               "capacity": {"memory": {"value": "1Gi"}}, "health": "Healthy"}
    assert list(device.capacity) == ["memory"]


def test_an_empty_model_gives_the_device_its_own_entries() -> None:
    state = _state([{"name": "m"}], {"name": "d", "deviceModel": "m"},
                   {"name": "e", "deviceModel": "m", "attributes": {"a": {"int": 1}}})
    devices, rejected = unfold(state)
    assert rejected == []
    assert _api(devices) == _api(DiscoveredState.from_api({"devices": [
        {"name": "d"}, {"name": "e", "attributes": {"a": {"int": 1}}}]}).devices)
    assert "deviceModel" not in devices[0].to_api()


def test_a_device_with_entries_the_model_lacks_lists_them_after_the_models() -> None:
    state = _state([{"name": "m", "attributes": {"a": {"int": 1}, "b": {"int": 2}}}],
                   {"name": "d", "deviceModel": "m",
                    "attributes": {"z": {"int": 9}, "c": {"int": 3}}})
    [device], _ = unfold(state)
    assert list(device.attributes) == ["a", "b", "z", "c"]


def test_a_device_repeating_the_models_value_publishes_it_once_in_the_models_place() -> None:
    state = _state([{"name": "m", "attributes": {"a": {"int": 1}, "b": {"int": 2}}}],
                   {"name": "d", "deviceModel": "m", "attributes": {"b": {"int": 2}}})
    [device], _ = unfold(state)
    assert device.to_api()["attributes"] == {"a": {"int": 1}, "b": {"int": 2}}


def test_exactly_32_with_the_model_is_kept_and_overlap_is_counted_once() -> None:
    model = {"name": "m", "attributes": {f"a{i}": {"int": i} for i in range(32)}}
    state = _state([model], {"name": "d", "deviceModel": "m",
                             "attributes": {f"a{i}": {"int": -i} for i in range(32)}},
                   {"name": "e", "deviceModel": "m", "capacity": {"c": {"value": "1"}}})
    devices, rejected = unfold(state)
    assert [d.name for d in devices] == ["d"]
    assert len(devices[0].attributes) == 32
    assert devices[0].attributes["a5"].int_value == -5
    assert [(r.name, r.field) for r in rejected] == [
        ("e", "status.discovered.devices[e].deviceModel")]


def test_rejections_follow_the_agents_own() -> None:
    agent = Rejection(name="x", field="status.discovered.devices[x].attributes", message="m")
    state = _state([{"name": "m"}], {"name": "d", "deviceModel": "n"}, rejected=[agent.to_api()])
    result = expand(state)
    assert result.devices == []
    assert result.rejected == [agent, Rejection(
        name="d", field="status.discovered.devices[d].deviceModel",
        message="no deviceModels entry 'n'")]


def test_an_unknown_model_on_a_mig_gpu_leaves_out_the_gpu_and_its_partitions() -> None:
    profile = PROFILE
    state = _state([{"name": "m"}], {"name": "g", "deviceModel": "n", "migModel": "mm"},
                   migModels=[{"name": "mm", "profiles": [profile]}])
    result = expand(state)
    assert (result.devices, result.counter_sets) == ([], [])
    assert [r.field for r in result.rejected] == ["status.discovered.devices[g].deviceModel"]


PROFILE = {"id": 19, "name": "MIG 1g.18gb", "sliceCount": 1, "multiprocessorCount": 16,
           "copyEngineCount": 1, "decoderCount": 1, "encoderCount": 0, "jpegCount": 1,
           "ofaCount": 0, "memorySizeMB": 16384, "placements": [{"start": 0, "size": 1}]}


# --- MIG partitions inherit the unfolded attributes -------------------------------------


def test_mig_partitions_inherit_the_models_attributes() -> None:
    from bench.scale import h200_node

    compacted, explicit = h200_node(7, True, "compact"), h200_node(7, True, "explicit")
    assert compacted["deviceModels"]
    assert any(
        "migModel" in d and "deviceModel" in d for d in compacted["devices"])
    folded = expand(DiscoveredState.from_api(compacted))
    full = expand(DiscoveredState.from_api(explicit))
    assert _api(folded.devices) == _api(full.devices)
    assert _api(folded.counter_sets) == _api(full.counter_sets)
    partitions = [d for d in folded.devices if d.name.startswith("gpu-0-")]
    assert partitions
    assert all(
        p.attributes["productName"].string_value == "NVIDIA H200" for p in partitions)


def test_hand_written_mixed_models_expand_partitions_from_the_unfolded_gpu() -> None:
    profile = PROFILE
    attrs = {"productName": _long("NVIDIA H200"), "uuid": _long("GPU-1"),
             "driverVersion": {"version": "570.124.6"}}
    model = {"name": "nvidia-h200", "attributes": attrs}
    compact = _state([model], {"name": "g", "deviceModel": "nvidia-h200", "migModel": "mm",
                               "attributes": {"uuid": _long("GPU-2")}},
                     migModels=[{"name": "mm", "profiles": [profile]}])
    full = DiscoveredState.from_api({
        "devices": [{"name": "g", "migModel": "mm",
                     "attributes": {**attrs, "uuid": _long("GPU-2")}}],
        "migModels": [{"name": "mm", "profiles": [profile]}]})
    a, b = expand(compact), expand(full)
    assert _api(a.devices) == _api(b.devices)
    assert len(a.devices) == 2
    assert _api(a.counter_sets) == _api(b.counter_sets)
    assert a.devices[1].attributes["driverVersion"].version_value == "570.124.6"


# --- fold -------------------------------------------------------------------------------


def test_fold_on_a_single_device_is_the_identity() -> None:
    state = DiscoveredState.from_api({"devices": [_gpu("g0")]})
    assert fold(state) is state


def test_fold_on_no_devices_and_devices_without_entries() -> None:
    empty = DiscoveredState()
    assert fold(empty) is empty
    bare = DiscoveredState.from_api({"devices": [{"name": "a"}, {"name": "b"}]})
    assert fold(bare) is bare


def test_fold_groups_by_name_order_and_round_trips() -> None:
    a = _gpu("a")
    reordered = {**a, "name": "b", "attributes": dict(reversed(list(a["attributes"].items())))}
    state = DiscoveredState.from_api({"devices": [a, reordered, {**_gpu("c")}]})
    folded = fold(state)
    assert [d.device_model for d in folded.devices] == ["nvidia-h200", None, "nvidia-h200"]
    assert _api(unfold(folded)[0]) == _api(state.devices)


def test_fold_is_idempotent() -> None:
    state = DiscoveredState.from_api({"devices": [_gpu(f"g{i}") for i in range(4)]})
    once = fold(state)
    assert once is not state
    assert fold(once).to_api() == once.to_api()


def test_a_device_whose_own_value_equals_the_model_lists_nothing_of_its_own() -> None:
    state = DiscoveredState.from_api({"devices": [_gpu(f"g{i}") for i in range(3)]})
    folded = fold(state).to_api()
    assert folded["devices"][0] == {
        "name": "g0", "health": "Healthy", "deviceModel": "nvidia-h200"}
    assert folded["devices"][1]["attributes"] == {"uuid": _long("GPU-g1-0000-4000-8000")}
    assert folded["deviceModels"][0]["capacity"] == {"memory": {"value": "143771Mi"}}


def test_two_kinds_whose_names_collide_after_normalisation_get_distinct_models() -> None:
    devices = [_gpu("a0", "NVIDIA H200"), _gpu("a1", "NVIDIA H200"),
               _gpu("b0", "nvidia--h200!", extra={"int": 1}),
               _gpu("b1", "nvidia--h200!", extra={"int": 1})]
    state = DiscoveredState.from_api({"devices": devices})
    folded = fold(state)
    assert [m.name for m in folded.device_models or []] == ["nvidia-h200", "nvidia-h200-2"]
    assert [d.device_model for d in folded.devices] == [
        "nvidia-h200", "nvidia-h200", "nvidia-h200-2", "nvidia-h200-2"]
    assert _api(unfold(folded)[0]) == _api(state.devices)


def test_a_name_taken_by_a_model_already_listed_is_not_reused() -> None:
    state = DiscoveredState.from_api({
        "deviceModels": [{"name": "nvidia-h200", "attributes": {"x": {"int": 1}}}],
        "devices": [{"name": "old", "deviceModel": "nvidia-h200"},
                    _gpu("g0"), _gpu("g1")]})
    folded = fold(state)
    assert [m.name for m in folded.device_models or []] == ["nvidia-h200", "nvidia-h200-2"]
    assert _api(unfold(folded)[0]) == _api(unfold(state)[0])


def _attr(product: str) -> dict[str, DeviceAttribute]:
    return {"productName": DeviceAttribute.model_validate({"string": product})}


@pytest.mark.parametrize(("product", "expected"), [
    ("NVIDIA H200", "nvidia-h200"),
    ("!!!@@@###", "device"),
    ("   ", "device"),
    ("ÄÖÜ H100 \u2013 SXM5 80GB\u2122", "h100-sxm5-80gb"),
    ("日本語", "device"),
    ("NVIDIA " + "X" * 200, ("nvidia-" + "x" * 200)[:50]),
    ("A" * 49 + " B", "a" * 49),
    ("Card 0x10de", "card-10de"),
])
def test_model_names_from_odd_product_names(product: str, expected: str) -> None:
    name = model_name(_attr(product), "device")
    assert name == expected
    assert DNS_LABEL.match(name)
    assert len(name) <= 63


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_model_name_is_always_a_dns_label(product: str) -> None:
    name = model_name(_attr(product), "device")
    assert DNS_LABEL.match(name)
    assert len(name) <= 63


def test_a_200_char_product_name_folds_with_a_valid_model_name() -> None:
    product = "Ü" + "Z" * 63  # the attribute itself is at most 64 characters
    devices = [_gpu(f"g{i}", product) for i in range(3)]
    state = DiscoveredState.from_api({"devices": devices})
    folded = fold(state)
    [model] = folded.device_models or []
    assert model.name == "z" * 50
    assert _api(unfold(folded)[0]) == _api(state.devices)


def test_many_kinds_with_one_base_name_stay_dns_labels() -> None:
    product = "Q" * 64
    devices = [_gpu(f"g{k}-{i}", product, **{f"k{k}": {"int": k}}) for k in range(12)
               for i in range(2)]
    folded = fold(DiscoveredState.from_api({"devices": devices}))
    names = [m.name for m in folded.device_models or []]
    assert len(names) == len(set(names)) == 12
    assert all(DNS_LABEL.match(n) and len(n) <= 63 for n in names)


def test_fold_stops_at_the_models_limit() -> None:
    devices = [_gpu(f"g{k}-{i}", f"Kind {k}", **{f"k{k}": {"int": k}}) for k in range(40)
               for i in range(2)]
    state = DiscoveredState.from_api({"devices": devices})
    folded = fold(state)
    assert len(folded.device_models or []) == 32
    assert _api(unfold(folded)[0]) == _api(state.devices)
    # validates as the CRD would take it
    assert DiscoveredState.model_validate(folded.to_api()).to_api() == folded.to_api()


# --- round trip -------------------------------------------------------------------------

_values = st.one_of(
    st.builds(lambda i: {"int": i}, st.integers(-3, 3)),
    st.builds(lambda b: {"bool": b}, st.booleans()),
    st.builds(lambda s: {"string": s}, st.sampled_from(["", "a", "NVIDIA H200", "x" * 40])),
)
_names = st.sampled_from(["a", "b", "c", "productName", "d.io/e"])


@st.composite
def _reports(draw: st.DrawFn) -> dict[str, Any]:
    kinds = draw(st.lists(st.lists(_names, unique=True, max_size=5), min_size=1, max_size=3))
    devices = []
    for index in range(draw(st.integers(0, 8))):
        names = draw(st.sampled_from(kinds))
        device: dict[str, Any] = {"name": f"d{index}"}
        if names:
            device["attributes"] = {n: draw(_values) for n in names}
        if draw(st.booleans()):
            device["capacity"] = {"memory": {"value": draw(st.sampled_from(["1Gi", "2Gi"]))}}
        if draw(st.booleans()):
            device["health"] = "Unhealthy"
        if draw(st.integers(0, 3)) == 0:
            device["migModel"] = "mm"
        devices.append(device)
    return {"devices": devices, "migModels": [{"name": "mm", "profiles": [PROFILE]}]}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_reports())
def test_fold_then_unfold_gives_back_the_same_bytes(report: dict[str, Any]) -> None:
    state = DiscoveredState.from_api(report)
    folded = fold(state)
    again = DiscoveredState.from_api(json.loads(json.dumps(folded.to_api())))
    devices, rejected = unfold(again)
    assert rejected == []
    assert json.dumps(_api(devices)) == json.dumps(_api(state.devices))
    size = [len(json.dumps(s.to_api(), separators=(",", ":"))) for s in (folded, state)]
    assert size[0] < size[1] if folded is not state else size[0] == size[1]
    assert _api(expand(again).devices) == _api(expand(state).devices)
    # the agent's path: compact then the operator's expand, through JSON
    written = expand(state)
    found = DiscoveryResult(devices=written.devices, counter_sets=written.counter_sets,
                            mig_profiles={d.name: state.mig_models[0].profiles  # type: ignore[index]
                                          for d in state.devices if d.mig_model})
    sent = DiscoveredState.from_api(json.loads(json.dumps(compact(found).to_api())))
    assert json.dumps(_api(expand(sent).devices)) == json.dumps(_api(found.devices))
    assert _api(expand(sent).counter_sets) == _api(found.counter_sets)
    assert all("consumesCounters" not in d for d in sent.to_api()["devices"])


# --- the agent's health path ------------------------------------------------------------


def test_health_transitions_read_through_a_compacted_report() -> None:
    state = DiscoveredState.from_api({"devices": [
        {**_gpu("g0"), "health": "Unhealthy", "healthTransitionTime": "2026-01-01T00:00:00Z"},
        _gpu("g1"), _gpu("g2")]})
    folded = fold(state)
    assert folded.device_models
    current = DiscoveredState.from_api(folded.to_api())
    found = [d.model_copy(update={"health": "Healthy", "health_transition_time": None})
             for d in expand(state).devices]
    now = "2026-02-02T00:00:00Z"
    stamped = stamp_health_transitions(found, expand(current).devices, now)
    assert [(d.name, d.health_transition_time) for d in stamped] == [
        ("g0", now), ("g1", None), ("g2", None)]
    assert stamped[0].attributes == state.devices[0].attributes


# --- the pool names a device's field by its place in the report -------------------------


def test_a_bad_value_is_named_at_the_devices_place_in_the_report() -> None:
    """A device left out for its deviceModel does not shift the index naming the next one."""
    from kubedra.publishing.pool import build_pool
    from tests.unit.api.test_device_models import _inventory

    state = _state([{"name": "m", "attributes": {"a": {"int": 1}}}],
                   {"name": "x0", "deviceModel": "gone"},
                   {"name": "d1", "deviceModel": "m", "attributes": {"b": {"string": "é" * 40}}},
                   {"name": "d2", "deviceModel": "m"})
    pool = build_pool(_inventory(state))
    assert [d.name for d in pool.devices] == ["d2"]
    assert [(r.name, r.field) for r in pool.left_out] == [
        ("x0", "status.discovered.devices[x0].deviceModel"),
        ("d1", "status.discovered.devices[1].attributes[b].string")]


def test_a_partition_written_out_from_its_mig_model_is_named_by_its_name() -> None:
    from kubedra.publishing.pool import build_pool
    from tests.unit.api.test_device_models import _inventory

    gpu = {"name": "g", "migModel": "mm", "attributes": {"uuid": {"string": "é" * 40}}}
    state = _state([], gpu, migModels=[{"name": "mm", "profiles": [PROFILE]}])
    pool = build_pool(_inventory(state))
    partitions = [d.name for d in expand(state).devices][1:]
    assert partitions
    assert [r.field for r in pool.left_out] == [
        "status.discovered.devices[0].attributes[uuid].string",
        *(f"status.discovered.devices[{p}].attributes[parentUUID].string" for p in partitions)]


async def test_the_agent_stamps_a_health_change_of_a_compacted_device(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two scans through the API: the second reads the first's compact report back (expand),
    stamps the GPU whose health changed, and a third scan with nothing new writes nothing."""
    from kubedra.node.agent import Agent
    from kubedra.settings import Settings

    agent = Agent(Settings(node_name="n", backend="pci", boot_id_path=tmp_path / "boot_id"),
                  api=None)  # type: ignore[arg-type]
    stored: dict[str, Any] = {}
    healths = iter([["Healthy"] * 3, ["Healthy", "Unhealthy", "Healthy"],
                    ["Healthy", "Unhealthy", "Healthy"]])

    def discover(*_: Any) -> DiscoveryResult:
        found = DiscoveredState.from_api({"devices": [
            {**_gpu(f"g{i}"), "health": h} for i, h in enumerate(next(healths))]})
        return DiscoveryResult(devices=[d for d in expand(found).devices])

    async def get_inventory(api: Any, name: str) -> dict[str, Any]:
        return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                "metadata": {"name": name}, "spec": {"driver": "gpu.kubedra.io", "nodeName": "n"},
                **({"status": {"discovered": stored["discovered"]}} if stored else {})}

    async def apply_discovered(api: Any, name: str, discovered: dict[str, Any]) -> None:
        stored["discovered"] = json.loads(json.dumps(discovered))

    monkeypatch.setattr("kubedra.node.agent.discover", discover)
    monkeypatch.setattr("kubedra.kube.get_inventory", get_inventory)
    monkeypatch.setattr("kubedra.kube.apply_discovered", apply_discovered)
    assert await agent.scan()
    assert [m["name"] for m in stored["discovered"]["deviceModels"]] == ["nvidia-h200"]
    assert await agent.scan()
    report = stored["discovered"]
    assert {d.get("deviceModel") for d in report["devices"]} == {"nvidia-h200"}
    stamped = report["devices"][1]
    assert stamped["health"] == "Unhealthy"
    assert stamped["healthTransitionTime"] == report["observedTime"]
    assert "healthTransitionTime" not in report["devices"][0]
    written = expand(DiscoveredState.from_api(report)).devices
    assert written[1].attributes == DiscoveredState.from_api(
        {"devices": [_gpu("g1")]}).devices[0].attributes
    assert agent.devices()["g1"].health == "Unhealthy"
    assert not await agent.scan()
