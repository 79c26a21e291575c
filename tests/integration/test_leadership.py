"""Operator leader election against the real API server: one leader at a time, hand-over on
release, fencing (a leader that cannot renew stops before its Lease could expire, and its
writes are refused), renewals that a blocked reconcile loop does not delay (the election runs
in a process of its own), and client-go's one-request renewal."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.wait import eventually
from kubedra import lease_api
from kubedra.controller.election import _Election
from kubedra.controller.leadership import (
    LEASE_NAME,
    ElectionTiming,
    Leadership,
    LostLeadership,
)
from kubedra.kube import WriteFenced, api_endpoint, fence_writes, make_api_client

pytestmark = pytest.mark.cluster

FAST = ElectionTiming(lease_duration=4, renew_deadline=2.5, retry_period=1.0)


async def _connect(control_plane: ControlPlane) -> Callable[[], Awaitable[lease_api.LeaseApi]]:
    return functools.partial(lease_api.connect,
                             await api_endpoint(control_plane.admin_kubeconfig))


def _election_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "leader-election"]


async def _holder(api: ApiClient, namespace: str) -> str:
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(LEASE_NAME, namespace)
    return str(lease.spec.holder_identity or "")


@dataclass
class _Replicas:
    """Replica a leading, b started after it (``led``: the replicas whose work started)."""

    a: Leadership
    b: Leadership
    task_a: asyncio.Task[None]
    task_b: asyncio.Task[None]
    led: list[str]

    async def stop(self) -> None:
        for task in (self.task_a, self.task_b):
            task.cancel()
        await asyncio.gather(self.task_a, self.task_b, return_exceptions=True)


async def _a_leads_then_b_starts(control_plane: ControlPlane, namespace: str) -> _Replicas:
    connect = await _connect(control_plane)
    a, b = (Leadership(connect, namespace, f"replica-{name}", FAST) for name in "ab")
    led: list[str] = []

    def work(name: str) -> Callable[[], Awaitable[None]]:
        async def lead() -> None:
            led.append(name)
            await asyncio.Event().wait()
        return lead
    task_a = asyncio.create_task(a.run(work("a")))

    async def a_leads() -> bool:
        return led == ["a"]
    await eventually(a_leads, timeout=20, what="replica-a leading")
    return _Replicas(a, b, task_a, asyncio.create_task(b.run(work("b"))), led)


async def test_one_leads_and_the_other_takes_over_when_it_stops(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    replicas = await _a_leads_then_b_starts(control_plane, namespace)
    a, b, task_a, led = replicas.a, replicas.b, replicas.task_a, replicas.led
    assert a.report() == {"role": "leader", "identity": "replica-a"}
    assert b.report()["role"] == "standby"
    assert await _holder(admin_api, namespace) == "replica-a"

    stopped = time.monotonic()
    task_a.cancel()  # a graceful stop: releases the Lease
    await asyncio.gather(task_a, return_exceptions=True)
    assert await _holder(admin_api, namespace) in {"", "replica-b"}

    async def b_leads() -> bool:
        return led == ["a", "b"]
    await eventually(b_leads, timeout=20, what="replica-b leading")
    # released: no wait for the Lease to expire, one retry period at most (and the call)
    assert time.monotonic() - stopped < FAST.lease_duration
    assert await _holder(admin_api, namespace) == "replica-b"
    await replicas.stop()
    assert _election_threads() == []


@pytest.mark.parametrize("blocked", [False, True], ids=["loop-free", "loop-blocked"])
async def test_a_leader_that_cannot_renew_stops_before_the_lease_expires(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str,
        blocked: bool) -> None:
    leader = Leadership(await _connect(control_plane), namespace, "replica-a", FAST)
    cancelled = asyncio.Event()
    lost = threading.Event()
    lost_at: list[float] = []

    def on_lost(err: LostLeadership) -> None:  # in the election thread
        lost_at.append(time.monotonic())
        lost.set()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
    task = asyncio.create_task(leader.run(lead, on_lost=on_lost))
    await eventually(lambda: _holder(admin_api, namespace), timeout=20,
                     what="replica-a leading")
    # someone else holds the Lease now (as after a partition): every renewal of a fails
    leases = client.CoordinationV1Api(admin_api)
    lease = await leases.read_namespaced_lease(LEASE_NAME, namespace)
    lease.spec.holder_identity, lease.spec.lease_duration_seconds = "intruder", 3600
    await leases.replace_namespaced_lease(LEASE_NAME, namespace, lease)
    taken = time.monotonic()
    if blocked:  # the event loop waits for on_lost: only the election thread can call it
        assert lost.wait(timeout=4 * FAST.lease_duration)

    with pytest.raises(LostLeadership):
        await asyncio.wait_for(task, timeout=20)
    assert cancelled.is_set()
    assert leader.report()["role"] == "standby"
    # stopped within the renew deadline of its last renewal, before the lease duration
    assert len(lost_at) == 1
    assert lost_at[0] - taken < FAST.lease_duration
    assert await _holder(admin_api, namespace) == "intruder"
    assert _election_threads() == []


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.parametrize("block", [_sleep, _spin], ids=["sleeping", "cpu-bound"])
async def test_a_blocked_reconcile_loop_does_not_lose_the_lease(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str,
        block: Callable[[float], None]) -> None:
    # longer than the renew deadline and the lease: with the election in the reconcilers'
    # loop, the leader fenced itself once the loop ran again
    blocked = 2 * FAST.renew_deadline
    assert blocked > FAST.lease_duration
    replicas = await _a_leads_then_b_starts(control_plane, namespace)
    lease = await client.CoordinationV1Api(admin_api).read_namespaced_lease(
        LEASE_NAME, namespace)
    renewed_before = lease.spec.renew_time

    block(blocked)  # the whole event loop: every coroutine of the reconcilers waits

    await asyncio.sleep(0)
    assert (replicas.task_a.done(), replicas.task_b.done()) == (False, False)
    assert (replicas.a.report()["role"], replicas.b.report()["role"], replicas.led) == (
        "leader", "standby", ["a"])
    lease = await client.CoordinationV1Api(admin_api).read_namespaced_lease(
        LEASE_NAME, namespace)
    assert lease.spec.holder_identity == "replica-a"
    assert lease.spec.renew_time > renewed_before  # renewed while the loop was blocked
    await replicas.stop()
    assert _election_threads() == []


async def test_the_leader_renews_with_one_request_and_reads_again_after_a_conflict(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    # client-go's fast path: the Lease the leader last wrote is updated without a GET
    lock = await (await _connect(control_plane))()
    try:
        await _renews_with_one_request(lock, admin_api, namespace)
    finally:
        await lock.close()


async def _renews_with_one_request(lock: lease_api.LeaseApi, admin_api: ApiClient,
                                   namespace: str) -> None:
    election = _Election(lock, namespace, "replica-a", FAST)

    def verbs() -> list[str]:
        return [verb for verb, _seconds in lock.calls]
    assert await election.try_acquire_or_renew() is True
    assert verbs() == ["GET", "POST"]  # not found: created
    assert await election.try_acquire_or_renew() is True
    assert verbs() == ["PUT"]
    first = await _holder_and_times(admin_api, namespace)
    assert await election.try_acquire_or_renew() is True
    assert verbs() == ["PUT"]
    second = await _holder_and_times(admin_api, namespace)
    assert second[0] == first[0] == "replica-a"
    assert second[1] == first[1]  # acquireTime kept
    assert second[2] > first[2]  # renewTime moved
    # someone else wrote the Lease: the optimistic update conflicts (409), the full path
    # reads it, sees another holder within its duration, and does not take it
    leases = client.CoordinationV1Api(admin_api)
    lease = await leases.read_namespaced_lease(LEASE_NAME, namespace)
    lease.spec.holder_identity, lease.spec.lease_duration_seconds = "intruder", 3600
    await leases.replace_namespaced_lease(LEASE_NAME, namespace, lease)
    assert await election.try_acquire_or_renew() is False
    assert verbs() == ["PUT", "GET"]
    assert (await _holder_and_times(admin_api, namespace))[0] == "intruder"
    # the intruder's Lease runs out (as observed): taken over, one more holder transition
    lease = await leases.read_namespaced_lease(LEASE_NAME, namespace)
    lease.spec.lease_duration_seconds = 1
    await leases.replace_namespaced_lease(LEASE_NAME, namespace, lease)

    async def taken() -> bool:
        return await election.try_acquire_or_renew()
    await eventually(taken, timeout=10, interval=0.5, what="the expired Lease taken over")
    lease = await leases.read_namespaced_lease(LEASE_NAME, namespace)
    assert (lease.spec.holder_identity, lease.spec.lease_transitions,
            lease.spec.lease_duration_seconds) == ("replica-a", 1, FAST.lease_duration)


async def _holder_and_times(api: ApiClient, namespace: str) -> tuple[str, object, object]:
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(LEASE_NAME, namespace)
    return str(lease.spec.holder_identity), lease.spec.acquire_time, lease.spec.renew_time


async def test_writes_are_fenced_unless_the_lease_was_renewed_within_the_deadline(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    leader = Leadership(await _connect(control_plane), namespace, "replica-a", FAST)
    api = await make_api_client(control_plane.admin_kubeconfig)
    fence_writes(api, leader.may_write)
    lease = {"metadata": {"name": "fenced-write"}, "spec": {"holderIdentity": "x"}}
    async with api:
        leases = client.CoordinationV1Api(api)
        with pytest.raises(WriteFenced):  # not leading
            await leases.create_namespaced_lease(namespace, lease)
        leading = asyncio.Event()

        async def lead() -> None:
            leading.set()
            await asyncio.Event().wait()
        task = asyncio.create_task(leader.run(lead))
        await asyncio.wait_for(leading.wait(), timeout=20)
        assert leader.may_write()
        await leases.create_namespaced_lease(namespace, lease)  # leading: written
        await leases.read_namespaced_lease("fenced-write", namespace)  # reads never fenced
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert not leader.may_write()
        with pytest.raises(WriteFenced):  # stopped: the Lease released
            await leases.delete_namespaced_lease("fenced-write", namespace)
    assert _election_threads() == []
