"""What the leader election measures about itself, for ``/healthz`` and the fenced leader's
last log line: how late the elector ran and why, how long its renewals took, and how long the
reconcilers' process paused for garbage collection.

A renewal that comes late has three possible causes, and each figure here names one:

- the elector did not run: it woke up later than it asked (``electionStallSeconds``), and of
  that it waited on the kernel's run queue ``electionStallQueuedSeconds`` (from
  ``/proc/self/task/<tid>/schedstat``: the machine had no CPU for it); the rest it waited for
  the interpreter lock or ran;
- the renewal's round trip was slow (``electionRenewalSeconds``, from the first request of a
  renewal to its last answer, which includes the API server's work and its API Priority and
  Fairness queueing; ``electionRenewalCalls`` splits it by request);
- renewals were not tried (``electionRenewalGapSeconds``: the longest time between the starts
  of two successful renewals, issue 23's target of at most 3 s).

The API server's answer names the priority level the request was put in
(``X-Kubernetes-PF-PriorityLevel-UID``, k8s.io/apiserver
``pkg/server/filters/priority-and-fairness.go``), shown as ``electionPriorityLevelUID``: it
tells whether the operator's FlowSchema (``manifests/flowschema.yaml``) is in effect.
``gcPauseSeconds`` is the longest garbage collection of the reconcilers' process, which held
the interpreter lock for all of it (the reason the election is a process of its own).
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from dataclasses import dataclass
from typing import Any


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
    """The longest delays the elector has seen since it started (seconds)."""

    stall_s: float = 0.0
    """The longest time the elector's event loop woke up later than it asked to."""
    stall_cpu_s: float = 0.0
    """The elector's CPU time during that stall."""
    stall_queued_s: float = 0.0
    """The elector's wait on the kernel's run queue during that stall."""
    renewal_s: float = 0.0
    """The slowest successful renewal, from its first request to its last answer."""
    renewal_calls: str = ""
    """The requests of that renewal and their round trips (``PUT 0.380``)."""
    renewal_gap_s: float = 0.0
    """The longest time between the starts of two successful renewals while leading."""
    renewals: int = 0
    """Successful renewals (and the first acquisition)."""
    priority_level_uid: str = ""
    """The APF priority level of the last Lease request
    (:data:`kubedra.lease_api.PRIORITY_LEVEL_HEADER`)."""

    def to_json(self) -> dict[str, Any]:
        """The figures as ``/healthz`` shows them (seconds rounded to milliseconds)."""
        return {
            "electionStallSeconds": round(self.stall_s, 3),
            "electionStallCpuSeconds": round(self.stall_cpu_s, 3),
            "electionStallQueuedSeconds": round(self.stall_queued_s, 3),
            "electionRenewalSeconds": round(self.renewal_s, 3),
            "electionRenewalCalls": self.renewal_calls,
            "electionRenewalGapSeconds": round(self.renewal_gap_s, 3),
            "electionRenewals": self.renewals,
            "electionPriorityLevelUID": self.priority_level_uid,
        }

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
        own = threading.get_native_id()
        while True:
            asked, cpu = time.monotonic() + tick, time.process_time()
            _, queued = thread_schedstat(own)
            await asyncio.sleep(tick)
            stall = time.monotonic() - asked
            if stall > self.stall_s:
                self.stall_s = stall
                self.stall_cpu_s = time.process_time() - cpu
                self.stall_queued_s = thread_schedstat(own)[1] - queued


class GcPauses:
    """The longest garbage collection of this process while :meth:`watch` is on
    (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.longest_s = 0.0
        self.generation = -1
        self._started = 0.0

    def watch(self) -> None:
        """Start recording collections."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def unwatch(self) -> None:
        """Stop recording collections."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def to_json(self) -> dict[str, Any]:
        """``{"gcPauseSeconds": ..., "gcPauseGeneration": ...}``."""
        return {"gcPauseSeconds": round(self.longest_s, 3), "gcPauseGeneration": self.generation}

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started:
            took = time.perf_counter() - self._started
            if took > self.longest_s:
                self.longest_s, self.generation = took, info.get("generation", -1)
