"""The prepare-time exclusivity rule (:mod:`kubedra.node.exclusivity`) over the real H200
capture's MIG counters (the snapshot backend with ``discovery.mig: partitions``): one counter
set ``gpu-0-counters`` with memory slices 0-7 (1 each), 7 compute slices, 8 copy engines, 7
decoders, 7 JPEG engines and 1 OFA engine; the whole GPU ``gpu-0`` consumes all of it."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest

from kubedra.api.inventory import DiscoverySettings, InventoryDevice
from kubedra.discovery import discover
from kubedra.node.checkpoint import PreparedClaim, PreparedDevice
from kubedra.node.exclusivity import Conflict, find_conflict, pool_counters
from tests.support.h200 import H200_CAPTURE

POOL = "node-1"
RESULT = discover(f"snapshot:{H200_CAPTURE}", DiscoverySettings(mig="partitions"), Path("/sys"))
DEVICES: dict[str, InventoryDevice] = {d.name: d for d in RESULT.devices}
COUNTERS = pool_counters(RESULT.counter_sets)
SET = "gpu-0-counters"


def _device(name: str, *, share: str | None = None, admin: bool = False,
            pool: str = POOL) -> PreparedDevice:
    return PreparedDevice(request_names=["gpu"], pool_name=pool, device_name=name,
                          cdi_device_ids=[], share_id=share, admin_access=admin or None)


def _claim(name: str, *devices: PreparedDevice,
           state: str = "PrepareCompleted") -> PreparedClaim:
    return PreparedClaim.model_validate({
        "uid": f"uid-{name}", "namespace": "ns", "name": name, "state": state,
        "bootID": "boot-1", "devices": [d.to_api() for d in devices]})


@dataclass
class Case:
    held: list[PreparedDevice]
    wanted: list[PreparedDevice]
    conflict: tuple[str, str, tuple[str, str] | None, int, int] | None
    """(wanted device, held device, counter, value, wanted in all), or None: allowed."""
    state: str = "PrepareCompleted"


CASES = {
    "whole GPU while a partition is prepared": Case(
        [_device("gpu-0-mig-3g71gb-s0")], [_device("gpu-0")],
        ("gpu-0", "gpu-0-mig-3g71gb-s0", (SET, "compute-slices"), 7, 10)),
    "partition while the whole GPU is prepared": Case(
        [_device("gpu-0")], [_device("gpu-0-mig-1g18gb-s3")],
        ("gpu-0-mig-1g18gb-s3", "gpu-0", (SET, "compute-slices"), 7, 8)),
    "overlapping placements": Case(
        [_device("gpu-0-mig-3g71gb-s0")], [_device("gpu-0-mig-2g35gb-s2")],
        ("gpu-0-mig-2g35gb-s2", "gpu-0-mig-3g71gb-s0", (SET, "memory-slice-2"), 1, 2)),
    "overlap found by a later device of the claim": Case(
        [_device("gpu-0-mig-1g18gb-s5")],
        [_device("gpu-0-mig-1g18gb-s3"), _device("gpu-0-mig-1g35gb-s4")],
        ("gpu-0-mig-1g35gb-s4", "gpu-0-mig-1g18gb-s5", (SET, "memory-slice-5"), 1, 2)),
    "disjoint placements": Case(
        [_device("gpu-0-mig-3g71gb-s0")], [_device("gpu-0-mig-3g71gb-s4")], None),
    "disjoint placements filling the GPU's compute slices": Case(
        [_device("gpu-0-mig-4g71gb-s0")], [_device("gpu-0-mig-3g71gb-s4")], None),
    "one OFA engine for two disjoint +me partitions": Case(
        [_device("gpu-0-mig-1g18gb-me-s0")], [_device("gpu-0-mig-1g18gb-me-s1")],
        ("gpu-0-mig-1g18gb-me-s1", "gpu-0-mig-1g18gb-me-s0", (SET, "ofa-engines"), 1, 2)),
    "three holders, the claim overlapping the last": Case(
        [_device("gpu-0-mig-3g71gb-s0"), _device("gpu-0-mig-2g35gb-s4"),
         _device("gpu-0-mig-1g18gb-s6")], [_device("gpu-0-mig-1g35gb-s6")],
        ("gpu-0-mig-1g35gb-s6", "gpu-0-mig-1g18gb-s6", (SET, "memory-slice-6"), 1, 2)),
    "same device": Case([_device("gpu-0")], [_device("gpu-0")], ("gpu-0", "gpu-0", None, 0, 0)),
    "same device, held by a claim still being prepared": Case(
        [_device("gpu-0")], [_device("gpu-0")], ("gpu-0", "gpu-0", None, 0, 0),
        state="PrepareStarted"),
    "a share while the device is held exclusively": Case(
        [_device("gpu-0")], [_device("gpu-0", share="s2")], ("gpu-0", "gpu-0", None, 0, 0)),
    "the device exclusively while a share is held": Case(
        [_device("gpu-0", share="s1")], [_device("gpu-0")], ("gpu-0", "gpu-0", None, 0, 0)),
    "two shares of one device": Case(
        [_device("gpu-0", share="s1")], [_device("gpu-0", share="s2")], None),
    "a share of a partition whose counters a held share consumed already": Case(
        [_device("gpu-0-mig-3g71gb-s0", share="s1")],
        [_device("gpu-0-mig-3g71gb-s0", share="s2")], None),
    "admin access to a device in use": Case(
        [_device("gpu-0-mig-3g71gb-s0")], [_device("gpu-0", admin=True)], None),
    "admin access to the same device": Case(
        [_device("gpu-0")], [_device("gpu-0", admin=True)], None),
    "a device an admin-access claim holds": Case(
        [_device("gpu-0", admin=True)], [_device("gpu-0-mig-1g18gb-s0")], None),
    "the same name in another pool": Case(
        [_device("gpu-0", pool="node-2")], [_device("gpu-0")], None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_exclusivity_by_what_devices_share(case: Case) -> None:
    holder = _claim("a", *case.held, state=case.state)
    claims = {holder.uid: holder}
    found = find_conflict("uid-b", case.wanted, claims, pool=POOL, devices=DEVICES,
                          counters=COUNTERS)
    if case.conflict is None:
        assert found is None
        return
    device, held, counter, value, wanted = case.conflict
    assert found is not None
    assert (found.device.device_name, found.holder.uid, found.held.device_name, found.counter,
            found.value, found.wanted) == (device, "uid-a", held, counter, Fraction(value),
                                           Fraction(wanted))


def test_the_claims_own_record_never_conflicts() -> None:
    own = _claim("b", _device("gpu-0"))
    assert find_conflict("uid-b", [_device("gpu-0")], {own.uid: own}, pool=POOL,
                         devices=DEVICES, counters=COUNTERS) is None


def test_the_first_holder_of_the_overdrawn_counter_is_named() -> None:
    first = _claim("a", _device("gpu-0-mig-1g18gb-s0"))
    second = _claim("c", _device("gpu-0-mig-1g18gb-s4"))
    found = find_conflict("uid-b", [_device("gpu-0")], {first.uid: first, second.uid: second},
                          pool=POOL, devices=DEVICES, counters=COUNTERS)
    assert found is not None
    assert (found.holder.name, found.held.device_name, found.counter, found.wanted) == (
        "a", "gpu-0-mig-1g18gb-s0", (SET, "compute-slices"), 9)


def test_refusal_messages_name_the_holder_its_device_and_what_they_share() -> None:
    holder = _claim("a", _device("gpu-0-mig-3g71gb-s0"))
    shared = Conflict(_device("gpu-0"), holder, holder.devices[0], (SET, "compute-slices"),
                      Fraction(7), Fraction(10))
    assert shared.message("ns/b") == (
        "device node-1/gpu-0 of claim ns/b shares counter compute-slices of counter set "
        "gpu-0-counters (7 in all, 10 wanted) with device node-1/gpu-0-mig-3g71gb-s0, still "
        "prepared for claim ns/a (UID uid-a); it is prepared once that claim is unprepared")
    same = Conflict(_device("gpu-0-mig-3g71gb-s0"), holder, holder.devices[0])
    assert same.message("ns/b") == (
        "device node-1/gpu-0-mig-3g71gb-s0 of claim ns/b is still prepared for claim ns/a "
        "(UID uid-a); it is prepared once that claim is unprepared")


def test_pool_counters_take_the_first_set_of_a_name() -> None:
    [gpu_set] = RESULT.counter_sets
    smaller = gpu_set.model_copy(update={"counters": {
        "memory-slice-0": gpu_set.counters["memory-slice-1"].model_copy(
            update={"value": gpu_set.counters["compute-slices"].value})}})
    counters = pool_counters([smaller, gpu_set])
    assert counters == {(SET, "memory-slice-0"): Fraction(7)}
