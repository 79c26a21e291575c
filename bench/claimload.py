"""bench/claimload: ResourceClaims and their pods created at a steady rate (the scale bench's
claims phase).

Each claim and its pod are two POSTs of bodies serialized before the clock starts, sent at
once (the pod may name a claim that does not exist yet: kube-scheduler waits for it) on the
connection pool of one ``ApiClient`` (its aiohttp session: kubernetes-asyncio's request
would serialize the bodies again), with up to :data:`IN_FLIGHT` claims in flight. Built this
way because the previous creator (kubernetes-asyncio's typed calls, the pod after its claim, 16
claims in flight) reached 16.4 claims a second on the 2-core bench machine, a third of the
issue's 50/s (``bench/RESULTS.md``, claims at 1,000 nodes).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient

from e2e.harness.controlplane import KWOK_NODE_LABEL

IN_FLIGHT = 200
"""Claims whose two POSTs may be unanswered at once (the API server's default
``--max-mutating-requests-inflight`` is 200; the pool opens up to 100 connections)."""
DEVICE_CLASS = "gpu.kubedra.io"
Json = dict[str, Any]


def claim_body(name: str) -> Json:
    """A ResourceClaim for one device of class ``gpu.kubedra.io``."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]}}}


def pod_with_claim(claim: str) -> Json:
    """A pod on a kwok node using ResourceClaim ``claim`` (the pod has the claim's name)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": claim},
            "spec": {"nodeSelector": {KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1]},
                     "tolerations": [{"operator": "Exists"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


@dataclass
class Created:
    """What :func:`create_claims` did: seconds from the first request sent to the last answer,
    the claims per second that makes, the highest lag of a claim's send behind its schedule
    (seconds: how far the creator itself fell behind the rate), and when each claim and its
    pod both existed (``time.time()`` at the later of the two answers, by claim name: from
    then on kube-scheduler can allocate the claim)."""

    seconds: float
    per_s: float
    max_lag_s: float
    created: dict[str, float]


async def create_claims(api: ApiClient, namespace: str, names: list[str], rate: float) -> Created:
    """Create claim ``name`` and pod ``name`` for each of ``names``, ``rate`` claims a second.

    Raises:
        RuntimeError: the API server refused a create (its status and answer in the message).
    """
    host = api.configuration.host
    paths = (f"{host}/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims",
             f"{host}/api/v1/namespaces/{namespace}/pods")
    bodies = [(json.dumps(claim_body(n)).encode(), json.dumps(pod_with_claim(n)).encode())
              for n in names]
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    gate = asyncio.Semaphore(IN_FLIGHT)

    session = api.rest_client.pool_manager  # the aiohttp session, TLS set up from the kubeconfig

    async def post(url: str, body: bytes) -> None:
        async with session.post(url, data=body, headers=headers) as response:
            answer = await response.read()
            if response.status != 201:
                raise RuntimeError(f"POST {url}: {response.status} {answer[:300]!r}")

    created: dict[str, float] = {}

    async def one(name: str, claim: bytes, pod: bytes) -> None:
        try:
            await asyncio.gather(post(paths[0], claim), post(paths[1], pod))
            created[name] = time.time()
        finally:
            gate.release()

    start, lag, tasks = time.monotonic(), 0.0, []
    for i, (name, (claim, pod)) in enumerate(zip(names, bodies, strict=True)):
        due = start + i / rate
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        await gate.acquire()
        lag = max(lag, time.monotonic() - due)
        tasks.append(asyncio.create_task(one(name, claim, pod)))
    await asyncio.gather(*tasks)
    seconds = time.monotonic() - start
    return Created(seconds=round(seconds, 2), per_s=round(len(names) / seconds, 1),
                   max_lag_s=round(lag, 3), created=created)
