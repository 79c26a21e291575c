"""Each node shape evaluated once (issue 24 item 1): the same text and JSON as node by node.

The fleet is :mod:`bench.fleet_dump`'s (node *k* with ``k mod 3 + 1`` GPUs held by its own
claim) with shapes that differ in one value only: on some nodes the GPUs of NUMA node 1 have
80Gi (a value the ``numa4`` claim's selector reads), on others ``gpu-5`` is on NUMA node 0 (the
value its ``matchAttribute`` constraint compares); one node's GPU has a taint (never reused),
and two nodes are named like words of the text (``request``, ``devices``: their names must not
be replaced in another node's text)."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

from bench import fleet_dump
from kubedra.allocation import AllocationFailed, Allocator
from kubedra.explain.claims import evaluate_node, explain_claim
from kubedra.explain.model import NodeOutcome
from kubedra.explain.node_shapes import NodeShapes
from kubedra.explain.render import _Texts, render_simulation
from kubedra.explain.shapes import masked, names
from kubedra.explain.simulate import claim_from_documents, simulate_claim
from kubedra.explain.snapshot import ClusterSnapshot
from kubedra.explain.sources import read_dump

NODES = 30
RENAMED = {4: "request", 7: "devices"}
TAINTED = 11
NUMA_SELECTOR = {"name": "gpu", "exactly": {
    "deviceClassName": fleet_dump.DRIVER, "count": 2, "selectors": [{"cel": {"expression": (
        'device.attributes["resource.kubernetes.io"].numaNode == 1')}}]}}


def _fleet() -> dict[str, Any]:
    dump = fleet_dump.fleet(NODES)
    items = dump["items"]
    for item in items:
        if item["kind"] == "ResourceSlice":
            index = int(item["spec"]["nodeName"].rsplit("-", 1)[1])
            for device in item["spec"]["devices"]:
                gpu = int(device["name"].split("-")[1])
                if index % 5 == 0 and gpu >= 4:
                    device["capacity"] = {**device["capacity"],
                                          "memory": {"value": "80Gi"}}
                if index % 7 == 3 and gpu == 5:
                    device["attributes"][fleet_dump.NUMA] = {"int": 0}
                if index == TAINTED and gpu == 7:
                    device["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    text = yaml.safe_dump(dump)
    for index, new in RENAMED.items():
        text = text.replace(fleet_dump.node_name(index), new)
    # names that are no words of kubedra's source (its docstrings name gpu-node-0000)
    for old, new in (("gpu-node-", "rack-host-"), ("train", "team-q"), ("job-", "task-")):
        text = text.replace(old, new)
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def _snapshot(tmp_path: pathlib.Path) -> ClusterSnapshot:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(_fleet()))
    return read_dump([path]).snapshot()


def _claim(name: str) -> Any:
    document = fleet_dump.claim_document(name) if name in fleet_dump.CLAIMS else {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [NUMA_SELECTOR]}}}
    return claim_from_documents([document], None)


def test_by_shape_reads_as_node_by_node(tmp_path: pathlib.Path) -> None:
    snapshot = _snapshot(tmp_path)
    for name in ("numa4", "gpu8", "numa1"):
        claim = _claim(name)
        by_shape = simulate_claim(snapshot, claim)
        by_node = simulate_claim(snapshot, claim, by_shape=False)
        assert by_shape.to_json() == by_node.to_json(), name
        for every_node in (False, True):
            assert render_simulation(by_shape, every_node=every_node) == \
                render_simulation(by_node, every_node=every_node), name


def test_a_shapes_masked_texts_are_each_nodes_own(tmp_path: pathlib.Path) -> None:
    """What grouping compares (each node's rows and reasons, and its message, with names
    masked): a node whose outcome was copied from the first of its shape gets it from that
    node's, and it equals masking its own texts."""
    snapshot = _snapshot(tmp_path)
    for name in ("numa4", "gpu8", "numa1"):
        candidates = simulate_claim(snapshot, _claim(name)).explanation.candidates
        copied = [n for n in candidates if n.renamed_from is not None
                  and n.renamed_from.reproduces_texts]
        # all but the first of each shape (at most ten), the tainted node and "request"
        assert len(copied) >= len(candidates) - 12, name
        assert not any(n.renamed_from is not None and n.renamed_from.reproduces_texts
                       for n in candidates if n.node in ("request", "devices")), name
        texts = _Texts()
        for node in candidates:
            for node_only in (False, True):
                words = frozenset([node.node]) if node_only else names(node)
                assert texts.masked.of(node, node_only=node_only) == tuple(
                    masked(t, words) for t in texts.of(node)), (name, node.node)


def test_what_a_shape_takes_from_the_pools_is_kept_with_them(tmp_path: pathlib.Path) -> None:
    """A later question (the operator keeps its snapshot) about a claim that reads the same
    values takes each node's device keys as made for the first; one reading other values
    makes its own; the shapes are the same either way."""
    snapshot = _snapshot(tmp_path)
    nodes = [(n, snapshot.resources.node_pools(n)) for n in snapshot.nodes]

    def parts(name: str) -> tuple[list[Any], list[Any]]:
        shapes = NodeShapes(snapshot, snapshot.allocator(), _claim(name))
        return ([shapes._pools_part(n, p) for n, p in nodes],
                [shapes.shape(n, p) for n, p in nodes])

    first, first_shapes = parts("numa4")
    again, again_shapes = parts("numa4")
    other, _ = parts("numa1")
    assert [part is None for part in first] == [n.name == _host(TAINTED) for n, _ in nodes]
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert again_shapes == first_shapes
    assert not any(a is b for a, b in zip(first, other, strict=True) if a is not None)


def test_each_shape_is_evaluated_once(tmp_path: pathlib.Path) -> None:
    """Node by node, each outcome equals the node's own; only the first node of a shape (or
    one whose names cannot be replaced, or a tainted one) is evaluated."""
    snapshot = _snapshot(tmp_path)
    claim = _claim("numa4")
    allocator = snapshot.allocator()
    shapes = NodeShapes(snapshot, allocator, claim)
    reused: list[str] = []
    for node in snapshot.nodes:
        pools = snapshot.resources.node_pools(node)
        own = evaluate_node(snapshot, allocator, claim, node, pools)
        shape = shapes.shape(node, pools)
        assert (shape is None) == (node.name == _host(TAINTED))
        outcome = shapes.reused(shape) if shape is not None else None
        if outcome is None:
            if shape is not None:
                shapes.keep(shape, own, pools)
            continue
        assert outcome.to_json() == own.to_json(), node.name
        reused.append(node.name)
    # nine shapes: 3 holder counts x (80Gi on NUMA 1 or not) x (gpu-5 on NUMA 0 or not), as
    # 29 nodes have them (the tainted one has none); and rack-host-0001 again, as the first
    # of its shape was "devices", a name that is a word of the text and is never replaced
    evaluated = {"devices", *(_host(i) for i in (0, 1, 2, 3, 5, 6, 10, 17, 25))}
    assert set(n.name for n in snapshot.nodes) - set(reused) == {*evaluated, _host(TAINTED)}
    assert shapes.evaluated == len(evaluated) == 10
    assert "request" in reused
    fits = {n.name for n in snapshot.nodes if _fits(allocator, n, claim)}
    assert _host(5) not in fits  # 80Gi on NUMA node 1, 1 GPU free on NUMA node 0
    assert _host(6) in fits


def _host(index: int) -> str:
    return f"rack-host-{index:04d}"


def _fits(allocator: Allocator, node: Any, claim: Any) -> bool:
    try:
        allocator.allocate(node, [claim])
    except AllocationFailed:
        return False
    return True


def test_a_copied_outcome_renames_a_field_when_it_is_read(tmp_path: pathlib.Path) -> None:
    """A copied outcome holds its fields without names at once, and renames the others when
    first read (the operator's Event reads each node's counts, not its devices' reasons):
    each read gives what renaming at once gave, and the copy equals the node's own outcome
    both ways, as the JSON does."""
    snapshot = _snapshot(tmp_path)
    claim = _claim("gpu8")  # fits on no node: every device's reason names it
    by_shape = explain_claim(snapshot, claim).candidates
    by_node = {o.node: o for o in explain_claim(snapshot, claim, by_shape=False).candidates}
    copies = [o for o in by_shape if o.renamed_from is not None]
    assert len(copies) >= NODES - 12
    for copy in copies:
        requests = copy.requests  # read by the explanation's grouping already
        assert copy.requests is requests  # renamed once, then kept
        if copy.renamed_from.reproduces_texts:  # else the Message masks its own names
            assert "devices" not in vars(requests[0])  # the devices' reasons: not read yet
        own = by_node[copy.node]
        assert isinstance(copy, NodeOutcome)
        assert (copy == own, own == copy, copy.to_json() == own.to_json()) == (True, True, True)
        assert [r.devices for r in requests] == [r.devices for r in own.requests]
