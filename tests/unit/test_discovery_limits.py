"""check_limits refuses each result the API server would reject in a ResourceSlice."""

from __future__ import annotations

import pytest

from kubedra.api.inventory import DiscoveryResult, InventoryDevice
from kubedra.api.resource import (
    Counter,
    CounterSet,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)
from kubedra.discovery import DiscoveryError
from kubedra.discovery.backends import check_limits


def _set(name: str = "gpu-0-counters", counters: int = 1) -> CounterSet:
    return CounterSet(name=name, counters={f"c-{i}": Counter(value="1") for i in range(counters)})


def _consuming(name: str, *sets: str, counter: str = "c-0") -> InventoryDevice:
    return InventoryDevice(name=name, consumes_counters=[
        DeviceCounterConsumption(counter_set=s, counters={counter: Counter(value="1")})
        for s in sets])


def test_a_valid_result_passes() -> None:
    check_limits(DiscoveryResult(
        devices=[_consuming("gpu-0", "gpu-0-counters"),
                 InventoryDevice(name="gpu-1", attributes={
                     f"a{i}": DeviceAttribute(string_value="x" * 64) for i in range(32)})],
        counter_sets=[_set(counters=32)]))


@pytest.mark.parametrize(("result", "message"), [
    (DiscoveryResult(devices=[InventoryDevice(name="gpu-0.mig")]),
     "device name 'gpu-0.mig' is not a DNS label"),
    (DiscoveryResult(devices=[InventoryDevice(name="gpu-0"), InventoryDevice(name="gpu-0")]),
     "device names are not unique"),
    (DiscoveryResult(devices=[InventoryDevice(
        name="gpu-0",
        attributes={f"a{i}": DeviceAttribute(int_value=i) for i in range(30)},
        capacity={f"c{i}": DeviceCapacity(value="1") for i in range(3)})]),
     "device gpu-0 has 33 attributes and capacities"),
    (DiscoveryResult(devices=[InventoryDevice(
        name="gpu-0", attributes={"productName": DeviceAttribute(string_value="x" * 65)})]),
     "attribute productName of device gpu-0 is longer than 64 characters"),
    (DiscoveryResult(devices=[_consuming("gpu-0", "a", "b", "c")],
                     counter_sets=[_set("a"), _set("b"), _set("c")]),
     "device gpu-0 consumes from too many counter sets"),
    (DiscoveryResult(devices=[_consuming("gpu-0", "gpu-1-counters")], counter_sets=[_set()]),
     "device gpu-0 consumes counters that counter set gpu-1-counters does not have"),
    (DiscoveryResult(devices=[_consuming("gpu-0", "gpu-0-counters", counter="c-9")],
                     counter_sets=[_set()]),
     "device gpu-0 consumes counters that counter set gpu-0-counters does not have"),
    (DiscoveryResult(counter_sets=[_set(counters=33)]),
     "counter set gpu-0-counters has more than 32 counters"),
    (DiscoveryResult(counter_sets=[_set("GPU-0")]),
     "counter \\(set\\) name 'GPU-0' is not a DNS label"),
    (DiscoveryResult(counter_sets=[_set(), _set()]), "counter set names are not unique"),
])
def test_each_limit_is_enforced(result: DiscoveryResult, message: str) -> None:
    with pytest.raises(DiscoveryError, match=message):
        check_limits(result)
