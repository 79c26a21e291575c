"""bench.scale's split of a claim's latency at the API server's audit timestamps: which audit
events are kube-scheduler's allocation and which the operator's Ready, and the percentiles
(nearest rank) the claims phase reports."""

from __future__ import annotations

from typing import Any

from bench.scale import OPERATOR_USER, SCHEDULER_USER, between, claim_writes, percentiles


def event(user: str, name: str, received: str, done: str, *, verb: str = "update",
          code: int = 200, namespace: str = "scale-claims", subresource: str = "status",
          stage: str = "ResponseComplete") -> dict[str, Any]:
    """An audit event (``audit.k8s.io/v1``, level Metadata) of a claim status write."""
    return {"kind": "Event", "level": "Metadata", "stage": stage, "verb": verb,
            "user": {"username": user},
            "objectRef": {"resource": "resourceclaims", "namespace": namespace, "name": name,
                          "apiGroup": "resource.k8s.io", "apiVersion": "v1",
                          "subresource": subresource},
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": f"2026-12-03T18:00:{received}Z",
            "stageTimestamp": f"2026-12-03T18:00:{done}Z"}


def test_allocation_and_ready_are_the_first_successful_writes_of_each() -> None:
    events = [
        # kube-scheduler's allocation of claim-a, refused once (a conflict), then written
        event(SCHEDULER_USER, "claim-a", "01.000000", "01.010000", code=409),
        event(SCHEDULER_USER, "claim-a", "01.100000", "01.120000"),
        # another namespace's claim of the same name, and a claim's spec (no subresource)
        event(SCHEDULER_USER, "claim-b", "01.000000", "01.050000", namespace="elsewhere"),
        event(OPERATOR_USER, "claim-b", "01.000000", "01.050000", subresource=""),
        event(OPERATOR_USER, "claim-a", "01.300000", "01.345000", verb="patch"),
        # a later write of the operator's (a health change) is not the Ready
        event(OPERATOR_USER, "claim-a", "05.000000", "05.010000", verb="patch"),
        event(SCHEDULER_USER, "claim-b", "02.000000", "02.250500"),
        event(OPERATOR_USER, "claim-b", "02.900000", "02.999999", verb="patch",
              stage="ResponseStarted"),
    ]
    found = claim_writes(events, "scale-claims")
    base = found.allocated["claim-a"] - 1.12
    assert {k: round(v - base, 6) for k, v in found.allocated.items()} == {
        "claim-a": 1.12, "claim-b": 2.2505}
    assert {k: round(v - base, 6) for k, v in found.sent.items()} == {"claim-a": 1.3}
    assert {k: round(v - base, 6) for k, v in found.ready.items()} == {"claim-a": 1.345}
    assert [round(s, 6) for s in between(found.allocated, found.ready)] == [0.225]


def test_percentiles_by_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 401)]  # 1 .. 400 s, shuffled order does not matter
    assert percentiles(samples[::-1]) == {"n": 400, "p50": 200.5, "p95": 380.0, "p99": 396.0,
                                          "max": 400.0}
    assert percentiles([0.25, 2.0, 1.0]) == {"n": 3, "p50": 1.0, "p95": 2.0, "p99": 2.0,
                                             "max": 2.0}
    assert percentiles([]) == {"n": 0}
