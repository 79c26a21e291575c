"""The operator's leader election, as it runs in a process of its own (the elector), started
and read by :class:`kubedra.controller.leadership.Leadership`.

The election is ``kubernetes_asyncio.leaderelection`` (the client-go algorithm: a candidate
takes the Lease when its holder has not renewed it for ``leaseDurationSeconds`` as observed by
the candidate), with three changes, each where client-go already differs from the library:

- a leader whose last observed record is still valid renews by updating the Lease it last
  wrote, one request, without reading it first; a conflict (someone else wrote it) falls
  back to the full read-then-update (client-go's "fast path for the leader to update
  optimistically", ``tryAcquireOrRenew`` in
  ``k8s.io/client-go/tools/leaderelection/leaderelection.go``);
- an API error reading the Lease other than 404 is a failed attempt, never an exception
  (client-go logs and retries; the library parsed a non-JSON 429 body and raised);
- a watchdog fences the leader when the last successful renewal *started* ``renew_deadline``
  seconds ago (client-go cancels the renew loop's context at ``RenewDeadline``), which is
  ``lease_duration - renew_deadline`` seconds before any other replica could take the Lease.

Why a process: in the reconcilers' process the election shared the interpreter lock with
them, and under load one garbage collection of the fleet's caches held it for up to 2.2 s
(``bench/RESULTS.md``, round 6: the election thread's longest stalls were the collector's
pauses, and a renewal's round trip took 2.5 s where the API server spent 0.3-1 s on it). A
process of its own needs only a CPU. It talks to its parent through a pipe (messages below)
and one shared ``double``, the monotonic time (``CLOCK_MONOTONIC``, the same clock in every
process) until which the parent may write: the last successful renewal's start plus the
renew deadline, 0 while not leading. The parent's writes check it (the fencing rule).

Messages, elector → parent: ``("leading",)``, ``("lost", message)``, ``("failed", error)``,
``("figures", ElectionFigures fields)`` every second, ``("ended",)`` last. Parent → elector:
``("stop",)`` (release the Lease if held, then end). The elector ends too when its parent
dies (``PR_SET_PDEATHSIG``), so it never renews for a process that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import os
import select
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from kubedra import kube
from kubedra.controller.election_figures import PRIORITY_LEVEL_HEADER, ElectionFigures
from kubedra.logging import get_logger

log = get_logger(__name__)

LEASE_NAME = "kubedra-operator"
"""The operator's leader-election Lease (in the operator's namespace)."""
FIGURES_EVERY_S = 1.0
"""Seconds between two ``figures`` messages to the parent."""
_PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: a signal the process gets when its parent dies (``<sys/prctl.h>``)."""


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
    raises :class:`LeaseUnreadable` (the library's election decides "not found" by parsing
    the error's body as JSON, and a body that is not JSON — API Priority and Fairness answers
    429 with plain text — raised out of the election; found by the throttling fault of
    e2e/test_faults.py), and that the Lease a create or update returns is kept, so that the
    next renewal can update it without reading it first.

    Each request's round trip is recorded in :attr:`calls` (``[("GET", seconds), ...]``,
    emptied by the election at every attempt), and the priority level the API server put it
    in in :attr:`priority_level_uid`."""

    def __init__(self, name: str, namespace: str, identity: str, api_client: Any) -> None:
        super().__init__(name, namespace, identity, api_client)
        self.calls: list[tuple[str, float]] = []
        self.priority_level_uid = ""

    async def _timed(self, verb: str, call: Awaitable[Any]) -> Any:
        started = time.monotonic()
        try:
            data, _status, headers = await call
        finally:
            self.calls.append((verb, time.monotonic() - started))
        self.priority_level_uid = headers.get(PRIORITY_LEVEL_HEADER, "")
        return data

    async def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        try:
            lease = await self._timed("GET", self.api_instance.read_namespaced_lease_with_http_info(
                name, namespace))
        except ApiException as err:
            if err.status != 404:
                raise LeaseUnreadable(kube.api_error_message(err)) from None
            return False, err
        self.lease_reference = lease
        return True, self.election_record(lease)

    async def create(self, name: str, namespace: str, election_record: Any) -> bool:
        body = client.V1Lease(metadata=client.V1ObjectMeta(name=name),
                              spec=self.update_lease(election_record))
        try:
            self.lease_reference = await self._timed(
                "POST", self.api_instance.create_namespaced_lease_with_http_info(namespace, body))
        except ApiException as err:
            log.warning("lease not created", lease=name, error=kube.api_error_message(err))
            return False
        return True

    async def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        assert self.lease_reference is not None
        self.lease_reference.spec = self.update_lease(updated_record, self.lease_reference.spec)
        try:
            self.lease_reference = await self._timed(
                "PUT", self.api_instance.replace_namespaced_lease_with_http_info(
                    name, namespace, self.lease_reference))
        except ApiException as err:
            log.warning("lease not updated", lease=name, error=kube.api_error_message(err))
            return False
        return True


class _Election(leaderelection.LeaderElection):  # type: ignore[misc]
    """The library's election with client-go's fast path for the leader, recording when the
    last successful renewal was sent; a Lease that cannot be reached or read is a failed
    attempt (retried), never an exception."""

    def __init__(self, config: electionconfig.Config, figures: ElectionFigures | None = None,
                 ) -> None:
        super().__init__(config)
        self.figures = figures or ElectionFigures()
        self.renewed_at: float | None = None
        """``time.monotonic()`` when the last successful create/update of the Lease was sent."""

    async def try_acquire_or_renew(self) -> bool:
        started = time.monotonic()
        lock: _LeaseLock = self.election_config.lock
        lock.calls = []
        try:
            ok: bool = await self._renew_optimistically() or await super().try_acquire_or_renew()
        except (TimeoutError, OSError, aiohttp.ClientError) as err:
            log.warning("lease not reachable", lease=LEASE_NAME, error=repr(err))
            return False
        except LeaseUnreadable as err:
            log.warning("lease not readable", lease=LEASE_NAME, error=str(err))
            return False
        self.figures.priority_level_uid = lock.priority_level_uid
        if ok:
            self.figures.renewed(started, self.renewed_at, lock.calls)
            self.renewed_at = started
        return ok

    async def _renew_optimistically(self) -> bool:
        """client-go's fast path: while this replica holds the Lease and its observed record
        has not expired, update the Lease it last wrote (one request; its resourceVersion
        makes a Lease someone else wrote since a conflict, and then the full path runs)."""
        lock: _LeaseLock = self.election_config.lock
        observed = self.observed_record
        lease_ms = self.election_config.lease_duration * 1000
        if (observed is None or observed.holder_identity != lock.identity
                or lock.lease_reference is None
                or self.observed_time_milliseconds + lease_ms <= int(time.time() * 1000)):
            return False
        # the library's own record format (a local naive time, as try_acquire_or_renew makes)
        now = str(datetime.datetime.fromtimestamp(time.time()))
        renewed = LeaderElectionRecord(lock.identity, str(self.election_config.lease_duration),
                                       observed.acquire_time, now)
        ok: bool = await self.update_lock(renewed)
        return ok


def elector_main(connection: Connection, until: Any, connect: Callable[[], Awaitable[Any]],
                 namespace: str, identity: str, timing: ElectionTiming,
                 setup: Callable[[], None] | None) -> None:
    """The elector process's entry (``multiprocessing`` spawn): run the election, talking to
    the parent over ``connection`` and publishing the write deadline in ``until`` (a shared
    ``double``), until told to stop, the Lease is lost, or the parent dies.

    Args:
        connect: makes the election's API client (its ``get``/``create``/``update`` of the
            Lease), closed at the end.
        setup: called first (the parent's logging configuration).
    """
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):  # Linux: end with the parent
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if setup is not None:
        setup()
    elector = _Elector(connection, until, namespace, identity, timing)
    try:
        asyncio.run(elector.main(connect))
    finally:
        with contextlib.suppress(OSError):
            connection.send(("ended",))
        connection.close()
        # the Lease is released: end now, without the interpreter's teardown (seconds of a
        # loaded machine's CPU that the parent would wait for)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(0)


class _Elector:
    """The election of one process, reporting to its parent."""

    def __init__(self, connection: Connection, until: Any, namespace: str, identity: str,
                 timing: ElectionTiming) -> None:
        self.connection, self.until = connection, until
        self.namespace, self.identity, self.timing = namespace, identity, timing
        self.figures = ElectionFigures()
        self.leading = False

    def send(self, *message: Any) -> None:
        with contextlib.suppress(OSError):  # the parent is gone: PDEATHSIG ends us
            self.connection.send(message)

    def send_figures(self) -> None:
        """Send the figures unless the pipe is full (a parent stopped by SIGSTOP, or whose
        reading thread does not run): a report is worth less than a renewal, and a message
        below ``PIPE_BUF`` bytes into a writable pipe never blocks."""
        with contextlib.suppress(OSError, ValueError):
            _, writable, _ = select.select([], [self.connection.fileno()], [], 0)
            if writable:
                self.connection.send(("figures", dataclasses.asdict(self.figures)))

    async def main(self, connect: Callable[[], Awaitable[Any]]) -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                message = self.connection.recv()
            except (EOFError, OSError):
                message = ("stop",)  # the parent closed its end
            if message[0] == "stop":
                loop.remove_reader(self.connection.fileno())
                task.cancel()
        loop.add_reader(self.connection.fileno(), readable)
        try:
            api = await connect()
            try:
                await self._elect(api)
            finally:
                await api.close()
        except asyncio.CancelledError:
            pass  # stopped
        except BaseException as err:  # handed to the parent
            try:
                self.send("failed", err)
            except Exception:
                self.send("failed", RuntimeError(repr(err)))
        finally:
            self.until.value = 0.0
            self.send_figures()

    async def _elect(self, api: Any) -> None:
        """Run the election until the Lease is lost (``("lost", ...)``) or this task is
        cancelled (the Lease released if held)."""
        timing = self.timing
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def started() -> None:
            self.leading = True
            # the parent may write from the moment it hears of it
            self.until.value = (election.renewed_at or time.monotonic()) + timing.renew_deadline
            log.info("leading", lease=LEASE_NAME, identity=self.identity)
            self.send("leading")

        async def stopped() -> None:
            if not lost.done():
                lost.set_exception(LostLeadership(
                    f"Lease {self.namespace}/{LEASE_NAME} not renewed within "
                    f"{timing.renew_deadline:g} s"))

        lock = _LeaseLock(LEASE_NAME, self.namespace, self.identity, api)
        election = _Election(electionconfig.Config(
            lock, lease_duration=timing.lease_duration, renew_deadline=timing.renew_deadline,
            retry_period=timing.retry_period, onstarted_leading=started,
            onstopped_leading=stopped), self.figures)
        tasks = [asyncio.create_task(election.run(), name="leader-election"),
                 asyncio.create_task(self._fence(election, lost), name="leader-fence"),
                 asyncio.create_task(self.figures.measure_stalls(), name="leader-stalls"),
                 asyncio.create_task(self._report(), name="leader-figures")]

        def election_ended(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() and not lost.done():
                lost.set_exception(task.exception())  # type: ignore[arg-type]
        tasks[0].add_done_callback(election_ended)
        try:
            await lost
        except LostLeadership as err:
            self.until.value = 0.0
            self.leading = False
            self.send("lost", str(err))
        except asyncio.CancelledError:
            self.until.value = 0.0
            held, self.leading = self.leading, False
            await _stop(tasks)
            if held:
                await _release(api, self.namespace, self.identity)
            raise
        finally:
            await _stop(tasks)

    async def _fence(self, election: _Election, lost: asyncio.Future[None]) -> None:
        """Keep ``until`` at the last renewal's start plus the renew deadline while leading;
        fail ``lost`` once that has passed."""
        deadline = self.timing.renew_deadline
        while not lost.done():
            renewed = election.renewed_at
            if self.leading and renewed is not None:
                self.until.value = renewed + deadline
                left = renewed + deadline - time.monotonic()
                if left <= 0:
                    self.until.value = 0.0
                    lost.set_exception(LostLeadership(
                        f"Lease {self.namespace}/{LEASE_NAME}: last renewal sent "
                        f"{deadline:g} s ago; stopping before it can expire"))
                    return
                await asyncio.sleep(min(left, 0.1))
            else:
                await asyncio.sleep(0.1)

    async def _report(self) -> None:
        while True:
            self.send_figures()
            await asyncio.sleep(FIGURES_EVERY_S)


async def _stop(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for them to end."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _release(api: Any, namespace: str, identity: str) -> None:
    """Give the Lease up (empty holder, 1 s duration) if ``identity`` still holds it."""
    leases = client.CoordinationV1Api(api)
    with contextlib.suppress(ApiException, TimeoutError, OSError):
        lease = await asyncio.wait_for(
            leases.read_namespaced_lease(LEASE_NAME, namespace), timeout=2.0)
        if lease.spec is None or lease.spec.holder_identity != identity:
            return
        lease.spec.holder_identity = ""
        lease.spec.lease_duration_seconds = 1
        await asyncio.wait_for(
            leases.replace_namespaced_lease(LEASE_NAME, namespace, lease), timeout=2.0)
        log.info("lease released", lease=LEASE_NAME, identity=identity)
