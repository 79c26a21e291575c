"""``status.discovered`` is one field for server-side apply (``x-kubernetes-map-type: atomic``),
on the real API server: the agent's managedFields entry names it once, whatever the report
holds (it named every field of every device before: 5.9 KB of an 8-H200 inventory); a report
replaces the last one whole; device names stay unique (the list-map inside)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness.kubedra import Kubedra
from kubedra import kube
from kubedra.api import inventory

pytestmark = pytest.mark.cluster


def _gpu(name: str, minor: int) -> dict[str, Any]:
    return {"name": name, "attributes": {"type": {"string": "gpu"}, "minor": {"int": minor}},
            "capacity": {"memory": {"value": "143771Mi"}}}


async def test_the_agent_owns_discovered_as_one_field(kubedra: Kubedra,
                                                      admin_api: ApiClient) -> None:
    node = f"owner-{uuid.uuid4().hex[:8]}"
    name = f"{node}-gpu.kubedra.io"
    await kube.create_inventory(admin_api, {
        "apiVersion": inventory.API_VERSION, "kind": inventory.KIND, "metadata": {"name": name},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": node}})
    try:
        await kube.apply_discovered(admin_api, name, {
            "backend": "snapshot", "devices": [_gpu(f"gpu-{i}", i) for i in range(8)]})
        listed = await kube.get_inventory(admin_api, name)
        assert listed is not None
        agent = [m for m in listed["metadata"]["managedFields"]
                 if m["manager"] == inventory.AGENT_FIELD_MANAGER]
        assert [(m["operation"], m["subresource"], m["fieldsV1"]) for m in agent] == [
            ("Apply", "status", {"f:status": {"f:discovered": {}}})]
        assert len(json.dumps(agent[0], separators=(",", ":"))) < 250

        # the next report replaces the last whole: gpu-0..6 and the backend are gone (health
        # is the CRD's default)
        await kube.apply_discovered(admin_api, name, {"devices": [_gpu("gpu-7", 7)]})
        listed = await kube.get_inventory(admin_api, name)
        assert listed is not None
        assert listed["status"]["discovered"] == {
            "devices": [{**_gpu("gpu-7", 7), "health": "Healthy"}]}

        with pytest.raises(ApiException) as refused:
            await kube.apply_discovered(admin_api, name, {
                "devices": [_gpu("gpu-7", 7), _gpu("gpu-7", 8)]})
        # server-side apply refuses the report before validation (v1.37.2 answers 500, its
        # structured-merge-diff's typed patch), as it did before discovered was atomic
        assert refused.value.status == 500
        assert '.status.discovered.devices: duplicate entries for key [name=\\"gpu-7\\"]' \
            in refused.value.body
    finally:
        await client.CustomObjectsApi(admin_api).delete_cluster_custom_object(
            inventory.GROUP, inventory.VERSION, inventory.PLURAL, name)
