"""Bad input, fuzzed against the real API server (issue 13, item 4): hypothesis generates
DeviceInventory specs — valid and broken names, attributes, capacities, counters — and each
must be either refused at admission with the field named, or accepted and then published or
reported (``Ready=False`` with a reason and message); the operator never crashes and a control
inventory published before stays exactly as it was.

Bounded in ``make test`` (``KUBEDRA_FUZZ_EXAMPLES``, default 25); counts in
``.cache/fuzz/inventories.json`` (tests/support/fuzz_report.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.fuzzing import INVENTORIES, fuzz, undisturbed
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import condition, read_inventory, slices_of
from tests.support.fuzz_report import fuzz_examples, write_fuzz_report
from tests.support.inventory_strategies import specs

pytestmark = pytest.mark.cluster

EXAMPLES = fuzz_examples("KUBEDRA_FUZZ_EXAMPLES", 25)


async def _try(api: ApiClient, name: str, spec: dict[str, Any]) -> str:
    """Create one inventory; its outcome: ``refused``, ``published`` or ``reported:<reason>``.

    Raises:
        AssertionError: a refusal that names no field, or an accepted inventory the operator
            neither publishes nor reports.
    """
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": name}, "spec": {**spec, "allNodes": True, "pool": name}}
    try:
        await custom.create_cluster_custom_object(*INVENTORIES, body)
    except ApiException as err:
        refusal = (err.status, str(err.body))
    else:
        refusal = None
    if refusal is not None:
        assert refusal[0] == 422, refusal
        assert "spec." in refusal[1], refusal
        return "refused"
    try:
        async def decided() -> dict[str, Any] | None:
            ready = condition(await read_inventory(api, name), "Ready")
            return ready if ready and ready.get("message") else None
        ready = await eventually(decided, timeout=60, what=f"{name} published or reported")
        if ready["status"] == "True":
            return "published"
        if ready["reason"] == "InvalidInventory":
            assert await slices_of(api, name) == []
        return f"reported:{ready['reason']}"
    finally:
        await custom.delete_cluster_custom_object(*INVENTORIES, name)


async def test_fuzzed_inventories_are_refused_or_reported_and_disturb_nothing(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    async with undisturbed(kubedra, admin_api, "fuzz-control", {
            "driver": "pci.kubedra.io", "allNodes": True, "pool": "fuzz-control",
            "devices": [{"name": "dev-0"}, {"name": "dev-1"}]}):
        outcomes = await fuzz(specs, EXAMPLES,
                              lambda spec, i: _try(admin_api, f"fuzz-{i}", spec))
    write_fuzz_report("inventories", outcomes)


async def test_a_pci_filter_that_is_not_hex_is_refused_naming_the_field(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    """``discovery.pci.classes: [zz]`` matched no PCI function: the pool was published empty
    (EmptyPool) as if the node had none. The API server refuses it now, naming the field."""
    with pytest.raises(ApiException) as refused:
        await client.CustomObjectsApi(admin_api).create_cluster_custom_object(
            "kubedra.io", "v1alpha1", "deviceinventories", {
                "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                "metadata": {"name": "pci-not-hex"},
                "spec": {"driver": "pci.kubedra.io", "nodeName": "pci-not-hex",
                         "discovery": {"pci": {"vendors": ["0x10de", "nvidia"],
                                               "classes": ["zz"]}}}})
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert sorted((c["field"], c["message"]) for c in causes) == [
        ("spec.discovery.pci.classes[0]", 'Invalid value: "zz": spec.discovery.pci.classes[0] in '
                                          "body should match '^(0[xX])?[0-9a-fA-F]{1,6}$'"),
        ("spec.discovery.pci.vendors[1]", 'Invalid value: "nvidia": spec.discovery.pci.vendors[1] '
                                          "in body should match '^(0[xX])?[0-9a-fA-F]{1,4}$'")]
