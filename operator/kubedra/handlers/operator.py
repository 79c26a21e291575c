"""The operator's kopf handlers: login, startup, cleanup and watch events; its health report.
(ResourceSlices and Nodes are watched by the operator's own caches, reported to
:func:`kubedra.controller.runtime.slice_changed` and ``node_changed``.)

Only ``@kopf.index`` (:mod:`kubedra.handlers.indexes`) and ``@kopf.on.event`` are used (no
state-changing handlers), so kopf never annotates or finalizes any object, ours included. Event
handlers only enqueue keys; the workers of :mod:`kubedra.controller.runtime` run the
reconcilers with their own retry back-off. kopf runs event handlers only after every index has
been filled, so the first handler call creates the state over complete caches.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import kopf

from kubedra import kube
from kubedra.controller.explanations import PENDING_POD_SELECTOR, unschedulable_for_claims
from kubedra.controller.runtime import Runtime
from kubedra.controller.state import OperatorState, allocation_results, pool_key
from kubedra.handlers import resources
from kubedra.handlers.indexes import cluster_view
from kubedra.logging import get_logger

log = get_logger(__name__)

KOPF_WATCH_LOGGER = "kopf._cogs.clients.watching"
"""kopf's logger of watch-stream starts, stops and restarts (``Restarting the watch-stream for
<resource>`` after 410 Gone)."""

LIST_CHUNK = 50
"""Objects per page of kopf's lists where the API server has no streaming list (and of its
lists of CRDs and namespaces). kopf decodes a page in one ``json.loads``, which holds the
interpreter lock, the election thread's too, for the whole page: 500 MIG inventories of 397 KB
are a 79 MB page, 3 to 4 s of CPU, and such a page fenced the leader (``bench/RESULTS.md``, round
4); 50 are at most 20 MB."""


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


@kopf.on.login(registry=resources.registry)
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


@kopf.on.startup(registry=resources.registry)
async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    """Configure kopf, create the API client and start the workers."""
    runtime = _runtime(memo)
    if runtime.settings.log_level.upper() != "DEBUG":  # one line per event is too much
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # kopf logs its watch-streams' life at debug level, one line each: started, stopped, and
    # "Restarting the watch-stream" after 410 Gone (the resourceVersion was compacted away:
    # it lists again). Rare and worth seeing: shown at every level.
    logging.getLogger(KOPF_WATCH_LOGGER).setLevel(logging.DEBUG)
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    settings.watching.server_timeout = 300
    settings.watching.chunk_size = LIST_CHUNK
    runtime.api = await kube.make_api_client(runtime.settings.kubeconfig)
    kube.fence_writes(runtime.api, runtime.may_write)
    # the streaming list sends each object as a watch event of its own, decoded alone (one
    # object: at most the API server's request limit, ~1.5 MB, milliseconds), where a page
    # is decoded whole; without it kopf lists in pages of LIST_CHUNK
    settings.watching.initial_streaming = await kube.serves_streaming_list(
        runtime.api, resources.url(resources.INVENTORIES))
    log.info("initial lists", streaming=settings.watching.initial_streaming,
             page=None if settings.watching.initial_streaming else LIST_CHUNK)
    settings.networking.error_backoffs = [1, 2, 5, 10]
    settings.watching.field_selectors[resources.PODS] = PENDING_POD_SELECTOR
    if runtime.settings.pool_selector:  # the pools this process owns (kubedra.api.selector)
        settings.watching.label_selectors[resources.INVENTORIES] = runtime.settings.pool_selector
    runtime.start()


@kopf.on.cleanup(registry=resources.registry)
async def cleanup(memo: Any, **_: Any) -> None:
    """Stop the workers and close the API client."""
    await _runtime(memo).stop()


def health(runtime: Runtime) -> dict[str, Any]:
    """What the leader's ``/healthz`` shows about its work (served by
    :func:`kubedra.handlers.command.run_operator`): caches filled, Leases synced, queue lengths,
    keys queued or in progress (``…Busy``), inventories reconciled (and of those found
    unchanged), slice writes since start, detections of what the cluster serves
    (``featureDetections``, the first at start included), Node watch events and of those the
    ones that changed what kubedra reads of a Node (``nodeChanges``; a heartbeat changes
    nothing), and what the cluster serves (``servedFeatures``:
    :meth:`kubedra.publishing.features.ServedFeatures.to_json`, null until it is detected)."""
    state = runtime.state
    return {
        "cachesReady": runtime.ready.is_set(),
        "leasesSynced": bool(runtime.leases and runtime.leases.synced.is_set()),
        "inventoriesQueued": len(state.inventory_queue) if state else 0,
        "claimsQueued": len(state.claim_queue) if state else 0,
        "inventoriesBusy": state.inventory_queue.busy() if state else 0,
        "claimsBusy": state.claim_queue.busy() if state else 0,
        "inventoriesReconciled": state.inventories_reconciled if state else 0,
        "inventoriesUnchanged": state.inventories_unchanged if state else 0,
        "sliceWrites": state.slice_writes if state else 0,
        "featureDetections": state.feature_detections if state else 0,
        "nodeEvents": runtime.nodes.counters.events if runtime.nodes else 0,
        "nodeChanges": runtime.nodes.counters.changes if runtime.nodes else 0,
        # null until detected (a failed detection leaves it null too: the log says why)
        "servedFeatures": state.served.to_json() if state and state.served.server_version
        else None,
    }


def _state(memo: Any, indexes: dict[str, Any]) -> OperatorState:
    """The operator state; created on the first event, when kopf has filled every index."""
    runtime = _runtime(memo)
    return runtime.state or runtime.begin(cluster_view(indexes))


@kopf.on.event(*resources.INVENTORIES, registry=resources.registry)
async def on_inventory(name: str, body: kopf.Body, memo: Any, **kwargs: Any) -> None:
    """An inventory changed: reconcile it, and the others naming the same pool (one of them
    may now own it) — unless the event is the operator's own allocations-only status write
    and nothing else changed (:meth:`~kubedra.controller.state.StatusOverlay.is_quiet_echo`:
    one reconcile per claim saved, ``bench/RESULTS.md``, claims at 1,000 nodes)."""
    state = _state(memo, kwargs)
    state.inventory_overlay.observe(name, body)
    if state.inventory_overlay.is_quiet_echo(name, body):
        return
    state.inventory_queue.add(name)
    for other in state.view.inventories_of_pool(*pool_key(body)):
        state.inventory_queue.add(other)


@kopf.on.event(*resources.CLASSES, registry=resources.registry)
async def on_device_class(memo: Any, **kwargs: Any) -> None:
    """A DeviceClass changed: explanations may change."""
    _inventory_changed(_state(memo, kwargs))


@kopf.on.event(*resources.TAINT_RULES, registry=resources.registry)
async def on_taint_rule(memo: Any, **kwargs: Any) -> None:
    """A DeviceTaintRule changed: explanations may change."""
    _inventory_changed(_state(memo, kwargs))


def _inventory_changed(state: OperatorState) -> None:
    state.explain.inventory_version += 1
    _explain_again(state)


@kopf.on.event(*resources.PODS, registry=resources.registry)
async def on_pod(namespace: str | None, name: str, type: str | None, body: kopf.Body,
                 memo: Any, **kwargs: Any) -> None:
    """A pending pod changed: explain its claims if the scheduler gave up on them."""
    state = _state(memo, kwargs)
    key = (namespace or "", name)
    if type != "DELETED" and unschedulable_for_claims(body):
        state.explain_queue.add(key)
    else:
        state.explain.forget_pod(key)


def _explain_again(state: OperatorState) -> None:
    state.explain_again()


@kopf.on.event(*resources.CLAIMS, registry=resources.registry)
async def on_claim(namespace: str | None, name: str, type: str | None, body: kopf.Body,
                   memo: Any, **kwargs: Any) -> None:
    """A claim changed: reconcile it, and the inventories whose allocations it touches;
    explanations of pending pods may change — unless the event is the operator's own
    ``status.devices`` write and nothing else changed
    (:func:`kubedra.controller.claims.same_inputs`: one claim reconcile per claim saved,
    ``bench/RESULTS.md``, claims at 50/s)."""
    state = _state(memo, kwargs)
    state.claim_overlay.observe((namespace or "", name), body)
    if state.claim_overlay.is_quiet_echo((namespace or "", name), body):
        return
    state.explain.claims_version += 1
    if type == "DELETED" or (body.get("status") or {}).get("allocation"):
        state.explain.forget_claim((namespace or "", name))
    _explain_again(state)
    claim_pools = _runtime(memo).claim_pools
    namespace = namespace or ""
    pools = {(r["driver"], r["pool"]) for r in allocation_results(body)}
    touched = pools | claim_pools.get((namespace, name), set())
    if pools:
        claim_pools[(namespace, name)] = pools
        state.claim_queue.add((namespace, name))
    else:
        claim_pools.pop((namespace, name), None)
    for driver, pool in touched:  # status.allocations: one write for a burst of claims
        inventory = state.inventory_for_pool(driver, pool)
        if inventory:
            state.inventory_queue.add_within(inventory, state.settings.allocations_delay)
