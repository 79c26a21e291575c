"""The operator's kopf registry: indexes, event handlers, login, startup and cleanup.

Only ``@kopf.index`` and ``@kopf.on.event`` are used (no state-changing handlers), so kopf never
annotates or finalizes any object, ours included. Event handlers only enqueue keys; workers
started at startup run the reconcilers with their own retry back-off. kopf runs event handlers
only after every index has been filled, so the first handler call marks the caches complete.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import kopf

from kubedra import kube
from kubedra.api import inventory as inv
from kubedra.controller.claims import reconcile_claim
from kubedra.controller.explain_state import ExplainState
from kubedra.controller.explanations import (
    PENDING_POD_SELECTOR,
    explain_pod,
    unschedulable_for_claims,
)
from kubedra.controller.inventories import raw_pool_key, reconcile_inventory
from kubedra.controller.leases import LeaseCache
from kubedra.controller.queue import WorkQueue
from kubedra.controller.state import ClaimUse, ClusterView, OperatorState, utcnow
from kubedra.logging import get_logger
from kubedra.publishing.sync import INVENTORY_LABEL, MANAGED_BY
from kubedra.settings import Settings

registry = kopf.OperatorRegistry()
log = get_logger(__name__)

INVENTORIES = (inv.GROUP, inv.VERSION, inv.PLURAL)
SLICES = ("resource.k8s.io", "v1", "resourceslices")
CLAIMS = ("resource.k8s.io", "v1", "resourceclaims")
CLASSES = ("resource.k8s.io", "v1", "deviceclasses")
TAINT_RULES = ("resource.k8s.io", "v1", "devicetaintrules")
PODS = ("v1", "pods")
NODES = ("v1", "nodes")
INVENTORY_WORKERS = 8
CLAIM_WORKERS = 2
RESYNC_INTERVAL = 300.0


@dataclass
class Runtime:
    """kubedra's operator-wide objects. kopf gives each watched object a shallow copy of the
    operator's memo, so everything mutable lives in this one shared instance."""

    settings: Settings
    api: Any = None
    leases: LeaseCache | None = None
    state: OperatorState | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    claim_pools: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class Memo(kopf.Memo):
    """kopf's memo, carrying the :class:`Runtime` (handlers receive it typed as ``Any``)."""

    runtime: Runtime


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """No diff-base: kopf builds one per watch event (a deep copy of the whole body) to detect
    changes for create/update handlers, and kubedra has none — only indexes and event
    handlers. Skipping it removes most of kopf's per-event CPU cost on large inventories."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def _runtime(memo: Any) -> Runtime:
    return cast(Memo, memo).runtime


def _plain(body: Any) -> dict[str, Any]:
    """A plain-dict copy of a kopf body without ``managedFields``."""
    data = dict(body)
    meta = {k: v for k, v in dict(data.get("metadata", {})).items() if k != "managedFields"}
    return {**data, "metadata": meta}


@kopf.on.login(registry=registry)
async def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
    """Authenticate kopf with the same credentials as kubedra's own client."""
    api = await kube.make_api_client(_runtime(memo).settings.kubeconfig)
    async with api:
        cfg = api.configuration
        token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
        scheme, _sep, value = (token or "").partition(" ")
        return kopf.ConnectionInfo(
            server=cfg.host, ca_path=cfg.ssl_ca_cert, insecure=not cfg.verify_ssl,
            certificate_path=cfg.cert_file, private_key_path=cfg.key_file,
            scheme=scheme or None if value else None, token=value or token or None,
        )


@kopf.on.startup(registry=registry)
async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    """Configure kopf, create the API client and start the workers."""
    runtime = _runtime(memo)
    if runtime.settings.log_level.upper() != "DEBUG":  # one line per event is too much
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    settings.watching.server_timeout = 300
    settings.networking.error_backoffs = [1, 2, 5, 10]
    settings.watching.field_selectors[PODS] = PENDING_POD_SELECTOR
    runtime.api = await kube.make_api_client(runtime.settings.kubeconfig)
    task = asyncio.create_task(_run(runtime))
    task.add_done_callback(_report_crash)
    runtime.tasks.append(task)


def _report_crash(task: asyncio.Task[None]) -> None:
    """Log a background task that ended with an exception (it would otherwise vanish)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("operator task crashed", task=task.get_name(), error=repr(task.exception()))


@kopf.on.cleanup(registry=registry)
async def cleanup(memo: Any, **_: Any) -> None:
    """Stop the workers and close the API client."""
    runtime = _runtime(memo)
    for task in runtime.tasks:
        task.cancel()
    await asyncio.gather(*runtime.tasks, return_exceptions=True)
    if runtime.state is not None:
        runtime.state.explain.executor.shutdown(wait=False, cancel_futures=True)
    await runtime.api.close()


@kopf.on.probe(id="kubedra", registry=registry)
async def probe(memo: Any, **_: Any) -> dict[str, Any]:
    """What ``/healthz`` shows about kubedra: caches filled, Leases synced, queue lengths."""
    runtime = _runtime(memo)
    state = runtime.state
    return {
        "cachesReady": runtime.ready.is_set(),
        "leasesSynced": bool(runtime.leases and runtime.leases.synced.is_set()),
        "inventoriesQueued": len(state.inventory_queue) if state else 0,
        "claimsQueued": len(state.claim_queue) if state else 0,
        "sliceWrites": state.slice_writes if state else 0,
    }


# --- indexes (kopf fills them before any event handler runs) ----------------------------------

@kopf.index(*INVENTORIES, registry=registry)
async def inventories(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    """Inventory name → the inventory."""
    return {name: _plain(body)}


@kopf.index(*INVENTORIES, registry=registry)
async def inventory_pools(name: str, body: kopf.Body, **_: Any) -> dict[tuple[str, str], str]:
    """(driver, pool) → names of the inventories that name it (normally one)."""
    return {raw_pool_key(_plain(body)): name}


@kopf.index(*INVENTORIES, registry=registry)
async def node_inventories(name: str, spec: kopf.Spec, **_: Any) -> dict[str, str]:
    """Node name → names of the node-local inventories of that node."""
    node = spec.get("nodeName")
    return {node: name} if node else {}


@kopf.index(*SLICES, registry=registry, labels=MANAGED_BY)
async def slices(labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    """Inventory name → its slices."""
    owner = labels.get(INVENTORY_LABEL)
    return {owner: _plain(body)} if owner else {}


@kopf.index(*CLAIMS, registry=registry)
async def claims(namespace: str | None, name: str, body: kopf.Body, **_: Any
                 ) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) → allocated claim (unallocated claims are not indexed)."""
    if not (body.get("status") or {}).get("allocation"):
        return {}
    return {(namespace or "", name): _plain(body)}


@kopf.index(*CLAIMS, registry=registry)
async def claim_uses(namespace: str | None, name: str, uid: str, body: kopf.Body, **_: Any
                     ) -> dict[tuple[str, str], list[ClaimUse]]:
    """(driver, pool) → the allocated devices of that pool, with their claims."""
    results = (((body.get("status") or {}).get("allocation") or {}).get("devices") or {}
               ).get("results") or []
    uses: dict[tuple[str, str], list[ClaimUse]] = {}
    for r in results:
        uses.setdefault((r["driver"], r["pool"]), []).append(ClaimUse(
            namespace=namespace or "", name=name, uid=uid, request=r["request"],
            driver=r["driver"],
            pool=r["pool"], device=r["device"]))
    return uses


@kopf.index(*CLAIMS, registry=registry)
async def pending_claims(namespace: str | None, name: str, body: kopf.Body, **_: Any
                         ) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) → unallocated claim (for explanations)."""
    if (body.get("status") or {}).get("allocation"):
        return {}
    return {(namespace or "", name): _plain(body)}


@kopf.index(*SLICES, registry=registry)
async def all_slices(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    """Slice name → every ResourceSlice of every driver (for explanations)."""
    return {name: _plain(body)}


@kopf.index(*CLASSES, registry=registry)
async def device_classes(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    """DeviceClass name → the class."""
    return {name: _plain(body)}


@kopf.index(*TAINT_RULES, registry=registry)
async def taint_rules(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    """DeviceTaintRule name → the rule."""
    return {name: _plain(body)}


@kopf.index(*NODES, registry=registry)
async def nodes(name: str, labels: kopf.Labels, **_: Any) -> dict[str, dict[str, Any]]:
    """Node name → its name and labels (all an explanation reads of a node)."""
    return {name: {"metadata": {"name": name, "labels": dict(labels)}}}


@kopf.index(*PODS, registry=registry)
async def unschedulable_pods(namespace: str | None, name: str, body: kopf.Body, **_: Any
                             ) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) → pod that kube-scheduler reports unschedulable because of its
    claims (the watch sees only pods not bound to a node)."""
    pod = _plain(body)
    return {(namespace or "", name): pod} if unschedulable_for_claims(pod) else {}


# --- events: enqueue ----------------------------------------------------------------------------

def _capture(memo: Any, kwargs: dict[str, Any]) -> OperatorState:
    """Create the state on the first event, when kopf has filled every index."""
    runtime = _runtime(memo)
    if runtime.state is None:
        assert runtime.leases is not None
        view = ClusterView(inventories=kwargs["inventories"], pools=kwargs["inventory_pools"],
                           node_inventories=kwargs["node_inventories"], slices=kwargs["slices"],
                           claims=kwargs["claims"], claim_uses=_flatten(kwargs["claim_uses"]),
                           all_slices=kwargs["all_slices"],
                           device_classes=kwargs["device_classes"],
                           taint_rules=kwargs["taint_rules"], nodes=kwargs["nodes"],
                           pending_claims=kwargs["pending_claims"],
                           unschedulable_pods=kwargs["unschedulable_pods"])
        runtime.state = OperatorState(
            api=runtime.api, settings=runtime.settings, view=view, leases=runtime.leases,
            explain=ExplainState(event_interval=runtime.settings.explain_event_interval))
        runtime.ready.set()
    return runtime.state


class _flatten(dict[tuple[str, str], Any]):
    """claim_uses stores a list per claim; present one flat store per pool."""

    def __init__(self, index: Any) -> None:
        super().__init__()
        self._index = index

    def get(self, key: Any, default: Any = None) -> Any:
        store = self._index.get(key)
        if store is None:
            return default
        return [use for uses in store for use in uses]


@kopf.on.event(*INVENTORIES, registry=registry)
async def on_inventory(name: str, body: kopf.Body, memo: Any, **kwargs: Any) -> None:
    """An inventory changed: reconcile it, and the others naming the same pool (one of them
    may now own it)."""
    state = _capture(memo, kwargs)
    state.inventory_queue.add(name)
    for other in state.view.inventories_of_pool(*raw_pool_key(_plain(body))):
        state.inventory_queue.add(other)


@kopf.on.event(*SLICES, registry=registry)
async def on_slice(labels: kopf.Labels, memo: Any, **kwargs: Any) -> None:
    """A slice changed: reconcile its inventory if it is one of ours (it may have been deleted
    by hand); explanations of pending pods may change."""
    state = _capture(memo, kwargs)
    ours = all(labels.get(k) == v for k, v in MANAGED_BY.items())
    owner = labels.get(INVENTORY_LABEL) if ours else None
    if owner:
        state.inventory_queue.add(owner)
    _inventory_changed(state)


@kopf.on.event(*CLASSES, registry=registry)
async def on_device_class(memo: Any, **kwargs: Any) -> None:
    """A DeviceClass changed: explanations may change."""
    _inventory_changed(_capture(memo, kwargs))


@kopf.on.event(*TAINT_RULES, registry=registry)
async def on_taint_rule(memo: Any, **kwargs: Any) -> None:
    """A DeviceTaintRule changed: explanations may change."""
    _inventory_changed(_capture(memo, kwargs))


def _inventory_changed(state: OperatorState) -> None:
    state.explain.inventory_version += 1
    _explain_again(state)


@kopf.on.event(*NODES, registry=registry)
async def on_node(name: str, type: str | None, labels: kopf.Labels, memo: Any,
                  **kwargs: Any) -> None:
    """A node changed: explanations change only when its labels did (heartbeats do not)."""
    state = _capture(memo, kwargs)
    if state.explain.node_changed(name, None if type == "DELETED" else labels):
        _explain_again(state)


@kopf.on.event(*PODS, registry=registry)
async def on_pod(namespace: str | None, name: str, type: str | None, body: kopf.Body,
                 memo: Any, **kwargs: Any) -> None:
    """A pending pod changed: explain its claims if the scheduler gave up on them."""
    state = _capture(memo, kwargs)
    key = (namespace or "", name)
    if type != "DELETED" and unschedulable_for_claims(body):
        state.explain_queue.add(key)
    else:
        state.explain.forget_pod(key)


def _explain_again(state: OperatorState) -> None:
    """Queue every unschedulable pod (pods whose inputs did not change are skipped)."""
    for key in list(state.view.unschedulable_pods):
        state.explain_queue.add(key)


@kopf.on.event(*CLAIMS, registry=registry)
async def on_claim(namespace: str | None, name: str, type: str | None, body: kopf.Body,
                   memo: Any, **kwargs: Any) -> None:
    """A claim changed: reconcile it, and the inventories whose allocations it touches;
    explanations of pending pods may change."""
    state = _capture(memo, kwargs)
    state.explain.claims_version += 1
    if type == "DELETED" or (body.get("status") or {}).get("allocation"):
        state.explain.forget_claim((namespace or "", name))
    _explain_again(state)
    claim_pools = _runtime(memo).claim_pools
    namespace = namespace or ""
    results = (((body.get("status") or {}).get("allocation") or {}).get("devices") or {}
               ).get("results") or []
    pools = {(r["driver"], r["pool"]) for r in results}
    touched = pools | claim_pools.get((namespace, name), set())
    if pools:
        claim_pools[(namespace, name)] = pools
        state.claim_queue.add((namespace, name))
    else:
        claim_pools.pop((namespace, name), None)
    for driver, pool in touched:
        inventory = state.inventory_for_pool(driver, pool)
        if inventory:
            state.inventory_queue.add(inventory)


# --- workers ------------------------------------------------------------------------------------

async def _run(runtime: Runtime) -> None:
    def lease_changed(node: str) -> None:
        if runtime.state is not None:
            for name in runtime.state.view.inventories_on_node(node):
                runtime.state.inventory_queue.add(name)

    runtime.leases = LeaseCache(runtime.api, runtime.settings.namespace, lease_changed)
    lease_task = asyncio.create_task(runtime.leases.run())
    await runtime.ready.wait()
    state = runtime.state
    assert state is not None
    workers = [asyncio.create_task(_work(state.inventory_queue, _inventory_step(state)))
               for _ in range(INVENTORY_WORKERS)]
    workers += [asyncio.create_task(_work(state.claim_queue, _claim_step(state)))
                for _ in range(CLAIM_WORKERS)]
    workers.append(asyncio.create_task(_work(state.explain_queue, _explain_step(state))))
    try:
        await _tick(state)
    finally:
        for task in [lease_task, *workers]:
            task.cancel()


def _inventory_step(state: OperatorState) -> Any:
    async def step(name: str) -> None:
        await reconcile_inventory(state, name)
        published = state.pools.get(name)
        if published:  # devices may have gone or turned unhealthy: re-check their claims
            for use in state.view.uses_of(published.pool.driver, published.pool.name):
                state.claim_queue.add((use.namespace, use.name))
    return step


def _claim_step(state: OperatorState) -> Any:
    async def step(key: tuple[str, str]) -> None:
        await reconcile_claim(state, *key)
    return step


def _explain_step(state: OperatorState) -> Any:
    async def step(key: tuple[str, str]) -> None:
        await explain_pod(state, *key)
    return step


async def _work(queue: WorkQueue[Any], step: Any) -> None:
    while True:
        key = await queue.get()
        try:
            await step(key)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # retried with back-off
            log.warning("reconcile failed; will retry", key=str(key), error=str(err),
                        failures=queue.failures(key) + 1)
            queue.done(key, failed=True)
        else:
            queue.done(key)


async def _tick(state: OperatorState) -> None:
    """Notice Lease expiry (a time event, not a watch event) and resync everything now and
    then."""
    since_resync = 0.0
    interval = state.settings.lease_check_interval
    while True:
        now = utcnow()
        for node in state.view.nodes_with_inventories():
            lease_state = state.leases.state(node, now)
            for name in state.view.inventories_on_node(node):
                if state.lease_states.get(name) != lease_state:
                    state.lease_states[name] = lease_state
                    state.inventory_queue.add(name)
        since_resync += interval
        if since_resync >= RESYNC_INTERVAL:
            since_resync = 0.0
            for name in state.view.inventory_names():
                state.inventory_queue.add(name)
        await asyncio.sleep(interval)
