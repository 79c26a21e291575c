"""How long the operator's work takes: Prometheus histograms the reconcilers observe (the
gauges, read from the state at scrape time, are in :mod:`kubedra.controller.metrics`, which
serves these too).

- ``kubedra_operator_reconcile_duration_seconds{queue, outcome}``: one reconcile of a key
  taken from a work queue (``inventories``, ``claims``, ``explain``, as
  ``kubedra_operator_queue_length``), from the worker taking it to the reconcile's end (the
  wait in the queue not included); ``outcome`` ``done``, ``retry`` (the reconcile asked for a
  retry: :class:`~kubedra.controller.queue.Retry`) or ``error`` (an API call failed; retried
  too).
- ``kubedra_operator_publish_duration_seconds{result}``: one inventory's pool, from the start
  of its reconcile until its slices were written (``written``: at least one slice created,
  updated or deleted), found as published (``unchanged``: no write was needed, whether
  ``status.publishedFrom`` verified the pool or the full reconcile found nothing to write) or
  refused by the API server (``failed``). A deleted inventory's release is not counted.

Every label pair exists from the start (at 0), so that ``rate()`` sees the first
observation. Labels are bounded: never a pool, claim or device name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
           10.0, 30.0, 60.0)
"""Seconds. From bench/RESULTS.md (``## scale``): an unchanged pool is verified in 0.14 ms of
CPU and fully reconciled in 2.2 ms (8 H200), so the lowest buckets tell the two apart; a claim
reconcile with its status write took 0.05 s on an idle API server and the writes of a publish
seconds on a loaded one; an explanation took from 39 ms (500 nodes) to tens of seconds (2,000
nodes on a loaded machine), hence the 30 and 60 s buckets. On the e2e cluster (one H200,
``e2e/test_dashboard.py``, load 10 on 2 cores) a publish that wrote its slice took 46 ms, one
that verified it 9.8 ms, and reconciles 14 ms (claims, explain) to 29 ms (inventories)."""

QUEUES = ("inventories", "claims", "explain")
OUTCOMES = ("done", "retry", "error")
PUBLISH_RESULTS = ("written", "unchanged", "failed")


class OperatorHistograms(Collector):
    """The operator's histograms (not registered anywhere: the operator's collector,
    :class:`kubedra.controller.metrics.OperatorCollector`, yields them)."""

    def __init__(self) -> None:
        self.reconcile_duration = Histogram(
            "kubedra_operator_reconcile_duration_seconds",
            "Time to reconcile one key of a work queue, by queue and outcome.",
            ["queue", "outcome"], buckets=BUCKETS, registry=None)
        self.publish_duration = Histogram(
            "kubedra_operator_publish_duration_seconds",
            "Time from an inventory's reconcile start to its slices written or verified.",
            ["result"], buckets=BUCKETS, registry=None)
        for queue in QUEUES:
            for outcome in OUTCOMES:
                self.reconcile_duration.labels(queue, outcome)
        for result in PUBLISH_RESULTS:
            self.publish_duration.labels(result)

    def reconciled(self, queue: str, outcome: str, started: float) -> None:
        """Observe a reconcile of ``queue`` that began at ``started`` (``time.monotonic()``)."""
        self.reconcile_duration.labels(queue, outcome).observe(time.monotonic() - started)

    def published(self, result: str, started: float) -> None:
        """Observe a pool's publish whose reconcile began at ``started``
        (``time.monotonic()``)."""
        self.publish_duration.labels(result).observe(time.monotonic() - started)

    def collect(self) -> Iterator[Metric]:
        """Both histograms."""
        yield from self.reconcile_duration.collect()
        yield from self.publish_duration.collect()
