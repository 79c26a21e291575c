"""Agent Leases: a namespaced cache of ``kubedra-agent-<node>`` Leases and their expiry.

The operator watches Leases only in its own namespace (a namespaced Role suffices), with a
plain list-then-watch loop that relists on any error, including 410 Gone.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from kubedra import kube
from kubedra.api.inventory import AGENT_LEASE_PREFIX, agent_lease_name
from kubedra.api.time import parse_timestamp
from kubedra.logging import get_logger

log = get_logger(__name__)

LeaseState = Literal["live", "expired", "missing"]


@dataclass(frozen=True)
class AgentLease:
    """What the operator needs from an agent Lease: when it was renewed and for how long."""

    node_name: str
    renew_time: datetime.datetime | None
    duration_s: int

    @property
    def expires_at(self) -> datetime.datetime | None:
        """``renewTime + leaseDurationSeconds`` (UTC), or None if never renewed."""
        if self.renew_time is None:
            return None
        return self.renew_time + datetime.timedelta(seconds=self.duration_s)

    def state(self, now: datetime.datetime) -> LeaseState:
        """``live`` until ``expires_at``, then ``expired``."""
        expires = self.expires_at
        return "live" if expires is not None and now < expires else "expired"


def parse_lease(obj: dict[str, Any]) -> AgentLease | None:
    """An :class:`AgentLease` from a Lease object, or None if it is not an agent Lease."""
    name: str = obj["metadata"]["name"]
    if not name.startswith(AGENT_LEASE_PREFIX):
        return None
    spec = obj.get("spec") or {}
    renew = spec.get("renewTime")
    renew_time = parse_timestamp(renew) if renew else None
    return AgentLease(node_name=spec.get("holderIdentity") or name[len(AGENT_LEASE_PREFIX):],
                      renew_time=renew_time,
                      duration_s=int(spec.get("leaseDurationSeconds") or 0))


class LeaseCache:
    """Agent Leases of one namespace by node name, kept current by :meth:`run`.

    Args:
        on_change: called with the node name whenever that node's Lease is added, renewed or
            deleted.
    """

    def __init__(self, api: ApiClient, namespace: str, on_change: Callable[[str], None]) -> None:
        self.api = api
        self.namespace = namespace
        self.on_change = on_change
        self.leases: dict[str, AgentLease] = {}
        self.synced = asyncio.Event()

    def state(self, node_name: str, now: datetime.datetime) -> LeaseState:
        """The Lease state of ``node_name``'s agent at ``now``."""
        lease = self.leases.get(node_name)
        return lease.state(now) if lease else "missing"

    async def confirm(self, node_name: str, now: datetime.datetime) -> LeaseState:
        """The state of ``node_name``'s agent Lease read from the API server now (the cache
        takes it): withdrawing a pool must not rest on a watch that lags behind, as it does in
        an operator busy with thousands of pools (bench/scale.py).

        Raises:
            ApiException: the Lease could not be read.
        """
        raw = await kube.read_lease(self.api, self.namespace, agent_lease_name(node_name))
        lease = parse_lease(raw) if raw else None
        if lease is None:
            self.leases.pop(node_name, None)
            return "missing"
        self.leases[node_name] = lease
        return lease.state(now)

    async def run(self) -> None:
        """List, then watch, forever; relist after errors with a short back-off."""
        coordination = client.CoordinationV1Api(self.api)
        while True:
            try:
                listed = await coordination.list_namespaced_lease(self.namespace)
                fresh = {}
                for item in listed.items:
                    lease = parse_lease(self.api.sanitize_for_serialization(item))
                    if lease:
                        fresh[lease.node_name] = lease
                for node in set(fresh) | set(self.leases):
                    if fresh.get(node) != self.leases.get(node):
                        self.on_change(node)
                self.leases = fresh
                self.synced.set()
                stream = watch.Watch(return_type="object")
                async for event in stream.stream(
                        coordination.list_namespaced_lease, self.namespace,
                        resource_version=listed.metadata.resource_version,
                        timeout_seconds=300):
                    lease = parse_lease(event["raw_object"])
                    if lease is None:
                        continue
                    if event["type"] == "DELETED":
                        self.leases.pop(lease.node_name, None)
                    else:
                        self.leases[lease.node_name] = lease
                    self.on_change(lease.node_name)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("lease watch failed; relisting", error=str(err))
                await asyncio.sleep(1.0)
