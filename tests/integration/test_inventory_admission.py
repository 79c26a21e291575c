"""The API server refuses a DeviceInventory override taint (its ``timeAdded`` too) and binding
conditions that no ResourceSlice could carry, naming the field (issue 26, item 4: "no field
dropped silently").

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
from e2e.harness.kubedra import kubectl, wait_established
from kubedra.api.time import TIME_PATTERN

pytestmark = pytest.mark.cluster

INVENTORIES = ("kubedra.io", "v1alpha1", "deviceinventories")
TAINT = "spec.overrides[0].taints[0]"
PREFIX_253 = ".".join(["a" * 63] * 4)[:253]
"""A DNS subdomain of exactly 253 characters (four labels of 63, the last cut to 62)."""
KEY_PATTERN = ("^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
               "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> None:
    """The DeviceInventory CRD of ``crds/``, served (no operator: admission only)."""
    kubectl(control_plane, "apply", "-k", str(REPO_ROOT / "crds"))
    wait_established(control_plane)


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


NIC = "spec.devices[0]"
NOT_CHECKED = ("<nil>", "Invalid value: null: some validation rules were not checked because "
                        "the object was invalid; correct the existing errors to complete "
                        "validation")


@pytest.mark.usefixtures("crd")
@pytest.mark.parametrize(("where", "device", "causes"), [
    ({}, {"bindingConditions": ["a", "a"], "bindingFailureConditions": ["f"]},
     [(f"{NIC}.bindingConditions[1]", 'Duplicate value: "a"')]),
    ({}, {"bindingConditions": ["a"], "bindingFailureConditions": ["f", "g", "f"]},
     [(f"{NIC}.bindingFailureConditions[2]", 'Duplicate value: "f"')]),
    ({}, {"bindingConditions": ["a", "b"], "bindingFailureConditions": ["b"]},
     [(f"{NIC}.bindingFailureConditions", "Invalid value: bindingFailureConditions must not "
                                          "overlap with bindingConditions")]),
    ({}, {"bindsToNode": True, "bindingConditions": ["a"]},
     [(f"{NIC}.bindingFailureConditions", "Invalid value: bindingFailureConditions are "
                                          "required to use bindingConditions")]),
    ({}, {"bindingConditions": [], "bindingFailureConditions": ["f"]},
     [(f"{NIC}.bindingConditions", "Invalid value: bindingConditions are required to use "
                                   "bindingFailureConditions")]),
    ({}, {"bindingConditions": list("abcde"), "bindingFailureConditions": ["f"]},
     [NOT_CHECKED, (f"{NIC}.bindingConditions", "Too many: 5: must have at most 4 items")]),
    ({"nodeName": "node-1"}, {"bindsToNode": True},
     [("spec.devices", "Invalid value: binding conditions and bindsToNode are for "
                       "network-attached pools (spec.nodeSelector or spec.allNodes), not a "
                       "node's own devices")]),
], ids=["twice", "failure-twice", "in-both-lists", "no-failure-conditions",
        "no-binding-conditions", "five", "node-local"])
async def test_bad_binding_conditions_are_refused_naming_the_field(
        admin_api: ApiClient, where: dict[str, str], device: dict[str, Any],
        causes: list[tuple[str, str]]) -> None:
    """Every rule of ``validateDeviceBindingParameters`` (v1.37.2), and kubedra's own
    (node-local devices have none); before, only the size and each name were checked, and
    the operator left the device out (DevicesLeftOut) of an inventory the API had taken."""
    body = _inventory("bad-binding")
    body["spec"] |= {**where, "devices": [{"name": "nic-0", **device}]}
    if where:
        del body["spec"]["allNodes"]
    assert await _causes(admin_api, body) == causes


@pytest.mark.usefixtures("crd")
async def test_binds_to_node_alone_is_accepted(admin_api: ApiClient) -> None:
    """``bindsToNode`` has no rule upstream: without binding conditions it is valid."""
    body = _inventory("binds-alone")
    body["spec"]["devices"] = [{"name": "nic-0", "bindsToNode": True}]
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(*INVENTORIES, body)
    await custom.delete_cluster_custom_object(*INVENTORIES, "binds-alone")


SLICES = ("resource.k8s.io", "v1", "resourceslices")


@pytest.mark.usefixtures("crd")
@pytest.mark.parametrize(("time_added", "published"), [
    ("2026-12-03T10:00:00Z", "2026-12-03T10:00:00Z"),
    ("2026-12-03T10:00:00.5+01:00", "2026-12-03T09:00:00Z"),
    ("2026-12-03T1:00:00Z", "2026-12-03T01:00:00Z"),  # Go's general parser: one-digit hour
    ("2026-12-03T10:00:00,5Z", "2026-12-03T10:00:00Z"),  # and a comma before the fraction
    ("2026-12-03T10:00:00+24:60", "2026-12-02T09:00:00Z"),  # and offsets up to 24:60
    ("2028-02-29T10:00:00Z", "2028-02-29T10:00:00Z"),
    ("2026-12-03", None),
    ("yesterday", None),
    ("2026-02-29T10:00:00Z", None),
    ("2026-12-03t10:00:00Z", None),
    ("2026-12-03T10:00:00+0100", None),
    ("", None),
], ids=["utc", "fraction-and-offset", "one-digit-hour", "comma", "offset-24-60", "leap-day",
        "date-only", "yesterday", "no-leap-day", "lower-case-t", "offset-without-colon",
        "empty"])
async def test_an_override_taint_time_is_refused_exactly_where_a_slice_would_be(
        admin_api: ApiClient, time_added: str, published: str | None) -> None:
    """``timeAdded`` was a free string: ``yesterday`` was stored and the ResourceSlice write
    failed (400, "cannot be handled as a ResourceSlice: parsing time"). Now the CRD takes
    what the ResourceSlice write takes (a ``metav1.Time``), no more, no less."""
    taint = {"key": "kubedra.io/maintenance", "effect": "NoSchedule", "timeAdded": time_added}
    custom = client.CustomObjectsApi(admin_api)
    slice_body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                  "metadata": {"name": "time-added"},
                  "spec": {"driver": "pci.kubedra.io", "allNodes": True,
                           "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                           "devices": [{"name": "dev-0", "taints": [taint]}]}}
    if published is None:
        with pytest.raises(ApiException) as refused:
            await custom.create_cluster_custom_object(*SLICES, slice_body)
        assert refused.value.status == 400
        assert "cannot be handled as a ResourceSlice: parsing time" in refused.value.body
        assert await _causes(admin_api, _inventory("time-added", taint=taint)) == [
            (f"{TAINT}.timeAdded", f"Invalid value: {json.dumps(time_added)}: "
                                   f"{TAINT}.timeAdded in body should match '{TIME_PATTERN}'")]
        return
    created = await custom.create_cluster_custom_object(*SLICES, slice_body)
    await custom.delete_cluster_custom_object(*SLICES, "time-added")
    assert created["spec"]["devices"][0]["taints"][0]["timeAdded"] == published
    await custom.create_cluster_custom_object(*INVENTORIES, _inventory("time-added", taint=taint))
    await custom.delete_cluster_custom_object(*INVENTORIES, "time-added")


def _mig_model(name: str, profile_id: int) -> dict[str, Any]:
    """A ``status.discovered.migModels`` entry with one profile and one placement."""
    return {"name": name, "profiles": [{
        "id": profile_id, "name": "MIG 1g.18gb", "sliceCount": 1, "multiprocessorCount": 16,
        "copyEngineCount": 1, "decoderCount": 1, "encoderCount": 0, "jpegCount": 1,
        "ofaCount": 0, "memorySizeMB": 16384, "placements": [{"start": 0, "size": 1}]}]}


@pytest.mark.usefixtures("crd")
async def test_two_mig_models_of_one_name_are_refused_naming_the_entry(
        admin_api: ApiClient) -> None:
    """Before, the CRD took two ``migModels`` entries of one name and the operator expanded
    every GPU naming it from the last one, silently; now the API server refuses the report,
    as it does two ``counterSets`` or ``deviceModels`` of one name."""
    api = client.CustomObjectsApi(admin_api)
    report = await api.create_cluster_custom_object(*INVENTORIES, _inventory("two-mig-models"))
    try:
        report["status"] = {"discovered": {"devices": [], "migModels": [
            _mig_model("nvidia-h200", 19), _mig_model("nvidia-h200", 20)]}}
        with pytest.raises(ApiException) as refused:
            await api.replace_cluster_custom_object_status(
                *INVENTORIES, "two-mig-models", report)
        assert refused.value.status == 422, refused.value.body
        causes = [(c.get("field"), c["message"])
                  for c in json.loads(refused.value.body)["details"]["causes"]]
        assert causes == [("status.discovered.migModels[1]",
                           'Duplicate value: {"name":"nvidia-h200"}')]
        report["status"]["discovered"]["migModels"] = [
            _mig_model("nvidia-h200", 19), _mig_model("nvidia-h100", 19)]
        written = await api.replace_cluster_custom_object_status(
            *INVENTORIES, "two-mig-models", report)
        assert [m["name"] for m in written["status"]["discovered"]["migModels"]] == [
            "nvidia-h200", "nvidia-h100"]
    finally:
        await api.delete_cluster_custom_object(*INVENTORIES, "two-mig-models")
