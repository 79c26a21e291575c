"""The Ready condition of each allocated device of a claim, one per reason (pure functions: no
cluster, milliseconds)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubedra.api.inventory import DeviceInventory
from kubedra.binding.attach import AttachResult
from kubedra.controller.claims import PoolLookup, decide_claim, device_condition
from kubedra.controller.state import PublishedPool
from kubedra.publishing.features import EFFECT_NONE_REFUSED, TAINTS_OFF
from kubedra.publishing.pool import build_pool

NOW = "2026-11-30T12:00:00Z"
EARLIER = "2026-11-30T11:00:00Z"
INVENTORY = "node-1-gpu"


def published(*, withdrawn: bool = False, draining: dict[str, str] | None = None,
              health: dict[str, tuple[str, str | None]] | None = None) -> PublishedPool:
    """node-1's pool with gpu-0 and gpu-1 published."""
    pool = build_pool(DeviceInventory.from_api({
        "metadata": {"name": INVENTORY},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "node-1",
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}))
    return PublishedPool.of(pool, health or {"gpu-0": ("Healthy", None),
                                             "gpu-1": ("Healthy", None)},
                            withdrawn=withdrawn, draining=draining)


def left_out(pool: PublishedPool, *, disabled: bool = False) -> PublishedPool:
    """``pool`` with gpu-0 left out of the slices, as on a cluster that drops device taints
    (1.34, 1.35 by default): it would carry one, being unhealthy or ``disabled``."""
    return dataclasses.replace(pool, devices=pool.devices - {"gpu-0"},
                               disabled=frozenset({"gpu-0"} if disabled else ()),
                               left_out={"gpu-0": TAINTS_OFF})


def result(device: str = "gpu-0", **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "node-1", "device": device,
            **extra}


CASES = [
    ("allocated", result(), published(), True, "Allocated",
     "device gpu-0 of pool node-1 (DeviceInventory node-1-gpu) is allocated to request gpu"),
    ("pool not published", result(), None, False, "DeviceNotFound",
     "pool node-1 of gpu.kubedra.io is not published; device gpu-0 cannot be used until its "
     "node agent reports again"),
    ("pool withdrawn", result(), published(withdrawn=True), False, "DeviceNotFound",
     "pool node-1 of gpu.kubedra.io is not published; device gpu-0 cannot be used until its "
     "node agent reports again"),
    ("device gone", result("gpu-7"), published(), False, "DeviceNotFound",
     "pool node-1 (DeviceInventory node-1-gpu) no longer has device gpu-7"),
    ("gone but kept while held", result(), published(draining={"gpu-0": "gone"}), False,
     "DeviceNotFound", "pool node-1 (DeviceInventory node-1-gpu) no longer has device gpu-0 "
                       "(the node agent no longer reports it); it stays published, tainted, "
                       "until released"),
    ("inventory deleted, kept while held", result(), published(draining={"gpu-0": "deleted"}),
     False, "DeviceNotFound", "pool node-1 (DeviceInventory node-1-gpu) no longer has device "
                              "gpu-0 (the DeviceInventory is deleted); it stays published, "
                              "tainted, until released"),
    ("disabled", result(), published(draining={"gpu-0": "disabled"}), False, "DeviceDisabled",
     "device gpu-0 of pool node-1 is disabled by an override in DeviceInventory node-1-gpu; it "
     "stays published, tainted, until released"),
    ("unhealthy", result(), published(health={"gpu-0": ("Unhealthy", "ECC errors")}), False,
     "DeviceUnhealthy", "device gpu-0 in pool node-1 is unhealthy: ECC errors"),
    ("disabled, left out where taints are dropped", result(), left_out(published(),
                                                                       disabled=True),
     False, "DeviceDisabled",
     "device gpu-0 of pool node-1 is disabled by an override in DeviceInventory node-1-gpu; it "
     f"is left out of the slices ({TAINTS_OFF})"),
    ("disabled and not yet kept for its claim", result(),
     dataclasses.replace(published(), devices=frozenset({"gpu-1"}),
                         disabled=frozenset({"gpu-0"})),
     False, "DeviceNotFound", "pool node-1 (DeviceInventory node-1-gpu) no longer has device "
                              "gpu-0"),
    ("unhealthy, left out where taints are dropped", result(),
     left_out(published(health={"gpu-0": ("Unhealthy", "ECC errors")})), False,
     "DeviceUnhealthy", "device gpu-0 in pool node-1 is unhealthy: ECC errors"),
    # found by newcomer14: was "pool node-1 ... no longer has device gpu-0", though the
    # inventory still has it and only the API server's refusal keeps it out
    ("healthy, left out where the taint effect None is refused", result(),
     dataclasses.replace(published(), devices=frozenset({"gpu-1"}),
                         left_out={"gpu-0": EFFECT_NONE_REFUSED}),
     False, "DeviceNotFound", "device gpu-0 of pool node-1 (DeviceInventory node-1-gpu) is left "
                              f"out of the slices ({EFFECT_NONE_REFUSED})"),
    ("unhealthy without a message", result(), published(health={"gpu-0": ("Unhealthy", None)}),
     False, "DeviceUnhealthy", "device gpu-0 in pool node-1 is unhealthy: reported by the node "
                               "agent"),
]


@pytest.mark.parametrize(("result_", "pool", "ok", "reason", "message"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_reason(result_: dict[str, Any], pool: PublishedPool | None, ok: bool,
                     reason: str, message: str) -> None:
    condition = device_condition(result_, INVENTORY, pool)
    assert (condition.ok, condition.reason, condition.message) == (ok, reason, message)


def lookup_of(pool: PublishedPool | None) -> PoolLookup:
    return lambda driver, name: (INVENTORY if pool else None, pool)


def test_entries_with_ready_conditions_and_a_problem_for_the_event() -> None:
    claim: dict[str, Any] = {"status": {}}
    results = [result(), result("gpu-1", shareID="s-1")]
    pool = published(health={"gpu-0": ("Healthy", None), "gpu-1": ("Unhealthy", "hot")})
    decision = decide_claim(claim, results, lookup_of(pool), NOW)
    assert decision.entries is not None
    assert [e.to_api() for e in decision.entries] == [
        {"driver": "gpu.kubedra.io", "pool": "node-1", "device": "gpu-0", "conditions": [
            {"type": "Ready", "status": "True", "reason": "Allocated", "message":
             "device gpu-0 of pool node-1 (DeviceInventory node-1-gpu) is allocated to request "
             "gpu", "lastTransitionTime": NOW}]},
        {"driver": "gpu.kubedra.io", "pool": "node-1", "device": "gpu-1", "shareID": "s-1",
         "conditions": [{"type": "Ready", "status": "False", "reason": "DeviceUnhealthy",
                         "message": "device gpu-1 in pool node-1 is unhealthy: hot",
                         "lastTransitionTime": NOW}]}]
    assert decision.event_message == "device gpu-1 in pool node-1 is unhealthy: hot"


def test_no_write_when_every_condition_is_already_there() -> None:
    pool = published()
    first = decide_claim({"status": {}}, [result()], lookup_of(pool), EARLIER)
    assert first.entries is not None
    claim = {"status": {"devices": [
        {**first.entries[0].to_api(),
         "conditions": [*first.entries[0].to_api()["conditions"],
                        {"type": "Prepared", "status": "True", "reason": "Prepared",
                         "message": "", "lastTransitionTime": EARLIER}]}]}}
    again = decide_claim(claim, [result()], lookup_of(pool), NOW)
    assert (again.entries, again.problems) == (None, [])


def test_a_changed_reason_is_written_with_a_new_transition_time_and_others_left_out() -> None:
    claim = {"status": {"devices": [{
        "driver": "gpu.kubedra.io", "pool": "node-1", "device": "gpu-0", "conditions": [
            {"type": "Ready", "status": "True", "reason": "Allocated", "message": "old",
             "lastTransitionTime": EARLIER},
            {"type": "Prepared", "status": "True", "reason": "Prepared", "message": "",
             "lastTransitionTime": EARLIER}]}]}}
    decision = decide_claim(claim, [result()], lookup_of(None), NOW)
    assert decision.entries is not None
    [condition] = decision.entries[0].conditions or []  # the agent's Prepared is not ours
    assert (condition.reason, condition.last_transition_time) == ("DeviceNotFound", NOW)
    same_status = decide_claim(claim, [result()], lookup_of(published()), NOW)
    assert same_status.entries is not None
    [condition] = same_status.entries[0].conditions or []
    assert (condition.reason, condition.last_transition_time) == ("Allocated", EARLIER)


BINDING = {"bindingConditions": ["kubedra.io/attached"],
           "bindingFailureConditions": ["kubedra.io/attach-failed"]}
KEY = ("gpu.kubedra.io", "node-1", "gpu-0", None)


def conditions_of(decision: Any) -> list[tuple[str, str, str, str]]:
    assert decision.entries is not None
    return [(c.type, c.status, c.reason, c.message) for c in decision.entries[0].conditions]


def test_attached_device_gets_its_binding_conditions_next_to_ready() -> None:
    claim: dict[str, Any] = {"metadata": {"name": "c"}, "status": {}}
    decision = decide_claim(claim, [result(**BINDING)], lookup_of(published()), NOW,
                            {KEY: AttachResult("Attached", "on port 7")})
    assert conditions_of(decision) == [
        ("Ready", "True", "Allocated", "device gpu-0 of pool node-1 (DeviceInventory "
                                       "node-1-gpu) is allocated to request gpu"),
        ("kubedra.io/attached", "True", "Attached", "on port 7")]


def test_failed_attach_sets_the_failure_condition_and_later_writes_keep_it() -> None:
    claim: dict[str, Any] = {"metadata": {"name": "c"}, "status": {}}
    failed = decide_claim(claim, [result(**BINDING)], lookup_of(published()), NOW,
                          {KEY: AttachResult("Failed", "port down")})
    assert conditions_of(failed)[1:] == [
        ("kubedra.io/attach-failed", "True", "AttachFailed", "port down")]
    assert failed.entries is not None
    claim["status"]["devices"] = [e.to_api() for e in failed.entries]
    # the attach step is not asked again (it answered): nothing changes, nothing is written
    again = decide_claim(claim, [result(**BINDING)], lookup_of(published()), NOW, {})
    assert again.entries is None
    # a change of Ready keeps the failure condition
    sick = decide_claim(claim, [result(**BINDING)], lookup_of(published(health={
        "gpu-0": ("Unhealthy", "ECC errors")})), NOW, {})
    assert sorted(c[0] for c in conditions_of(sick)) == ["Ready", "kubedra.io/attach-failed"]


def test_pending_attach_writes_no_binding_condition() -> None:
    claim: dict[str, Any] = {"metadata": {"name": "c"}, "status": {}}
    decision = decide_claim(claim, [result(**BINDING)], lookup_of(published()), NOW,
                            {KEY: AttachResult("Pending", "waiting for the fabric")})
    assert [c[0] for c in conditions_of(decision)] == ["Ready"]
