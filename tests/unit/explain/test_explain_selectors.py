"""Why a CEL selector accepts or rejects a device, on the real H200 device gpu-0."""

from __future__ import annotations

import pytest

from kubedra.allocation import NodeInfo, ResourceSnapshot
from kubedra.allocation.pools import DeviceEntry
from kubedra.api.resource import ResourceSlice
from kubedra.cel.selector import NO_SUCH_KEY_HINT
from kubedra.explain.selectors import judge, judge_parts, split_conjuncts
from tests.support.explain_builders import h200_slices

MEMORY = 'device.capacity["gpu.kubedra.io"].memory'
CC = 'device.attributes["gpu.kubedra.io"].cudaComputeCapability'


@pytest.fixture(scope="module")
def gpu0() -> DeviceEntry:
    inventory = ResourceSnapshot([ResourceSlice.from_api(s) for s in h200_slices("n")], [])
    [device] = inventory.node_pools(NodeInfo("n")).devices
    return device


@pytest.mark.parametrize(("expression", "parts"), [
    ("a && b", ["a", "b"]),
    ("(a && b) && (c)", ["a", "b", "c"]),
    ("((a && b))", ["a", "b"]),
    ("a && (b || c)", ["a", "b || c"]),
    ("a && b || c", ["a && b || c"]),
    ("a ? b && c : d", ["a ? b && c : d"]),
    ('x == "&&" && y', ['x == "&&"', "y"]),
    ("x == r'\\' && y", ["x == r'\\'", "y"]),
    ("f(a && b) && c", ["f(a && b)", "c"]),
    ("!(a && b)", ["!(a && b)"]),
])
def test_split_at_top_level_and(expression: str, parts: list[str]) -> None:
    assert split_conjuncts(expression) == parts


@pytest.mark.parametrize(("expression", "conjunct", "sentence"), [
    # the demo: 143771Mi = 150754820096 bytes, 141Gi = 151397597184 bytes
    (f'{MEMORY}.compareTo(quantity("141Gi")) >= 0', None,
     "has 150754820096 bytes, less than the 151397597184 asked "
     "(gpu.kubedra.io/memory: 143771Mi < 141Gi)"),
    (f'{MEMORY}.compareTo(quantity("140Gi")) >= 0 && {CC}.compareTo(semver("10.0.0")) >= 0',
     f'{CC}.compareTo(semver("10.0.0")) >= 0',
     "has cudaComputeCapability 9.0.0, less than the 10.0.0 asked"),
    (f'{MEMORY}.compareTo(quantity("100Gi")) < 0', None,
     "has 150754820096 bytes, not less than the 107374182400 allowed "
     "(gpu.kubedra.io/memory: 143771Mi >= 100Gi)"),
    (f'{MEMORY}.isGreaterThan(quantity("200Gi"))', None,
     "has 150754820096 bytes, not more than the 214748364800 asked "
     "(gpu.kubedra.io/memory: 143771Mi <= 200Gi)"),
    (f'!{MEMORY}.isLessThan(quantity("200Gi"))', None,
     "has 150754820096 bytes, less than the 214748364800 asked "
     "(gpu.kubedra.io/memory: 143771Mi < 200Gi)"),
    (f'quantity("200Gi").compareTo({MEMORY}) <= 0', None,
     "has 150754820096 bytes, less than the 214748364800 asked "
     "(gpu.kubedra.io/memory: 143771Mi < 200Gi)"),
    ('device.capacity["gpu.kubedra.io"].multiprocessors.compareTo(quantity("140")) > 0', None,
     "has 132 multiprocessors, not more than the 140 asked "
     "(gpu.kubedra.io/multiprocessors: 132 <= 140)"),
    ('device.attributes["gpu.kubedra.io"].type == "mig"', None,
     'has type "gpu", not the "mig" asked'),
    ('device.attributes["gpu.kubedra.io"]["productName"] != "NVIDIA H200"', None,
     'has productName "NVIDIA H200", the value the selector excludes'),
    ('device.attributes["gpu.kubedra.io"].minor >= 2', None, "has minor 0, less than the 2 asked"),
    ('device.attributes["gpu.kubedra.io"].migEnabled == true', None,
     "has migEnabled false, not the true asked"),
    ('device.driver == "pci.kubedra.io"', None,
     'has driver "gpu.kubedra.io", not the "pci.kubedra.io" asked'),
    ('has(device.attributes["gpu.kubedra.io"].profile)', None,
     "has no attribute gpu.kubedra.io/profile"),
    ('device.attributes["gpu.kubedra.io"].productName in ["H100", "A100"]', None,
     'does not match device.attributes["gpu.kubedra.io"].productName in ["H100", "A100"] '
     '(gpu.kubedra.io/productName = "NVIDIA H200")'),
    # the conjunct is quoted when the comparison is not with a literal
    (f'{MEMORY}.compareTo(device.capacity["gpu.kubedra.io"].memory) > 0', None,
     f'does not match {MEMORY}.compareTo(device.capacity["gpu.kubedra.io"].memory) > 0 '
     "(gpu.kubedra.io/memory = 150754820096 (143771Mi))"),
    # the device's value in the units of the literal, whatever units the slice used
    (f'{MEMORY}.compareTo(quantity("150G")) < 0', None,
     "has 150754820096 bytes, not less than the 150000000000 allowed "
     "(gpu.kubedra.io/memory: 150754820096 >= 150G)"),
])
def test_rejection_says_what_the_device_has(gpu0: DeviceEntry, expression: str,
                                            conjunct: str | None, sentence: str) -> None:
    found = judge(expression, gpu0)
    assert found.passed is False
    assert found.conjunct == (conjunct or expression)
    assert found.sentence() == sentence


def test_the_first_false_conjunct_decides(gpu0: DeviceEntry) -> None:
    expression = ('device.driver == "gpu.kubedra.io" && '
                  'has(device.attributes["gpu.kubedra.io"].profile) && '
                  'device.attributes["gpu.kubedra.io"].type == "mig"')
    found = judge(expression, gpu0)
    assert found.conjunct == 'has(device.attributes["gpu.kubedra.io"].profile)'
    assert found.comparison is None
    assert found.values == ("gpu.kubedra.io/profile = unset",)


def test_runtime_error_is_reported(gpu0: DeviceEntry) -> None:
    found = judge('device.attributes["gpu.kubedra.io"].profile == "x"', gpu0)
    assert found.passed is None
    assert found.error == f"no such key: profile{NO_SUCH_KEY_HINT}"


def test_parts_of_a_passing_selector(gpu0: DeviceEntry) -> None:
    expression = (f'{MEMORY}.compareTo(quantity("140Gi")) >= 0 && '
                  f'{CC}.compareTo(semver("9.0.0")) >= 0 && '
                  'has(device.attributes["gpu.kubedra.io"].uuid)')
    assert [f.sentence() for f in judge_parts(expression, gpu0)] == [
        "has 150754820096 bytes, at least the 150323855360 asked "
        "(gpu.kubedra.io/memory: 143771Mi >= 140Gi)",
        "has cudaComputeCapability 9.0.0, at least the 9.0.0 asked",
        "has attribute gpu.kubedra.io/uuid"]
