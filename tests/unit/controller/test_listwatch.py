"""ListWatch's bookkeeping without a server: a relist replaces the cache and reports exactly
what differs (deletes included, as client-go's ``Replace``); a watch event that leaves the
record equal reports nothing and keeps the cached object."""

from __future__ import annotations

import json
from typing import Any

from kubedra.controller.listwatch import Index, ListWatch
from kubedra.controller.nodes import NODE_DECODER, declared_features, node_record


def _node(name: str, uid: str = "u1", heartbeat: str = "t0", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "labels": labels, "resourceVersion": "1"},
            "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": heartbeat}]}}


def _apply(cache: ListWatch[dict[str, Any]], node: dict[str, Any], *, deleted: bool) -> None:
    cache._apply(node["metadata"]["name"], node_record(node), deleted=deleted)


def _cache() -> tuple[ListWatch[dict[str, Any]], list[tuple[str, Any, Any]]]:
    changes: list[tuple[str, Any, Any]] = []
    cache = ListWatch(None, "/api/v1/nodes", NODE_DECODER,  # type: ignore[arg-type]
                      lambda *change: changes.append(change))
    return cache, changes


def test_a_relist_reports_added_changed_and_deleted_records_once() -> None:
    cache, changes = _cache()
    fresh: dict[str, Any] = {}
    for node in (_node("a"), _node("b")):
        cache._take(fresh, node["metadata"]["name"], node_record(node))
    cache._replace(fresh)
    assert [c[0] for c in sorted(changes)] == ["a", "b"]
    assert cache.synced.is_set()
    kept = cache.get("a")
    changes.clear()

    fresh = {}
    for node in (_node("a", heartbeat="t9"), _node("c")):
        cache._take(fresh, node["metadata"]["name"], node_record(node))
    cache._replace(fresh)
    assert sorted((name, after is None) for name, _, after in changes) == [
        ("b", True), ("c", False)]
    assert cache.get("a") is kept  # equal record: the cached object stays
    assert dict(Index(cache)) == {"a": (kept,), "c": (cache.get("c"),)}


def test_an_event_that_changes_nothing_read_reports_nothing() -> None:
    cache, changes = _cache()
    _apply(cache, _node("a"), deleted=False)
    record = cache.get("a")
    changes.clear()
    for beat in range(5):
        _apply(cache, _node("a", heartbeat=f"t{beat}"), deleted=False)
    assert changes == []
    assert cache.get("a") is record
    _apply(cache, _node("a", zone="z"), deleted=False)
    _apply(cache, _node("a", uid="u2", zone="z"), deleted=False)  # another Node, same name
    _apply(cache, _node("a", uid="u2", zone="z"), deleted=True)
    assert [(before and before["metadata"]["uid"], after and after["metadata"]["labels"])
            for _, before, after in changes] == [
        ("u1", {"zone": "z"}), ("u1", {"zone": "z"}), ("u2", None)]
    assert cache.records == {}
    assert cache.counters.changes == 4


def test_a_node_record_keeps_the_features_its_kubelet_declares() -> None:
    plain = _node("a")
    declaring = _node("a")
    declaring["status"]["declaredFeatures"] = ["DRANodeAllocatableResources", "Another"]
    assert node_record(plain) == {"metadata": {"name": "a", "uid": "u1", "labels": {}}}
    assert declared_features(node_record(plain)) == frozenset()
    record = node_record(declaring)
    assert record["status"] == {"declaredFeatures": ["Another", "DRANodeAllocatableResources"]}
    assert declared_features(record) == {"Another", "DRANodeAllocatableResources"}
    cache, changes = _cache()
    _apply(cache, plain, deleted=False)
    changes.clear()
    _apply(cache, declaring, deleted=False)  # a kubelet restarted with the gate on
    assert [name for name, _, _ in changes] == ["a"]
    changes.clear()
    heartbeat = _node("a", heartbeat="t9")
    heartbeat["status"]["declaredFeatures"] = ["Another", "DRANodeAllocatableResources"]
    _apply(cache, heartbeat, deleted=False)
    assert changes == []


def test_the_json_decoder_reads_events_pages_bookmarks_and_errors() -> None:
    node = _node("a", zone="z")
    event = NODE_DECODER.event(json.dumps({"type": "MODIFIED", "object": node}).encode())
    assert (event.type, event.name, event.resource_version, event.record) == (
        "MODIFIED", "a", "1", {"metadata": {"name": "a", "uid": "u1", "labels": {"zone": "z"}}})
    end = NODE_DECODER.event(json.dumps({"type": "BOOKMARK", "object": {"metadata": {
        "resourceVersion": "5", "annotations": {"k8s.io/initial-events-end": "true"}}}}).encode())
    assert (end.resource_version, end.ends_initial_events, end.record) == ("5", True, None)
    gone = NODE_DECODER.event(json.dumps({"type": "ERROR", "object": {
        "code": 410, "message": "too old resource version"}}).encode())
    assert (gone.code, gone.message) == (410, "too old resource version")
    page = NODE_DECODER.page(json.dumps({"metadata": {"resourceVersion": "9", "continue": "c"},
                                         "items": [node]}).encode())
    assert (page.items, page.continue_token, page.resource_version) == (
        [("a", node_record(node))], "c", "9")
