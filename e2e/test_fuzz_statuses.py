"""Bad input, fuzzed against the real API server (issue 13, item 4): DeviceInventory statuses as
a buggy or hostile node agent could write them, and reports discovered from generated capture
variants (tests/support/capture_strategies.py) through the ``snapshot`` backend.

Each input is applied (server-side apply, force, as the agent's field manager) to an inventory
whose device ``good-0`` is published already, keeping ``good-0`` in the report. It must be
either refused naming a ``status.`` field (at admission, 422, or by server-side apply, which
answers 500 for a value of the wrong type), or accepted, and then the operator
publishes exactly the devices the pool admits (the others named in ``DevicesLeftOut``), writing
its own status fields (slices, device count) back over what the writer put there, or reports
``Ready=False`` ``InvalidInventory`` naming a ``status.`` field. ``good-0`` stays published as
it was in every case, the operator never crashes, and a control inventory's slices keep their
resourceVersions (its slice names are among the fake ``status.slices`` offered).

Bounded in ``make test`` (``KUBEDRA_FUZZ_STATUSES``, default 10); counts in
``.cache/fuzz/statuses.json`` (tests/support/fuzz_report.py).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException
from pydantic import ValidationError

from e2e.fuzzing import INVENTORIES, fuzz, undisturbed
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import condition, read_inventory, slices_of
from kubedra import kube
from kubedra.api.inventory import AGENT_FIELD_MANAGER, DeviceInventory, DiscoverySettings
from kubedra.discovery import DiscoveryError, discover
from kubedra.publishing.pool import build_pool
from tests.support.capture_strategies import capture_variants, write_variant
from tests.support.fuzz_report import fuzz_examples, write_fuzz_report
from tests.support.inventory_strategies import discovered, operator_fields

pytestmark = pytest.mark.cluster

EXAMPLES = fuzz_examples("KUBEDRA_FUZZ_STATUSES", 10)
DRIVER = "pci.kubedra.io"
GOOD = {"name": "good-0", "attributes": {"model": {"string": "fuzz"}}}
"""The device every fuzzed report keeps: it must stay published as it was."""


def _captured(variant: dict[str, Any], mig: str) -> dict[str, Any] | None:
    """``status.discovered`` as the agent reports a capture variant, or None when discovery
    fails (a DiscoveryError: the agent keeps its last report)."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            result = discover(f"snapshot:{write_variant(Path(folder) / 'c', variant)}",
                              DiscoverySettings.model_validate({"mig": mig}))
        except DiscoveryError:
            return None
    return {"devices": [d.to_api() for d in result.devices],
            "counterSets": [c.to_api() for c in result.counter_sets],
            "rejected": [r.to_api() for r in result.rejected], "backend": "snapshot"}


def _body(name: str) -> dict[str, Any]:
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": name},
            "spec": {"driver": DRIVER, "allNodes": True, "pool": name}}


def _devices(slices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}


async def _published(api: ApiClient, name: str, expected: set[str],
                     left_out: bool) -> dict[str, Any] | None:
    """The slices' devices when the operator published exactly ``expected`` and its status
    says so (its own fields written back), else None."""
    obj = await read_inventory(api, name)
    published = condition(obj, "Published") or {}
    slices = await slices_of(api, name)
    devices = _devices(slices)
    status = (obj or {}).get("status") or {}
    reason = "DevicesLeftOut" if left_out else ("SlicesPublished", "EmptyPool")
    ok = (published.get("status") == "True" and published.get("reason") in reason
          and set(devices) == expected and status.get("deviceCount") == len(devices)
          and status.get("slices") == [s["metadata"]["name"] for s in slices])
    return devices if ok else None


async def _try(api: ApiClient, name: str, status: dict[str, Any]) -> str:
    """Publish ``good-0`` in a new inventory, then apply ``status`` (``good-0`` first in its
    report); the outcome: ``refused``, ``published``, ``published, some left out`` or
    ``reported:InvalidInventory``."""
    custom = client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object(*INVENTORIES, _body(name))
    try:
        await kube.apply_inventory_status(api, name, {"discovered": {"devices": [GOOD]}},
                                          AGENT_FIELD_MANAGER)
        before = await eventually(lambda: _published(api, name, {"good-0"}, False),
                                  timeout=60, what=f"{name} publishing good-0")
        try:
            await kube.apply_inventory_status(api, name, status, AGENT_FIELD_MANAGER)
        except ApiException as err:
            refusal: tuple[int, str] | None = (err.status, str(err.body))
        else:
            refusal = None
        if refusal is not None:
            # 422: invalid; 500: server-side apply could not type the patch (a string for
            # an integer); both name the field
            assert refusal[0] in (422, 500), refusal
            assert "status." in refusal[1], refusal
            outcome = "refused" if refusal[0] == 422 else "refused (untyped apply)"
        else:
            outcome = await _decided(api, name, status)
        assert _devices(await slices_of(api, name))["good-0"] == before["good-0"]
        return outcome
    finally:
        await custom.delete_cluster_custom_object(*INVENTORIES, name)


async def _decided(api: ApiClient, name: str, status: dict[str, Any]) -> str:
    """Wait for the operator's decision about the accepted ``status``."""
    try:
        inventory = DeviceInventory.from_api({**_body(name), "status": status})
    except ValidationError:
        async def reported() -> dict[str, Any] | None:
            ready = condition(await read_inventory(api, name), "Ready") or {}
            return ready if ready.get("reason") == "InvalidInventory" else None
        ready = await eventually(reported, timeout=60, what=f"{name} reported invalid")
        assert ready["status"] == "False"
        assert ready["message"].startswith("status."), ready
        return "reported:InvalidInventory"
    pool = build_pool(inventory)
    expected = {d.name for d in pool.devices}
    assert "good-0" in expected
    await eventually(lambda: _published(api, name, expected, bool(pool.left_out)),
                     timeout=90, what=f"{name} publishing {len(expected)} devices")
    return "published, some left out" if pool.left_out else "published"


async def test_fuzzed_statuses_are_refused_or_reported_and_disturb_nothing(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    async def attempt(report: Any, index: int) -> str:
        if isinstance(report, tuple):  # a capture variant, discovered as the agent would
            found = await asyncio.to_thread(_captured, *report)
            if found is None:
                return "capture: discovery error"
            kind, report = "capture", {"discovered": {**found,
                                                      "devices": [GOOD, *found["devices"]]}}
        else:
            kind = "status"
        return f"{kind}: " + await _try(admin_api, f"fuzz-status-{index}", report)

    async with undisturbed(kubedra, admin_api, "fuzz-status-control", {
            "driver": DRIVER, "allNodes": True, "pool": "fuzz-status-control",
            "devices": [{"name": "dev-0"}]}) as control:
        reports = st.one_of(
            st.builds(lambda d, o: {"discovered": {**d, "devices": [GOOD, *d["devices"]]}, **o},
                      discovered, operator_fields([s["metadata"]["name"] for s in control])),
            st.builds(lambda v, mig: (v, mig), capture_variants(),
                      st.sampled_from(["none", "partitions"])))
        outcomes = await fuzz(reports, EXAMPLES, attempt)
    write_fuzz_report("statuses", outcomes)


async def test_a_report_with_any_unicode_is_applied_as_written(kubedra: Kubedra,
                                                                admin_api: ApiClient) -> None:
    """Found by the fuzzing above: the agent's report (server-side apply) with one character
    beyond U+FFFF in one device's string failed whole, 400 "invalid Unicode character escape
    code", so the node's other devices were never reported either."""
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(*INVENTORIES, _body("fuzz-unicode"))
    devices = [GOOD, {"name": "odd-0", "attributes": {"model": {"string": "GPU 😀 \x85é"}},
                      "health": "Unhealthy", "healthMessage": "XID \U0001d7f3 \u2028\x7f"}]
    try:
        await kube.apply_discovered(admin_api, "fuzz-unicode", {"devices": devices})
        inventory = await read_inventory(admin_api, "fuzz-unicode")
        assert inventory is not None
        assert inventory["status"]["discovered"]["devices"] == [
            {**GOOD, "health": "Healthy"}, devices[1]]
    finally:
        await custom.delete_cluster_custom_object(*INVENTORIES, "fuzz-unicode")
