"""The executor's attach step (KEP-5007): one answer per allocation, even when the cached claim
does not show the conditions just written yet."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubedra.binding.attach import AttachRequest, AttachResult
from kubedra.controller.executor import _attach
from tests.support.scripted_attacher import ScriptedAttacher

RESULT = {"request": "nic", "driver": "fabric.kubedra.io", "pool": "fabric",
          "device": "nic-flaky", "bindingConditions": ["kubedra.io/attached"],
          "bindingFailureConditions": ["kubedra.io/attach-failed"]}
KEY = ("fabric.kubedra.io", "fabric", "nic-flaky", None)


class Counting(ScriptedAttacher):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def attach(self, request: AttachRequest) -> AttachResult:
        self.calls += 1
        return await super().attach(request)


def claim(allocated_at: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "nic", "uid": "u1"},
            "status": {"allocation": {"allocationTimestamp": allocated_at,
                                      "devices": {"results": [RESULT]}}}}


async def test_a_stale_claim_gets_the_remembered_answer_and_a_new_allocation_a_new_one() -> None:
    attacher = Counting()
    state: Any = SimpleNamespace(attacher=attacher, attach_outcomes={})
    first = await _attach(state, claim("2026-11-30T12:00:00Z"), [RESULT])
    assert first[KEY].state == "Failed"
    # the watch has not delivered the failure condition yet: same allocation, same answer
    again = await _attach(state, claim("2026-11-30T12:00:00Z"), [RESULT])
    assert (again[KEY], attacher.calls) == (first[KEY], 1)
    # kube-scheduler deallocated and allocated again: the attach step runs again
    second = await _attach(state, claim("2026-11-30T12:00:07Z"), [RESULT])
    assert (second[KEY].state, attacher.calls) == ("Attached", 2)
