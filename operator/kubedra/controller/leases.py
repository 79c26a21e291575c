"""Agent Leases: a namespaced cache of ``kubedra-agent-<node>`` Leases and their expiry.

The operator watches Leases only in its own namespace (a namespaced Role suffices), through
the operator's own list/watch loop (:class:`~kubedra.controller.listwatch.ListWatch`: a
streaming list or bounded pages, bookmarks, a relist on 410 Gone), each event decoded by the
standard library's ``json`` straight into an :class:`AgentLease` (at 5,000 nodes the agents
renew about 375 times a second). It keeps the expiry times in a heap, so that the operator's
tick looks only at the Leases that expired since it last asked, not at every node's.
"""

from __future__ import annotations

import asyncio
import datetime
import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes_asyncio.client import ApiClient

from kubedra import kube
from kubedra.api.inventory import AGENT_LEASE_PREFIX, agent_lease_name
from kubedra.api.time import parse_timestamp
from kubedra.controller.listwatch import JsonDecoder, ListWatch

LeaseState = Literal["live", "expired", "missing"]

LEASES_PATH = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


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


LEASE_DECODER = JsonDecoder(parse_lease)
"""Lease events and pages → :class:`AgentLease` s (other Leases of the namespace, the
operator's own election Lease among them, are left out)."""


class LeaseCache:
    """Agent Leases of one namespace by node name, kept current by :meth:`run`.

    Args:
        api: the API client.
        namespace: the operator's namespace, where the agents renew their Leases.
        on_change: called with the node name whenever that node's Lease is added, renewed or
            deleted.
    """

    def __init__(self, api: ApiClient, namespace: str, on_change: Callable[[str], None]) -> None:
        self.api = api
        self.namespace = namespace
        self.on_change = on_change
        self.leases: dict[str, AgentLease] = {}
        self.watch = ListWatch(api, LEASES_PATH.format(namespace=namespace), LEASE_DECODER,
                               self._changed)
        self._expiries: list[tuple[datetime.datetime, str]] = []
        """A heap of (expiry time, node): one entry per Lease version taken; entries of
        Leases renewed since are skipped when they come up (:meth:`expired`)."""

    @property
    def synced(self) -> asyncio.Event:
        """Set once the first list is in the cache."""
        return self.watch.synced

    def take(self, lease: AgentLease) -> None:
        """Make ``lease`` its node's Lease (from the watch, or read by :meth:`confirm`)."""
        self.leases[lease.node_name] = lease
        expires = lease.expires_at
        if expires is not None:
            heapq.heappush(self._expiries, (expires, lease.node_name))

    def state(self, node_name: str, now: datetime.datetime) -> LeaseState:
        """The Lease state of ``node_name``'s agent at ``now``."""
        lease = self.leases.get(node_name)
        return lease.state(now) if lease else "missing"

    def expired(self, now: datetime.datetime) -> list[str]:
        """Nodes whose agent Lease, as last taken, expired at or before ``now`` and since the
        last call: each expiry is reported once, and a Lease renewed in time never. Costs
        O(log n) per Lease version taken, not a scan of every node per tick."""
        due: list[str] = []
        while self._expiries and self._expiries[0][0] <= now:
            expires, node = heapq.heappop(self._expiries)
            lease = self.leases.get(node)
            if lease is not None and lease.expires_at == expires:
                due.append(node)
        return due

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
        self.take(lease)
        return lease.state(now)

    async def run(self) -> None:
        """List, then watch, forever (until cancelled); relists as
        :meth:`ListWatch.run <kubedra.controller.listwatch.ListWatch.run>` does."""
        await self.watch.run()

    def _changed(self, name: str, before: AgentLease | None, after: AgentLease | None) -> None:
        if before is not None and (after is None or after.node_name != before.node_name):
            self.leases.pop(before.node_name, None)
            self.on_change(before.node_name)
        if after is not None:
            self.take(after)
            self.on_change(after.node_name)
