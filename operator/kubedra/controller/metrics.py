"""Prometheus metrics of the operator (all named ``kubedra_operator_*``), read from its state
when ``/metrics`` is scraped, so that no reconciler does any work for them.

- ``kubedra_operator_leader`` (gauge): 1 while this replica holds the leader Lease.
- ``kubedra_operator_queue_length{queue}`` (gauge): keys waiting in a work queue
  (``inventories``, ``claims``, ``explain``), in progress not counted.
- ``kubedra_operator_pool_withdrawn{driver, pool}`` (gauge): 1 for each pool that is
  withdrawn (its agent's Lease expired; only withdrawn pools have a series).
- ``kubedra_operator_devices_unhealthy{driver, pool}`` (gauge): published devices the agent
  reports ``Unhealthy`` (tainted ``kubedra.io/unhealthy``); pools with none have no series.
- ``kubedra_operator_devices_draining{driver, pool}`` (gauge): devices dropped from the pool
  (disabled, no longer reported, withdrawn or deleted) that stay published, tainted
  ``kubedra.io/draining``, because claims hold them; pools with none have no series.
- ``kubedra_operator_unschedulable_pods`` (gauge): pods kube-scheduler reports unschedulable
  because of their claims (those the operator explains with ``CannotAllocate`` Events).
- ``kubedra_operator_unschedulable_pod_max_age_seconds`` (gauge): seconds since the oldest of
  them became unschedulable (its ``PodScheduled=False`` condition's
  ``lastTransitionTime``); 0 when there is none.
- ``kubedra_operator_pending_claims`` (gauge): ResourceClaims not allocated (of every driver;
  a claim no pod names yet included).
- ``kubedra_operator_fleet_devices_published{driver, model, profile}``,
  ``kubedra_operator_fleet_devices_allocated{...}``, ``kubedra_operator_fleet_devices_free{...}``
  (gauges): the devices of every usable pool per driver and model as ``kubectl dra status``
  counts them (its ``devices`` rows: ``model`` the ``productName`` or ``vendorID:deviceID``,
  ``profile`` the MIG profile, ``""`` for a whole device), counted every
  ``fleet_metrics_interval`` seconds at most (:mod:`kubedra.controller.fleet`); none until the
  first count, nor with that setting 0.

The histograms of :mod:`kubedra.controller.histograms` are served with them. These are the
series the alerts and the dashboard of ``manifests/monitoring`` read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from kubedra.api.time import parse_timestamp, utcnow
from kubedra.controller.runtime import Runtime
from kubedra.controller.state import OperatorState
from kubedra.explain.status import Rows


def _gauge(name: str, text: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"kubedra_operator_{name}", text, labels=list(labels))


def _unschedulable_since(pod: dict[str, object]) -> float | None:
    """When the pod's ``PodScheduled=False`` condition was set (POSIX seconds), or None."""
    status = pod.get("status")
    for condition in (status.get("conditions") or []) if isinstance(status, dict) else []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            try:
                return parse_timestamp(condition.get("lastTransitionTime") or "").timestamp()
            except ValueError:
                return None
    return None


class OperatorCollector(Collector):
    """The operator's gauges, from ``runtime`` (its state once the caches are filled) and
    ``leading`` (whether this replica leads)."""

    def __init__(self, runtime: Runtime, leading: Callable[[], bool]) -> None:
        self.runtime = runtime
        self.leading = leading

    def collect(self) -> Iterator[Metric]:
        """The gauges now (pool, pod, claim and fleet gauges only on the leader, which has
        the state), then the histograms."""
        leader = _gauge("leader", "1 while this replica holds the leader Lease.")
        leader.add_metric([], 1.0 if self.leading() else 0.0)
        yield leader
        state = self.runtime.state
        if state is not None:
            yield from _state_gauges(state)
            if state.fleet is not None:
                yield from _fleet_gauges(state.fleet)
        yield from self.runtime.metrics.collect()


def _state_gauges(state: OperatorState) -> Iterator[GaugeMetricFamily]:
    queues = _gauge("queue_length", "Keys waiting in a work queue.", ("queue",))
    for queue, found in (("inventories", state.inventory_queue), ("claims", state.claim_queue),
                         ("explain", state.explain_queue)):
        queues.add_metric([queue], float(len(found)))
    yield queues
    pair = ("driver", "pool")
    withdrawn = _gauge("pool_withdrawn", "1 for each withdrawn pool.", pair)
    unhealthy = _gauge("devices_unhealthy", "Published devices reported Unhealthy.", pair)
    draining = _gauge("devices_draining", "Dropped devices kept published for their claims.",
                      pair)
    for pool in list(state.pools.values()):
        key = [pool.driver, pool.name]
        if pool.withdrawn:
            withdrawn.add_metric(key, 1.0)
        sick = sum(1 for d in pool.devices if pool.health.get(d, ("",))[0] == "Unhealthy")
        if sick:
            unhealthy.add_metric(key, float(sick))
        if pool.draining:
            draining.add_metric(key, float(len(pool.draining)))
    yield from (withdrawn, unhealthy, draining)
    since = [s for pod in state.view.values(state.view.unschedulable_pods)
             if (s := _unschedulable_since(pod)) is not None]
    pods = _gauge("unschedulable_pods",
                  "Pods kube-scheduler reports unschedulable because of their claims.")
    pods.add_metric([], float(len(state.view.unschedulable_pods)))
    oldest = _gauge("unschedulable_pod_max_age_seconds",
                    "Seconds since the oldest unschedulable pod became unschedulable.")
    oldest.add_metric([], max(0.0, utcnow().timestamp() - min(since)) if since else 0.0)
    pending = _gauge("pending_claims", "ResourceClaims not allocated.")
    pending.add_metric([], float(len(state.view.pending_claims)))
    yield from (pods, oldest, pending)


def _fleet_gauges(rows: Rows) -> Iterator[GaugeMetricFamily]:
    labels = ("driver", "model", "profile")
    published = _gauge("fleet_devices_published", "Devices of usable pools, per model.", labels)
    allocated = _gauge("fleet_devices_allocated", "Devices allocated to claims, per model.",
                       labels)
    free = _gauge("fleet_devices_free", "Devices a claim could be given now, per model.",
                  labels)
    for (driver, model, profile), counts in sorted(rows.items(), key=lambda r: (
            r[0][0], r[0][1], r[0][2] or "")):
        key = [driver, model, profile or ""]
        published.add_metric(key, float(counts.published))
        allocated.add_metric(key, float(counts.allocated))
        free.add_metric(key, float(counts.free))
    yield from (published, allocated, free)
