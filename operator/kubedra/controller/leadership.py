"""Leader election for the operator: one replica reconciles, the others wait.

The operator's replicas compete for the ``coordination.k8s.io`` Lease ``kubedra-operator`` in
the operator's namespace through ``kubernetes_asyncio.leaderelection`` (the client-go
algorithm: a candidate takes the Lease when its holder has not renewed it for
``leaseDurationSeconds`` as observed by the candidate). Only the holder runs the reconcilers
(:meth:`Leadership.run` starts the ``lead`` coroutine); a standby does nothing but retry every
``retry_period`` seconds.

The election runs in a thread of its own (``leader-election``), with its own event loop and its
own API client, as client-go runs it in a goroutine of its own: the reconcilers' event loop
can be busy for seconds (kopf's initial lists of a thousand nodes, a start on a loaded
machine) without delaying a renewal. It still shares the interpreter lock: one call that
holds it for seconds (decoding a list page of tens of MB in one ``json.loads``) delays it
(a page of 500 MIG inventories is 79 MB; bounding pages is ``bench/RESULTS.md``, round 4,
plan 8). The thread hands over to the reconcilers' loop only through
``loop.call_soon_threadsafe`` (leading, failed, stopped) and a ``threading.Event``
(:attr:`Leadership.leading`).

Fencing: the library cancels the leader's work only when a renewal loop gives up, and an API
call that hangs would delay that. A watchdog in the election thread stops the leader when the
last successful renewal *started* ``renew_deadline`` seconds ago, ``lease_duration -
renew_deadline`` seconds before any other replica could consider the Lease expired (another
replica starts its ``lease_duration`` countdown no earlier than it reads the renewal, which is
later than the renewal request was sent). The watchdog calls ``on_lost`` in the election
thread, so a reconcile loop that is blocked cannot delay it: the operator exits the process
from there (client-go's controllers do the same), and the kubelet restarts it as a standby.

Hand-over: a leader that stops on purpose (SIGTERM during a rolling update or a drain) releases
the Lease (empty holder, as client-go's ``ReleaseOnCancel``) once its work has stopped, so a
standby takes it at its next retry instead of waiting for the Lease to expire.

Defaults are client-go's (k8s.io/client-go/tools/leaderelection, as kube-controller-manager
uses them): lease 15 s, renew deadline 10 s, retry 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
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
from kubedra.controller.election_figures import PRIORITY_LEVEL_HEADER, ElectionFigures
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
    throttling fault of e2e/test_faults.py).

    Each request's round trip is recorded in :attr:`calls` (``[("GET", seconds), ...]``,
    emptied by the election at every attempt) and the priority level the API server put it
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
            await self._timed("PUT", self.api_instance.replace_namespaced_lease_with_http_info(
                name, namespace, self.lease_reference))
        except ApiException as err:
            log.warning("lease not updated", lease=name, error=kube.api_error_message(err))
            return False
        return True


class _Election(leaderelection.LeaderElection):  # type: ignore[misc]
    """The library's election, recording when the last successful renewal was sent; a Lease
    that cannot be reached or read is a failed attempt (retried), never an exception."""

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
            ok: bool = await super().try_acquire_or_renew()
        except (TimeoutError, OSError, aiohttp.ClientError) as err:
            log.warning("lease not reachable", lease=LEASE_NAME, error=repr(err))
            return False
        except LeaseUnreadable as err:
            log.warning("lease not readable", lease=LEASE_NAME, error=str(err))
            return False
        if ok:
            self.figures.renewed(started, self.renewed_at, lock.calls)
            self.renewed_at = started
        return ok


class Leadership:
    """Whether this replica leads, for health reports, and the running election.

    Args:
        connect: makes the election's own API client (with ``get``/``create``/``update`` on
            the Lease); called, and the client closed, in the election thread's event loop.
        namespace: the Lease's namespace.
        identity: this process's name in the Lease, unique per process (the operator uses
            ``<pod name>_<uuid>``: a container restarted in place is another candidate).
        timing: the election's durations.
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]], namespace: str, identity: str,
                 timing: ElectionTiming | None = None) -> None:
        self.connect = connect
        self.namespace = namespace
        self.identity = identity
        self.timing = timing or ElectionTiming()
        self._leading = threading.Event()
        self.figures = ElectionFigures()
        """How late the election thread ran and how long its renewals took, since start."""

    @property
    def leading(self) -> bool:
        """True while this replica holds the Lease (set and cleared by the election thread)."""
        return self._leading.is_set()

    def assume_leading(self) -> None:
        """Count as the leader without an election (``--no-leader-elect``: one replica)."""
        self._leading.set()

    def report(self) -> dict[str, Any]:
        """What ``/healthz`` shows: ``{"role": "leader"|"standby", "identity": ...}``."""
        return {"role": "leader" if self.leading else "standby", "identity": self.identity}

    async def run(self, lead: Callable[[], Awaitable[None]],
                  on_lost: Callable[[LostLeadership], None] | None = None) -> None:
        """Wait for the Lease, then run ``lead()`` in this event loop while holding it; when
        ``lead`` returns or this task is cancelled, stop ``lead``, then release the Lease.
        The election thread has ended when this returns.

        Args:
            lead: the work of the leader.
            on_lost: called in the election thread the moment the Lease is lost, before
                anything is handed to this event loop (which may be blocked); the operator
                exits the process there.

        Raises:
            LostLeadership: the Lease could not be renewed in time; ``lead`` was cancelled
                (the caller should exit the process).
            Exception: whatever ``lead`` or the election raised (after the Lease was
                released).
        """
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[None] = loop.create_future()
        ended: asyncio.Future[None] = loop.create_future()
        work: list[asyncio.Task[None]] = []

        def fail(err: BaseException) -> None:
            if not outcome.done():
                outcome.set_exception(err)

        def start_leading() -> None:
            if not outcome.done():  # not lost or failed in the meantime
                work.append(loop.create_task(self._lead(lead, outcome), name="leader-work"))

        def lost(err: LostLeadership) -> None:  # in the election thread
            if on_lost is not None:
                on_lost(err)
            loop.call_soon_threadsafe(fail, err)

        election = _ElectionThread(
            self, on_leading=lambda: loop.call_soon_threadsafe(start_leading), on_lost=lost,
            on_failed=lambda err: loop.call_soon_threadsafe(fail, err),
            on_ended=lambda: loop.call_soon_threadsafe(ended.set_result, None))
        election.start()
        try:
            await outcome
        except LostLeadership:
            # fenced: stop the work now, without waiting for it to wind down
            for task in work:
                task.cancel()
            raise
        except BaseException:
            await _stop(work)
            raise
        finally:
            # the work has stopped before the Lease is released: no write after the release
            election.stop()
            await ended
            election.join()

    @staticmethod
    async def _lead(lead: Callable[[], Awaitable[None]], outcome: asyncio.Future[None]) -> None:
        """Run ``lead()``; its end (returned or raised) settles ``outcome``."""
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


class _ElectionThread(threading.Thread):
    """The election of a :class:`Leadership`, in a daemon thread with its own event loop and
    API client. Its callbacks are called in this thread: ``on_leading()`` when the Lease is
    taken, ``on_lost(err)`` when it is lost, ``on_failed(err)`` when the election raised,
    ``on_ended()`` last, whatever happened. :meth:`stop` (from any thread) ends it, releasing
    the Lease if it is held."""

    def __init__(self, leadership: Leadership, *, on_leading: Callable[[], object],
                 on_lost: Callable[[LostLeadership], None],
                 on_failed: Callable[[BaseException], object],
                 on_ended: Callable[[], object]) -> None:
        super().__init__(name="leader-election", daemon=True)
        self.leadership = leadership
        self.on_leading, self.on_lost = on_leading, on_lost
        self.on_failed, self.on_ended = on_failed, on_ended
        self._lock = threading.Lock()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            self.on_ended()

    def stop(self) -> None:
        """Ask the thread to end (release the Lease if held); returns at once."""
        with self._lock:
            self._stopping = True
            if self._loop is not None and self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)

    async def _main(self) -> None:
        with self._lock:
            if self._stopping:
                return
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        self.leadership.figures.watch_gc()
        try:
            api = await self.leadership.connect()
            try:
                await self._elect(api)
            finally:
                await api.close()
        except asyncio.CancelledError:
            pass  # stopped
        except BaseException as err:  # handed to Leadership.run()
            self.on_failed(err)
        finally:
            self.leadership.figures.unwatch_gc()
            with self._lock:
                self._loop = self._task = None

    async def _elect(self, api: Any) -> None:
        """Run the election until the Lease is lost (``on_lost``) or this task is cancelled
        (the Lease released if held)."""
        leadership, timing = self.leadership, self.leadership.timing
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def started() -> None:
            leadership._leading.set()
            log.info("leading", lease=LEASE_NAME, identity=leadership.identity)
            self.on_leading()

        async def stopped() -> None:
            if not lost.done():
                lost.set_exception(LostLeadership(
                    f"Lease {leadership.namespace}/{LEASE_NAME} not renewed within "
                    f"{timing.renew_deadline:g} s"))

        lock = _LeaseLock(LEASE_NAME, leadership.namespace, leadership.identity, api)
        election = _Election(electionconfig.Config(
            lock, lease_duration=timing.lease_duration, renew_deadline=timing.renew_deadline,
            retry_period=timing.retry_period, onstarted_leading=started,
            onstopped_leading=stopped), leadership.figures)
        tasks = [asyncio.create_task(election.run(), name="leader-election"),
                 asyncio.create_task(self._fence(election, lost), name="leader-fence"),
                 asyncio.create_task(leadership.figures.measure_stalls(), name="leader-stalls")]

        def election_ended(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() and not lost.done():
                lost.set_exception(task.exception())  # type: ignore[arg-type]
        tasks[0].add_done_callback(election_ended)
        try:
            await lost
        except LostLeadership as err:
            leadership._leading.clear()
            self.on_lost(err)
        except asyncio.CancelledError:
            held = leadership.leading
            leadership._leading.clear()
            await _stop(tasks)
            if held:
                await _release(api, leadership.namespace, leadership.identity)
            raise
        finally:
            await _stop(tasks)

    async def _fence(self, election: _Election, lost: asyncio.Future[None]) -> None:
        """Fail ``lost`` once the last successful renewal is ``renew_deadline`` old."""
        leadership = self.leadership
        deadline = leadership.timing.renew_deadline
        while not lost.done():
            renewed = election.renewed_at
            if leadership.leading and renewed is not None:
                left = renewed + deadline - time.monotonic()
                if left <= 0:
                    lost.set_exception(LostLeadership(
                        f"Lease {leadership.namespace}/{LEASE_NAME}: last renewal sent "
                        f"{deadline:g} s ago; stopping before it can expire"))
                    return
                await asyncio.sleep(min(left, 0.5))
            else:
                await asyncio.sleep(0.5)


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
