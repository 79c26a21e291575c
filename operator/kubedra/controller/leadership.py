"""Leader election for the operator: one replica reconciles, the others wait.

The operator's replicas compete for the ``coordination.k8s.io`` Lease ``kubedra-operator`` in
the operator's namespace (the client-go algorithm, :mod:`kubedra.controller.election`). Only
the holder runs the reconcilers (:meth:`Leadership.run` starts the ``lead`` coroutine); a
standby does nothing but retry every ``retry_period`` seconds.

The election runs in a process of its own (the elector, ``multiprocessing`` spawn), with its
own interpreter, event loop and API client, as client-go's components give leader election a
client of its own: the reconcilers' process can be busy for seconds — kopf's initial lists of
a thousand nodes, a garbage collection of its caches, a start on a loaded machine — without
delaying a renewal, since the elector shares no interpreter lock with it (the thread it ran in
before waited up to 2.2 s for a collection to end, ``bench/RESULTS.md``, round 6). A thread
of this process (``leader-election``) reads the elector's messages and hands them to the
reconcilers' loop only through ``loop.call_soon_threadsafe`` (leading, failed, ended) and a
``threading.Event`` (:attr:`Leadership.leading`).

Fencing: the elector stops leading when the last successful renewal *started*
``renew_deadline`` seconds ago, ``lease_duration - renew_deadline`` seconds before any other
replica could consider the Lease expired (another replica starts its ``lease_duration``
countdown no earlier than it reads the renewal, which is later than the renewal request was
sent), and says so; ``on_lost`` is called in the reading thread, so a reconcile loop that is
blocked cannot delay it: the operator exits the process from there (client-go's controllers
do the same), and the kubelet restarts it as a standby. Independently of that message, every
write of the reconcilers checks :meth:`Leadership.may_write` (the renew deadline, published
by the elector in shared memory), so a write that would start after the deadline is refused
even while this process has not run to read the message. An elector that dies is a lost
Lease; an elector whose parent dies ends with it.

Hand-over: a leader that stops on purpose (SIGTERM during a rolling update or a drain) releases
the Lease (empty holder, as client-go's ``ReleaseOnCancel``) once its work has stopped, so a
standby takes it at its next retry instead of waiting for the Lease to expire.

Defaults are client-go's (k8s.io/client-go/tools/leaderelection, as kube-controller-manager
uses them): lease 15 s, renew deadline 10 s, retry 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kubedra.controller.election import (
    LEASE_NAME,
    ElectionTiming,
    LostLeadership,
    elector_main,
)
from kubedra.controller.election_figures import ElectionFigures, GcPauses
from kubedra.logging import get_logger

__all__ = ["LEASE_NAME", "ElectionTiming", "Leadership", "LostLeadership"]

log = get_logger(__name__)

ELECTOR_STOP_S = 10.0
"""Seconds to wait for the elector to end after ``stop`` (it releases the Lease first) before
it is killed."""


class ElectionFailed(RuntimeError):
    """The elector could not run (no API client, or it raised); the message says why."""


class Leadership:
    """Whether this replica leads, for health reports and the writers' fence, and the running
    election.

    Args:
        connect: makes the election's own API client (with ``get``/``create``/``update`` on
            the Lease); called, and the client closed, in the elector process, so it must be
            picklable (a ``functools.partial`` of a module function).
        namespace: the Lease's namespace.
        identity: this process's name in the Lease, unique per process (the operator uses
            ``<pod name>_<uuid>``: a container restarted in place is another candidate).
        timing: the election's durations.
        setup: called first in the elector (picklable; the operator's logging configuration).
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]], namespace: str, identity: str,
                 timing: ElectionTiming | None = None,
                 setup: Callable[[], None] | None = None) -> None:
        self.connect = connect
        self.namespace = namespace
        self.identity = identity
        self.timing = timing or ElectionTiming()
        self.setup = setup
        self._leading = threading.Event()
        self._assumed = False
        self._until: Any = None
        """The elector's shared ``double``: monotonic time until which writes are allowed."""
        self.figures = ElectionFigures()
        """The elector's figures (:mod:`kubedra.controller.election_figures`), as last sent."""
        self.gc = GcPauses()
        """The longest garbage collection of this process while the election runs."""

    @property
    def leading(self) -> bool:
        """True while this replica holds the Lease (set and cleared by the reading thread)."""
        return self._leading.is_set()

    def assume_leading(self) -> None:
        """Count as the leader without an election (``--no-leader-elect``: one replica)."""
        self._assumed = True
        self._leading.set()

    def may_write(self) -> bool:
        """True while this replica may write to the API: it holds the Lease and its last
        successful renewal started less than ``renew_deadline`` seconds ago (or it runs
        without an election). Read from shared memory: no message from the elector is needed,
        so a write that starts late is refused however late this process runs."""
        if self._assumed:
            return True
        until = self._until
        return until is not None and self.leading and time.monotonic() < until.value

    def report(self) -> dict[str, Any]:
        """What ``/healthz`` shows: ``{"role": "leader"|"standby", "identity": ...}``."""
        return {"role": "leader" if self.leading else "standby", "identity": self.identity}

    def figures_json(self) -> dict[str, Any]:
        """The election's figures and this process's longest GC pause, as ``/healthz``
        shows them (:meth:`ElectionFigures.to_json`, :meth:`GcPauses.to_json`)."""
        return {**self.figures.to_json(), **self.gc.to_json()}

    async def run(self, lead: Callable[[], Awaitable[None]],
                  on_lost: Callable[[LostLeadership], None] | None = None) -> None:
        """Wait for the Lease, then run ``lead()`` in this event loop while holding it; when
        ``lead`` returns or this task is cancelled, stop ``lead``, then release the Lease.
        The elector has ended when this returns.

        Args:
            lead: the work of the leader.
            on_lost: called in the reading thread the moment the Lease is lost, before
                anything is handed to this event loop (which may be blocked); the operator
                exits the process there.

        Raises:
            LostLeadership: the Lease could not be renewed in time, or the elector died;
                ``lead`` was cancelled (the caller should exit the process).
            ElectionFailed: the elector could not run.
            Exception: whatever ``lead`` raised (after the Lease was released).
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

        def lost(err: LostLeadership) -> None:  # in the reading thread
            if on_lost is not None:
                on_lost(err)
            loop.call_soon_threadsafe(fail, err)

        elector = _ElectorProcess(
            self, on_leading=lambda: loop.call_soon_threadsafe(start_leading), on_lost=lost,
            on_failed=lambda err: loop.call_soon_threadsafe(fail, err),
            on_ended=lambda: loop.call_soon_threadsafe(ended.set_result, None))
        self.gc.watch()
        elector.start()
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
            elector.stop()
            await ended
            elector.join()
            self.gc.unwatch()

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


class _ElectorProcess:
    """The elector of a :class:`Leadership` and the thread that reads its messages. Its
    callbacks are called in that thread: ``on_leading()`` when the Lease is taken,
    ``on_lost(err)`` when it is lost (or the elector died), ``on_failed(err)`` when the
    election could not run, ``on_ended()`` last, whatever happened. :meth:`stop` (from any
    thread) ends it, releasing the Lease if it is held."""

    def __init__(self, leadership: Leadership, *, on_leading: Callable[[], object],
                 on_lost: Callable[[LostLeadership], None],
                 on_failed: Callable[[BaseException], object],
                 on_ended: Callable[[], object]) -> None:
        self.leadership = leadership
        self.on_leading, self.on_lost = on_leading, on_lost
        self.on_failed, self.on_ended = on_failed, on_ended
        self._stopping = threading.Event()
        context = multiprocessing.get_context("spawn")
        self._until = context.Value("d", 0.0, lock=False)
        self._connection, child = context.Pipe()
        self._process = context.Process(
            target=elector_main, name="kubedra-elector", daemon=True,
            args=(child, self._until, leadership.connect, leadership.namespace,
                  leadership.identity, leadership.timing, leadership.setup))
        self._child_end = child
        self._reader = threading.Thread(target=self._read, name="leader-election", daemon=True)

    def start(self) -> None:
        """Start the elector and the reading thread."""
        self.leadership._until = self._until
        self._process.start()
        self._child_end.close()
        self._reader.start()

    def stop(self) -> None:
        """Ask the elector to end (release the Lease if held); returns at once."""
        self._stopping.set()
        with contextlib.suppress(OSError, ValueError):
            self._connection.send(("stop",))

    def join(self) -> None:
        """Wait for the reading thread and the elector to end."""
        self._reader.join()

    def _read(self) -> None:
        leadership = self.leadership
        try:
            while self._dispatch(self._receive()):
                pass
        finally:
            leadership._leading.clear()
            self._process.join(ELECTOR_STOP_S)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
            self._connection.close()
            self.on_ended()

    def _receive(self) -> tuple[Any, ...]:
        try:
            message: tuple[Any, ...] = self._connection.recv()
        except (EOFError, OSError):
            self._process.join(1.0)
            return ("died", self._process.exitcode)
        return message

    def _dispatch(self, message: tuple[Any, ...]) -> bool:
        """Act on one message; False when the elector has ended."""
        leadership, kind = self.leadership, message[0]
        if kind == "figures":
            leadership.figures = ElectionFigures(**message[1])
        elif kind == "leading":
            leadership._leading.set()
            self.on_leading()
        elif kind == "lost":
            leadership._leading.clear()
            self.on_lost(LostLeadership(message[1]))
        elif kind == "failed":
            err = message[1]
            self.on_failed(err if isinstance(err, Exception) else ElectionFailed(str(err)))
        elif kind == "died":
            if not self._stopping.is_set():
                leadership._leading.clear()
                self.on_lost(LostLeadership(
                    f"the elector process ended unexpectedly (exit code {message[1]})"))
            return False
        return bool(kind != "ended")


async def _stop(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for them to end."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
