"""The real-node invariants of the fault suite (e2e/invariants.py) report what they must: a
device prepared for two claims (the same device, or a MIG partition and its whole GPU on the
H200 capture's counters), a CDI spec without a prepared claim, a prepared claim without its
spec, a running pod whose claim is not prepared, a prepared claim no pod uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e.invariants import NodeFiles, node_inventory, node_violations, prepared_twice
from kubedra.api.inventory import DiscoverySettings
from kubedra.api.mig import compact
from kubedra.discovery import discover
from kubedra.node.claimspec import spec_path
from tests.support.h200 import H200_CAPTURE

DRIVER = "gpu.kubedra.io"


def _node(tmp_path: Path, claims: dict[str, dict[str, Any]], specs: list[str]) -> NodeFiles:
    files = NodeFiles("n", tmp_path, tmp_path / "cdi")
    (tmp_path / "plugins" / DRIVER).mkdir(parents=True)
    (tmp_path / "plugins" / DRIVER / "checkpoint.json").write_text(json.dumps(
        {"checksum": "", "data": {"version": 1, "claims": claims}}))
    files.cdi_dir.mkdir()
    for uid in specs:
        spec_path(files.cdi_dir, DRIVER, uid).write_text("{}")
    (files.cdi_dir / "other-vendor_x.json").write_text("{}")  # not ours: ignored
    return files


def _claim(uid: str, state: str = "PrepareCompleted", device: str = "gpu-0",
           **extra: Any) -> dict[str, Any]:
    return {"uid": uid, "namespace": "ns", "name": f"c-{uid}", "state": state,
            "bootID": "b", "devices": [{"requestNames": ["gpu"], "poolName": "n",
                                        "deviceName": device, "cdiDeviceIDs": [], **extra}]}


def _pod(name: str, claim: str, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name},
            "status": {"phase": phase,
                       "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}}


def _api_claim(uid: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": f"c-{uid}", "uid": uid}}


def test_a_consistent_node_has_no_violation(tmp_path: Path) -> None:
    files = _node(tmp_path, {"u1": _claim("u1")}, ["u1"])
    assert files.spec_uids() == {"u1"}
    assert node_violations(files, [_api_claim("u1")], [_pod("p1", "c-u1")]) == []


def test_every_broken_node_invariant_is_reported(tmp_path: Path) -> None:
    files = _node(tmp_path, {"u1": _claim("u1"), "u2": _claim("u2", "PrepareStarted"),
                             "u3": _claim("u3", device="gpu-1")}, ["u2", "u4"])
    found = node_violations(files, [_api_claim(u) for u in ("u1", "u2", "u3")],
                            [_pod("p2", "c-u2"), _pod("p3", "c-u3", "Pending")])
    assert found == [
        "node n: device n/gpu-0 of claim u2 and device n/gpu-0 of claim u1 are prepared together",
        "node n: CDI spec of claim u2 without a prepared claim",
        "node n: CDI spec of claim u4 without a prepared claim",
        "node n: prepared claim u1 has no CDI spec",
        "node n: prepared claim u3 has no CDI spec",
        "node n: pod ns/p2 runs but its claim u2 is not prepared",
        "node n: claim u1 is prepared but no pod of the node uses it",
    ]


def test_a_shared_or_admin_device_is_not_prepared_twice(tmp_path: Path) -> None:
    files = _node(tmp_path, {}, [])
    checkpoint = {"a": _claim("a", shareID="s1"), "b": _claim("b", shareID="s2"),
                  "c": _claim("c", device="gpu-1"), "d": _claim("d", device="gpu-1",
                                                                adminAccess=True)}
    assert prepared_twice(files, checkpoint) == []


def _inventory(node: str) -> dict[str, Any]:
    """The node's inventory as the API returns it: the H200 capture with MIG partitions,
    reported in the compact form (``migModels``), as today's agent writes it."""
    found = discover(f"snapshot:{H200_CAPTURE}", DiscoverySettings(mig="partitions"),
                     Path("/sys"))
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": DRIVER, "nodeName": node},
            "status": {"discovered": compact(found).to_api()}}


def test_a_partition_and_its_whole_gpu_are_prepared_twice(tmp_path: Path) -> None:
    files = _node(tmp_path, {}, [])
    inventory = node_inventory(files, [_inventory("other"), _inventory("n")])
    assert inventory is not None
    assert inventory["spec"]["nodeName"] == "n"
    checkpoint = {"a": _claim("a", device="gpu-0-mig-3g71gb-s0"), "b": _claim("b")}
    assert prepared_twice(files, checkpoint, inventory) == [
        "node n: device n/gpu-0 of claim b and device n/gpu-0-mig-3g71gb-s0 of claim a are "
        "prepared together, consuming 10 of counter compute-slices of counter set "
        "gpu-0-counters (7 in all)"]
    assert prepared_twice(files, checkpoint) == [], "by name only, without the inventory"
    disjoint = {"a": _claim("a", device="gpu-0-mig-3g71gb-s0"),
                "d": _claim("d", device="gpu-0-mig-3g71gb-s4")}
    assert prepared_twice(files, disjoint, inventory) == []
