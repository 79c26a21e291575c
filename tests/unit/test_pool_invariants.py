"""The fleet check of the fault suite (e2e/invariants.py, ``pool_violations``) reports what it
must: a pool with no inventory, not Ready, or with no slices; a slice left at an older
generation; a pool whose slices do not publish the inventory's report (a change not yet
published, a device missing or extra, a counter set missing) — and nothing for a pool that
kubedra's own pool builder published from the report (8 H200 GPUs, and the compact MIG form
with its counter sets)."""

from __future__ import annotations

import copy
from typing import Any

from bench.scale import h200_node, published_slices
from e2e.invariants import PoolViolations, pool_violations

DRIVER = "gpu.kubedra.io"


def _inventory(node: str, discovered: dict[str, Any], generation: int = 2,
               ready: str | None = "True") -> dict[str, Any]:
    """The inventory of ``node`` as the API returns it once the operator published its pool
    (pool ``node`` at ``generation``, one slice)."""
    status: dict[str, Any] = {"discovered": discovered,
                              "pool": {"name": node, "generation": generation,
                                       "resourceSliceCount": 1}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "reason": (
            "Published" if ready == "True" else "NodeNotFound")}]
    return {"metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node}, "status": status}


def _slices(node: str, discovered: dict[str, Any], generation: int = 2,
            suffix: str = "abcde") -> list[dict[str, Any]]:
    """The slices kubedra's pool builder makes of ``discovered`` (bench.scale), as the API
    returns them."""
    return [{"metadata": {"name": f"{node}-{DRIVER}-{suffix}",
                          "labels": {"kubedra.io/inventory": f"{node}-{DRIVER}"}},
             "spec": {"driver": DRIVER, "nodeName": node,
                      "pool": {"name": node, "generation": generation,
                               "resourceSliceCount": 1}, **spec}}
            for spec in published_slices(node, discovered)]


GPUS = h200_node(0, mig=False)


def test_pools_published_from_their_reports_have_converged() -> None:
    mig = h200_node(1, mig=True)
    assert "migModels" in mig, "the compact form, written out by the check"
    assert "deviceModels" in GPUS, "the compact form, written out by the check"
    slices = _slices("n1", GPUS) + _slices("n2", mig)
    inventories = [_inventory("n1", GPUS), _inventory("n2", mig),
                   _inventory("other", GPUS, ready="False")]
    found = pool_violations(slices, inventories, [f"n1-{DRIVER}", f"n2-{DRIVER}"])
    assert found == PoolViolations()
    assert found.unconverged() == set()
    assert found.lines() == []
    assert pool_violations(slices, inventories, []) == PoolViolations(), "only those named"


def test_a_quantity_written_another_way_is_the_same_content() -> None:
    slices = _slices("n1", GPUS)
    slices[0]["spec"]["devices"][0]["capacity"]["memory"] = {"value": "143771Mi"}
    other = copy.deepcopy(GPUS)
    other["deviceModels"][0]["capacity"]["memory"] = {"value": f"{143771 * 2**20}"}
    assert pool_violations(slices, [_inventory("n1", other)], [f"n1-{DRIVER}"]) \
        == PoolViolations()


def test_pools_missing_or_not_ready_are_reported_by_name() -> None:
    no_pool = _inventory("n4", GPUS)
    del no_pool["status"]["pool"]
    inventories = [_inventory("n1", GPUS, ready="False"), _inventory("n2", GPUS, ready=None),
                   _inventory("n3", GPUS), no_pool]
    found = pool_violations([], inventories, [f"n{i}-{DRIVER}" for i in range(6)])
    assert found == PoolViolations(missing=[
        (f"n0-{DRIVER}", "no DeviceInventory"),
        (f"n1-{DRIVER}", "Ready is False (NodeNotFound)"),
        (f"n2-{DRIVER}", "no Ready condition"),
        (f"n3-{DRIVER}", "no slices"),
        (f"n4-{DRIVER}", "no status.pool"),
        (f"n5-{DRIVER}", "no DeviceInventory")])
    assert found.unconverged() == {f"n{i}-{DRIVER}" for i in range(6)}
    assert found.lines()[1] == f"pool of n1-{DRIVER}: missing: Ready is False (NodeNotFound)"


def test_a_slice_at_an_older_generation_is_stale() -> None:
    slices = _slices("n1", GPUS, generation=3) + _slices("n1", GPUS, generation=2,
                                                         suffix="old")
    found = pool_violations(slices, [_inventory("n1", GPUS, generation=3)], [f"n1-{DRIVER}"])
    assert found == PoolViolations(stale=[
        (f"n1-{DRIVER}", f"slice n1-{DRIVER}-old at generation 2, the pool at 3")])
    assert found.lines() == [
        f"pool of n1-{DRIVER}: stale: slice n1-{DRIVER}-old at generation 2, the pool at 3"]


def test_slices_that_do_not_publish_the_report_are_reported_with_the_devices() -> None:
    churned = copy.deepcopy(GPUS)
    churned["devices"][0].setdefault("attributes", {})["benchChurn"] = {"int": 7}  # the storm
    fewer = copy.deepcopy(GPUS)
    del fewer["devices"][7]  # a GPU gone from the report, still published
    more = _slices("n3", GPUS)
    del more[0]["spec"]["devices"][3]  # a reported GPU not published
    mig = h200_node(1, mig=True)
    no_counters = _slices("n4", mig)
    gone = no_counters[0]["spec"]["sharedCounters"].pop(2)["name"]
    slices = _slices("n1", GPUS) + _slices("n2", GPUS) + more + no_counters
    inventories = [_inventory("n1", churned), _inventory("n2", fewer), _inventory("n3", GPUS),
                   _inventory("n4", mig)]
    found = pool_violations(slices, inventories, [f"n{i}-{DRIVER}" for i in range(1, 5)])
    assert gone == "gpu-2-counters"
    assert found == PoolViolations(content=[
        (f"n1-{DRIVER}", "devices changed ['gpu-0']"),
        (f"n2-{DRIVER}", "devices not reported ['gpu-7']"),
        (f"n3-{DRIVER}", "devices unpublished ['gpu-3']"),
        (f"n4-{DRIVER}", "counter sets unpublished ['gpu-2-counters']")])
    assert found.unconverged() == {f"n{i}-{DRIVER}" for i in range(1, 5)}
