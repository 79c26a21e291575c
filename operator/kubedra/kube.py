"""The one place where kubedra talks to the Kubernetes API (kubernetes-asyncio).

Every call kubedra makes goes through a function here, so that handlers and domain logic stay
free of API plumbing and tests can count writes. Functions take an ``ApiClient`` and plain
values, return pydantic models or dicts, and raise ``kubernetes_asyncio.client.ApiException``
unchanged unless they say otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient, ApiException

from kubedra.api import resource

APPLY_PATCH = "application/apply-patch+yaml"
"""Content type of server-side apply; patch bodies are JSON, which is valid YAML."""


async def make_api_client(kubeconfig: Path | None = None) -> ApiClient:
    """An ``ApiClient`` from ``kubeconfig``, else the in-cluster service account, else
    ``$KUBECONFIG`` / ``~/.kube/config``.

    Raises:
        kubernetes_asyncio.config.ConfigException: no usable configuration was found.
    """
    configuration = client.Configuration()
    if kubeconfig is not None:
        await config.load_kube_config(config_file=str(kubeconfig),
                                      client_configuration=configuration)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration)
    else:
        await config.load_kube_config(client_configuration=configuration)
    return ApiClient(configuration)


def is_not_found(err: BaseException) -> bool:
    """True for an ``ApiException`` with HTTP status 404."""
    return isinstance(err, ApiException) and err.status == 404


def is_conflict(err: BaseException) -> bool:
    """True for an ``ApiException`` with HTTP status 409 (conflict or already exists)."""
    return isinstance(err, ApiException) and err.status == 409


async def _call_json(api: ApiClient, method: str, path: str, *, body: Any = None,
                     query: list[tuple[str, str]] | None = None,
                     content_type: str = "application/json") -> Any:
    """One API request whose response body is returned as parsed JSON (no client models, so
    fields newer than kubernetes-asyncio's models survive). Raises ``ApiException``."""
    return await api.call_api(
        path, method, query_params=query or [], body=body,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        response_types_map={200: "object", 201: "object"}, auth_settings=["BearerToken"],
        _return_http_data_only=True)


def _claim_path(namespace: str, name: str) -> str:
    return f"/apis/{resource.API_VERSION}/namespaces/{namespace}/resourceclaims/{name}"


async def get_resource_claim(api: ApiClient, namespace: str, name: str) -> resource.ResourceClaim:
    """GET one ResourceClaim (needs ``get`` on ``resourceclaims``).

    Raises:
        ApiException: e.g. 404 when the claim does not exist.
    """
    return resource.ResourceClaim.from_api(
        await _call_json(api, "GET", _claim_path(namespace, name)))


async def apply_resource_claim_device_status(
        api: ApiClient, namespace: str, name: str,
        devices: list[resource.AllocatedDeviceStatus], field_manager: str) -> None:
    """Server-side apply ``status.devices`` of a claim as ``field_manager`` (forced).

    ``devices`` is everything this manager wants to own there: entries it owned before and
    left out are removed, unless another manager still owns fields in them (the list is a map
    keyed by driver, pool, device and shareID, and each entry's conditions a map keyed by type,
    so the agent's ``Prepared`` and the operator's ``Ready`` coexist). An empty list withdraws
    all of this manager's entries.

    Permissions (``DRAResourceClaimGranularStatusAuthorization``, on by default since 1.36;
    k8s.io/kubernetes pkg/registry/resource/utils.go ``AuthorizedForDeviceStatus``): ``patch``
    on ``resourceclaims/status``, and for each driver whose entries change, verb
    ``associated-node:patch`` (a service account whose token carries the node the allocation
    names) or ``arbitrary-node:patch`` on ``resourceclaims/driver`` with that driver name as
    resource name.

    Raises:
        ApiException: 404 when the claim is gone, 403 without the permissions above, 422 when an
            entry names a device the claim has not been allocated.
    """
    status: dict[str, Any] = {"devices": [d.to_api() for d in devices]} if devices else {}
    body = {"apiVersion": resource.API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "status": status}
    await _call_json(api, "PATCH", _claim_path(namespace, name) + "/status", body=body,
                     query=[("fieldManager", field_manager), ("force", "true")],
                     content_type=APPLY_PATCH)
