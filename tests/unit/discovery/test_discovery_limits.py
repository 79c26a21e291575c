"""Discovery leaves out exactly the devices and counter sets the API server would refuse, each
with the field and why, and keeps every other device of the node (issue 16, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.api.inventory import (
    MAX_COUNTER_SETS,
    MAX_DEVICES,
    DiscoveredState,
    DiscoveryResult,
    DiscoverySettings,
    InventoryDevice,
    Rejection,
)
from kubedra.api.resource import (
    Counter,
    CounterSet,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)
from kubedra.discovery import discover
from kubedra.discovery.backends import screen
from tests.support.h200 import capture_with_second_gpu

H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"


def _set(name: str = "gpu-0-counters", counters: int = 1) -> CounterSet:
    return CounterSet(name=name, counters={f"c-{i}": Counter(value="1") for i in range(counters)})


def _consuming(name: str, counter_set: str, counter: str = "c-0") -> InventoryDevice:
    return InventoryDevice(name=name, consumes_counters=[DeviceCounterConsumption(
        counter_set=counter_set, counters={counter: Counter(value="1")})])


def test_a_result_at_the_limits_passes_whole() -> None:
    result = DiscoveryResult(
        devices=[_consuming("gpu-0", "gpu-0-counters"),
                 InventoryDevice(name="gpu-1", attributes={
                     f"a{i}": DeviceAttribute(string_value="é" * 32) for i in range(32)})],
        counter_sets=[_set(counters=32)])
    assert screen(result) == result


@pytest.mark.parametrize(("bad", "field", "message"), [
    (InventoryDevice(name="gpu-9", attributes={"model": DeviceAttribute(string_value="é" * 33)}),
     "devices[gpu-9].attributes[model].string",
     "66 bytes (33 characters); the API server allows at most 64 bytes"),
    (InventoryDevice(name="gpu-9", attributes={"v": DeviceAttribute(
        version_value="1.0.0-" + "a" * 59)}),
     "devices[gpu-9].attributes[v].version",
     "65 bytes (65 characters); the API server allows at most 64 bytes"),
    (InventoryDevice(name="gpu-9", attributes={"tags": DeviceAttribute(
        string_values=["ok", "ü" * 40])}),
     "devices[gpu-9].attributes[tags].strings[1]",
     "80 bytes (40 characters); the API server allows at most 64 bytes"),
    (InventoryDevice(name="gpu-9", attributes={"tags": DeviceAttribute(string_values=[])}),
     "devices[gpu-9].attributes[tags].strings", "must not be empty if set"),
    (InventoryDevice(name="gpu-9", attributes={"n": DeviceAttribute()}),
     "devices[gpu-9].attributes[n]",
     "exactly one of int, bool, string, version (or ints, bools, strings, versions) must be set"),
    (InventoryDevice(name="gpu-9",
                     attributes={"many": DeviceAttribute(int_values=list(range(49)))}),
     "devices[gpu-9].attributes", "49 attribute values; at most 48"),
    (InventoryDevice(name="gpu-9", attributes={f"a{i}": DeviceAttribute(int_value=i)
                                               for i in range(30)},
                     capacity={f"c{i}": DeviceCapacity(value="1") for i in range(3)}),
     "devices[gpu-9].attributes", "33 attributes and capacities; at most 32"),
    (InventoryDevice(name="gpu-9", capacity={"memory": DeviceCapacity.model_validate(
        {"value": "1Gi", "requestPolicy": {"default": "1Gi"}})}),
     "devices[gpu-9].capacity[memory].requestPolicy",
     "forbidden: the device does not allow multiple allocations"),
    (_consuming("gpu-9", "gpu-1-counters"),
     "devices[gpu-9].consumesCounters[0].counterSet",
     "no usable counter set named 'gpu-1-counters'"),
    (_consuming("gpu-9", "gpu-0-counters", counter="c-9"),
     "devices[gpu-9].consumesCounters[0].counters[c-9]",
     "counter set 'gpu-0-counters' has no counter 'c-9'"),
    (InventoryDevice(name="gpu-9", consumes_counters=[DeviceCounterConsumption(
        counter_set="gpu-0-counters", counters={})]),
     "devices[gpu-9].consumesCounters[0].counters", "required: at least one counter"),
    (InventoryDevice(name="gpu-0"), "devices[gpu-0].name", "the name is used twice"),
    (InventoryDevice.model_construct(name="gpu-9", attributes={
        "gpu.kubedra.io/mig/profile": DeviceAttribute(string_value="1g.18gb")}, capacity={}),
     "devices[gpu-9].attributes[gpu.kubedra.io/mig/profile]",
     "has 2 '/'; at most one '/' may separate the domain from the name "
     "(Kubernetes 1.38 refuses more)"),
    (InventoryDevice.model_construct(name="gpu-9", attributes={},
                                     capacity={"a/b/c/memory": DeviceCapacity(value="1Gi")}),
     "devices[gpu-9].capacity[a/b/c/memory]",
     "has 3 '/'; at most one '/' may separate the domain from the name "
     "(Kubernetes 1.38 refuses more)"),
])
def test_only_the_device_that_breaks_a_rule_is_left_out(
        bad: InventoryDevice, field: str, message: str) -> None:
    good = _consuming("gpu-0", "gpu-0-counters")
    result = screen(DiscoveryResult(devices=[good, bad], counter_sets=[_set()]))
    assert result.devices == [good]
    assert result.counter_sets == [_set()]
    assert result.rejected == [Rejection(name=bad.name, field=field, message=message)]


@pytest.mark.parametrize(("bad", "field", "message"), [
    (_set(counters=33), "counterSets[gpu-0-counters].counters", "33 counters; at most 32"),
    (_set(counters=0), "counterSets[gpu-0-counters].counters", "required: at least one counter"),
])
def test_a_refused_counter_set_costs_only_the_devices_that_consume_it(
        bad: CounterSet, field: str, message: str) -> None:
    free = InventoryDevice(name="nic-0")
    result = screen(DiscoveryResult(devices=[_consuming("gpu-0", bad.name), free],
                                    counter_sets=[bad]))
    assert result.devices == [free]
    assert result.counter_sets == []
    assert result.rejected == [
        Rejection(name=bad.name, field=field, message=message),
        Rejection(name="gpu-0", field="devices[gpu-0].consumesCounters[0].counterSet",
                  message="no usable counter set named 'gpu-0-counters'")]


def test_a_counter_set_named_twice_keeps_the_first() -> None:
    result = screen(DiscoveryResult(counter_sets=[_set(), _set(counters=2)]))
    assert result.counter_sets == [_set()]
    assert result.rejected == [Rejection(name="gpu-0-counters",
                                         field="counterSets[gpu-0-counters].name",
                                         message="the name is used twice")]


@pytest.mark.parametrize("mig", ["none", "partitions"])
def test_a_70_character_product_name_costs_only_its_own_gpu(tmp_path: Path, mig: str) -> None:
    """The replayed fault: a second GPU whose product name has 70 characters. The first GPU
    (and its MIG partitions) is reported; the second and its partitions are left out, each
    naming the field."""
    folder = capture_with_second_gpu(tmp_path / "capture", "NVIDIA " + "H" * 63)
    whole = discover(f"snapshot:{H200}", DiscoverySettings(mig=mig))  # type: ignore[arg-type]
    result = discover(f"snapshot:{folder}", DiscoverySettings(mig=mig))  # type: ignore[arg-type]
    assert result.devices == whole.devices
    assert result.counter_sets == whole.counter_sets
    assert {r.name for r in result.rejected} == {"gpu-1"}
    assert Rejection(name="gpu-1", field="devices[gpu-1].attributes[productName].string",
                     message="70 bytes (70 characters); the API server allows at most 64 "
                             "bytes") in result.rejected


def test_a_report_keeps_at_most_the_counter_sets_and_devices_an_inventory_lists() -> None:
    """Found by fuzzing capture variants (issue 13, item 4): 40 MIG-capable GPUs gave 40
    counter sets, and the agent's report (at most 32 in ``status.discovered.counterSets``)
    failed to build, which stopped its discovery loop. Now what is over a limit is left out
    like any other value the API server would refuse, with its consumers."""
    sets = [_set(f"gpu-{i}-counters") for i in range(MAX_COUNTER_SETS + 1)]
    consumers = [_consuming(f"gpu-{i}", f"gpu-{i}-counters") for i in range(len(sets))]
    plain = [InventoryDevice(name=f"dev-{i}") for i in range(MAX_DEVICES)]
    result = screen(DiscoveryResult(devices=consumers + plain, counter_sets=sets))
    last = MAX_COUNTER_SETS
    assert [c.name for c in result.counter_sets] == [f"gpu-{i}-counters" for i in range(last)]
    kept = [d.name for d in result.devices]
    assert kept == [f"gpu-{i}" for i in range(last)] + [f"dev-{i}" for i in
                                                        range(MAX_DEVICES - last)]
    assert result.rejected[:2] == [
        Rejection(name=f"gpu-{last}-counters", field=f"counterSets[gpu-{last}-counters]",
                  message="a DeviceInventory lists at most 32 counter sets"),
        Rejection(name=f"gpu-{last}", field=f"devices[gpu-{last}].consumesCounters[0]"
                  f".counterSet", message=f"no usable counter set named 'gpu-{last}-counters'")]
    assert result.rejected[2:] == [
        Rejection(name=f"dev-{i}", field=f"devices[dev-{i}]",
                  message="a DeviceInventory lists at most 4096 devices")
        for i in range(MAX_DEVICES - last, MAX_DEVICES)]
    DiscoveredState(devices=result.devices, counter_sets=result.counter_sets,
                    rejected=result.rejected)  # the agent's report builds
