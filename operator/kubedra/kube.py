"""The one place where kubedra talks to the Kubernetes API (kubernetes-asyncio).

Every call kubedra makes goes through a function here, so that handlers and domain logic stay
free of API plumbing and tests can count writes. Functions take an ``ApiClient`` and plain
values, return pydantic models or dicts, and raise ``kubernetes_asyncio.client.ApiException``
unchanged unless they say otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient, ApiException

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
