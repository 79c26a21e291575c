"""The three Lease requests of the leader election (read, create, replace) over plain aiohttp,
for the elector process (:mod:`kubedra.controller.election`): without kubernetes-asyncio's
generated client, whose import alone is about 71 MiB of the process's memory, the elector
needs about a third of what it did (``bench/RESULTS.md``, the elector's memory).

Where the API server is and how to authenticate come from the parent process, which reads the
kubeconfig or the in-cluster service account with kubernetes-asyncio
(:func:`kubedra.kube.api_endpoint`) and hands an :class:`ApiEndpoint` (plain, picklable) to
the elector. Bodies are the API's JSON (``coordination.k8s.io/v1`` ``Lease``) as dicts.
"""

from __future__ import annotations

import json
import ssl
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

PRIORITY_LEVEL_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
"""The response header naming the API Priority and Fairness priority level that served a
request (``k8s.io/apiserver`` ``pkg/server/filters/priority-and-fairness.go``)."""


@dataclass(frozen=True)
class ApiEndpoint:
    """How to reach and authenticate to the API server: ``server`` (``https://host:port``),
    the certificate authority's PEM file, a client certificate and key (PEM files), and either
    ``authorization`` (the whole ``Authorization`` header value, ``Bearer ...``) or
    ``token_file`` (a service account token, read again for every request, as the kubelet
    rotates it)."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    authorization: str | None = None
    token_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of the requests (None for plain HTTP).

        Raises:
            OSError: a certificate or key file cannot be loaded (``ssl.SSLError`` is one).
        """
        if not self.server.startswith("https:"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def headers(self) -> dict[str, str]:
        """The request headers that authenticate (none without a token)."""
        if self.token_file:
            with open(self.token_file, encoding="utf-8") as token:
                return {"Authorization": f"Bearer {token.read().strip()}"}
        return {"Authorization": self.authorization} if self.authorization else {}


class LeaseApiError(Exception):
    """The API server answered a Lease request with an error: ``status`` (HTTP), and the
    message (the ``Status`` body's ``message``, else the body's first line)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class LeaseApi:
    """Lease requests on one endpoint, each within :attr:`timeout_s` (seconds); every
    request's round trip is appended to :attr:`calls` (``[("GET", seconds), ...]``) and the
    priority level of the last answer kept in :attr:`priority_level_uid`."""

    def __init__(self, endpoint: ApiEndpoint, timeout_s: float = 10.0) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.calls: list[tuple[str, float]] = []
        self.priority_level_uid = ""
        context = endpoint.ssl_context()
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context if context is not None else False))

    def _url(self, namespace: str, name: str = "") -> str:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        return self.endpoint.server.rstrip("/") + path + (f"/{name}" if name else "")

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease, or None if there is none (404).

        Raises:
            LeaseApiError: any other error answer.
            aiohttp.ClientError, TimeoutError: the API server was not reached in time.
        """
        try:
            return await self._request("GET", self._url(namespace, name))
        except LeaseApiError as err:
            if err.status == 404:
                return None
            raise

    async def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the Lease ``body``; returns it as stored (errors as :meth:`get`; 409 if it
        exists)."""
        return await self._request("POST", self._url(namespace), body)

    async def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Replace the Lease with ``body`` (its ``metadata.resourceVersion`` makes a Lease
        written by someone else since a 409); returns it as stored (errors as :meth:`get`)."""
        return await self._request("PUT", self._url(namespace, name), body)

    async def close(self) -> None:
        """Close the connections."""
        await self._session.close()

    async def _request(self, method: str, url: str, body: dict[str, Any] | None = None,
                       ) -> dict[str, Any]:
        started = time.monotonic()
        headers = {"Accept": "application/json", **self.endpoint.headers()}
        try:
            async with self._session.request(
                    method, url, json=body, headers=headers,
                    timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                    server_hostname=self.endpoint.tls_server_name) as response:
                text = await response.text()
                self.priority_level_uid = response.headers.get(PRIORITY_LEVEL_HEADER, "")
                if response.status >= 400:
                    raise LeaseApiError(response.status, _message(text, response.reason))
                answer: dict[str, Any] = json.loads(text)
                return answer
        finally:
            self.calls.append((method, time.monotonic() - started))


def _message(text: str, reason: str | None) -> str:
    """The ``message`` of a ``Status`` body, else the body's first line (API Priority and
    Fairness answers 429 with plain text), else the HTTP reason."""
    try:
        message = json.loads(text)["message"]
        if isinstance(message, str):
            return message
    except (ValueError, KeyError, TypeError):
        pass
    return (text.strip().splitlines() or [reason or ""])[0]


async def connect(endpoint: ApiEndpoint) -> LeaseApi:
    """A :class:`LeaseApi` on ``endpoint``, made in the running event loop (the elector's
    ``connect``; picklable as ``functools.partial(connect, endpoint)``).

    Raises:
        OSError: the endpoint's TLS files cannot be loaded.
    """
    return LeaseApi(endpoint)
