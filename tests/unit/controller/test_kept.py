"""Records of the inventory and claim indexes (kubedra.controller.kept): the object given back
as the API sent it but managedFields and annotations, small where the fleet repeats itself,
immutable, and made by the index functions themselves."""

import asyncio
import dataclasses
import json
from typing import Any

import kopf
import pytest

from bench.scale import h200_node, inventory_body, node_name
from kubedra.controller.kept import KeptObject, Packer, opened
from kubedra.controller.state import ClusterView
from kubedra.handlers import indexes


def inventory(index: int) -> dict[str, Any]:
    """Node ``index``'s 8-H200 inventory as listed: managedFields, an annotation, the agent's
    report and the operator's status."""
    body = inventory_body(node_name(index))
    name = body["metadata"]["name"]
    body["metadata"].update(
        uid=f"uid-{index}", resourceVersion=str(100 + index), generation=1,
        creationTimestamp="2026-12-02T10:00:00Z", labels={"kubedra.io/node": node_name(index)},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        managedFields=[{"manager": "kubedra-agent", "fieldsV1": {"f:status": {}}}])
    body["status"] = {
        "discovered": h200_node(index, False),
        "conditions": [{"type": "Ready", "status": "True", "reason": "Published",
                        "message": f"pool {name} published", "observedGeneration": 1,
                        "lastTransitionTime": "2026-12-02T10:00:01Z"}],
        "slices": [f"{name}-00000"], "deviceCount": 8, "allocatedCount": 0,
        "publishedFrom": {"inputs": "0" * 32, "slices": {f"{name}-00000": "7"}}}
    return body


def without_left_out(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("managedFields", "annotations")}
    return {**obj, "metadata": meta}


def test_a_record_gives_the_object_back_but_managed_fields_and_annotations() -> None:
    packer = Packer()
    original = inventory(0)
    record = packer.keep(original)
    assert record.body() == without_left_out(original)
    assert json.dumps(record.body()) == json.dumps(without_left_out(original))  # key order too
    assert (record.namespace, record.name, record.uid, record.resource_version,
            record.creation_timestamp) == ("", original["metadata"]["name"], "uid-0", "100",
                                           "2026-12-02T10:00:00Z")
    assert "managedFields" in original["metadata"]  # the original is left alone


def test_types_survive_as_json_has_them() -> None:
    obj = {"metadata": {"name": "c", "namespace": "ns"},
           "spec": {"a": True, "b": 1, "c": 1.0, "d": None, "e": [1, True, 1.5, "1"],
                    "f": 2**70, "g": "é ✓"}}
    back = Packer().keep(obj).body()
    assert back == obj
    assert [type(v) for v in back["spec"]["e"]] == [int, bool, float, str]
    assert type(back["spec"]["a"]) is bool
    assert type(back["spec"]["c"]) is float


def test_each_opening_is_a_new_copy_and_the_record_is_immutable() -> None:
    record = Packer().keep(inventory(1))
    first = record.body()
    first["status"]["discovered"]["devices"].clear()
    assert len(record.body()["status"]["discovered"]["devices"]) == 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "other"  # type: ignore[misc]
    assert not hasattr(record, "__dict__")  # slots


def test_what_every_node_repeats_is_kept_once_in_the_shared_dictionary() -> None:
    packer = Packer()
    records = [packer.keep(inventory(i)) for i in range(50)]
    text = len(json.dumps(without_left_out(inventory(7))).encode())
    # the first record made the dictionary; every other holds what differs only
    assert all(r.dictionary is records[0].dictionary for r in records)
    assert max(len(r.packed) for r in records[1:]) * 10 < text
    assert [r.body() for r in records] == [without_left_out(inventory(i)) for i in range(50)]


def test_a_larger_object_replaces_the_dictionary_and_earlier_records_still_open() -> None:
    packer = Packer()
    small = inventory_body(node_name(0))  # created, the agent has not reported yet
    early = packer.keep(small)
    later = packer.keep(inventory(1))
    assert later.dictionary is not early.dictionary
    assert early.body() == small
    assert later.body() == without_left_out(inventory(1))
    assert packer.keep(inventory(2)).dictionary is later.dictionary  # not twice as large


def test_the_index_functions_keep_records_and_the_view_opens_them() -> None:
    async def index(name: str, body: dict[str, Any]) -> Any:
        function = getattr(indexes, name)
        meta = body["metadata"]
        return await function(namespace=meta.get("namespace"), name=meta["name"],
                              uid=meta.get("uid", ""), body=kopf.Body(body),
                              spec=kopf.Spec(kopf.Body(body)))
    raw = inventory(3)
    kept = without_left_out(raw)  # the index function then releases the event's status
    inventories = asyncio.run(index("inventories", raw))
    (record,) = inventories.values()
    assert isinstance(record, KeptObject)
    assert "status" not in raw
    assert "status" in kept
    claim = {"metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                          "managedFields": [{"manager": "kube-scheduler"}]},
             "spec": {"devices": {"requests": [{"name": "gpu"}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "p", "device": "d"}]}}}}
    claims = asyncio.run(index("claims", claim))
    assert asyncio.run(index("pending_claims", claim)) == {}
    view = ClusterView({raw["metadata"]["name"]: [record]}, {}, {}, {},
                       {k: [v] for k, v in claims.items()}, {})
    assert view.inventory(raw["metadata"]["name"]) == kept
    assert view.has_inventory(raw["metadata"]["name"])
    assert not view.has_inventory("other")
    assert view.claim("ns", "c") == without_left_out(claim)
    assert opened(claim) is claim
