"""``kubedra status`` on a small fleet: every count, exactly, and the text."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from kubedra.api.resource import ResourceClaim
from kubedra.cli import kubectl_dra
from kubedra.explain import ClusterSnapshot
from kubedra.explain.status import fleet_status
from kubedra.explain.status_render import render_status
from tests.support.explain_builders import gpu_claim, h200_slices, node, on_node, shipped_classes

Json = dict[str, Any]
GPU = "gpu.kubedra.io"
TOO_BIG = 'device.attributes["gpu.kubedra.io"].productName == "NVIDIA B200"'


def _gpus(node_name: str, taints: dict[str, Json], count: int = 4) -> Json:
    """A slice of ``count`` whole H200s on ``node_name``; ``taints``: device → its taint."""
    devices = []
    for i in range(count):
        name = f"gpu-{i}"
        device: Json = {"name": name, "attributes": {"productName": {"string": "NVIDIA H200"},
                                                     "type": {"string": "gpu"}}}
        if name in taints:
            device["taints"] = [taints[name]]
        devices.append(device)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{GPU}-00000"},
            "spec": {"driver": GPU, "nodeName": node_name, "devices": devices,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}}}


def _taint(key: str, value: str) -> Json:
    return {"key": key, "value": value, "effect": "NoSchedule"}


def _fleet() -> tuple[ClusterSnapshot, list[Json]]:
    """n1: 4 GPUs, gpu-0 held by job-a, gpu-1 unhealthy, gpu-2 draining (gone); n2: MIG,
    gpu-0 held whole; n3: a withdrawn pool whose gpu-0 is held; n4's pool is incomplete;
    ghost's node does not exist; n5 has no devices."""
    slices = [
        _gpus("n1", {"gpu-1": _taint("kubedra.io/unhealthy", "XID-79"),
                     "gpu-2": _taint("kubedra.io/draining", "gone")}),
        *h200_slices("n2", mig="partitions"),
        _gpus("n3", {"gpu-0": _taint("kubedra.io/draining", "withdrawn")}, count=1),
        {**_gpus("n4", {}), "spec": {**_gpus("n4", {})["spec"], "pool": {
            "name": "n4", "generation": 1, "resourceSliceCount": 2}}},
        _gpus("ghost", {}, count=2),
    ]
    claims = [gpu_claim("job-a", allocation=on_node("n1", "n1", "gpu-0")),
              gpu_claim("whole", allocation=on_node("n2", "n2", "gpu-0")),
              gpu_claim("kept", namespace="train", allocation=on_node("n3", "n3", "gpu-0")),
              gpu_claim("too-big", TOO_BIG), gpu_claim("too-big-2", TOO_BIG),
              gpu_claim("four", count=4, allocationMode="ExactCount")]
    nodes = [node(n) for n in ("n1", "n2", "n3", "n4", "n5")]
    return ClusterSnapshot.from_api(slices, shipped_classes(), [], claims, nodes), []


def _row(model: str, profile: str | None, *numbers: int) -> Json:
    names = ("published", "allocated", "claims", "free", "unhealthy", "draining", "withdrawn")
    return {"driver": GPU, "model": model, "profile": profile,
            **dict(zip(names, numbers, strict=True))}


H200 = "NVIDIA H200"


def test_counts_per_model_agree_with_the_allocator() -> None:
    snapshot, pods = _fleet()
    found = fleet_status(snapshot, pods).to_json()
    assert found["nodes"] == {"total": 5, "withDevices": 4}
    # whole GPUs: n1 4 (1 held, 1 unhealthy, 1 draining, 1 free), n2 1 held, n3 1 held
    # (withdrawn); n2's 25 partitions are not free: their GPU is allocated whole
    assert found["devices"] == [
        _row(H200, None, 6, 3, 3, 1, 1, 2, 1),
        _row(H200, "1g.18gb", 7, 0, 0, 0, 0, 0, 0),
        _row(H200, "1g.18gb+me", 7, 0, 0, 0, 0, 0, 0),
        _row(H200, "1g.35gb", 4, 0, 0, 0, 0, 0, 0),
        _row(H200, "2g.35gb", 3, 0, 0, 0, 0, 0, 0),
        _row(H200, "3g.71gb", 2, 0, 0, 0, 0, 0, 0),
        _row(H200, "4g.71gb", 1, 0, 0, 0, 0, 0, 0),
        _row(H200, "7g.141gb", 1, 0, 0, 0, 0, 0, 0)]
    assert found["unusablePools"] == [{"driver": GPU, "pool": "n4", "node": "n4",
                                       "reason": "incomplete: 1 of 2 slices published",
                                       "devices": 4}]
    assert found["poolsOnNoNode"] == [{"driver": GPU, "pool": "ghost", "node": "ghost",
                                       "devices": 2}]


def test_pending_claims_are_grouped_by_verdict_and_failed_check() -> None:
    snapshot, pods = _fleet()
    pending = fleet_status(snapshot, pods).to_json()["pending"]
    # too-big: no GPU is a B200 (n4's incomplete pool has no devices for it: "devices",
    # earlier); four: no node has 4 free GPUs (n1 has 1)
    assert [(g["verdict"], g["failedAt"], g["claims"]) for g in pending] == [
        ("Unschedulable", "matchRequest", ["demo/too-big", "demo/too-big-2"]),
        ("Unschedulable", "free", ["demo/four"])]


def test_a_claim_whose_device_class_does_not_exist_failed_at_the_class() -> None:
    """kube-scheduler evaluates no node for it (its PreFilter); the group said ``noDevices``,
    as if no node had devices, though four have them."""
    snapshot, pods = _fleet()
    missing = ClusterSnapshot.build(
        [], [], [], [*snapshot.claims, ResourceClaim.from_api(gpu_claim(
            "typo", device_class="gpu.kubedra.oi"))], snapshot.nodes)
    snapshot = ClusterSnapshot(snapshot.resources, snapshot.taint_rules, missing.claims,
                               snapshot.nodes)
    pending = fleet_status(snapshot, pods).to_json()["pending"]
    assert [(g["verdict"], g["failedAt"], g["claims"]) for g in pending] == [
        ("Unschedulable", "matchRequest", ["demo/too-big", "demo/too-big-2"]),
        ("Unschedulable", "deviceClass", ["demo/typo"]),
        ("Unschedulable", "free", ["demo/four"])]
    assert pending[1]["message"].startswith(
        "cannot be allocated: request gpu: device class gpu.kubedra.oi does not exist")


def test_by_node_and_by_pool() -> None:
    snapshot, pods = _fleet()
    status = fleet_status(snapshot, pods)
    by_node = status.to_json("node")["byNode"]
    assert [n["node"] for n in by_node] == ["n1", "n2", "n3"]
    assert by_node[0]["devices"] == [_row(H200, None, 4, 1, 1, 1, 1, 1, 0)]
    assert by_node[2]["devices"] == [_row(H200, None, 1, 1, 1, 0, 0, 1, 1)]
    by_pool = status.to_json("pool")["byPool"]
    assert [(p["pool"], p["node"], p["generation"], p["slices"]) for p in by_pool] == [
        ("n1", "n1", 1, 1), ("n2", "n2", 1, 2), ("n3", "n3", 1, 1)]


def test_a_partition_is_free_until_its_gpu_or_an_overlapping_partition_is_allocated() -> None:
    slices = h200_slices("n2", mig="partitions")
    snapshot = ClusterSnapshot.from_api(slices, shipped_classes(), [], [
        gpu_claim("half", allocation=on_node("n2", "n2", "gpu-0-mig-4g71gb-s0"))], [node("n2")])
    rows = {(r["profile"]): (r["published"], r["allocated"], r["free"])
            for r in fleet_status(snapshot).to_json()["devices"]}
    # 4g.71gb at start 0 takes memory slices 0-3: the whole GPU, the 7g and every partition
    # starting below 4 overlap it
    assert rows == {None: (1, 0, 0), "1g.18gb": (7, 0, 3), "1g.18gb+me": (7, 0, 3),
                    "1g.35gb": (4, 0, 2), "2g.35gb": (3, 0, 1), "3g.71gb": (2, 0, 1),
                    "4g.71gb": (1, 1, 0), "7g.141gb": (1, 0, 0)}


def test_text_groups_nodes_that_read_the_same() -> None:
    slices = [s for n in ("a1", "a2", "a3") for s in [_gpus(n, {}, count=2)]]
    snapshot = ClusterSnapshot.from_api(slices, shipped_classes(), [], [
        gpu_claim("j", allocation=on_node("a2", "a2", "gpu-0"))],
        [node(n) for n in ("a1", "a2", "a3")])
    assert render_status(fleet_status(snapshot), by="node") == (
        "Nodes: 3 (3 with devices)\n"
        "\n"
        "NODE          DRIVER          MODEL        PUBLISHED  ALLOCATED  CLAIMS  FREE  "
        "UNHEALTHY  DRAINING  WITHDRAWN\n"
        "a1 (+1 more)  gpu.kubedra.io  NVIDIA H200  2          0          0       2     "
        "0          0         0\n"
        "a2            gpu.kubedra.io  NVIDIA H200  2          1          1       1     "
        "0          0         0\n"
        "\n"
        "Pending claims: none\n")


def test_the_command_reads_a_dump(tmp_path: Any) -> None:
    import yaml

    snapshot_objects = [{"kind": "Node", **node("a1")}, {"kind": "DeviceClass",
                                                        **shipped_classes()[0]},
                        _gpus("a1", {}, count=2)]
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"kind": "List", "items": snapshot_objects}))
    result = CliRunner().invoke(kubectl_dra, ["status", "--from", str(dump), "-o", "json"])
    assert result.exit_code == 0, result.output
    import json

    assert json.loads(result.stdout)["devices"] == [_row(H200, None, 2, 0, 0, 2, 0, 0, 0)]


def _tainted_dump(tmp_path: Any, name: str, version: str) -> Any:
    """A dump recording ``version``: node a1's two GPUs tainted NoSchedule, a claim pending."""
    import json

    items = [{"kind": "Node", **node("a1")}, {"kind": "DeviceClass", **shipped_classes()[0]},
             _gpus("a1", {f"gpu-{i}": _taint("kubedra.io/unhealthy", "XID-79")
                          for i in range(2)}, count=2),
             {"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1", **gpu_claim("one")}]
    dump = tmp_path / name
    dump.write_text(json.dumps({"kind": "List", "serverVersion": version, "items": items}))
    return dump


def test_status_decides_as_the_dumps_kubernetes_version(tmp_path: Any) -> None:
    """status explains pending claims as the cluster's scheduler, as explain does (it decided
    as 1.37 whatever the dump recorded): on 1.35, whose scheduler has device taints off, the
    claim that 1.37 keeps off the tainted GPUs fits; dumps of two minors need --kube-version."""
    import json

    old, new = _tainted_dump(tmp_path, "a.json", "v1.35.4"), _tainted_dump(tmp_path, "b.json",
                                                                          "v1.37.2")
    runs = {name: CliRunner().invoke(kubectl_dra, ["status", "-o", "json", *args]) for name, args
            in (("1.35", ["--from", str(old)]), ("1.37", ["--from", str(new)]),
                ("chosen", ["--from", str(old), "--from", str(new), "--kube-version", "1.35"]),
                ("mixed", ["--from", str(old), "--from", str(new)]))}
    pending = {name: [(g["verdict"], g["failedAt"]) for g in json.loads(r.stdout)["pending"]]
               for name, r in runs.items() if name != "mixed"}
    assert pending == {"1.35": [("Fits", None)], "1.37": [("Unschedulable", "untainted")],
                       "chosen": [("Fits", None)]}
    assert {name: json.loads(r.stdout)["kubeVersion"] for name, r in runs.items()
            if name != "mixed"} == {"1.35": "1.35", "1.37": "1.37", "chosen": "1.35"}
    assert runs["1.35"].stderr.splitlines()[0] == (
        f"note: deciding as Kubernetes 1.35's scheduler, the version the dump records: "
        f"v1.35.4 ({old}) (choose with --kube-version)")
    assert (runs["mixed"].exit_code, runs["mixed"].stderr) == (1, (
        f"Error: --from: the dumps are of different Kubernetes versions: v1.35.4 ({old}), "
        f"v1.37.2 ({new}); choose the one to decide as with --kube-version\n"))
