"""The operator's leader election treats an unreadable Lease as a failed attempt (retried),
whatever the error's body: API Priority and Fairness answers 429 with plain text, which
kubernetes-asyncio's election parsed as JSON and raised out of the election, stopping the
operator; the message the elector logs is the body's first line or the Status's message."""

from __future__ import annotations

import pytest

from kubedra.controller.election import ElectionTiming, _Election
from kubedra.lease_api import ApiEndpoint, LeaseApi, LeaseApiError, _message

THROTTLED = "Too many requests, please try again later.\n"
"""kube-apiserver's body of an APF 429 (k8s.io/apiserver pkg/server/filters, tooManyRequests)."""
STATUS_500 = ('{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd down",'
              '"code":500}')


async def _attempt(status: int, body: str) -> bool:
    api = LeaseApi(ApiEndpoint(server="https://127.0.0.1:1"))
    try:
        async def refused(method: str, url: str, body_: object = None) -> dict[str, object]:
            raise LeaseApiError(status, _message(body, None))
        api._request = refused  # type: ignore[method-assign]
        election = _Election(api, "kubedra-system", "replica-a", ElectionTiming())
        ok: bool = await election.try_acquire_or_renew()
        return ok
    finally:
        await api.close()


@pytest.mark.parametrize(("status", "body"), [
    (429, THROTTLED),
    (503, "upstream connect error\n"),
    (500, STATUS_500),
])
async def test_an_unreadable_lease_is_a_failed_attempt(status: int, body: str) -> None:
    assert await _attempt(status, body) is False


@pytest.mark.parametrize(("body", "message"), [
    (THROTTLED, "Too many requests, please try again later."),
    (STATUS_500, "etcd down"),
    ("", "Bad Gateway"),
])
def test_the_error_message_is_the_status_message_or_the_first_line(body: str,
                                                                   message: str) -> None:
    assert _message(body, "Bad Gateway") == message
