"""The API server refuses a DeviceInventory override taint (and a binding condition) that no
ResourceSlice could carry, naming the field (issue 26, item 4: "no field dropped silently").

Before, ``spec.overrides[].taints`` took any key and value: the operator then left the device
out of its pool (``DevicesLeftOut``), and a binding condition with a prefix over 253
characters failed the ResourceSlice write. The CRD now states upstream's rules
(``validateDeviceTaint`` and ``validateDeviceBindingParameters`` in
k8s.io/kubernetes/pkg/apis/resource/validation/validation.go, v1.37.2); these tests apply
``crds/`` to the real v1.37.2 kube-apiserver and read its exact causes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness import ControlPlane
from e2e.harness.controlplane import REPO_ROOT
from e2e.harness.kubedra import kubectl
from e2e.harness.wait import eventually

pytestmark = pytest.mark.cluster

INVENTORIES = ("kubedra.io", "v1alpha1", "deviceinventories")
TAINT = "spec.overrides[0].taints[0]"
PREFIX_253 = ".".join(["a" * 63] * 4)[:253]
"""A DNS subdomain of exactly 253 characters (four labels of 63, the last cut to 62)."""
KEY_PATTERN = ("^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
               "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


@pytest.fixture(scope="module")
async def crd(control_plane: ControlPlane, admin_api: ApiClient) -> None:
    """The DeviceInventory CRD of ``crds/``, served (no operator: admission only).

    Polled, not ``kubectl wait --for=condition=Established``: kubectl 1.37.1 fails at once
    (".status.conditions accessor error: <nil> is of the type <nil>") when it reads the CRD
    before the API server has written any condition, which it did in 3 of 9 runs here."""
    kubectl(control_plane, "apply", "-k", str(REPO_ROOT / "crds"))
    extensions = client.ApiextensionsV1Api(admin_api)

    async def established() -> bool:
        crd = await extensions.read_custom_resource_definition("deviceinventories.kubedra.io")
        return any(c.type == "Established" and c.status == "True"
                   for c in crd.status.conditions or [])
    await eventually(established, timeout=60, what="the DeviceInventory CRD established")


def _inventory(name: str, *, taint: dict[str, str] | None = None,
               binding: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": "pci.kubedra.io", "allNodes": True, "pool": name}
    if taint is not None:
        spec["overrides"] = [{"device": "dev-0", "taints": [taint]}]
    if binding is not None:
        spec["devices"] = [{"name": "dev-0", "bindsToNode": True, "bindingConditions": binding,
                            "bindingFailureConditions": ["kubedra.io/attach-failed"]}]
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": name}, "spec": spec}


async def _causes(api: ApiClient, body: dict[str, Any]) -> list[tuple[str, str]]:
    """Create ``body``, which must be refused with 422; its causes, (field, message) sorted."""
    with pytest.raises(ApiException) as refused:
        await client.CustomObjectsApi(api).create_cluster_custom_object(*INVENTORIES, body)
    assert refused.value.status == 422, refused.value.body
    details = json.loads(refused.value.body)["details"]
    return sorted((c.get("field", ""), c["message"]) for c in details["causes"])


@pytest.mark.usefixtures("crd")
@pytest.mark.parametrize(("taint", "causes"), [
    ({"key": "bad key!", "effect": "NoSchedule"}, [
        (f"{TAINT}.key", f'Invalid value: "bad key!": {TAINT}.key in body should match '
                         f"'{KEY_PATTERN}'")]),
    ({"key": "a" * 64, "effect": "NoSchedule"}, [
        (f"{TAINT}.key", f'Invalid value: "{"a" * 64}": name part must be no more than 63 '
                         "characters"),
        (f"{TAINT}.key", f'Invalid value: "{"a" * 64}": {TAINT}.key in body should match '
                         f"'{KEY_PATTERN}'")]),
    ({"key": f"a{PREFIX_253}/unhealthy", "effect": "NoSchedule"}, [
        (f"{TAINT}.key", f'Invalid value: "a{PREFIX_253}/unhealthy": prefix part (before '
                         "'/') must be no more than 253 characters")]),
    ({"key": "kubedra.io/maintenance", "value": "fan broken", "effect": "NoSchedule"}, [
        (f"{TAINT}.value", f'Invalid value: "fan broken": {TAINT}.value in body should match '
                           f"'{VALUE_PATTERN}'")]),
    ({"key": "kubedra.io/maintenance", "effect": "Sometimes"}, [
        ("<nil>", "Invalid value: null: some validation rules were not checked because the "
                  "object was invalid; correct the existing errors to complete validation"),
        (f"{TAINT}.effect", 'Unsupported value: "Sometimes": supported values: "None", '
                            '"NoSchedule", "NoExecute"')]),
], ids=["bad-key", "64-character-name", "254-character-prefix", "bad-value", "bad-effect"])
async def test_a_bad_override_taint_is_refused_naming_the_field(
        admin_api: ApiClient, taint: dict[str, str], causes: list[tuple[str, str]]) -> None:
    assert await _causes(admin_api, _inventory("bad-taint", taint=taint)) == causes


@pytest.mark.usefixtures("crd")
async def test_a_binding_condition_with_a_prefix_over_253_characters_is_refused(
        admin_api: ApiClient) -> None:
    body = _inventory("bad-binding", binding=[f"a{PREFIX_253}/attached"])
    assert await _causes(admin_api, body) == [
        ("spec.devices[0].bindingConditions[0]", f'Invalid value: "a{PREFIX_253}/attached": '
         "prefix part (before '/') must be no more than 253 characters")]


@pytest.mark.usefixtures("crd")
@pytest.mark.parametrize(("taint", "binding"), [
    ({"key": "maintenance", "value": "fan", "effect": "NoSchedule"}, ["attached"]),
    ({"key": f"{PREFIX_253}/{'n' * 63}", "value": "v" * 63, "effect": "NoExecute"},
     [f"{PREFIX_253}/{'n' * 63}"]),
    ({"key": "kubedra.io/Under_score.dot-dash", "value": "", "effect": "None"},
     ["kubedra.io/attached"]),
], ids=["plain", "longest", "empty-value"])
async def test_a_valid_taint_and_binding_condition_are_accepted(
        admin_api: ApiClient, taint: dict[str, str], binding: list[str]) -> None:
    body = _inventory("good-taint", taint=taint, binding=binding)
    custom = client.CustomObjectsApi(admin_api)
    created = await custom.create_cluster_custom_object(*INVENTORIES, body)
    try:
        assert created["spec"]["overrides"][0]["taints"] == [taint]
        assert created["spec"]["devices"][0]["bindingConditions"] == binding
    finally:
        await custom.delete_cluster_custom_object(*INVENTORIES, "good-taint")


@pytest.mark.usefixtures("crd")
async def test_an_override_leaves_room_for_the_operators_own_taints(
        admin_api: ApiClient) -> None:
    """At most 14 taints: a device carries at most 16, and the operator may add
    kubedra.io/unhealthy and kubedra.io/draining (with 16 the slice of an unhealthy device was
    refused, and the device stayed published without its taint)."""
    body = _inventory("many-taints")
    taints = [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(15)]
    body["spec"]["overrides"] = [{"device": "dev-0", "taints": taints}]
    assert await _causes(admin_api, body) == [
        ("<nil>", "Invalid value: null: some validation rules were not checked because the "
                  "object was invalid; correct the existing errors to complete validation"),
        ("spec.overrides[0].taints", "Too many: 15: must have at most 14 items")]
    body["spec"]["overrides"][0]["taints"] = taints[:14]
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(*INVENTORIES, body)
    await custom.delete_cluster_custom_object(*INVENTORIES, "many-taints")
