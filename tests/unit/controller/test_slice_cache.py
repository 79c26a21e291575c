"""The slice cache's decoder and indexes without a server: an event or a page becomes a
record holding the metadata decisions read and the spec, never managedFields; the operator's
slices are indexed by inventory and pool, another driver's only kept for explanations; a
bookmark ending the initial events and a 410 are told apart."""

from __future__ import annotations

import json
from typing import Any

from kubedra.controller.slices import SliceCache, SliceDecoder, SliceRecord
from kubedra.publishing.sync import INVENTORY_LABEL, MANAGED_BY

GPU = {"name": "gpu-0", "attributes": {"productName": {"string": "NVIDIA H200"}},
       "capacity": {"memory": {"value": "141Gi"}}}


def _slice(name: str, *, inventory: str | None = "inv-a", pool: str = "node-a",
           driver: str = "gpu.kubedra.io", rv: str = "7", devices: Any = None) -> dict[str, Any]:
    labels = {INVENTORY_LABEL: inventory, **MANAGED_BY} if inventory else {"other": "x"}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": rv,
                         "generation": 1, "labels": labels, "creationTimestamp": "t",
                         "annotations": {"a": "b"},
                         "ownerReferences": [{"apiVersion": "apiextensions.k8s.io/v1",
                                              "kind": "CustomResourceDefinition",
                                              "name": "crd", "uid": "u"}],
                         "managedFields": [{"manager": "kubedra-operator",
                                            "fieldsV1": {"f:spec": {}}}]},
            "spec": {"driver": driver, "pool": {"name": pool, "generation": 1,
                                                "resourceSliceCount": 1},
                     "nodeName": pool, "devices": devices if devices is not None else [GPU]}}


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def test_an_event_is_a_record_of_what_decisions_read() -> None:
    event = SliceDecoder().event(_line("ADDED", _slice("s1")))
    assert (event.type, event.name, event.resource_version) == ("ADDED", "s1", "7")
    assert event.record is not None
    assert event.record.as_api() == {
        "metadata": {"name": "s1", "uid": "uid-s1", "resourceVersion": "7", "generation": 1,
                     "labels": {INVENTORY_LABEL: "inv-a", **MANAGED_BY},
                     "ownerReferences": [{"apiVersion": "apiextensions.k8s.io/v1",
                                          "kind": "CustomResourceDefinition", "name": "crd",
                                          "uid": "u"}]},
        "spec": _slice("s1")["spec"]}


def test_equal_device_values_and_owners_are_kept_once() -> None:
    decoder = SliceDecoder()
    page = decoder.page(json.dumps({"metadata": {"resourceVersion": "9", "continue": "c"},
                                    "items": [_slice("s1"), _slice("s2")]}).encode())
    assert (page.continue_token, page.resource_version) == ("c", "9")
    (_, a), (_, b) = page.items
    assert a is not None
    assert b is not None
    gpu_a, gpu_b = a.spec["devices"][0], b.spec["devices"][0]
    assert gpu_a["attributes"]["productName"] is gpu_b["attributes"]["productName"]
    assert a.metadata.ownerReferences is b.metadata.ownerReferences


def test_bookmarks_and_errors() -> None:
    decoder = SliceDecoder()
    end = decoder.event(_line("BOOKMARK", {"metadata": {
        "resourceVersion": "12", "annotations": {"k8s.io/initial-events-end": "true"}}}))
    assert (end.type, end.resource_version, end.ends_initial_events, end.record) == (
        "BOOKMARK", "12", True, None)
    plain = decoder.event(_line("BOOKMARK", {"metadata": {"resourceVersion": "13"}}))
    assert not plain.ends_initial_events
    gone = decoder.event(_line("ERROR", {"kind": "Status", "code": 410, "message": "too old"}))
    assert (gone.type, gone.code, gone.message) == ("ERROR", 410, "too old")


def test_the_indexes_follow_adds_changes_and_deletes() -> None:
    seen: list[tuple[str | None, str | None, str]] = []

    def changed(before: SliceRecord | None, after: SliceRecord | None, version: str) -> None:
        seen.append((before and before.metadata.resourceVersion,
                     after and after.metadata.resourceVersion, version))

    cache = SliceCache(None, changed)
    decoder = SliceDecoder()

    def apply(kind: str, obj: dict[str, Any], version: str) -> None:
        event = decoder.event(_line(kind, obj))
        cache.watch._apply(event.name, event.record, deleted=kind == "DELETED",
                           version=version)

    apply("ADDED", _slice("s1"), "7")
    apply("ADDED", _slice("s2", pool="node-a"), "7")
    apply("ADDED", _slice("x1", inventory=None, driver="other.example.com"), "7")
    assert dict(cache.by_inventory) == {"inv-a": ("s1", "s2")}
    assert dict(cache.by_pool) == {("gpu.kubedra.io", "node-a"): ("inv-a",)}
    assert sorted(cache.all) == ["s1", "s2", "x1"]
    assert cache.all["x1"][0]["spec"]["driver"] == "other.example.com"

    apply("MODIFIED", _slice("s1", inventory="inv-b", pool="pool-b", rv="8"), "8")
    assert dict(cache.by_inventory) == {"inv-a": ("s2",), "inv-b": ("s1",)}
    assert dict(cache.by_pool) == {("gpu.kubedra.io", "node-a"): ("inv-a",),
                                   ("gpu.kubedra.io", "pool-b"): ("inv-b",)}
    apply("DELETED", _slice("s2", rv="9"), "10")
    apply("DELETED", _slice("s1", rv="8"), "11")
    assert (dict(cache.by_inventory), dict(cache.by_pool)) == ({}, {})
    assert sorted(cache.all) == ["x1"]
    assert seen[-2:] == [("7", None, "10"), ("8", None, "11")]
