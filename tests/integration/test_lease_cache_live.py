"""The agent Lease cache (:class:`kubedra.controller.leases.LeaseCache`) against the real API
server: the agents' Leases listed and watched through the operator's own list/watch loop,
other Leases left out, renewals and deletes reported, and each expiry reported once by
:meth:`LeaseCache.expired` (the operator's tick looks at nothing else)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.wait import eventually
from kubedra.controller.leases import AgentLease, LeaseCache

pytestmark = pytest.mark.cluster


@pytest.fixture
async def namespace(admin_api: ApiClient) -> AsyncIterator[str]:
    """A namespace of the test's own, deleted after it."""
    name = f"leases-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(admin_api)
    await core.create_namespace({"metadata": {"name": name}})
    yield name
    await core.delete_namespace(name)


def _renewed(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _put_lease(api: ApiClient, namespace: str, name: str, holder: str,
                     renewed: datetime.datetime, duration_s: int) -> None:
    coordination = client.CoordinationV1Api(api)
    body = {"metadata": {"name": name}, "spec": {
        "holderIdentity": holder, "leaseDurationSeconds": duration_s,
        "renewTime": _renewed(renewed)}}
    try:
        current = await coordination.read_namespaced_lease(name, namespace)
    except client.ApiException as err:
        if err.status != 404:
            raise
        await coordination.create_namespaced_lease(namespace, body)
        return
    body["metadata"]["resourceVersion"] = current.metadata.resource_version
    await coordination.replace_namespaced_lease(name, namespace, body)


async def test_agent_leases_are_cached_renewed_deleted_and_expire_once(
        admin_api: ApiClient, namespace: str) -> None:
    start = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    await _put_lease(admin_api, namespace, "kubedra-agent-n1", "n1", start, 40)
    await _put_lease(admin_api, namespace, "kubedra-operator", "operator-0", start, 15)
    changed: list[str] = []
    cache = LeaseCache(admin_api, namespace, changed.append)
    task = asyncio.create_task(cache.run())
    try:
        await asyncio.wait_for(cache.synced.wait(), timeout=30)
        assert cache.leases == {"n1": AgentLease("n1", start, 40)}
        assert changed == ["n1"]
        assert cache.state("n1", start + datetime.timedelta(seconds=39)) == "live"
        assert cache.state("n2", start) == "missing"

        renewed = start + datetime.timedelta(seconds=10)
        await _put_lease(admin_api, namespace, "kubedra-agent-n1", "n1", renewed, 40)
        await _put_lease(admin_api, namespace, "kubedra-operator", "operator-0", renewed, 15)
        await _put_lease(admin_api, namespace, "kubedra-agent-n2", "n2", start, 20)

        async def seen() -> bool:
            return cache.leases == {"n1": AgentLease("n1", renewed, 40),
                                    "n2": AgentLease("n2", start, 20)}
        await eventually(seen, timeout=30, what="the renewal and the new Lease cached")
        assert changed == ["n1", "n1", "n2"]

        # n1's first version would have expired at start + 40 s, but it was renewed in time
        assert cache.expired(start + datetime.timedelta(seconds=45)) == ["n2"]
        assert cache.expired(start + datetime.timedelta(seconds=49)) == []  # reported once
        assert cache.expired(start + datetime.timedelta(seconds=50)) == ["n1"]

        await client.CoordinationV1Api(admin_api).delete_namespaced_lease(
            "kubedra-agent-n2", namespace)

        async def deleted() -> bool:
            return "n2" not in cache.leases
        await eventually(deleted, timeout=30, what="the deleted Lease dropped")
        assert changed == ["n1", "n1", "n2", "n2"]
        assert cache.state("n2", start) == "missing"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
