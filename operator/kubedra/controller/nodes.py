"""Nodes as the operator reads them: a :class:`~kubedra.controller.listwatch.ListWatch` of
records holding a Node's name, UID and labels, nothing else.

A Node's status changes every few seconds (the kubelet's, or kwok's, heartbeats), which is
nothing kubedra decides on: a Node counts for whether it exists (a node-local pool is withdrawn
without it) and its labels (explanations: node selectors). With kopf watching Nodes, every
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
    a node); equal for two versions of a Node that differ only in status or annotations."""
    meta = node["metadata"]
    return {"metadata": {"name": meta["name"], "uid": meta.get("uid", ""),
                         "labels": dict(meta.get("labels") or {})}}


NODE_DECODER = JsonDecoder(node_record)
"""Node events and pages → :func:`node_record` s (the standard library's ``json``: a Node's
event is 0.02 ms, ``bench/decode.py``)."""
