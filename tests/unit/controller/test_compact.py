"""Compact copies for the operator's caches (kubedra.controller.compact): equal to the object
(without managedFields), equal device values shared, nothing merged that differs in type."""

from typing import Any

from kubedra.controller.compact import Compactor


def gpu(index: int) -> dict[str, Any]:
    return {"name": f"gpu-{index}",
            "attributes": {"productName": {"string": "NVIDIA H200"}, "index": {"int": index},
                           "ecc": {"bool": True}, "one": {"int": 1},
                           "ids": {"ints": [1, 2]}},
            "capacity": {"memory": {"value": "143771Mi"}},
            "consumesCounters": [{"counterSet": "gpu-0-counters",
                                  "counters": {"memory": {"value": "16Gi"}}}]}


def slice_(rv: str, *indexes: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"s-{rv}", "uid": f"u-{rv}", "resourceVersion": rv,
                         "managedFields": [{"manager": "kubedra-operator"}]},
            "spec": {"driver": "gpu.kubedra.io", "devices": [gpu(i) for i in indexes],
                     "sharedCounters": [{"name": "gpu-0-counters",
                                         "counters": {"memory": {"value": "16Gi"}}}]}}


def test_the_copy_equals_the_object_without_managed_fields() -> None:
    original = slice_("1", 0, 1)
    copied = Compactor().copy(original)
    expected = {**original, "metadata": {k: v for k, v in original["metadata"].items()
                                         if k != "managedFields"}}
    assert copied == expected
    assert "managedFields" in original["metadata"]  # the original is left alone


def test_equal_values_are_one_object_across_devices_and_objects() -> None:
    compactor = Compactor()
    one, two = compactor.copy(slice_("1", 0)), compactor.copy(slice_("2", 0))
    first, second = one["spec"]["devices"][0], two["spec"]["devices"][0]
    assert first["attributes"]["productName"] is second["attributes"]["productName"]
    assert first["capacity"]["memory"] is second["capacity"]["memory"]
    assert (first["consumesCounters"][0]["counters"]["memory"]
            is one["spec"]["sharedCounters"][0]["counters"]["memory"])


def test_values_of_another_type_are_not_merged() -> None:
    device = Compactor().copy(slice_("1", 1))["spec"]["devices"][0]["attributes"]
    assert device["ecc"] == {"bool": True}
    assert device["one"] == {"int": 1}
    assert device["index"] is not device["ecc"]
    assert type(device["one"]["int"]) is int
    assert type(device["ecc"]["bool"]) is bool
    assert device["ids"] == {"ints": [1, 2]}


def test_discovered_devices_of_an_inventory_are_compacted() -> None:
    compactor = Compactor()
    inventories = [compactor.copy({"metadata": {"name": f"n{i}", "resourceVersion": str(i)},
                                   "spec": {"driver": "gpu.kubedra.io"},
                                   "status": {"discovered": {"devices": [gpu(i)]}}})
                   for i in range(2)]
    a, b = (inv["status"]["discovered"]["devices"][0]["attributes"] for inv in inventories)
    assert a["productName"] is b["productName"]
    assert a["index"] == {"int": 0}
    assert b["index"] == {"int": 1}


def test_the_same_object_version_is_copied_once() -> None:
    compactor = Compactor()
    assert compactor.copy(slice_("1", 0)) is compactor.copy(slice_("1", 0))
    assert compactor.copy(slice_("1", 0)) is not compactor.copy(slice_("2", 0))


def test_the_memory_of_values_is_bounded() -> None:
    compactor = Compactor(limit=3)
    for i in range(10):
        compactor.copy(slice_(str(i), i))
    assert len(compactor._values) <= 3
