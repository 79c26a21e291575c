"""kubedra.cel.reads: which values a selector reads, so that devices agreeing on them share one
evaluation (issue 24: a memory selector over 16,000 GPUs)."""

from __future__ import annotations

import itertools

import pytest

from kubedra.api.resource import DeviceAttribute, DeviceCapacity
from kubedra.cel.device import CELDevice
from kubedra.cel.reads import conversion_error, reads, values_key

D = "gpu.kubedra.io"


@pytest.mark.parametrize(("expression", "expected"), [
    (f'device.driver == "{D}" && has(device.attributes["{D}"].type) && '
     f'device.attributes["{D}"].type == "gpu"',
     (("attributes", D, "type"), ("driver", "", ""))),
    (f'device.capacity["{D}"].memory.compareTo(quantity("140Gi")) >= 0',
     (("capacity", D, "memory"),)),
    ('device.allowMultipleAllocations', (("allow", "", ""),)),
    ('"device" == device.driver', (("driver", "", ""),)),
    ('true', ()),
])
def test_a_selector_that_reads_named_values_says_which(expression: str,
                                                       expected: tuple[object, ...]) -> None:
    assert reads(expression) == expected


@pytest.mark.parametrize("expression", [
    'device.attributes["x"]["y"] == 1',
    'device.attributes["x"].?y.orValue(1) == 1',
    'device.attributes.exists(d, true)',
    '"gpu" in device.attributes["x"]',
    'device.attributes["x"].y == 1 || "device.driver" == device.capacity["x"]["m"]',
])
def test_any_other_use_of_device_reads_everything(expression: str) -> None:
    assert reads(expression) is None


def _attrs(**values: object) -> dict[str, DeviceAttribute]:
    return {name: DeviceAttribute.model_validate(v) for name, v in values.items()}


def test_devices_that_differ_only_in_unread_values_have_one_key() -> None:
    read = reads(f'device.capacity["{D}"].memory.compareTo(quantity("140Gi")) >= 0')
    assert read is not None
    memory = {"memory": DeviceCapacity.model_validate({"value": "143771Mi"})}
    one = values_key(read, None, D, _attrs(uuid={"string": "GPU-1"}), memory, False)
    two = values_key(read, None, D, _attrs(uuid={"string": "GPU-2"}), memory, False)
    other = values_key(read, None, D, _attrs(uuid={"string": "GPU-2"}),
                       {"memory": DeviceCapacity.model_validate({"value": "80Gi"})}, False)
    assert one == two == (None, None, (143771 * 2**20, 1, "BinarySI"))
    assert other == (None, None, (80 * 2**30, 1, "BinarySI"))
    half = values_key(read, None, D, {}, {"memory": DeviceCapacity.model_validate(
        {"value": "500m"})}, False)
    assert half == (None, None, (1, 2, "DecimalSI"))


def test_a_device_upstream_cannot_convert_keys_apart() -> None:
    """DeviceMatches fails on any attribute with an unparsable version, whatever is read."""
    read = reads('device.driver == "x"')
    assert read is not None
    assert conversion_error(D, _attrs(v={"version": "1.0.0"})) is None
    assert conversion_error(D, {"v": DeviceAttribute.model_construct(version_value="1.0")}) == "v"
    assert conversion_error(D, {"w": DeviceAttribute.model_construct()}) == "w"
    assert values_key(read, "v", D, {}, {}, False) == ("v", D)


_FIELDS = {"int_value": 1, "bool_value": True, "string_value": "s", "version_value": "1.0.0",
           "int_values": [1], "bool_values": [True], "string_values": ["s"],
           "version_values": ["1.0.0"]}
_BAD_VERSIONS = {"version_value": "1.0", "version_values": ["1.0.0", "1.0"]}


@pytest.mark.parametrize("lists", [True, False])
def test_conversion_error_is_the_prepared_devices_error_whatever_fields_are_set(
        lists: bool) -> None:
    """Every attribute of no, one or two value fields (versions that parse and versions that
    do not): :func:`conversion_error` names it exactly when converting the device for CEL
    fails, the fields read in that conversion's order (an attribute with a string and a
    version that does not parse converts as its string)."""
    values = [*_FIELDS.items(), *_BAD_VERSIONS.items()]
    combinations = [()] + [(v,) for v in values] + [
        pair for pair in itertools.combinations(values, 2) if pair[0][0] != pair[1][0]]
    for fields in combinations:
        attributes = {"a": DeviceAttribute.model_construct(**dict(fields))}
        prepared = CELDevice(D, attributes, {}, list_attributes=lists).prepared
        expected = None if prepared.error is None else "a"
        assert conversion_error(D, attributes, lists) == expected, fields
