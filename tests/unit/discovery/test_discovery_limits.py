"""Discovery refuses results the API server would reject: limits the models check themselves
surface as DiscoveryError from discover(), the rest are check_limits' job."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kubedra.api.inventory import DiscoveryResult, DiscoverySettings, InventoryDevice
from kubedra.api.resource import (
    Counter,
    CounterSet,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)
from kubedra.discovery import DiscoveryError, discover
from kubedra.discovery.backends import check_limits

H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"


def _set(name: str = "gpu-0-counters", counters: int = 1) -> CounterSet:
    return CounterSet(name=name, counters={f"c-{i}": Counter(value="1") for i in range(counters)})


def _consuming(name: str, counter_set: str, counter: str = "c-0") -> InventoryDevice:
    return InventoryDevice(name=name, consumes_counters=[DeviceCounterConsumption(
        counter_set=counter_set, counters={counter: Counter(value="1")})])


def test_a_result_at_the_limits_passes() -> None:
    check_limits(DiscoveryResult(
        devices=[_consuming("gpu-0", "gpu-0-counters"),
                 InventoryDevice(name="gpu-1", attributes={
                     f"a{i}": DeviceAttribute(string_value="x" * 64) for i in range(32)})],
        counter_sets=[_set(counters=32)]))


@pytest.mark.parametrize(("result", "message"), [
    (DiscoveryResult(devices=[InventoryDevice(name="gpu-0"), InventoryDevice(name="gpu-0")]),
     "device names are not unique"),
    (DiscoveryResult(devices=[InventoryDevice(
        name="gpu-0",
        attributes={f"a{i}": DeviceAttribute(int_value=i) for i in range(30)},
        capacity={f"c{i}": DeviceCapacity(value="1") for i in range(3)})]),
     "device gpu-0 has 33 attributes and capacities"),
    (DiscoveryResult(devices=[_consuming("gpu-0", "gpu-1-counters")], counter_sets=[_set()]),
     "device gpu-0 consumes counters that counter set gpu-1-counters does not have"),
    (DiscoveryResult(devices=[_consuming("gpu-0", "gpu-0-counters", counter="c-9")],
                     counter_sets=[_set()]),
     "device gpu-0 consumes counters that counter set gpu-0-counters does not have"),
    (DiscoveryResult(counter_sets=[_set(counters=33)]),
     "counter set gpu-0-counters has more than 32 counters"),
    (DiscoveryResult(counter_sets=[_set(), _set()]), "counter set names are not unique"),
])
def test_each_limit_is_enforced(result: DiscoveryResult, message: str) -> None:
    with pytest.raises(DiscoveryError, match=message):
        check_limits(result)


def test_a_value_the_models_refuse_is_a_discovery_error(tmp_path: Path) -> None:
    """A product name longer than 64 characters (``DeviceAttributeMaxValueLength``)."""
    folder = tmp_path / "capture"
    shutil.copytree(H200, folder)
    document = json.loads((folder / "nvml.json").read_text())
    document["devices"][0]["Name"] = "NVIDIA " + "H" * 60
    (folder / "nvml.json").write_text(json.dumps(document))
    with pytest.raises(DiscoveryError, match=r"(?s)backend snapshot:\S+ found a device the API "
                                             r"would reject: .*at most 64 characters"):
        discover(f"snapshot:{folder}", DiscoverySettings())
