"""Agent Leases: parsing and expiry."""

from __future__ import annotations

import datetime

from kubedra.controller.leases import AgentLease, parse_lease

RENEWED = datetime.datetime(2026, 11, 30, 12, 0, 0, 500000, tzinfo=datetime.UTC)


def lease(name: str = "kubedra-agent-node-1", **spec: object) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": spec}


def test_an_agent_lease_is_live_until_renew_time_plus_duration() -> None:
    parsed = parse_lease(lease(holderIdentity="node-1", leaseDurationSeconds=40,
                               renewTime="2026-11-30T12:00:00.500000Z"))
    assert parsed == AgentLease(node_name="node-1", renew_time=RENEWED, duration_s=40)
    assert parsed.state(RENEWED + datetime.timedelta(seconds=39.9)) == "live"
    assert parsed.state(RENEWED + datetime.timedelta(seconds=40)) == "expired"


def test_a_lease_never_renewed_is_expired_and_the_node_comes_from_the_name() -> None:
    parsed = parse_lease(lease(leaseDurationSeconds=40))
    assert parsed == AgentLease(node_name="node-1", renew_time=None, duration_s=40)
    assert parsed.state(RENEWED) == "expired"


def test_other_leases_are_not_agent_leases() -> None:
    assert parse_lease(lease("kube-scheduler", holderIdentity="x")) is None
