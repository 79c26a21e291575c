"""The operator reconciles a node's inventories when its agent Lease changes state, not on every
renewal (bench/scale.py: at 500 nodes every renewal re-reconciled the node's inventory, 15 % of a
core in a steady state with nothing to do)."""

import datetime
from types import SimpleNamespace

from kubedra.controller.leases import AgentLease, LeaseCache
from kubedra.controller.queue import WorkQueue
from kubedra.controller.runtime import check_lease

NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)


def state_with(leases: LeaseCache) -> SimpleNamespace:
    view = SimpleNamespace(inventories_on_node=lambda node: [f"{node}-gpu.kubedra.io"])
    return SimpleNamespace(leases=leases, view=view, lease_states={},
                           inventory_queue=WorkQueue[str]())


def renewed(at: datetime.datetime) -> AgentLease:
    return AgentLease(node_name="n1", renew_time=at, duration_s=40)


async def test_renewals_of_a_live_lease_queue_nothing() -> None:
    leases = LeaseCache(api=None, namespace="kubedra-system", on_change=lambda node: None)
    state = state_with(leases)
    leases.take(renewed(NOW))
    check_lease(state, "n1", NOW)  # first sight: live
    assert len(state.inventory_queue) == 1
    await state.inventory_queue.get()
    state.inventory_queue.done("n1-gpu.kubedra.io")
    for seconds in (13, 26, 39):
        leases.take(renewed(NOW + datetime.timedelta(seconds=seconds)))
        check_lease(state, "n1", NOW + datetime.timedelta(seconds=seconds))
    assert len(state.inventory_queue) == 0


async def test_expiry_and_return_queue_the_inventory() -> None:
    leases = LeaseCache(api=None, namespace="kubedra-system", on_change=lambda node: None)
    state = state_with(leases)
    leases.take(renewed(NOW))
    check_lease(state, "n1", NOW)
    await state.inventory_queue.get()
    state.inventory_queue.done("n1-gpu.kubedra.io")
    check_lease(state, "n1", NOW + datetime.timedelta(seconds=41))
    assert state.lease_states["n1-gpu.kubedra.io"] == "expired"
    assert len(state.inventory_queue) == 1
    await state.inventory_queue.get()
    state.inventory_queue.done("n1-gpu.kubedra.io")
    later = NOW + datetime.timedelta(seconds=50)
    leases.take(renewed(later))
    check_lease(state, "n1", later)
    assert state.lease_states["n1-gpu.kubedra.io"] == "live"
    assert len(state.inventory_queue) == 1


async def test_a_lease_the_watch_shows_expired_is_read_again(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A busy operator reads renewals late; before withdrawing a pool it reads the Lease."""
    fresh = {"metadata": {"name": "kubedra-agent-n1"},
             "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                      "renewTime": "2026-11-30T12:00:50.000000Z"}}
    reads = []

    async def read_lease(api: object, namespace: str, name: str) -> dict | None:  # type: ignore[type-arg]
        reads.append((namespace, name))
        return fresh if name == "kubedra-agent-n1" else None

    monkeypatch.setattr("kubedra.kube.read_lease", read_lease)
    leases = LeaseCache(api=None, namespace="kubedra-system", on_change=lambda node: None)
    leases.take(renewed(NOW))  # what the lagging watch showed
    later = NOW + datetime.timedelta(seconds=60)
    assert leases.state("n1", later) == "expired"
    assert await leases.confirm("n1", later) == "live"
    assert leases.state("n1", later) == "live"
    assert await leases.confirm("n2", later) == "missing"
    assert reads == [("kubedra-system", "kubedra-agent-n1"), ("kubedra-system", "kubedra-agent-n2")]
