"""What the leader election's thread measures about itself, for ``/healthz`` and the fenced
leader's last log line: how late it ran and why, and how long its renewals took.

A renewal that comes late has three possible causes, and each figure here names one:

- the election thread did not run: it waited on the kernel's run queue (``stallQueued``,
  from ``/proc/self/task/<tid>/schedstat``: the machine had no CPU for it), or it waited for
  the interpreter lock while another thread held it (``stallMainCpu``: the reconcilers' thread
  on a CPU during the stall, i.e. one unit of its work, or a garbage collection, ``gcPause``);
- the renewal's round trip was slow (``renewalSeconds``: from the first request of a renewal
  to its last answer, which includes the API server's work, its API Priority and Fairness
  queueing, and this process reading the answer);
- renewals were not tried (``renewalGapSeconds``: the longest time between the starts of two
  successful renewals, issue 23's target of at most 3 s).

The API server's answer names the priority level the request was put in
(``X-Kubernetes-PF-PriorityLevel-UID``, k8s.io/apiserver
``pkg/server/filters/priority-and-fairness.go``), shown as ``electionPriorityLevelUID``: it
tells whether the operator's FlowSchema (``manifests/flowschema.yaml``) is in effect.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

PRIORITY_LEVEL_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
"""The response header that names the APF priority level a request was executed at."""


def thread_schedstat(native_id: int) -> tuple[float, float]:
    """``(seconds on a CPU, seconds waiting on the run queue)`` of thread ``native_id`` of this
    process since it started (``/proc/self/task/<tid>/schedstat``, Linux); ``(0, 0)`` where the
    file cannot be read."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as stat:
            on_cpu, queued, _slices = stat.read().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(on_cpu) / 1e9, int(queued) / 1e9


@dataclass
class ElectionFigures:
    """The longest delays the election has seen since the process started (seconds)."""

    stall_s: float = 0.0
    """The longest time the election thread woke up later than it asked to."""
    stall_cpu_s: float = 0.0
    """The process's CPU time during that stall (every thread)."""
    stall_queued_s: float = 0.0
    """The election thread's wait on the kernel's run queue during that stall."""
    stall_main_cpu_s: float = 0.0
    """The main thread's (the reconcilers' event loop) time on a CPU during that stall."""
    stall_at: str = ""
    """Where the main thread was when that stall ended (``file:line function``, innermost
    last): the end of the unit of work that held the interpreter lock, if one did."""
    renewal_s: float = 0.0
    """The slowest successful renewal, from its first request to its last answer."""
    renewal_calls: str = ""
    """The requests of that renewal and their round trips (``GET 0.412 PUT 0.380``)."""
    renewal_gap_s: float = 0.0
    """The longest time between the starts of two successful renewals while leading."""
    renewals: int = 0
    """Successful renewals (and the first acquisition)."""
    priority_level_uid: str = ""
    """The APF priority level of the last Lease request (:data:`PRIORITY_LEVEL_HEADER`)."""
    gc_pause_s: float = 0.0
    """The longest garbage collection of the process (any thread holds the lock through it)."""
    gc_generation: int = -1
    """The generation of that collection."""

    def to_json(self) -> dict[str, Any]:
        """The figures as ``/healthz`` shows them (seconds rounded to milliseconds)."""
        return {
            "electionStallSeconds": round(self.stall_s, 3),
            "electionStallCpuSeconds": round(self.stall_cpu_s, 3),
            "electionStallQueuedSeconds": round(self.stall_queued_s, 3),
            "electionStallMainCpuSeconds": round(self.stall_main_cpu_s, 3),
            "electionStallAt": self.stall_at,
            "electionRenewalSeconds": round(self.renewal_s, 3),
            "electionRenewalCalls": self.renewal_calls,
            "electionRenewalGapSeconds": round(self.renewal_gap_s, 3),
            "electionRenewals": self.renewals,
            "electionPriorityLevelUID": self.priority_level_uid,
            "gcPauseSeconds": round(self.gc_pause_s, 3),
            "gcPauseGeneration": self.gc_generation,
        }

    def log_fields(self) -> dict[str, Any]:
        """The figures as keyword arguments of a log line (snake case)."""
        return {"election_stall_s": round(self.stall_s, 3),
                "election_stall_cpu_s": round(self.stall_cpu_s, 3),
                "election_stall_queued_s": round(self.stall_queued_s, 3),
                "election_stall_main_cpu_s": round(self.stall_main_cpu_s, 3),
                "election_stall_at": self.stall_at,
                "election_renewal_s": round(self.renewal_s, 3),
                "election_renewal_calls": self.renewal_calls,
                "election_renewal_gap_s": round(self.renewal_gap_s, 3),
                "gc_pause_s": round(self.gc_pause_s, 3)}

    def renewed(self, started: float, previous: float | None, calls: list[tuple[str, float]],
                ) -> None:
        """Count a successful renewal that started at ``started`` (``time.monotonic()``), the
        previous one at ``previous``; ``calls``: its requests and their round trips."""
        self.renewals += 1
        took = time.monotonic() - started
        if took > self.renewal_s:
            self.renewal_s = took
            self.renewal_calls = " ".join(f"{verb} {seconds:.3f}" for verb, seconds in calls)
        if previous is not None:
            self.renewal_gap_s = max(self.renewal_gap_s, started - previous)

    async def measure_stalls(self, tick: float = 0.1) -> None:
        """Record the longest stall of the calling thread's event loop, waking every ``tick``
        seconds, until cancelled."""
        import asyncio

        own = threading.get_native_id()
        main = threading.main_thread()
        main_id = main.native_id or 0
        while True:
            asked, cpu = time.monotonic() + tick, time.process_time()
            _, queued = thread_schedstat(own)
            main_cpu, _ = thread_schedstat(main_id)
            await asyncio.sleep(tick)
            stall = time.monotonic() - asked
            if stall > self.stall_s:
                self.stall_s = stall
                self.stall_cpu_s = time.process_time() - cpu
                self.stall_queued_s = thread_schedstat(own)[1] - queued
                self.stall_main_cpu_s = thread_schedstat(main_id)[0] - main_cpu
                self.stall_at = _where(main.ident)

    def watch_gc(self) -> None:
        """Record the longest garbage collection from now on (``gc.callbacks``); undone by
        :meth:`unwatch_gc`."""
        gc.callbacks.append(self._gc_callback)

    def unwatch_gc(self) -> None:
        """Stop recording garbage collections."""
        if self._gc_callback in gc.callbacks:
            gc.callbacks.remove(self._gc_callback)

    _gc_started: float = 0.0

    def _gc_callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            took = time.perf_counter() - self._gc_started
            if took > self.gc_pause_s:
                self.gc_pause_s, self.gc_generation = took, info.get("generation", -1)


def _where(ident: int | None, depth: int = 4) -> str:
    """The innermost ``depth`` frames of thread ``ident``, as ``file:line function`` joined by
    `` < `` (innermost first); empty if it has none."""
    frame = sys._current_frames().get(ident or 0)
    if frame is None:
        return ""
    frames = traceback.extract_stack(frame)[-depth:]
    return " < ".join(f"{'/'.join(f.filename.rsplit('/', 2)[-2:])}:{f.lineno} {f.name}"
                      for f in reversed(frames))
