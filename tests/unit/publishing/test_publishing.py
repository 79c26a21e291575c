"""Inventory → pool → slices → planned writes (no cluster)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubedra.api.inventory import DeviceInventory
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCounterConsumption,
    OwnerReference,
    ResourceSlice,
)
from kubedra.publishing.pool import (
    DRAINING_TAINT_KEY,
    RECOVERED_TAINT_VALUE,
    UNHEALTHY_TAINT_KEY,
    DesiredPool,
    build_pool,
    drain_deadlines,
    keep_dropped_devices,
)
from kubedra.publishing.slices import split_pool
from kubedra.publishing.sync import SliceWrite, plan_sync, slice_name
from kubedra.settings import MAX_SECONDS

OWNER = OwnerReference(api_version="kubedra.io/v1alpha1", kind="DeviceInventory",
                       name="node-1-gpu", uid="uid-1", controller=True)


def inventory(devices: int, *, taint_every: int = 0, counters: bool = False,
              static: list[dict[str, Any]] | None = None,
              overrides: list[dict[str, Any]] | None = None) -> DeviceInventory:
    """An inventory of node-1 with ``devices`` discovered devices dev-000… ."""
    found = []
    for i in range(devices):
        device: dict[str, Any] = {
            "name": f"dev-{i:03d}",
            "attributes": {"index": {"int": i}},
            "capacity": {"memory": {"value": "80Gi"}},
        }
        if taint_every and i % taint_every == 0:
            device["health"], device["healthMessage"] = "Unhealthy", "ECC errors"
        if counters:
            device["consumesCounters"] = [{"counterSet": "node-counters",
                                           "counters": {"slots": {"value": "1"}}}]
        found.append(device)
    status: dict[str, Any] = {"discovered": {"devices": found}}
    if counters:
        status["discovered"]["counterSets"] = [
            {"name": "node-counters", "counters": {"slots": {"value": str(devices)}}}]
    return DeviceInventory.from_api({
        "metadata": {"name": "node-1-gpu", "uid": "uid-1", "generation": 1},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "node-1", "devices": static,
                 "overrides": overrides},
        "status": status})


def plan(inv: DeviceInventory, existing: list[ResourceSlice]) -> tuple[list[SliceWrite], int]:
    pool = build_pool(inv)
    result = plan_sync(inv.metadata.name or "", OWNER, pool, split_pool(pool), existing)
    return result.writes, result.pool.generation


class FakeServer:
    """Stores slices the way the API server does: resourceVersion, taint timeAdded."""

    def __init__(self) -> None:
        self.slices: dict[str, dict[str, Any]] = {}
        self.version = 0

    def apply(self, writes: list[SliceWrite]) -> None:
        for write in writes:
            if write.verb == "delete":
                del self.slices[write.name]
                continue
            assert write.body is not None
            if write.verb == "create":
                assert write.name not in self.slices
            else:
                assert write.body["metadata"]["resourceVersion"] == \
                    self.slices[write.name]["metadata"]["resourceVersion"]
            self.version += 1
            body = {**write.body, "metadata": {**write.body["metadata"],
                                               "resourceVersion": str(self.version)}}
            for device in body["spec"].get("devices", []):
                for taint in device.get("taints", []):
                    taint.setdefault("timeAdded", "2026-11-29T00:00:00Z")
            self.slices[write.name] = body

    def existing(self) -> list[ResourceSlice]:
        return [ResourceSlice.from_api(s) for s in self.slices.values()]


@pytest.mark.parametrize(("devices", "taint_every", "counters", "expected_sizes"), [
    (1, 0, False, [1]),
    (128, 0, False, [128]),
    (129, 0, False, [128, 1]),
    (300, 0, False, [128, 128, 44]),
    (1, 1, False, [1]),
    (128, 1, False, [64, 64]),
    (129, 1, False, [64, 64, 1]),
    (300, 1, False, [64, 64, 64, 64, 44]),
    # dev-000, dev-100 and dev-200 are tainted: each caps its own slice at 64, the plain run
    # dev-128..dev-199 between them fits in one slice of 72
    (300, 100, False, [64, 64, 72, 64, 36]),
    (129, 0, True, [64, 64, 1]),
])
def test_slice_sizes(devices: int, taint_every: int, counters: bool,
                     expected_sizes: list[int]) -> None:
    pool = build_pool(inventory(devices, taint_every=taint_every, counters=counters))
    contents = split_pool(pool)
    device_slices = [c for c in contents if not c.counter_sets]
    assert [len(c.devices) for c in device_slices] == expected_sizes
    assert [d.name for c in device_slices for d in c.devices] == [
        f"dev-{i:03d}" for i in range(devices)]
    assert [len(c.counter_sets) for c in contents if c.counter_sets] == ([1] if counters else [])
    if counters:
        assert contents[0].counter_sets[0].name == "node-counters"
        assert not contents[0].devices


def test_greedy_packing_with_one_tainted_device_in_the_middle() -> None:
    inv = inventory(300)
    assert inv.status
    assert inv.status.discovered
    inv.status.discovered.devices[200].health = "Unhealthy"
    sizes = [len(c.devices) for c in split_pool(build_pool(inv))]
    assert sizes == [128, 72, 64, 36]  # dev-200 starts a slice capped at 64


def test_first_publish_creates_every_slice_at_generation_1() -> None:
    writes, generation = plan(inventory(300), [])
    assert generation == 1
    assert [(w.verb, w.name) for w in writes] == [
        ("create", "node-1-gpu-00000"), ("create", "node-1-gpu-00001"),
        ("create", "node-1-gpu-00002")]
    first = writes[0].body
    assert first is not None
    assert first["metadata"]["labels"] == {"kubedra.io/inventory": "node-1-gpu",
                                           "app.kubernetes.io/managed-by": "kubedra"}
    assert first["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory", "name": "node-1-gpu",
        "uid": "uid-1", "controller": True}]
    assert first["spec"]["pool"] == {"name": "node-1", "generation": 1, "resourceSliceCount": 3}
    assert first["spec"]["nodeName"] == "node-1"
    assert first["spec"]["devices"][0] == {
        "name": "dev-000", "attributes": {"index": {"int": 0}},
        "capacity": {"memory": {"value": "80Gi"}}}


def test_second_sync_writes_nothing() -> None:
    server = FakeServer()
    inv = inventory(300, taint_every=7, counters=True)
    writes, _ = plan(inv, [])
    server.apply(writes)
    assert plan(inv, server.existing()) == ([], 1)


def test_one_changed_slice_keeps_the_generation() -> None:
    server = FakeServer()
    server.apply(plan(inventory(300), [])[0])
    changed = inventory(300)
    assert changed.status
    assert changed.status.discovered
    changed.status.discovered.devices[5].attributes["index"].int_value = 999
    writes, generation = plan(changed, server.existing())
    assert generation == 1
    assert [(w.verb, w.name) for w in writes] == [("update", "node-1-gpu-00000")]


def test_two_changed_slices_bump_the_generation_and_rewrite_all() -> None:
    server = FakeServer()
    server.apply(plan(inventory(300), [])[0])
    changed = inventory(300)
    assert changed.status
    assert changed.status.discovered
    changed.status.discovered.devices[5].attributes["index"].int_value = 999
    changed.status.discovered.devices[250].attributes["index"].int_value = 999
    writes, generation = plan(changed, server.existing())
    assert generation == 2
    assert [(w.verb, w.name) for w in writes] == [
        ("update", "node-1-gpu-00000"), ("update", "node-1-gpu-00001"),
        ("update", "node-1-gpu-00002")]
    assert all(w.body and w.body["spec"]["pool"]["generation"] == 2 for w in writes)


def test_deleted_slice_is_recreated_and_the_generation_bumped() -> None:
    server = FakeServer()
    server.apply(plan(inventory(300), [])[0])
    del server.slices["node-1-gpu-00001"]
    writes, generation = plan(inventory(300), server.existing())
    assert generation == 2
    assert [(w.verb, w.name) for w in writes] == [
        ("update", "node-1-gpu-00000"), ("update", "node-1-gpu-00002"),
        ("create", "node-1-gpu-00001")]


def test_shrinking_pool_deletes_obsolete_slices_first() -> None:
    server = FakeServer()
    server.apply(plan(inventory(300), [])[0])
    writes, generation = plan(inventory(100), server.existing())
    assert generation == 1  # no new slice and one update: upstream keeps the generation
    assert [(w.verb, w.name) for w in writes] == [
        ("delete", "node-1-gpu-00001"), ("delete", "node-1-gpu-00002"),
        ("update", "node-1-gpu-00000")]
    assert writes[0].resource_version == server.slices["node-1-gpu-00001"]["metadata"][
        "resourceVersion"]
    server.apply(writes)
    assert plan(inventory(100), server.existing()) == ([], 1)


def test_older_generation_slices_are_obsolete() -> None:
    server = FakeServer()
    server.apply(plan(inventory(1), [])[0])
    stale = ResourceSlice.from_api({**server.slices["node-1-gpu-00000"]})
    stale.metadata.name = "node-1-gpu-00001"
    stale.spec.pool.generation = 0
    writes, generation = plan(inventory(1), [*server.existing(), stale])
    assert generation == 1
    assert [(w.verb, w.name) for w in writes] == [("delete", "node-1-gpu-00001")]


def test_unhealthy_device_is_tainted_and_taint_time_is_kept() -> None:
    server = FakeServer()
    inv = inventory(2, taint_every=2)
    writes, _ = plan(inv, [])
    device = writes[0].body["spec"]["devices"][0]  # type: ignore[index]
    assert device["taints"] == [
        {"key": UNHEALTHY_TAINT_KEY, "value": "ECC-errors", "effect": "NoSchedule"}]
    server.apply(writes)
    assert plan(inv, server.existing()) == ([], 1)


@pytest.mark.parametrize(("health", "changed", "taint", "held_until"), [
    ("Healthy", "2026-11-30T11:58:00Z", RECOVERED_TAINT_VALUE, "2026-11-30T12:03:00+00:00"),
    ("Healthy", "2026-11-30T11:55:00Z", None, None),  # exactly 300 s: the hold-down is over
    ("Healthy", None, None, None),                     # never changed
    ("Unhealthy", "2026-11-30T11:59:00Z", "ECC-errors", None),
])
def test_recovered_device_stays_tainted_for_the_hold_down_time(
        health: str, changed: str | None, taint: str | None, held_until: str | None) -> None:
    inv = inventory(1)
    device = inv.status.discovered.devices[0]  # type: ignore[union-attr]
    device.health, device.health_transition_time = health, changed  # type: ignore[assignment]
    if health == "Unhealthy":
        device.health_message = "ECC errors"
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    pool = build_pool(inv, now=now, hold_down=300)
    taints = pool.devices[0].taints or []
    assert [(t.key, t.value, t.effect) for t in taints] == (
        [(UNHEALTHY_TAINT_KEY, taint, "NoSchedule")] if taint else [])
    assert (pool.held_until.isoformat() if pool.held_until else None) == held_until
    assert build_pool(inv, now=now).devices[0].taints == (
        None if health == "Healthy" else taints)  # no hold-down configured


def fabric(device: dict[str, Any], *, node_local: bool = False) -> DeviceInventory:
    """A network-attached inventory (or, with ``node_local``, node-1's) with ``device``."""
    where: dict[str, Any] = {"nodeName": "node-1"} if node_local else {"allNodes": True}
    return DeviceInventory.from_api({
        "metadata": {"name": "fabric", "uid": "uid-2"},
        "spec": {"driver": "nic.kubedra.io", **where, "devices": [{"name": "nic-0", **device}]}})


def test_binding_conditions_are_published_for_network_attached_devices() -> None:
    [device] = build_pool(fabric({
        "bindsToNode": True, "bindingConditions": ["kubedra.io/attached"],
        "bindingFailureConditions": ["kubedra.io/attach-failed"]})).devices
    assert device.to_api() == {
        "name": "nic-0", "bindsToNode": True, "bindingConditions": ["kubedra.io/attached"],
        "bindingFailureConditions": ["kubedra.io/attach-failed"]}


@pytest.mark.parametrize(("device", "node_local", "field", "message"), [
    ({"bindingConditions": ["a"], "bindingFailureConditions": ["f"]}, True,
     "spec.devices[0].bindingConditions", "for network-attached pools"),
    ({"bindsToNode": True}, True,
     "spec.devices[0].bindingConditions", "for network-attached pools"),
    ({"bindingConditions": ["a"]}, False, "spec.devices[0].bindingFailureConditions",
     "bindingFailureConditions are required to use bindingConditions"),
    ({"bindingConditions": [], "bindingFailureConditions": ["f"]}, False,
     "spec.devices[0].bindingConditions",
     "bindingConditions are required to use bindingFailureConditions"),
    ({"bindingConditions": ["a", "a"], "bindingFailureConditions": ["f"]}, False,
     "spec.devices[0].bindingConditions[1]", "duplicate value 'a'"),
    ({"bindingConditions": ["a"], "bindingFailureConditions": ["f", "g", "f"]}, False,
     "spec.devices[0].bindingFailureConditions[2]", "duplicate value 'f'"),
    ({"bindingConditions": ["a", "b"], "bindingFailureConditions": ["f", "b"]}, False,
     "spec.devices[0].bindingFailureConditions[1]",
     "'b': bindingFailureConditions must not overlap with bindingConditions"),
    # stored before the CRD refused it: the ResourceSlice write failed
    ({"bindingConditions": ["a"], "bindingFailureConditions": ["a" * 254 + "/f"]}, False,
     "spec.devices[0].bindingFailureConditions[0]", "subdomain of at most 253 characters"),
])
def test_bad_binding_conditions_leave_the_device_out_naming_the_field(
        device: dict[str, Any], node_local: bool, field: str, message: str) -> None:
    pool = build_pool(fabric(device, node_local=node_local))
    assert pool.devices == []
    [rejected] = pool.left_out
    assert (rejected.name, rejected.field) == ("nic-0", field)
    assert message in rejected.message


def test_overrides_disable_and_taint_devices() -> None:
    inv = inventory(3, overrides=[
        {"device": "dev-001", "disabled": True},
        {"device": "dev-002", "taints": [{"key": "maintenance", "effect": "NoExecute"}]}])
    pool = build_pool(inv)
    assert [d.name for d in pool.devices] == ["dev-000", "dev-002"]
    assert pool.devices[1].taints
    assert pool.devices[1].taints[0].effect == "NoExecute"


def test_static_and_discovered_devices_are_merged_in_name_order() -> None:
    inv = inventory(2, static=[{"name": "aaa", "attributes": {"model": {"string": "x"}}}])
    assert [d.name for d in build_pool(inv).devices] == ["aaa", "dev-000", "dev-001"]


def test_long_inventory_names_are_shortened_to_a_valid_slice_name() -> None:
    name = slice_name("n" * 253, 3)
    assert len(name) == 253
    assert name.endswith("-00003")
    assert slice_name("n" * 253, 3) == name


@pytest.mark.parametrize(("mutate", "field", "message"), [
    (lambda inv: inv.spec.devices.append(  # type: ignore[union-attr]
        inv.status.discovered.devices[0].model_copy()),  # type: ignore[union-attr]
     "status.discovered.devices[0].name", "device 'dev-000' is listed twice"),
    (lambda inv: setattr(inv.status.discovered.devices[1], "consumes_counters",  # type: ignore[union-attr]
                         [DeviceCounterConsumption(counter_set="nope",
                                                   counters={"slots": Counter(value="1")})]),
     "status.discovered.devices[1].consumesCounters[0].counterSet",
     "no usable counter set named 'nope'"),
    (lambda inv: inv.status.discovered.devices[1].attributes.update(  # type: ignore[union-attr]
        model=DeviceAttribute(string_value="é" * 33)),
     "status.discovered.devices[1].attributes[model].string",
     "66 bytes (33 characters); the API server allows at most 64 bytes"),
    (lambda inv: inv.status.discovered.devices[1].attributes.update(  # type: ignore[union-attr]
        tags=DeviceAttribute(strings=["x" * 65])),
     "status.discovered.devices[1].attributes[tags].strings[0]",
     "65 bytes (65 characters); the API server allows at most 64 bytes"),
])
def test_a_device_the_api_would_refuse_is_left_out_naming_the_field(
        mutate: Any, field: str, message: str) -> None:
    inv = inventory(2, static=[])
    inv = DeviceInventory.from_api(inv.to_api())
    mutate(inv)
    pool = build_pool(DeviceInventory.from_api(inv.to_api()))
    assert [d.name for d in pool.devices] == (
        ["dev-000", "dev-001"] if field.endswith("name") else ["dev-000"])
    assert [(r.field, r.message) for r in pool.left_out] == [(field, message)]


def test_an_empty_counter_set_costs_only_the_devices_that_consume_it() -> None:
    """The replayed fault: ``counterSets: [{name: cs-0, counters: {}}]`` and an unrelated
    ``dev-0``; ``dev-0`` is published, the set is left out naming the field."""
    inv = DeviceInventory.from_api({
        "metadata": {"name": "static"},
        "spec": {"driver": "pci.kubedra.io", "allNodes": True,
                 "counterSets": [{"name": "cs-0", "counters": {}}],
                 "devices": [{"name": "dev-0"}, {"name": "dev-1", "consumesCounters": [
                     {"counterSet": "cs-0", "counters": {"c": {"value": "1"}}}]}]}})
    pool = build_pool(inv)
    assert [d.name for d in pool.devices] == ["dev-0"]
    assert pool.counter_sets == []
    assert [(r.name, r.field, r.message) for r in pool.left_out] == [
        ("cs-0", "spec.counterSets[0].counters", "required: at least one counter"),
        ("dev-1", "spec.devices[1].consumesCounters[0].counterSet",
         "no usable counter set named 'cs-0'")]


def test_an_invalid_override_taint_leaves_out_only_its_device() -> None:
    inv = inventory(2, overrides=[{"device": "dev-001", "taints": [
        {"key": "bad key", "value": "ü", "effect": "NoSchedule"}]}])
    pool = build_pool(inv)
    assert [d.name for d in pool.devices] == ["dev-000"]
    assert [(r.name, r.field) for r in pool.left_out] == [
        ("dev-001", "spec.overrides[0].taints[0].key"),
        ("dev-001", "spec.overrides[0].taints[0].value")]


@pytest.mark.parametrize(("time_added", "left_out"), [
    ("2026-12-03T10:00:00Z", False),
    ("2026-12-03T1:00:00,5+24:60", False),  # Go's time.Parse takes it, so the API does
    ("yesterday", True),
    ("2026-12-03", True),
    ("2026-02-29T10:00:00Z", True),
])
def test_an_override_taint_time_the_api_cannot_read_leaves_out_its_device(
        time_added: str, left_out: bool) -> None:
    """Stored before the CRD refused it, such a ``timeAdded`` failed the whole ResourceSlice
    write (400: "cannot be handled as a ResourceSlice: parsing time")."""
    inv = inventory(2, overrides=[{"device": "dev-001", "taints": [
        {"key": "maintenance", "effect": "NoSchedule", "timeAdded": time_added}]}])
    pool = build_pool(inv)
    assert [d.name for d in pool.devices] == ["dev-000"] if left_out else ["dev-000", "dev-001"]
    assert [(r.name, r.field, r.message) for r in pool.left_out] == ([(
        "dev-001", "spec.overrides[0].taints[0].timeAdded",
        f"{time_added!r} is not a time the API server reads (RFC 3339, e.g. "
        "2026-12-03T10:00:00Z)")] if left_out else [])


def test_what_the_agent_left_out_is_reported_first() -> None:
    data = inventory(1).to_api()
    data["status"]["discovered"]["rejected"] = [
        {"name": "gpu-1", "field": "devices[gpu-1].attributes[productName].string",
         "message": "70 bytes (70 characters); the API server allows at most 64 bytes"}]
    pool = build_pool(DeviceInventory.from_api(data))
    assert [d.name for d in pool.devices] == ["dev-000"]
    assert [r.name for r in pool.left_out] == ["gpu-1"]


def test_counter_overuse_and_unknown_counter_are_left_out() -> None:
    inv = inventory(2, counters=True)
    data = inv.to_api()
    data["status"]["discovered"]["devices"][0]["consumesCounters"][0]["counters"] = {
        "slots": {"value": "3"}}
    pool = build_pool(DeviceInventory.from_api(data))
    assert [d.name for d in pool.devices] == ["dev-001"]
    assert [(r.field, r.message) for r in pool.left_out] == [(
        "status.discovered.devices[0].consumesCounters[0].counters[slots]",
        "consumes 3 but counter set 'node-counters' holds only 2")]
    data["status"]["discovered"]["devices"][0]["consumesCounters"][0]["counters"] = {
        "cores": {"value": "1"}}
    pool = build_pool(DeviceInventory.from_api(data))
    assert [r.message for r in pool.left_out] == [
        "counter set 'node-counters' has no counter 'cores'"]


def test_unhealthy_taint_values_are_ascii_label_values() -> None:
    data = inventory(1).to_api()
    device = data["status"]["discovered"]["devices"][0]
    device["health"], device["healthMessage"] = "Unhealthy", "température élevée: 95°C"
    [built] = build_pool(DeviceInventory.from_api(data)).devices
    assert built.taints is not None
    assert built.taints[0].value == "temp-rature--lev-e--95-C"


def test_an_empty_pool_as_stored_needs_no_write() -> None:
    """The API server stores an empty pool's slice without ``devices``; it must compare equal,
    or every reconcile of an empty pool updates it (found with issue 16, item 7)."""
    pool = build_pool(inventory(0))
    [create] = plan_sync("node-1-gpu", OWNER, pool, split_pool(pool), []).writes
    assert create.body is not None
    assert "devices" not in create.body["spec"]
    stored = ResourceSlice.from_api({**create.body, "metadata": {
        **create.body["metadata"], "resourceVersion": "5"}})
    assert plan_sync("node-1-gpu", OWNER, pool, split_pool(pool), [stored]).writes == []


def test_generation_never_goes_back_when_every_slice_was_deleted() -> None:
    pool = build_pool(inventory(2))
    result = plan_sync("node-1-gpu", OWNER, pool, split_pool(pool), [], published_generation=3)
    assert result.pool.generation == 4
    assert [(w.verb, w.name) for w in result.writes] == [("create", "node-1-gpu-00000")]


def test_allocated_devices_dropped_by_the_inventory_stay_published_tainted() -> None:
    server = FakeServer()
    before = inventory(3, counters=True)
    server.apply(plan(before, [])[0])
    # dev-001 is disabled by an override, dev-002 is no longer reported; both are allocated
    after = DeviceInventory.from_api({**before.to_api(), "spec": {
        **before.to_api()["spec"], "overrides": [{"device": "dev-001", "disabled": True}]}})
    assert after.status
    assert after.status.discovered
    after.status.discovered.devices.pop(2)
    pool = build_pool(after)
    assert [d.name for d in pool.devices] == ["dev-000"]
    kept, draining = keep_dropped_devices(pool, {"dev-001", "dev-002"}, *published(server))
    assert draining == {"dev-001": "disabled", "dev-002": "gone"}
    assert [d.name for d in kept.devices] == ["dev-000", "dev-001", "dev-002"]
    assert [(t.key, t.value, t.effect) for t in kept.devices[1].taints or []] == [
        ("kubedra.io/draining", "disabled", "NoSchedule")]
    assert [(t.key, t.value, t.effect) for t in kept.devices[2].taints or []] == [
        ("kubedra.io/draining", "gone", "NoSchedule")]
    # their counters stay consumed from the set they use
    uses = kept.devices[2].consumes_counters or []
    assert [(u.counter_set, u.counters["slots"].value) for u in uses] == [
        ("node-counters", Quantity("1"))]
    assert [c.name for c in kept.counter_sets] == ["node-counters"]


def test_a_dropped_device_keeps_its_counter_set_even_if_the_set_is_gone() -> None:
    server = FakeServer()
    before = inventory(2, counters=True)
    server.apply(plan(before, [])[0])
    data = before.to_api()
    data["status"]["discovered"] = {"devices": data["status"]["discovered"]["devices"][:1]}
    del data["status"]["discovered"]["devices"][0]["consumesCounters"]
    pool = build_pool(DeviceInventory.from_api(data))
    assert pool.counter_sets == []
    kept, draining = keep_dropped_devices(pool, {"dev-001"}, *published(server))
    assert draining == {"dev-001": "gone"}
    assert [c.name for c in kept.counter_sets] == ["node-counters"]
    assert kept.counter_sets[0].counters["slots"].value == Quantity("2")


def test_released_devices_are_not_kept() -> None:
    server = FakeServer()
    server.apply(plan(inventory(2), [])[0])
    pool = build_pool(inventory(1))
    assert keep_dropped_devices(pool, set(), *published(server)) == (pool, {})


def published(server: FakeServer) -> tuple[list[Device], list[CounterSet]]:
    """The devices and counter sets the fake server holds."""
    slices = server.existing()
    return ([d for s in slices for d in s.spec.devices or []],
            [c for s in slices for c in s.spec.shared_counters or []])


def test_a_disabled_allocated_device_is_kept_without_any_previous_slice() -> None:
    inv = inventory(2, overrides=[{"device": "dev-001", "disabled": True}])
    kept, draining = keep_dropped_devices(build_pool(inv), {"dev-001"}, [], [])
    assert draining == {"dev-001": "disabled"}
    assert [d.name for d in kept.devices] == ["dev-000", "dev-001"]


def test_the_whole_device_keeps_consuming_counters_a_held_partition_still_needs() -> None:
    """MIG switched off while a partition is allocated: the whole GPU, now published without
    counters, must keep consuming them, or the scheduler could give it out as well."""
    partitions = DeviceInventory.from_api({
        "metadata": {"name": "n-gpu"},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "n", "devices": [
            {"name": "gpu-0", "consumesCounters": [
                {"counterSet": "gpu-0-counters", "counters": {"slices": {"value": "2"}}}]},
            {"name": "gpu-0-mig-s0", "consumesCounters": [
                {"counterSet": "gpu-0-counters", "counters": {"slices": {"value": "1"}}}]}],
            "counterSets": [{"name": "gpu-0-counters", "counters": {"slices": {"value": "2"}}}]}})
    before = build_pool(partitions)
    whole_only = DeviceInventory.from_api({
        "metadata": {"name": "n-gpu"},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "n", "devices": [{"name": "gpu-0"}]}})
    kept, draining = keep_dropped_devices(build_pool(whole_only), {"gpu-0-mig-s0"},
                                          before.devices, before.counter_sets)
    assert draining == {"gpu-0-mig-s0": "gone"}
    assert [c.name for c in kept.counter_sets] == ["gpu-0-counters"]
    whole = kept.devices[0]
    assert whole.name == "gpu-0"
    assert [(u.counter_set, u.counters["slices"].value) for u in whole.consumes_counters or []] \
        == [("gpu-0-counters", Quantity("2"))]
    # once the partition is released, the whole GPU is published as the inventory says
    assert keep_dropped_devices(build_pool(whole_only), set(), kept.devices,
                                kept.counter_sets)[0].devices[0].consumes_counters is None


T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
"""When the draining taints of :func:`draining_devices` were added."""


def draining_devices(taints: dict[str, str | None]) -> list[Device]:
    """Published devices by name → the ``timeAdded`` of their draining taint (None: a taint
    without a time; ``untainted``: no draining taint)."""
    return [Device.from_api({"name": name, **({"taints": [
        {"key": DRAINING_TAINT_KEY, "value": "disabled", "effect": "NoSchedule",
         **({"timeAdded": added} if added else {})}]} if added != "untainted" else {})})
        for name, added in taints.items()]


@pytest.mark.parametrize(("published", "now", "held", "expected"), [
    # not tainted yet: its grace starts now
    (draining_devices({"dev-002": "untainted"}), T0, set(),
     {"dev-002": T0 + timedelta(seconds=30)}),
    # tainted 10 s ago: 20 s left, counted from the taint's timeAdded, not from now
    (draining_devices({"dev-002": "2026-11-30T11:59:50Z"}), T0, set(),
     {"dev-002": T0 + timedelta(seconds=20)}),
    # tainted exactly 30 s ago: the grace is over, it goes
    (draining_devices({"dev-002": "2026-11-30T11:59:30Z"}), T0, set(), {}),
    # held: kept until released, not by the grace
    (draining_devices({"dev-002": "untainted"}), T0, {"dev-002"}, {}),
    # still offered (re-enabled): nothing leaves
    (draining_devices({"dev-000": "2026-11-30T11:59:50Z"}), T0, set(), {}),
])
def test_a_leaving_device_is_kept_for_the_drain_grace_from_its_taint_time(
        published: list[Device], now: datetime, held: set[str],
        expected: dict[str, datetime]) -> None:
    pool = build_pool(inventory(1))
    assert drain_deadlines(pool, published, held, now, 30.0) == expected


def test_no_drain_grace_takes_a_leaving_device_out_at_once() -> None:
    pool = build_pool(inventory(1))
    assert drain_deadlines(pool, draining_devices({"dev-002": "untainted"}), set(), T0, 0.0) == {}


def test_the_longest_drain_grace_still_makes_a_valid_time() -> None:
    """The settings allow at most :data:`kubedra.settings.MAX_SECONDS`; the wake-up is then
    still a datetime (an unbounded grace overflowed it and failed every reconcile)."""
    pool = build_pool(inventory(1))
    assert drain_deadlines(pool, draining_devices({"dev-002": "untainted"}), set(), T0,
                           MAX_SECONDS) == {"dev-002": T0 + timedelta(days=365)}


def test_a_taint_keeps_its_time_when_its_device_moves_to_another_slice() -> None:
    """A drain grace counts from the taint's ``timeAdded``: a device that moves to another
    slice (devices before it left) must not get a new time."""
    server = FakeServer()
    before = inventory(129, overrides=[{"device": "dev-128", "disabled": True}])
    server.apply(plan(before, [])[0])
    pool = build_pool(before)
    kept, _ = keep_dropped_devices(pool, {"dev-128"}, *published(server))
    server.apply(plan_sync("node-1-gpu", OWNER, kept, split_pool(kept),
                           server.existing()).writes)
    [where] = [s for s in server.existing() for d in s.spec.devices or []
               if d.name == "dev-128"]
    assert where.metadata.name == "node-1-gpu-00001"
    # dev-000 … dev-064 are disabled too: dev-128 moves into the first slice, with its time
    moved = inventory(129, overrides=[{"device": f"dev-{i:03d}", "disabled": True}
                                      for i in [*range(65), 128]])
    shrunk = keep_dropped_devices(build_pool(moved), {"dev-128"}, *published(server))[0]
    writes = plan_sync("node-1-gpu", OWNER, shrunk, split_pool(shrunk),
                       server.existing()).writes
    [device] = [d for w in writes if w.name == "node-1-gpu-00000" and w.body
                for d in w.body["spec"]["devices"] if d["name"] == "dev-128"]
    assert device["taints"] == [{"key": DRAINING_TAINT_KEY, "value": "disabled",
                                 "effect": "NoSchedule", "timeAdded": "2026-11-29T00:00:00Z"}]


def test_an_unhealthy_device_with_the_most_override_taints_still_gets_its_taint() -> None:
    taints = [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(14)]
    inv = inventory(1, taint_every=1, overrides=[{"device": "dev-000", "taints": taints}])
    pool = build_pool(inv)
    published = pool.devices[0].taints or []
    assert [t.key for t in published] == [f"k{i}" for i in range(14)] + [UNHEALTHY_TAINT_KEY]
    assert pool.left_out == []


def test_an_override_stored_with_more_taints_than_leave_room_leaves_its_device_out() -> None:
    taints = [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(16)]
    inv = inventory(2, taint_every=2, overrides=[{"device": "dev-000", "taints": taints}])
    pool = build_pool(inv)
    assert [d.name for d in pool.devices] == ["dev-001"]  # never published without its taint
    assert [(r.name, r.field, r.message) for r in pool.left_out] == [
        ("dev-000", "spec.overrides[0].taints",
         "16 taints: at most 14, since the operator may add 2 of its own (kubedra.io/unhealthy, "
         "kubedra.io/draining) and a device carries at most 16")]


def test_a_writes_payload_is_its_body_as_json_bytes() -> None:
    """The executor sends ``payload`` (pydantic's JSON), tests and tools read ``body``: the
    same object for a MIG node's 5 slices, and characters beyond ASCII written as UTF-8
    (kube-apiserver reads both)."""
    from bench.scale import h200_node, inventory_body

    inv = DeviceInventory.from_api({**inventory_body("n"), "metadata": {"name": "n-gpu"},
                                    "status": {"discovered": h200_node(0, True)}})
    pool = build_pool(inv)
    writes = plan_sync("n-gpu", OWNER, pool, split_pool(pool), []).writes
    assert len(writes) == 5
    assert [json.loads(w.payload or b"") for w in writes] == [w.body for w in writes]
    device = {"name": "gpu-0", "attributes": {"productName": {"string": "H200 “ü” 😀"}}}
    pool = DesiredPool(driver="gpu.kubedra.io", name="n", node_name="n",
                       devices=[Device.from_api(device)])
    [write] = plan_sync("n-gpu", OWNER, pool, split_pool(pool), []).writes
    assert write.payload is not None
    assert json.loads(write.payload) == write.body
    assert "H200 “ü” 😀".encode() in write.payload
    assert SliceWrite("delete", "n-gpu-00000").payload is None
