"""Small helpers for end-to-end tests and the demo: read objects as plain dicts, make pods
that use claim templates (on kwok nodes, or real containers on a real node that report what
they were given)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness import KWOK_NODE_LABEL
from e2e.harness.images import TEST_IMAGE
from e2e.harness.wait import eventually
from kubedra.api import inventory as inv


async def read_inventory(api: ApiClient, name: str) -> dict[str, Any] | None:
    """The DeviceInventory as a dict, or None."""
    try:
        obj: dict[str, Any] = await client.CustomObjectsApi(api).get_cluster_custom_object(
            inv.GROUP, inv.VERSION, inv.PLURAL, name)
        return obj
    except ApiException as err:
        if err.status == 404:
            return None
        raise


async def slices_of(api: ApiClient, inventory_name: str) -> list[dict[str, Any]]:
    """The ResourceSlices of an inventory, sorted by name."""
    listed = await client.ResourceV1Api(api).list_resource_slice(
        label_selector=f"kubedra.io/inventory={inventory_name}")
    items = [api.sanitize_for_serialization(s) for s in listed.items]
    return sorted(items, key=lambda s: s["metadata"]["name"])


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The condition ``type_`` of ``obj.status.conditions``."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == type_:
            return dict(cond)
    return None


REPORT_SCRIPT = ("{ env | grep '^NVIDIA_' | sort; for f in /dev/nvidia* /dev/nvidia-caps/*; "
                 'do [ -c "$f" ] && echo "$f"; done; } > /dev/termination-log; exit 0')
"""What a reporting container writes as its termination message: the ``NVIDIA_*`` variables,
sorted, then the NVIDIA device nodes it has, one per line."""


def gpu_claim_spec(selector: str | None = None, device_class: str = "gpu.kubedra.io",
                   tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A ResourceClaim spec asking (request ``gpu``) for one device of ``device_class``
    matching the CEL ``selector`` (any device of the class without one), tolerating the
    device ``tolerations`` (KEP-5055) if given."""
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    if tolerations:
        exactly["tolerations"] = tolerations
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


async def create_claim_template(api: ApiClient, namespace: str, name: str,
                                selector: str | None = None,
                                device_class: str = "gpu.kubedra.io",
                                tolerations: list[dict[str, Any]] | None = None) -> None:
    """A ResourceClaimTemplate ``name`` with :func:`gpu_claim_spec`."""
    await client.ResourceV1Api(api).create_namespaced_resource_claim_template(namespace, {
        "metadata": {"name": name},
        "spec": {"spec": gpu_claim_spec(selector, device_class, tolerations)}})


async def create_gpu_pod(api: ApiClient, namespace: str, name: str, selector: str, *,
                         device_class: str = "gpu.kubedra.io", node: str | None = None,
                         tolerations: list[dict[str, Any]] | None = None) -> None:
    """A ResourceClaimTemplate asking for one device of ``device_class`` matching the CEL
    ``selector`` (tolerating the device ``tolerations``), and a pod (for kwok nodes, or for
    ``node`` only) that uses it."""
    node_selector = {KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1]}
    if node:
        node_selector["kubernetes.io/hostname"] = node
    await create_claim_template(api, namespace, name, selector, device_class, tolerations)
    await client.CoreV1Api(api).create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": node_selector,
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [{"name": "main", "image": "registry.invalid/cuda-app:1",
                            "resources": {"claims": [{"name": "gpu"}]}}],
        }})


async def pod_claim(api: ApiClient, namespace: str, pod: str) -> dict[str, Any] | None:
    """The ResourceClaim generated for ``pod`` (claim ``gpu``), or None before it exists."""
    obj = await client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
    for status in obj.status.resource_claim_statuses or []:
        if status.resource_claim_name:
            claim = await client.ResourceV1Api(api).read_namespaced_resource_claim(
                status.resource_claim_name, namespace)
            plain: dict[str, Any] = api.sanitize_for_serialization(claim)
            return plain
    return None


async def posted_events(api: ApiClient, namespace: str, field_selector: str, *,
                        count: int = 1, timeout: float = 60.0) -> list[Any]:
    """The Events (``V1Event``) in ``namespace`` that match ``field_selector``, once at least
    ``count`` are there: kopf posts an Event from a queue of its own, so it may come after the
    status written with it. Raises TimeoutError after ``timeout`` seconds with fewer."""
    async def listed() -> list[Any] | None:
        events = await client.CoreV1Api(api).list_namespaced_event(
            namespace, field_selector=field_selector)
        return list(events.items) if len(events.items) >= count else None
    found: list[Any] = await eventually(listed, timeout=timeout,
                                        what=f"{count} Events ({field_selector})")
    return found


async def claim_events(api: ApiClient, namespace: str, claim: str,
                       reason: str) -> list[dict[str, Any]]:
    """The Events with ``reason`` about ResourceClaim ``claim``, oldest first."""
    listed = await client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={claim},reason={reason}")
    events = [api.sanitize_for_serialization(e) for e in listed.items]
    return sorted((e for e in events if e["involvedObject"].get("kind") == "ResourceClaim"),
                  key=lambda e: e.get("firstTimestamp") or "")


async def create_reporting_pod(api: ApiClient, namespace: str, name: str, node: str, *,
                               template: str | None = None, claim: str | None = None,
                               script: str = REPORT_SCRIPT,
                               extended_resources: dict[str, int] | None = None) -> None:
    """A pod for real node ``node`` that uses claim ``gpu`` (from ResourceClaimTemplate
    ``template`` or the existing ResourceClaim ``claim``) in two containers of the test image:
    init container ``report`` writes what ``script`` writes to ``/dev/termination-log``
    (:data:`REPORT_SCRIPT`'s report by default) as its termination message and exits; ``main``
    sleeps, holding the claim until the pod is deleted. Host network, no ServiceAccount token,
    never pulled. With ``extended_resources`` (e.g. ``{"nvidia.com/gpu": 1}``) both containers
    have those limits instead, and the pod no claim (KEP-5004: the scheduler makes one)."""
    source = {"resourceClaimTemplateName": template} if template else {
        "resourceClaimName": claim}
    uses: dict[str, Any] = ({"limits": extended_resources} if extended_resources
                            else {"claims": [{"name": "gpu"}]})
    claims = [] if extended_resources else [{"name": "gpu", **source}]
    await client.CoreV1Api(api).create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "hostNetwork": True, "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": claims,
            "initContainers": [{"name": "report", "image": TEST_IMAGE,
                                "imagePullPolicy": "Never", "args": [script],
                                "resources": uses}],
            "containers": [{"name": "main", "image": TEST_IMAGE, "imagePullPolicy": "Never",
                            "args": ["exec sleep 2147483647"], "resources": uses}],
        }})


async def running_report(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod ``name`` (as a dict) once its ``main`` container runs, with its ``report``
    container's termination message under ``report``; None before."""
    pod: dict[str, Any] = api.sanitize_for_serialization(
        await client.CoreV1Api(api).read_namespaced_pod(name, namespace))
    status = pod.get("status") or {}
    main = next((c for c in status.get("containerStatuses") or [] if c["name"] == "main"), None)
    report = next((c for c in status.get("initContainerStatuses") or []
                   if c["name"] == "report"), None)
    if not main or "running" not in (main.get("state") or {}) or not report:
        return None
    terminated = (report.get("state") or {}).get("terminated") or {}
    pod["report"] = terminated.get("message")
    return pod
