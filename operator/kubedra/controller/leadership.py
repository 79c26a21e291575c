"""Leader election for the operator: one replica reconciles, the others wait.

The operator's replicas compete for the ``coordination.k8s.io`` Lease ``kubedra-operator`` in
the operator's namespace through ``kubernetes_asyncio.leaderelection`` (the client-go
algorithm: a candidate takes the Lease when its holder has not renewed it for
``leaseDurationSeconds`` as observed by the candidate). Only the holder runs the reconcilers
(:func:`run_when_leading` starts the ``lead`` coroutine); a standby does nothing but retry every
``retry_period`` seconds.

Fencing: the library cancels the leader's work only when a renewal loop gives up, and an API
call that hangs would delay that. :class:`Leadership` adds a watchdog: when the last successful
renewal *started* ``renew_deadline`` seconds ago, the leader stops at once, ``lease_duration -
renew_deadline`` seconds before any other replica could consider the Lease expired (another
replica starts its ``lease_duration`` countdown no earlier than it reads the renewal, which is
later than the renewal request was sent). The operator process then exits (client-go's
controllers do the same), and the kubelet restarts it as a standby.

Hand-over: a leader that stops on purpose (SIGTERM during a rolling update or a drain) releases
the Lease (empty holder, as client-go's ``ReleaseOnCancel``), so a standby takes it at its next
retry instead of waiting for the Lease to expire.

Defaults are client-go's (k8s.io/client-go/tools/leaderelection, as kube-controller-manager
uses them): lease 15 s, renew deadline 10 s, retry 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from kubedra import kube
from kubedra.logging import get_logger

log = get_logger(__name__)

LEASE_NAME = "kubedra-operator"
"""The operator's leader-election Lease (in the operator's namespace)."""


@dataclass(frozen=True)
class ElectionTiming:
    """Leader-election durations in seconds (client-go's defaults). The Lease stores whole
    seconds (``leaseDurationSeconds``), so ``lease_duration`` is an int."""

    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LostLeadership(RuntimeError):
    """The leader could not renew its Lease within the renew deadline."""


class LeaseUnreadable(Exception):
    """Reading the Lease failed with an API error other than 404 (the message says which)."""


class _LeaseLock(LeaseLock):  # type: ignore[misc]
    """The library's Lease lock, except that an API error reading the Lease other than 404
    raises :class:`LeaseUnreadable`. The library's election decides "not found" by parsing
    the error's body as JSON, and a body that is not JSON — API Priority and Fairness answers
    429 with plain text — raised out of the election and stopped the operator (found by the
    throttling fault of e2e/test_faults.py)."""

    async def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        found, record = await super().get(name, namespace)
        if isinstance(record, ApiException) and record.status != 404:
            raise LeaseUnreadable(kube.api_error_message(record))
        return found, record


class _Election(leaderelection.LeaderElection):  # type: ignore[misc]
    """The library's election, recording when the last successful renewal was sent; a Lease
    that cannot be reached or read is a failed attempt (retried), never an exception."""

    def __init__(self, config: electionconfig.Config) -> None:
        super().__init__(config)
        self.renewed_at: float | None = None
        """``time.monotonic()`` when the last successful create/update of the Lease was sent."""

    async def try_acquire_or_renew(self) -> bool:
        started = time.monotonic()
        try:
            ok: bool = await super().try_acquire_or_renew()
        except (TimeoutError, OSError, aiohttp.ClientError) as err:
            log.warning("lease not reachable", lease=LEASE_NAME, error=repr(err))
            return False
        except LeaseUnreadable as err:
            log.warning("lease not readable", lease=LEASE_NAME, error=str(err))
            return False
        if ok:
            self.renewed_at = started
        return ok


class Leadership:
    """Whether this replica leads, for health reports, and the running election.

    Args:
        api: an API client with ``get``/``create``/``update`` on the Lease.
        namespace: the Lease's namespace.
        identity: this process's name in the Lease, unique per process (the operator uses
            ``<pod name>_<uuid>``: a container restarted in place is another candidate).
        timing: the election's durations.
    """

    def __init__(self, api: Any, namespace: str, identity: str,
                 timing: ElectionTiming | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.identity = identity
        self.timing = timing or ElectionTiming()
        self.leading = False

    def report(self) -> dict[str, Any]:
        """What ``/healthz`` shows: ``{"role": "leader"|"standby", "identity": ...}``."""
        return {"role": "leader" if self.leading else "standby", "identity": self.identity}

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Wait for the Lease, then run ``lead()`` while holding it; release the Lease when
        ``lead`` returns or this task is cancelled.

        Raises:
            LostLeadership: the Lease could not be renewed in time; ``lead`` was cancelled
                first (the caller should exit the process).
            Exception: whatever ``lead`` raised (after the Lease was released).
        """
        timing = self.timing
        outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        lead_task: list[asyncio.Task[Any]] = []

        async def started() -> None:
            # the library runs this as a task of its own and cancels it only when a renewal
            # loop gives up: run() cancels it too, whatever ends the election
            lead_task.append(asyncio.current_task())  # type: ignore[arg-type]
            self.leading = True
            log.info("leading", lease=LEASE_NAME, identity=self.identity)
            try:
                await lead()
            except asyncio.CancelledError:
                raise
            except BaseException as err:  # handed to run()'s caller
                if not outcome.done():
                    outcome.set_exception(err)
            else:
                if not outcome.done():
                    outcome.set_result(None)

        async def stopped() -> None:
            self.leading = False
            if not outcome.done():
                outcome.set_exception(LostLeadership(
                    f"Lease {self.namespace}/{LEASE_NAME} not renewed within "
                    f"{timing.renew_deadline:g} s"))

        lock = _LeaseLock(LEASE_NAME, self.namespace, self.identity, self.api)
        election = _Election(electionconfig.Config(
            lock, lease_duration=timing.lease_duration, renew_deadline=timing.renew_deadline,
            retry_period=timing.retry_period, onstarted_leading=started,
            onstopped_leading=stopped))
        tasks = [asyncio.create_task(election.run(), name="leader-election"),
                 asyncio.create_task(self._fence(election, outcome), name="leader-fence")]

        def election_ended(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() and not outcome.done():
                outcome.set_exception(task.exception())  # type: ignore[arg-type]
        tasks[0].add_done_callback(election_ended)
        try:
            await outcome
        except LostLeadership:
            # fenced: stop the work now, without waiting for it to wind down
            self.leading = False
            for task in [*tasks, *lead_task]:
                task.cancel()
            raise
        except BaseException:
            await self._stop(tasks + lead_task)
            raise
        await self._stop(tasks + lead_task)

    async def _stop(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Cancel the election and the work, then release the Lease if this replica held it."""
        held, self.leading = self.leading, False
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if held:
            await self._release()

    async def _fence(self, election: _Election, outcome: asyncio.Future[None]) -> None:
        """Fail ``outcome`` once the last successful renewal is ``renew_deadline`` old."""
        while not outcome.done():
            renewed = election.renewed_at
            if self.leading and renewed is not None:
                left = renewed + self.timing.renew_deadline - time.monotonic()
                if left <= 0:
                    self.leading = False
                    outcome.set_exception(LostLeadership(
                        f"Lease {self.namespace}/{LEASE_NAME}: last renewal sent "
                        f"{self.timing.renew_deadline:g} s ago; stopping before it can expire"))
                    return
                await asyncio.sleep(min(left, 0.5))
            else:
                await asyncio.sleep(0.5)

    async def _release(self) -> None:
        """Give the Lease up (empty holder, 1 s duration) if this replica still holds it."""
        leases = client.CoordinationV1Api(self.api)
        with contextlib.suppress(ApiException, TimeoutError, OSError):
            lease = await asyncio.wait_for(
                leases.read_namespaced_lease(LEASE_NAME, self.namespace), timeout=2.0)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            await asyncio.wait_for(
                leases.replace_namespaced_lease(LEASE_NAME, self.namespace, lease), timeout=2.0)
            log.info("lease released", lease=LEASE_NAME, identity=self.identity)
