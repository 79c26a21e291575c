"""MIG partitions of the H200 as counter-consuming devices: the exact model, and a small
counter check (the scheduler's rule: for every counter, the allocated devices together take
no more than the set holds) proving which combinations can be allocated together."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from kubedra.api.inventory import (
    DiscoveryResult,
    DiscoverySettings,
    InventoryDevice,
    MigProfile,
    Rejection,
)
from kubedra.api.mig import mig_partitions, partition_name
from kubedra.discovery import discover
from kubedra.discovery.backends import screen

H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"


@pytest.fixture(scope="module")
def h200() -> DiscoveryResult:
    return discover(f"snapshot:{H200}", DiscoverySettings(mig="partitions"))


@pytest.fixture(scope="module")
def devices(h200: DiscoveryResult) -> dict[str, InventoryDevice]:
    return {device.name: device for device in h200.devices}


def fits(h200: DiscoveryResult, names: list[str]) -> bool:
    """Whether these devices can all be allocated at once: each at most once, and per counter
    the sum of their consumption within the counter set's value."""
    if len(set(names)) != len(names):
        return False
    by_name = {device.name: device for device in h200.devices}
    available = {(s.name, counter): c.value.value
                 for s in h200.counter_sets for counter, c in s.counters.items()}
    taken: dict[tuple[str, str], Fraction] = {}
    for name in names:
        for consumption in by_name[name].consumes_counters or []:
            for counter, c in consumption.counters.items():
                key = (consumption.counter_set, counter)
                taken[key] = taken.get(key, Fraction(0)) + c.value.value
    return all(value <= available[key] for key, value in taken.items())


def test_one_device_per_profile_and_placement(devices: dict[str, InventoryDevice]) -> None:
    profiles = Counter(device.attributes["profile"].string_value for device in devices.values()
                       if device.name != "gpu-0")
    assert profiles == {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1,
                        "7g.141gb": 1, "1g.18gb+me": 7}
    assert sorted(devices) == sorted([
        "gpu-0",
        *(f"gpu-0-mig-1g18gb-s{start}" for start in range(7)),
        *(f"gpu-0-mig-1g18gb-me-s{start}" for start in range(7)),
        *(f"gpu-0-mig-1g35gb-s{start}" for start in (0, 2, 4, 6)),
        *(f"gpu-0-mig-2g35gb-s{start}" for start in (0, 2, 4)),
        "gpu-0-mig-3g71gb-s0", "gpu-0-mig-3g71gb-s4", "gpu-0-mig-4g71gb-s0",
        "gpu-0-mig-7g141gb-s0",
    ])


def test_counter_set_of_the_h200(h200: DiscoveryResult) -> None:
    assert [s.to_api() for s in h200.counter_sets] == [{
        "name": "gpu-0-counters",
        "counters": {
            **{f"memory-slice-{index}": {"value": "1"} for index in range(8)},
            "compute-slices": {"value": "7"},
            "copy-engines": {"value": "8"},
            "decoders": {"value": "7"},
            "jpeg-engines": {"value": "7"},
            "ofa-engines": {"value": "1"},
        },
    }]


def test_a_partition_exactly(devices: dict[str, InventoryDevice]) -> None:
    assert devices["gpu-0-mig-3g71gb-s4"].to_api() == {
        "name": "gpu-0-mig-3g71gb-s4",
        "attributes": {
            "productName": {"string": "NVIDIA H200"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.159.4"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
            "parentUUID": {"string": "GPU-3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d"},
            "type": {"string": "mig"},
            "profile": {"string": "3g.71gb"},
            "profileID": {"int": 9},
            "placementStart": {"int": 4},
            "placementSize": {"int": 4},
        },
        "capacity": {
            "memory": {"value": "71424Mi"},
            "multiprocessors": {"value": "60"},
            "copyEngines": {"value": "3"},
            "decoders": {"value": "3"},
            "encoders": {"value": "0"},
            "jpegEngines": {"value": "3"},
            "ofaEngines": {"value": "0"},
        },
        "consumesCounters": [{
            "counterSet": "gpu-0-counters",
            "counters": {
                "memory-slice-4": {"value": "1"}, "memory-slice-5": {"value": "1"},
                "memory-slice-6": {"value": "1"}, "memory-slice-7": {"value": "1"},
                "compute-slices": {"value": "3"}, "copy-engines": {"value": "3"},
                "decoders": {"value": "3"}, "jpeg-engines": {"value": "3"},
            },
        }],
        "health": "Healthy",
    }


def test_whole_gpu_consumes_the_whole_set(h200: DiscoveryResult,
                                          devices: dict[str, InventoryDevice]) -> None:
    consumption = devices["gpu-0"].consumes_counters
    assert consumption is not None
    assert len(consumption) == 1
    assert consumption[0].counter_set == "gpu-0-counters"
    assert consumption[0].counters == h200.counter_sets[0].counters


def test_seven_1g18gb_fit_and_nothing_else_does(h200: DiscoveryResult,
                                               devices: dict[str, InventoryDevice]) -> None:
    sevens = [f"gpu-0-mig-1g18gb-s{start}" for start in range(7)]
    assert fits(h200, sevens)
    assert not [name for name in devices if name.startswith("gpu-0-mig-1g18gb-s")
                and name not in sevens]  # there is no eighth 1g.18gb device
    assert [name for name in devices if name not in sevens and fits(h200, [*sevens, name])] == []


def test_no_7g141gb_while_any_1g18gb_is_allocated(h200: DiscoveryResult) -> None:
    assert fits(h200, ["gpu-0-mig-7g141gb-s0"])
    for start in range(7):
        assert not fits(h200, [f"gpu-0-mig-1g18gb-s{start}", "gpu-0-mig-7g141gb-s0"])


def test_two_3g71gb_fit(h200: DiscoveryResult) -> None:
    assert fits(h200, ["gpu-0-mig-3g71gb-s0", "gpu-0-mig-3g71gb-s4"])


def test_4g71gb_and_3g71gb_only_at_starts_0_and_4(h200: DiscoveryResult) -> None:
    assert fits(h200, ["gpu-0-mig-4g71gb-s0", "gpu-0-mig-3g71gb-s4"])
    assert not fits(h200, ["gpu-0-mig-4g71gb-s0", "gpu-0-mig-3g71gb-s0"])


def test_whole_gpu_excludes_every_partition(h200: DiscoveryResult,
                                           devices: dict[str, InventoryDevice]) -> None:
    assert fits(h200, ["gpu-0"])
    assert [name for name in devices if name != "gpu-0" and fits(h200, ["gpu-0", name])] == []


def test_one_1g18gb_me_at_a_time(h200: DiscoveryResult) -> None:
    with_me = [f"gpu-0-mig-1g18gb-me-s{start}" for start in range(7)]
    assert all(fits(h200, [name]) for name in with_me)
    assert [pair for pair in itertools.combinations(with_me, 2) if fits(h200, list(pair))] == []
    # the media extensions sit beside plain 1g.18gb partitions
    assert fits(h200, ["gpu-0-mig-1g18gb-me-s0",
                       *(f"gpu-0-mig-1g18gb-s{start}" for start in range(1, 7))])


def test_pairs_fit_exactly_when_their_memory_slices_are_disjoint(
        h200: DiscoveryResult, devices: dict[str, InventoryDevice]) -> None:
    """Across all 300 pairs of partitions: overlapping placements never fit together; disjoint
    ones always do, except two media-extension partitions (one OFA engine)."""

    def slices(name: str) -> set[int]:
        attributes = devices[name].attributes
        start = attributes["placementStart"].int_value
        size = attributes["placementSize"].int_value
        assert start is not None
        assert size is not None
        return set(range(start, start + size))

    partitions = [name for name in devices if name != "gpu-0"]
    for first, second in itertools.combinations(partitions, 2):
        both_me = "-me-" in first and "-me-" in second
        expected = not slices(first) & slices(second) and not both_me
        assert fits(h200, [first, second]) == expected, (first, second)


def test_a_full_mixed_layout_fits_and_is_full(h200: DiscoveryResult,
                                              devices: dict[str, InventoryDevice]) -> None:
    layout = ["gpu-0-mig-2g35gb-s0", "gpu-0-mig-2g35gb-s2", "gpu-0-mig-2g35gb-s4",
              "gpu-0-mig-1g35gb-s6"]
    assert fits(h200, layout)
    assert [name for name in devices if name not in layout and fits(h200, [*layout, name])] == []


@pytest.mark.parametrize(("profile", "start", "name"), [
    ("1g.18gb", 3, "gpu-0-mig-1g18gb-s3"),
    ("1g.18gb+me", 0, "gpu-0-mig-1g18gb-me-s0"),
    ("7g.141gb", 0, "gpu-0-mig-7g141gb-s0"),
    ("1g.24gb+gfx", 6, "gpu-0-mig-1g24gb-gfx-s6"),
])
def test_partition_names_are_dns_labels(profile: str, start: int, name: str) -> None:
    assert partition_name("gpu-0", profile, start) == name


GPU = InventoryDevice(name="gpu-0")


def _profile(name: str, placements: list[dict[str, int]]) -> MigProfile:
    return MigProfile.model_validate({
        "id": 1, "name": name, "sliceCount": 1, "multiprocessorCount": 16,
        "copyEngineCount": 1, "decoderCount": 0, "encoderCount": 0, "jpegCount": 0,
        "ofaCount": 0, "memorySizeMB": 1024, "placements": placements})


def test_profiles_without_placements_give_no_partitions() -> None:
    assert mig_partitions(GPU, []) is None
    assert mig_partitions(GPU, [_profile("MIG 1g.1gb", [])]) is None


def test_more_than_32_counters_is_refused() -> None:
    wide = mig_partitions(GPU, [_profile("MIG 1g.1gb", [{"start": 0, "size": 31}])])
    assert wide is not None
    assert len(wide.counter_set.counters) == 33
    result = screen(DiscoveryResult(devices=wide.devices, counter_sets=[wide.counter_set]))
    assert (result.devices, result.counter_sets) == ([], [])
    assert result.rejected[0] == Rejection(name="gpu-0-counters",
                                           field="counterSets[gpu-0-counters].counters",
                                           message="33 counters; at most 32")


def test_clashing_partition_names_are_refused() -> None:
    profiles = [_profile("MIG 1g.1gb", [{"start": 0, "size": 1}]),
                _profile("MIG 1g1gb", [{"start": 0, "size": 1}])]
    clash = mig_partitions(GPU, profiles)
    assert clash is not None
    assert [device.name for device in clash.devices] == ["gpu-0-mig-1g1gb-s0"] * 2
    result = screen(DiscoveryResult(devices=clash.devices, counter_sets=[clash.counter_set]))
    assert result.devices == clash.devices[:1]
    assert result.rejected == [Rejection(name="gpu-0-mig-1g1gb-s0",
                                         field="devices[gpu-0-mig-1g1gb-s0].name",
                                         message="the name is used twice")]


def test_every_device_is_within_the_api_limits(h200: DiscoveryResult) -> None:
    assert max(len(d.attributes) + len(d.capacity) for d in h200.devices) == 19
    assert max(len(d.consumes_counters or []) for d in h200.devices) == 1
    assert len(h200.counter_sets[0].counters) == 13
