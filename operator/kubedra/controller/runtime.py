"""The operator's runtime: the one shared :class:`Runtime`, the workers that drain the work
queues, and the tick that notices Lease expiry.

Event handlers (:mod:`kubedra.handlers.operator`) only enqueue keys; the workers run the
reconcilers, each key by one worker at a time, with per-key retry back-off
(:class:`~kubedra.controller.queue.WorkQueue`). The state is created on the first event, when
kopf has filled every index (:meth:`Runtime.begin`).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import gc
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubedra.api.time import utcnow
from kubedra.binding.attach import load_attacher
from kubedra.controller.executor import reconcile_claim, reconcile_inventory
from kubedra.controller.explain_state import ExplainState
from kubedra.controller.explanations import explain_pod, prepare_explainer
from kubedra.controller.features import detect_served, watch_served
from kubedra.controller.fleet import count_fleet
from kubedra.controller.histograms import OperatorHistograms
from kubedra.controller.leases import LeaseCache
from kubedra.controller.listwatch import Index, ListWatch
from kubedra.controller.nodes import NODE_DECODER, NODES_PATH, declared_features
from kubedra.controller.queue import Retry, WorkQueue
from kubedra.controller.resync import ResyncRound
from kubedra.controller.slices import SliceCache, SliceRecord
from kubedra.controller.state import ClusterView, OperatorState
from kubedra.logging import get_logger
from kubedra.settings import Settings

log = get_logger(__name__)

INVENTORY_WORKERS = 8
CLAIM_WORKERS = 16
"""Claims reconciled at once. A claim's reconcile is mostly waiting for its status write, so
with 2 the claims of a burst queued behind each other's API round trips (bench/scale.py at
100 nodes, 10 claims/s: 12.6 s p50 from the allocation seen to the reconcile start)."""

K = TypeVar("K", bound=Hashable)
Step = Callable[[K], Awaitable[None]]


@dataclass
class Runtime:
    """kubedra's operator-wide objects. kopf gives each watched object a shallow copy of the
    operator's memo, so everything mutable lives in this one shared instance.

    ``claim_pools``: (namespace, name) of an allocated claim → the (driver, pool) pairs its
    allocation results name, so that the inventories of those pools are reconciled again when
    the claim is deallocated or deleted.
    """

    settings: Settings
    api: Any = None
    leases: LeaseCache | None = None
    nodes: ListWatch[dict[str, Any]] | None = None
    """Nodes by name: UID and labels (:mod:`kubedra.controller.nodes`)."""
    slices: SliceCache | None = None
    """ResourceSlices of the pools this process owns (:mod:`kubedra.controller.slices`)."""
    state: OperatorState | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    claim_pools: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    metrics: OperatorHistograms = field(default_factory=OperatorHistograms)
    """The reconcilers' histograms, served from the start (standby included)."""
    may_write: Callable[[], bool] = field(default=lambda: True)
    """The writers' fence (:meth:`kubedra.controller.leadership.Leadership.may_write`): every
    write of :attr:`api` checks it (:func:`kubedra.kube.fence_writes`)."""

    def begin(self, view: ClusterView) -> OperatorState:
        """Create the state over the filled caches and let the workers start.

        Raises:
            RuntimeError: called before :func:`run` created the Lease cache.
        """
        if self.leases is None or self.nodes is None or self.slices is None:
            raise RuntimeError("the Lease, Node and slice caches are created before the first "
                               "event")
        view.nodes = Index(self.nodes)
        view.slices, view.slice_pools = self.slices.by_inventory, self.slices.by_pool
        view.all_slices = self.slices.all
        self.state = OperatorState(
            api=self.api, settings=self.settings, view=view, leases=self.leases,
            explain=ExplainState(event_interval=self.settings.explain_event_interval),
            attacher=load_attacher(self.settings.attacher), metrics=self.metrics)
        self.ready.set()  # the caches are frozen after the first pass, not now: see
        # freeze_after_first_pass
        return self.state

    def start(self) -> None:
        """Create the Node and slice caches and start :func:`run` as a background task (its
        crash is logged)."""
        self.nodes = ListWatch(self.api, NODES_PATH, NODE_DECODER,
                               lambda name, before, after: node_changed(self, name, before,
                                                                        after))
        self.slices = SliceCache(self.api, functools.partial(slice_changed, self),
                                 selector=self.settings.pool_selector or None)
        task = asyncio.create_task(run(self))
        task.add_done_callback(_report_crash)
        self.tasks.append(task)

    async def stop(self) -> None:
        """Cancel the background tasks, stop the explanation thread, close the API client."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.state is not None:
            self.state.explain.executor.shutdown(wait=False, cancel_futures=True)
        await self.api.close()


def _report_crash(task: asyncio.Task[None]) -> None:
    """Log a background task that ended with an exception (it would otherwise vanish)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("operator task crashed", task=task.get_name(), error=repr(task.exception()))


async def run(runtime: Runtime) -> None:
    """Watch agent Leases, wait for the caches, then run the workers and the tick until
    cancelled."""
    def lease_changed(node: str) -> None:
        if runtime.state is not None:
            check_lease(runtime.state, node, utcnow())

    runtime.leases = LeaseCache(runtime.api, runtime.settings.namespace, lease_changed)
    assert runtime.nodes is not None  # created by start()
    assert runtime.slices is not None
    lease_task = asyncio.create_task(runtime.leases.run())
    node_task = asyncio.create_task(runtime.nodes.run())
    slice_task = asyncio.create_task(runtime.slices.watch.run())
    await runtime.ready.wait()
    await runtime.leases.synced.wait()  # no pool is judged by a Lease not read yet
    await runtime.nodes.synced.wait()  # nor by a Node not read yet
    await runtime.slices.watch.synced.wait()  # nor by slices not listed yet
    state = runtime.state
    if state is None:  # ready is set only by begin(), which sets the state
        raise RuntimeError("the operator state is missing after the caches became ready")
    state.served = await detect_served(state)
    if note := state.explain.decide_as(state.served.server_version):
        log.warning("explanations may differ from the scheduler's", reason=note)
    for inventory in list(runtime.slices.by_inventory):
        # the slices listed before the state existed queued nothing: those of a deleted
        # inventory (kept while claims hold their devices) are reconciled from here
        state.inventory_queue.add(inventory)
    workers = start_workers(state)
    workers.append(asyncio.create_task(prepare_explainer(state)))
    workers.append(asyncio.create_task(watch_served(state)))
    if state.settings.fleet_metrics_interval:
        workers.append(asyncio.create_task(count_fleet(state)))
    try:
        await tick(state)
    finally:
        for task in [lease_task, node_task, slice_task, *workers]:
            task.cancel()


def start_workers(state: OperatorState) -> list[asyncio.Task[None]]:
    """The workers of the three queues: ``INVENTORY_WORKERS``, ``CLAIM_WORKERS`` and one
    explainer (its allocator runs in a thread of its own)."""
    timed = state.metrics.reconciled
    workers = [asyncio.create_task(work(state.inventory_queue, inventory_step(state),
                                        functools.partial(timed, "inventories")))
               for _ in range(INVENTORY_WORKERS)]
    workers += [asyncio.create_task(work(state.claim_queue, claim_step(state),
                                         functools.partial(timed, "claims")))
                for _ in range(CLAIM_WORKERS)]
    workers.append(asyncio.create_task(work(state.explain_queue, explain_step(state),
                                            functools.partial(timed, "explain"))))
    return workers


def inventory_step(state: OperatorState) -> Step[str]:
    """Reconcile one inventory, then queue the claims of its pool if what it publishes changed
    (devices may have gone or turned unhealthy; a claim's ``Ready`` reads nothing else of the
    inventory). A reconcile for a claim's allocation changes nothing a claim reads, so it
    queues no claim (``bench/RESULTS.md``, claims at 50/s)."""
    async def step(name: str) -> None:
        before = state.pools.get(name)
        await reconcile_inventory(state, name)
        state.inventories_reconciled += 1
        published = state.pools.get(name)
        if published and published != before:
            for use in state.view.uses_of(published.driver, published.name):
                state.claim_queue.add((use.namespace, use.name))
        freeze_after_first_pass(state)
    return step


def freeze_after_first_pass(state: OperatorState) -> None:
    """Once, when the first pass over the inventories is done (at least as many reconciles
    as inventories, and nothing queued or in progress but this one): collect the cyclic
    garbage, then freeze what is left (``gc.freeze``). What the caches hold lives long, so
    the cyclic collector need not walk it again (a full collection of the millions of
    objects a large fleet's caches hold is seconds of CPU under the interpreter lock);
    frozen objects are still freed by their reference counts.

    Frozen at the first event, when kopf had filled every index, it froze kopf's body of
    every listed object as well: each listed object's worker holds it until every index is
    filled, and a ``kopf.Body`` is a reference cycle with its views (``Body._meta`` is a
    ``Meta`` whose source is the body), so once the workers let go each was cyclic garbage
    in the permanent generation, never collected, holding the raw event it wraps: one
    listed inventory (60 KiB as ``json.loads`` makes it, 8 H200) per node for the life of
    the process (``bench/RESULTS.md``, scale, round 15). By the end of the first pass every
    listed object's handler has run, so their bodies are garbage the collection frees.
    """
    if (state.caches_frozen or state.inventory_queue.busy() > 1
            or state.inventories_reconciled < len(state.view.inventories)):
        return
    gc.collect()
    gc.freeze()
    state.caches_frozen = True


def claim_step(state: OperatorState) -> Step[tuple[str, str]]:
    """Reconcile one claim, by (namespace, name)."""
    async def step(key: tuple[str, str]) -> None:
        await reconcile_claim(state, *key)
    return step


def explain_step(state: OperatorState) -> Step[tuple[str, str]]:
    """Explain the claims of one pod, by (namespace, name)."""
    async def step(key: tuple[str, str]) -> None:
        await explain_pod(state, *key)
    return step


async def work(queue: WorkQueue[K], step: Step[K],
               timed: Callable[[str, float], None]) -> None:
    """Take keys from ``queue`` forever and run ``step`` on each; a failure is logged and the
    key retried with back-off. ``timed(outcome, started)`` is told how each step ended
    (``done``, ``retry`` or ``error``) and when it began (``time.monotonic()``)."""
    while True:
        key = await queue.get()
        started = time.monotonic()
        try:
            await step(key)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # retried with back-off
            log.warning("reconcile failed; will retry", key=str(key), error=str(err),
                        failures=queue.failures(key) + 1)
            timed("retry" if isinstance(err, Retry) else "error", started)
            queue.done(key, failed=True)
        else:
            timed("done", started)
            queue.done(key)


def node_changed(runtime: Runtime, name: str, before: dict[str, Any] | None,
                 after: dict[str, Any] | None) -> None:
    """What kubedra reads of Node ``name`` changed (the cache reports nothing else): its
    inventories are reconciled when it came, went or is another Node (UID:
    ``NodeNotFound``) or its kubelet declares other features, and pending pods explained again
    when its labels changed."""
    state = runtime.state
    if state is None:
        return
    if _uid(before) != _uid(after) or declared_features(before) != declared_features(after):
        for inventory in state.view.inventories_on_node(name):
            state.inventory_queue.add(inventory)
    labels = None if after is None else after["metadata"]["labels"]
    if state.explain.node_changed(name, labels):
        state.explain_again()


def slice_changed(runtime: Runtime, before: SliceRecord | None, after: SliceRecord | None,
                  version: str) -> None:
    """A slice changed (the cache reports nothing else; ``version``: the resourceVersion of
    the change, of a delete the delete's): if it is one of the operator's, tell the overlay
    of the operator's own writes what the watch saw and reconcile its inventory (the slice
    may have been changed or deleted by hand); a deleted inventory's last slice may have held
    back another inventory of its pool; explanations of pending pods may change."""
    state = runtime.state
    if state is None:
        return
    record = after or before
    assert record is not None  # a change has one side at least
    owner = record.inventory()
    if owner:
        state.overlay.observe(owner, record.metadata.name, version, deleted=after is None)
        state.inventory_queue.add(owner)
        if after is None and not state.view.has_inventory(owner):
            for other in state.view.inventories_of_pool(*record.pool()):
                state.inventory_queue.add(other)
    state.explain.inventory_version += 1
    state.explain_again()


def _uid(node: dict[str, Any] | None) -> str | None:
    return None if node is None else str(node["metadata"]["uid"])


def check_lease(state: OperatorState, node: str, now: datetime.datetime) -> None:
    """Queue the node's inventories whose agent Lease changed state (live, expired, missing)
    since they were last queued for it; renewing a live Lease changes nothing (at 5,000 nodes
    the agents renew 375 times a second)."""
    lease_state = state.leases.state(node, now)
    for name in state.view.inventories_on_node(node):
        if state.lease_states.get(name) != lease_state:
            state.lease_states[name] = lease_state
            state.inventory_queue.add(name)


async def tick(state: OperatorState) -> None:
    """Notice Lease expiry and the end of health hold-downs and drain graces (time events,
    not watch events) and resync everything now and then. Only the Leases that expired since
    the last tick are looked at (:meth:`LeaseCache.expired`); a Lease's other changes come
    through its watch (``lease_changed``)."""
    resync = ResyncRound()
    interval = state.settings.lease_check_interval
    while True:
        now = utcnow()
        for node in state.leases.expired(now):
            check_lease(state, node, now)
        for name, until in list(state.wake_ups.items()):
            if until <= now:
                del state.wake_ups[name]
                state.inventory_queue.add(name)
        for name in resync.due(state.view.inventory_names, interval):
            state.inventory_queue.add(name)
        await asyncio.sleep(interval)
