"""Operator leader election against the real API server: one leader at a time, hand-over on
release, fencing (a leader that cannot renew stops before its Lease could expire), and renewals
that a blocked reconcile loop does not delay (the election runs in a thread of its own)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.wait import eventually
from kubedra.controller.leadership import (
    LEASE_NAME,
    ElectionTiming,
    Leadership,
    LostLeadership,
)
from kubedra.kube import make_api_client

pytestmark = pytest.mark.cluster

FAST = ElectionTiming(lease_duration=4, renew_deadline=2.5, retry_period=1.0)


def _connect(control_plane: ControlPlane) -> Callable[[], object]:
    return functools.partial(make_api_client, control_plane.admin_kubeconfig)


def _election_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "leader-election"]


async def _holder(api: ApiClient, namespace: str) -> str:
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(LEASE_NAME, namespace)
    return str(lease.spec.holder_identity or "")


async def test_one_leads_and_the_other_takes_over_when_it_stops(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    a = Leadership(_connect(control_plane), namespace, "replica-a", FAST)
    b = Leadership(_connect(control_plane), namespace, "replica-b", FAST)
    led: list[str] = []

    def work(name: str) -> object:
        async def lead() -> None:
            led.append(name)
            await asyncio.Event().wait()
        return lead
    task_a = asyncio.create_task(a.run(work("a")))  # type: ignore[arg-type]
    await eventually(lambda: _holder(admin_api, namespace), timeout=20,
                     what="replica-a leading")
    task_b = asyncio.create_task(b.run(work("b")))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert (a.report(), led) == ({"role": "leader", "identity": "replica-a"}, ["a"])
    assert b.report()["role"] == "standby"

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
    task_b.cancel()
    await asyncio.gather(task_b, return_exceptions=True)
    assert _election_threads() == []


async def test_a_leader_that_cannot_renew_stops_before_the_lease_expires(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    leader = Leadership(_connect(control_plane), namespace, "replica-a", FAST)
    cancelled = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
    task = asyncio.create_task(leader.run(lead))
    await eventually(lambda: _holder(admin_api, namespace), timeout=20,
                     what="replica-a leading")
    # someone else holds the Lease now (as after a partition): every renewal of a fails
    leases = client.CoordinationV1Api(admin_api)
    lease = await leases.read_namespaced_lease(LEASE_NAME, namespace)
    lease.spec.holder_identity, lease.spec.lease_duration_seconds = "intruder", 3600
    await leases.replace_namespaced_lease(LEASE_NAME, namespace, lease)
    taken = time.monotonic()

    with pytest.raises(LostLeadership):
        await asyncio.wait_for(task, timeout=20)
    stopped = time.monotonic() - taken
    assert cancelled.is_set()
    assert leader.report()["role"] == "standby"
    # stopped within the renew deadline of its last renewal, before the lease duration
    assert stopped < FAST.lease_duration
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
    a = Leadership(_connect(control_plane), namespace, "replica-a", FAST)
    b = Leadership(_connect(control_plane), namespace, "replica-b", FAST)
    led: list[str] = []

    def work(name: str) -> Callable[[], object]:
        async def lead() -> None:
            led.append(name)
            await asyncio.Event().wait()
        return lead
    task_a = asyncio.create_task(a.run(work("a")))  # type: ignore[arg-type]
    await eventually(lambda: _holder(admin_api, namespace), timeout=20,
                     what="replica-a leading")
    task_b = asyncio.create_task(b.run(work("b")))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    lease = await client.CoordinationV1Api(admin_api).read_namespaced_lease(
        LEASE_NAME, namespace)
    renewed_before = lease.spec.renew_time

    block(blocked)  # the whole event loop: every coroutine of the reconcilers waits

    await asyncio.sleep(0)
    assert (task_a.done(), task_b.done()) == (False, False)
    assert (a.report()["role"], b.report()["role"], led) == ("leader", "standby", ["a"])
    lease = await client.CoordinationV1Api(admin_api).read_namespaced_lease(
        LEASE_NAME, namespace)
    assert lease.spec.holder_identity == "replica-a"
    assert lease.spec.renew_time > renewed_before  # renewed while the loop was blocked
    for task in (task_a, task_b):
        task.cancel()
    await asyncio.gather(task_a, task_b, return_exceptions=True)
    assert _election_threads() == []


async def test_a_leader_with_a_blocked_loop_is_fenced_from_the_election_thread(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    lost = threading.Event()
    leader = Leadership(_connect(control_plane), namespace, "replica-a", FAST)

    async def lead() -> None:
        await asyncio.Event().wait()
    task = asyncio.create_task(leader.run(lead, on_lost=lambda err: lost.set()))
    await eventually(lambda: _holder(admin_api, namespace), timeout=20,
                     what="replica-a leading")
    leases = client.CoordinationV1Api(admin_api)
    lease = await leases.read_namespaced_lease(LEASE_NAME, namespace)
    lease.spec.holder_identity, lease.spec.lease_duration_seconds = "intruder", 3600
    await leases.replace_namespaced_lease(LEASE_NAME, namespace, lease)
    taken = time.monotonic()

    # the event loop blocked until on_lost is called: only the election thread can call it
    assert lost.wait(timeout=4 * FAST.lease_duration)
    assert time.monotonic() - taken < FAST.lease_duration
    assert leader.report()["role"] == "standby"
    with pytest.raises(LostLeadership):
        await asyncio.wait_for(task, timeout=20)
    assert _election_threads() == []
