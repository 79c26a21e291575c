"""Learn what the cluster serves (:class:`kubedra.publishing.features.ServedFeatures`): API
discovery for the versions of ``resource.k8s.io`` and DeviceTaintRule, and server-side dry-run
creates of the probe slices for the fields the API server keeps.

At start and then every ``feature_detection_interval`` (:func:`watch_served`). The probe is
made again each time rather than only when discovery changes: a feature gate flipped on a
restarted API server of the same version changes neither its version nor its discovery
document (the fields belong to resources it serves either way), only what a write keeps. A
probe is six small requests, none stored; a detection that finds the same features changes
nothing, and one that finds others queues every inventory, whose fingerprint (it covers
``off``) then no longer matches: the pools whose slices change are written again.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import aiohttp
from kubernetes_asyncio.client import ApiClient, ApiException

from kubedra import kube
from kubedra.controller.state import OperatorState
from kubedra.logging import get_logger
from kubedra.publishing import features

log = get_logger(__name__)


async def detect(api: ApiClient, driver: str) -> features.ServedFeatures:
    """What this cluster serves; ``driver`` names the probe slices (a driver the operator may
    write slices of).

    Raises:
        ApiException: discovery failed, or a dry-run create was refused (no permission, or a
            server without ``resource.k8s.io/v1``); a refused probe of the effect None (422,
            or 403 from admission) is ``taint_effect_none=False`` instead.
    """
    group = await kube.get_discovery(api, "/apis/resource.k8s.io")
    versions = tuple(v["version"] for v in group.get("versions") or [])
    try:
        v1 = await kube.get_discovery(api, "/apis/resource.k8s.io/v1")
    except ApiException as err:
        if not kube.is_not_found(err):
            raise
        v1 = {}
    rules = any(r.get("name") == "devicetaintrules" for r in v1.get("resources") or [])
    served = features.served_from_probe(
        await kube.dry_run_resource_slice(api, features.probe_slice(driver)),
        await kube.dry_run_resource_slice(api, features.probe_counter_slice(driver)),
        resource_versions=versions, device_taint_rules=rules,
        server_version=await kube.server_version(api))
    if not served.device_taints:
        return served
    try:
        await kube.dry_run_resource_slice(api, features.probe_effect_none_slice(driver))
    except ApiException as err:
        # 422: validation (1.34's validDeviceTaintEffects); 403: an admission webhook or
        # policy. The probes before it were taken with the same permissions, so either is
        # the effect refused, and what they learned stands.
        if err.status not in (403, 422):
            raise
        return replace(served, taint_effect_none=False)
    return served


PROBE_DRIVER = "gpu.kubedra.io"
"""Driver named by the probe slices (any driver the operator may publish)."""


async def detect_served(state: OperatorState) -> features.ServedFeatures:
    """:func:`detect` for the operator at start, logged; where detection fails, the operator
    assumes the defaults of :class:`~kubedra.publishing.features.ServedFeatures` (the fields
    of 1.37's default gates kept), says so, and :func:`watch_served` tries again."""
    served = await _detect_logged(state, "could not learn what the cluster serves; assuming "
                                         "the defaults until the next detection")
    if served is None:
        return features.ServedFeatures()
    log.info("cluster features detected", **served.to_json())
    return served


async def _detect_logged(state: OperatorState, failed: str) -> features.ServedFeatures | None:
    """:func:`detect`, counted in ``state.feature_detections``; None (logged as ``failed``,
    with the reason) where the API server refused or could not be reached (restarting)."""
    try:
        served = await detect(state.api, PROBE_DRIVER)
    except ApiException as err:
        log.warning(failed, error=kube.api_error_message(err))
        return None
    except (TimeoutError, aiohttp.ClientError, OSError) as err:
        log.warning(failed, error=f"the API server is unreachable: {err}")
        return None
    state.feature_detections += 1
    return served


async def watch_served(state: OperatorState) -> None:
    """Detect again every ``feature_detection_interval`` seconds (never when 0), forever; when
    the features differ from ``state.served``, take them and queue every inventory. A failed
    detection (an API error, or the API server unreachable while it restarts) keeps what was
    known (logged)."""
    interval = state.settings.feature_detection_interval
    if not interval:
        return
    while True:
        await asyncio.sleep(interval)
        served = await _detect_logged(state, "could not detect what the cluster serves again; "
                                             "keeping what was detected before")
        if served is None or served == state.served:
            continue
        log.info("cluster features changed", before=state.served.to_json(),
                 after=served.to_json())
        state.served = served
        for name in state.view.inventory_names():
            state.inventory_queue.add(name)
