"""The operator's index views: a claim's allocation results, pools of raw inventories, and the
per-pool view of the claim index."""

from __future__ import annotations

from kubedra.controller.state import ClaimUse, allocation_results, pool_key
from kubedra.handlers.indexes import PoolUses


def _use(name: str, device: str) -> ClaimUse:
    return ClaimUse(namespace="ns", name=name, uid=f"uid-{name}", request="gpu",
                    driver="gpu.kubedra.io", pool="node-1", device=device)


def test_pool_uses_is_a_mapping_with_one_flat_list_per_pool() -> None:
    index = {("gpu.kubedra.io", "node-1"): [[_use("a", "gpu-0"), _use("a", "gpu-1")],
                                            [_use("b", "gpu-2")]]}
    uses = PoolUses(index)
    assert list(uses) == [("gpu.kubedra.io", "node-1")]
    assert len(uses) == 1
    assert [u.device for u in uses[("gpu.kubedra.io", "node-1")]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert dict(uses.items()) == {("gpu.kubedra.io", "node-1"): [
        _use("a", "gpu-0"), _use("a", "gpu-1"), _use("b", "gpu-2")]}
    assert uses.get(("gpu.kubedra.io", "node-2")) is None
    assert ("gpu.kubedra.io", "node-2") not in uses


def test_allocation_results_of_a_raw_claim() -> None:
    result = {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "node-1", "device": "gpu-0"}
    allocated = {"status": {"allocation": {"devices": {"results": [result]}}}}
    assert allocation_results(allocated) == [result]
    for unallocated in ({}, {"status": None}, {"status": {}}, {"status": {"allocation": {}}},
                        {"status": {"allocation": {"devices": {}}}}):
        assert allocation_results(unallocated) == []


def test_pool_key_names_the_pool_as_publishing_does() -> None:
    meta = {"name": "inv"}
    assert pool_key({"metadata": meta, "spec": {"driver": "d", "pool": "p", "nodeName": "n"}}
                    ) == ("d", "p")
    assert pool_key({"metadata": meta, "spec": {"driver": "d", "nodeName": "n"}}) == ("d", "n")
    assert pool_key({"metadata": meta, "spec": {"driver": "d", "allNodes": True}}) == ("d", "inv")
