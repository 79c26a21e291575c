"""The operator's leader election, as it runs in a process of its own (the elector), started
and read by :class:`kubedra.controller.leadership.Leadership`.

The election is client-go's (``tryAcquireOrRenew`` in
``k8s.io/client-go/tools/leaderelection/leaderelection.go``): a candidate takes the Lease when
its holder has not renewed it for ``leaseDurationSeconds`` as observed by the candidate (the
time it last saw the record change, on its own clock), and counts ``leaseTransitions`` when the
holder changes; a leader whose last observed record is still valid renews by updating the
Lease it last wrote, one request, without reading it first, and a conflict (someone else wrote
it) falls back to the full read-then-update. Where this differs from client-go:

- an API error or an unreachable API server is a failed attempt, logged, retried (client-go
  does the same; kubernetes-asyncio's election raised on a 429 whose body is not JSON);
- a watchdog fences the leader when the last successful renewal *started* ``renew_deadline``
  seconds ago (client-go cancels the renew loop's context at ``RenewDeadline``), which is
  ``lease_duration - renew_deadline`` seconds before any other replica could take the Lease.

Its three requests go through :class:`kubedra.lease_api.LeaseApi` (plain aiohttp), so that the
process does not import kubernetes-asyncio's generated client: 88 MiB of RSS with it, about a
third without (``bench/RESULTS.md``, the elector's memory).

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
import os
import random
import select
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import aiohttp

from kubedra.api.time import micro_timestamp, utcnow
from kubedra.controller.election_figures import ElectionFigures
from kubedra.lease_api import LeaseApi, LeaseApiError
from kubedra.logging import get_logger

log = get_logger(__name__)

LEASE_NAME = "kubedra-operator"
"""The operator's leader-election Lease (in the operator's namespace)."""
FIGURES_EVERY_S = 1.0
"""Seconds between two ``figures`` messages to the parent."""
_PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: a signal the process gets when its parent dies (``<sys/prctl.h>``)."""
JITTER_FACTOR = 1.2
"""A candidate waits ``retry_period * (1 + random() * JITTER_FACTOR)`` between two tries to
take the Lease (client-go's ``JitterFactor``, ``leaderelection.go``)."""


@dataclass(frozen=True)
class ElectionTiming:
    """Leader-election durations in seconds (client-go's defaults). The Lease stores whole
    seconds (``leaseDurationSeconds``), so ``lease_duration`` is an int."""

    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LostLeadership(RuntimeError):
    """The leader could not renew its Lease within the renew deadline."""


@dataclass(frozen=True)
class _Record:
    """What the election reads of a Lease's ``spec``: the holder, its duration (seconds),
    acquire and renew times (as written), and the number of holder changes."""

    holder: str
    duration_s: int
    acquire_time: str
    renew_time: str
    transitions: int

    @classmethod
    def of(cls, lease: dict[str, Any]) -> _Record:
        spec = lease.get("spec") or {}
        return cls(spec.get("holderIdentity") or "", int(spec.get("leaseDurationSeconds") or 0),
                   spec.get("acquireTime") or "", spec.get("renewTime") or "",
                   int(spec.get("leaseTransitions") or 0))


class _Election:
    """client-go's election of ``identity`` for the Lease ``namespace/name`` (module
    docstring), recording when the last successful renewal was sent (:attr:`renewed_at`)
    and, in :attr:`figures`, each renewal's round trips."""

    def __init__(self, api: LeaseApi, namespace: str, identity: str, timing: ElectionTiming,
                 figures: ElectionFigures | None = None, name: str = LEASE_NAME) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.identity, self.timing = identity, timing
        self.figures = figures or ElectionFigures()
        self.renewed_at: float | None = None
        """``time.monotonic()`` when the last successful create/update of the Lease was sent."""
        self.lease: dict[str, Any] | None = None
        """The Lease as this replica last wrote it (the fast path updates it)."""
        self.observed: _Record | None = None
        self.observed_at = 0.0
        """``time.monotonic()`` when :attr:`observed` was last seen to change."""

    async def run(self, on_started: Callable[[], Awaitable[None]]) -> None:
        """Try to take the Lease until it is taken (every ``retry_period``, jittered), call
        ``on_started``, then renew it every ``retry_period``, forever; whether renewals
        still keep the lead is the caller's watchdog's to decide (:attr:`renewed_at`)."""
        jitter = random.Random()
        while True:
            if await self.try_acquire_or_renew():
                break
            await asyncio.sleep(self.timing.retry_period * (1 + jitter.random() * JITTER_FACTOR))
        await on_started()
        while True:
            await asyncio.sleep(self.timing.retry_period)
            await self.try_acquire_or_renew()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: True if this replica holds the Lease, renewed now; an API error or an
        unreachable API server is a failed attempt (False), logged."""
        started = time.monotonic()
        self.api.calls = []
        try:
            ok = await self._renew_optimistically() or await self._acquire_or_renew()
        except (TimeoutError, OSError, aiohttp.ClientError) as err:
            log.warning("lease not reachable", lease=self.name, error=repr(err))
            return False
        except LeaseApiError as err:
            log.warning("lease not readable", lease=self.name, error=str(err))
            return False
        self.figures.priority_level_uid = self.api.priority_level_uid
        if ok:
            self.figures.renewed(started, self.renewed_at, self.api.calls)
            self.renewed_at = started
        return ok

    def _valid(self, record: _Record) -> bool:
        """Whether ``record``, as observed, is within its duration on this replica's clock."""
        return self.observed_at + record.duration_s > time.monotonic()

    async def _renew_optimistically(self) -> bool:
        """client-go's fast path: while this replica holds the Lease and its observed record
        has not expired, update the Lease it last wrote (one request; its resourceVersion
        makes a Lease someone else wrote since a conflict, and then the full path runs)."""
        observed = self.observed
        if (self.lease is None or observed is None or observed.holder != self.identity
                or not self._valid(observed)):
            return False
        spec = {**self.lease["spec"], "renewTime": micro_timestamp(utcnow()),
                "leaseDurationSeconds": self.timing.lease_duration}
        try:
            await self._write({**self.lease, "spec": spec})
        except LeaseApiError as err:
            log.info("lease not renewed in one request", lease=self.name, error=str(err))
            return False
        return True

    async def _acquire_or_renew(self) -> bool:
        """client-go's full path: read the Lease; create it if there is none; leave it to a
        holder whose record is still valid; else take or renew it."""
        lease = await self.api.get(self.namespace, self.name)
        now = micro_timestamp(utcnow())
        spec = {"holderIdentity": self.identity,
                "leaseDurationSeconds": self.timing.lease_duration,
                "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
        if lease is None:
            try:
                await self._write({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                   "metadata": {"name": self.name}, "spec": spec}, create=True)
            except LeaseApiError as err:
                log.warning("lease not created", lease=self.name, error=str(err))
                return False
            return True
        record = _Record.of(lease)
        if record != self.observed:
            self.observed, self.observed_at = record, time.monotonic()
        if record.holder and record.holder != self.identity and self._valid(record):
            return False  # held by another replica
        if record.holder == self.identity:
            spec.update(acquireTime=record.acquire_time, leaseTransitions=record.transitions)
        else:
            spec["leaseTransitions"] = record.transitions + 1
        try:
            await self._write({**lease, "spec": {**(lease.get("spec") or {}), **spec}})
        except LeaseApiError as err:
            log.warning("lease not updated", lease=self.name, error=str(err))
            return False
        return True

    async def _write(self, lease: dict[str, Any], create: bool = False) -> None:
        """Create or replace the Lease and remember it as written and observed.

        Raises:
            LeaseApiError: the API server refused it (409: someone else wrote it since).
        """
        self.lease = await (self.api.create(self.namespace, lease) if create
                            else self.api.replace(self.namespace, self.name, lease))
        self.observed, self.observed_at = _Record.of(self.lease), time.monotonic()


def elector_main(connection: Connection, until: Any, connect: Callable[[], Awaitable[LeaseApi]],
                 namespace: str, identity: str, timing: ElectionTiming,
                 setup: Callable[[], None] | None) -> None:
    """The elector process's entry (``multiprocessing`` spawn): run the election, talking to
    the parent over ``connection`` and publishing the write deadline in ``until`` (a shared
    ``double``), until told to stop, the Lease is lost, or the parent dies.

    Args:
        connect: makes the election's :class:`~kubedra.lease_api.LeaseApi` (picklable, e.g.
            ``functools.partial(kubedra.lease_api.connect, endpoint)``), closed at the end.
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

    async def main(self, connect: Callable[[], Awaitable[LeaseApi]]) -> None:
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
            api.timeout_s = self.timing.renew_deadline  # a later answer is of no use
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

    async def _elect(self, api: LeaseApi) -> None:
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

        election = _Election(api, self.namespace, self.identity, timing, self.figures)
        tasks = [asyncio.create_task(election.run(started), name="leader-election"),
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


async def _release(api: LeaseApi, namespace: str, identity: str) -> None:
    """Give the Lease up (empty holder, 1 s duration, as client-go's ``release``) if
    ``identity`` still holds it."""
    with contextlib.suppress(LeaseApiError, TimeoutError, OSError, aiohttp.ClientError):
        lease = await asyncio.wait_for(api.get(namespace, LEASE_NAME), timeout=2.0)
        if lease is None or _Record.of(lease).holder != identity:
            return
        now = micro_timestamp(utcnow())
        lease["spec"] = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1,
                         "acquireTime": now, "renewTime": now}
        await asyncio.wait_for(api.replace(namespace, LEASE_NAME, lease), timeout=2.0)
        log.info("lease released", lease=LEASE_NAME, identity=identity)
