"""SliceDecoder: the same ResourceSlice models as ``ResourceSlice.from_api``, the same errors at
the same places, with equal attribute values and capacities shared."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from kubedra.api.resource import ResourceSlice
from kubedra.api.slice_decoding import SliceDecoder
from tests.support.explain_builders import h200_slices

Json = dict[str, Any]


def _eight_gpus(node: str) -> Json:
    """An H200 node's slice with 8 GPUs: the capture's GPU, each with its own uuid and minor."""
    (one,) = h200_slices(node)
    gpu = one["spec"]["devices"][0]
    devices = []
    for index in range(8):
        device = copy.deepcopy(gpu)
        device["name"] = f"gpu-{index}"
        device["attributes"]["uuid"] = {"string": f"GPU-{node}-{index}"}
        device["attributes"]["minor"] = {"int": index}
        devices.append(device)
    one["spec"]["devices"] = devices
    return one


def _both(slices: list[Json]) -> tuple[list[ResourceSlice], list[ResourceSlice]]:
    decoder = SliceDecoder()
    return [decoder.decode(s) for s in slices], [ResourceSlice.from_api(s) for s in slices]


def test_the_models_are_those_of_from_api() -> None:
    slices = [_eight_gpus("node-a"), _eight_gpus("node-b"),
              *h200_slices("node-c", mig="partitions")]
    decoded, validated = _both(slices)
    assert decoded == validated
    assert [s.model_dump(exclude_unset=True) for s in decoded] == [
        s.model_dump(exclude_unset=True) for s in validated]
    assert [s.to_api() for s in decoded] == [s.to_api() for s in validated]


def test_equal_values_share_one_model_and_different_ones_do_not() -> None:
    a, b = _eight_gpus("node-a"), _eight_gpus("node-b")
    decoder = SliceDecoder()
    first, second = decoder.decode(a).spec.devices, decoder.decode(b).spec.devices
    one, other = (first or [])[0], (second or [])[0]
    attributes, other_attributes = one.attributes or {}, other.attributes or {}
    assert attributes["productName"] is other_attributes["productName"]
    assert (one.capacity or {})["memory"] is (other.capacity or {})["memory"]
    assert attributes["uuid"] is not other_attributes["uuid"]
    assert other_attributes["uuid"].string_value == "GPU-node-b-0"


def _with_device_field(path: tuple[str, ...], value: Any) -> list[Json]:
    """Two slices of node-a; in the second, device 3's field at ``path`` set to ``value``."""
    first = _eight_gpus("node-a")
    second = copy.deepcopy(first)
    second["metadata"]["name"] = "other"
    target = second["spec"]["devices"][3]
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return [first, second]


@pytest.mark.parametrize(("path", "value"), [
    (("attributes", "minor"), {"int": "seven"}),
    (("attributes", "productName"), {"string": 7}),
    (("attributes", "driverVersion"), {"version": "1.x"}),
    (("capacity", "memory"), {"value": "lots"}),
    (("capacity", "memory"), {}),
    (("attributes",), ["not", "a", "map"]),
    (("name",), None),
])
def test_bad_input_fails_as_from_api_does_naming_the_field(path: tuple[str, ...],
                                                           value: Any) -> None:
    """A value that is also valid elsewhere in the fleet (device 3's own) was validated and
    shared first: the bad one is still reported, at its place in the slice."""
    good, bad = _with_device_field(path, value)
    decoder = SliceDecoder()
    decoder.decode(good)
    with pytest.raises(ValidationError) as ours:
        decoder.decode(bad)
    with pytest.raises(ValidationError) as upstream:
        ResourceSlice.from_api(bad)
    assert str(ours.value) == str(upstream.value)
    assert ours.value.errors(include_context=False) == upstream.value.errors(
        include_context=False)
    assert ours.value.errors()[0]["loc"][:3] == ("spec", "devices", 3)


@pytest.mark.parametrize(("field", "first", "value"), [
    *((("attributes", "extra"), {"bool": True}, v) for v in (
        {"bool": 1}, {"bool": 1.0}, {"int": True}, {"int": 1.0}, {"int": 1.5}, {"ints": [1, 2]},
        {"strings": ["a", "b"]}, {"string": "gpu", "int": 1}, {})),
    (("capacity", "memory"), {"value": 1}, {"value": True}),
    (("capacity", "memory"), {"value": 1}, {"value": 1.0}),
])
def test_values_equal_in_python_but_of_other_types_are_judged_alone(
        field: tuple[str, ...], first: Json, value: Json) -> None:
    """``1 == 1.0 == True`` in Python: each is validated as what it is, as from_api does (a
    capacity of ``1`` is a quantity, ``true`` is not)."""
    slices = _with_device_field(field, first)
    slices += _with_device_field(field, value)[1:]
    for s, name in zip(slices, ("a", "b", "c"), strict=True):
        s["metadata"]["name"] = name
    decoder = SliceDecoder()
    for s in slices:
        try:
            expected: Any = ResourceSlice.from_api(s).to_api()
        except ValidationError as err:
            expected = str(err)
        try:
            got: Any = decoder.decode(s).to_api()
        except ValidationError as err:
            got = str(err)
        assert got == expected


def test_capacities_with_a_request_policy_and_slices_without_devices() -> None:
    gpu = _eight_gpus("node-a")
    gpu["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"] = {
        "default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    counters = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": "counters"},
                "spec": {"driver": "gpu.kubedra.io", "nodeName": "node-a",
                         "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 2},
                         "sharedCounters": [{"name": "gpu-0", "counters": {
                             "memory": {"value": "80Gi"}}}]}}
    decoded, validated = _both([gpu, counters])
    assert [s.to_api() for s in decoded] == [s.to_api() for s in validated]
