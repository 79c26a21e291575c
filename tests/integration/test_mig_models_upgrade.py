"""An inventory stored before ``status.discovered.migModels`` became a list map keyed by name
(commit 87844fe), holding two entries of one name, after the CRD is upgraded (newcomer14):
what the real v1.37.2 kube-apiserver then takes of the operator's and the agent's status
writes.

The test serves a copy of the CRD in a group of its own (``nc14.kubedra.io``), so the
session's DeviceInventory CRD is untouched.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.controlplane import REPO_ROOT
from e2e.harness.wait import eventually
from kubedra import kube
from kubedra.kube import apply_patch_body

pytestmark = pytest.mark.cluster

GROUP = "nc14.kubedra.io"
CRD_NAME = f"deviceinventories.{GROUP}"
NAME = "dup-mig-models"


def _crd(list_map: bool) -> dict[str, Any]:
    """The repository's DeviceInventory CRD in :data:`GROUP`; ``migModels`` a list map keyed
    by name (as now) or atomic (as before 87844fe)."""
    crd: dict[str, Any] = yaml.safe_load(
        (REPO_ROOT / "crds" / "deviceinventories.kubedra.io.yaml").read_text())
    crd["metadata"] = {"name": CRD_NAME}
    crd["spec"]["group"] = GROUP
    for version in crd["spec"]["versions"]:
        mig = (version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
               ["discovered"]["properties"]["migModels"])
        assert mig["x-kubernetes-list-type"] == "map"
        if not list_map:
            del mig["x-kubernetes-list-type"], mig["x-kubernetes-list-map-keys"]
    return crd


def _mig_model(name: str, profile_id: int) -> dict[str, Any]:
    return {"name": name, "profiles": [{
        "id": profile_id, "name": "MIG 1g.18gb", "sliceCount": 1, "multiprocessorCount": 16,
        "copyEngineCount": 1, "decoderCount": 1, "encoderCount": 0, "jpegCount": 1,
        "ofaCount": 0, "memorySizeMB": 16384, "placements": [{"start": 0, "size": 1}]}]}


async def _established(ext: client.ApiextensionsV1Api) -> bool:
    crd = await ext.read_custom_resource_definition(CRD_NAME)
    return any(c.type == "Established" and c.status == "True"
               for c in (crd.status.conditions or []))


async def test_an_inventory_with_duplicate_mig_models_takes_status_writes_after_upgrade(
        admin_api: ApiClient) -> None:
    ext = client.ApiextensionsV1Api(admin_api)
    objects = client.CustomObjectsApi(admin_api)
    await ext.create_custom_resource_definition(_crd(list_map=False))
    try:
        await eventually(lambda: _established(ext), what=f"{CRD_NAME} established")
        stored = await eventually(lambda: objects.create_cluster_custom_object(
            GROUP, "v1alpha1", "deviceinventories", {
                "apiVersion": f"{GROUP}/v1alpha1", "kind": "DeviceInventory",
                "metadata": {"name": NAME},
                "spec": {"driver": "pci.kubedra.io", "allNodes": True, "pool": NAME}}),
            what="the inventory created")
        stored["status"] = {"discovered": {"devices": [], "migModels": [
            _mig_model("nvidia-h200", 19), _mig_model("nvidia-h200", 20)]}}
        await objects.replace_cluster_custom_object_status(
            GROUP, "v1alpha1", "deviceinventories", NAME, stored)

        upgraded = _crd(list_map=True)
        upgraded["metadata"]["resourceVersion"] = (
            await ext.read_custom_resource_definition(CRD_NAME)).metadata.resource_version
        await ext.replace_custom_resource_definition(CRD_NAME, upgraded)

        async def conditions_applied() -> dict[str, Any]:
            # the operator's write: server-side apply of its conditions only
            return await kube._raw(objects.patch_cluster_custom_object_status(
                GROUP, "v1alpha1", "deviceinventories", NAME, apply_patch_body({
                    "apiVersion": f"{GROUP}/v1alpha1", "kind": "DeviceInventory",
                    "metadata": {"name": NAME}, "status": {"conditions": [{
                        "type": "Published", "status": "True", "reason": "SlicesPublished",
                        "message": "m", "lastTransitionTime": "2026-12-03T19:00:00Z"}]}}),
                field_manager="kubedra-operator", force=True,
                _content_type=f"{kube.APPLY_PATCH}; charset=utf-8", _preload_content=False))
        written = await eventually(conditions_applied, timeout=30.0,
                                   what="the operator's conditions applied")
        assert [m["profiles"][0]["id"]
                for m in written["status"]["discovered"]["migModels"]] == [19, 20]
        assert [c["type"] for c in written["status"]["conditions"]] == ["Published"]
    finally:
        await ext.delete_custom_resource_definition(CRD_NAME)
