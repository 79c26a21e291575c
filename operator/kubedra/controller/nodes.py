"""Nodes as the operator reads them: a :class:`~kubedra.controller.listwatch.ListWatch` of
records holding a Node's name, UID, labels and declared features, nothing else.

A Node's status changes every few seconds (the kubelet's, or kwok's, heartbeats), which is
nothing kubedra decides on: a Node counts for whether it exists (a node-local pool is withdrawn
without it), its labels (explanations: node selectors) and the features its kubelet declares
(``status.declaredFeatures``, KEP-5328: which a slice may use on it), which change only when the
kubelet restarts. With kopf watching Nodes, every
heartbeat went through kopf's per-object worker, an index update and a handler: half of the
operator's CPU in a steady 1,000-node fleet (``bench/RESULTS.md``, round 4, plan 7). Here a
heartbeat is decoded and found equal to the cached record; nothing else happens.
"""

from __future__ import annotations

from typing import Any

from kubedra.controller.listwatch import JsonDecoder

NODES_PATH = "/api/v1/nodes"


def node_record(node: dict[str, Any]) -> dict[str, Any]:
    """``{"metadata": {"name", "uid", "labels"}}`` of a Node (the shape explanations read of
    a node), with ``{"status": {"declaredFeatures"}}`` where the kubelet declares any; equal
    for two versions of a Node that differ only in other status or annotations."""
    meta = node["metadata"]
    record: dict[str, Any] = {"metadata": {"name": meta["name"], "uid": meta.get("uid", ""),
                                           "labels": dict(meta.get("labels") or {})}}
    declared = (node.get("status") or {}).get("declaredFeatures")
    if declared:
        record["status"] = {"declaredFeatures": sorted(declared)}
    return record


def declared_features(record: dict[str, Any] | None) -> frozenset[str]:
    """The features a Node's kubelet declares, from its :func:`node_record` (none for None)."""
    return frozenset(((record or {}).get("status") or {}).get("declaredFeatures") or ())


NODE_DECODER = JsonDecoder(node_record)
"""Node events and pages → :func:`node_record` s (the standard library's ``json``: a Node's
event is 0.02 ms, ``bench/decode.py``)."""
