"""The operator's leader election treats an unreadable Lease as a failed attempt (retried),
whatever the error's body: API Priority and Fairness answers 429 with plain text, which the
library's election parsed as JSON and raised out of the election, stopping the operator."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient, ApiException
from kubernetes_asyncio.leaderelection import electionconfig

from kubedra.controller.election import _Election, _LeaseLock

THROTTLED = "Too many requests, please try again later.\n"
"""kube-apiserver's body of an APF 429 (k8s.io/apiserver pkg/server/filters, tooManyRequests)."""


async def _attempt(status: int, reason: str, body: str) -> bool:
    async with ApiClient() as api:
        lock = _LeaseLock("kubedra-operator", "kubedra-system", "replica-a", api)

        async def refused(name: str, namespace: str) -> None:
            err = ApiException(status=status, reason=reason)
            err.body = body
            raise err
        lock.api_instance.read_namespaced_lease_with_http_info = refused

        async def nothing() -> None:
            return None
        election = _Election(electionconfig.Config(
            lock, lease_duration=15, renew_deadline=10, retry_period=2,
            onstarted_leading=nothing, onstopped_leading=nothing))
        ok: bool = await election.try_acquire_or_renew()
        return ok


@pytest.mark.parametrize(("status", "reason", "body"), [
    (429, "Too Many Requests", THROTTLED),
    (503, "Service Unavailable", "upstream connect error\n"),
    (500, "Internal Server Error",
     '{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}'),
])
async def test_an_unreadable_lease_is_a_failed_attempt(status: int, reason: str,
                                                       body: str) -> None:
    assert await _attempt(status, reason, body) is False
