"""Verify an unchanged pool without decoding it: ``status.publishedFrom``, the fingerprint of
what an inventory's pool was last published from.

A full reconcile of an inventory decodes it and its slices (pydantic), builds the pool, splits
it into slices and compares each with the published one. An operator that starts does that for
every inventory to verify the pools it finds; at 300 nodes that was most of a restart's CPU
(``bench/RESULTS.md``, "scale"). With the fingerprint a pool that nothing changed is verified
from the raw cached objects: one digest of the inventory's inputs and a look at the slices'
resourceVersions.

What :func:`kubedra.controller.inventories.decide_inventory` reads: the inventory's
generation, ``spec``, ``status.discovered`` (its ``observedTime`` by nothing), ``status.retained``
and ``status.pool``; the pool's slices; the agent's Lease state; whether the Node exists; the
other inventories naming the pool, live or deleted; the devices claims hold; the slices' owner;
the clock and the hold-down setting; and the operator's own rules. A publish records
(:func:`record`) a digest of the inventory's part, the operator's version, the owner's UID and
the hold-down (:func:`inputs_digest`), with the resourceVersion of every slice after its
writes — only for a plain publish: published, no device tainted (so no health taint, no
hold-down, which only ends with time, and nothing draining), every held device published.

A later reconcile, in this process or after a restart, finds the pool unchanged
(:func:`unchanged_pool`) when the digest matches, the slices are exactly the recorded names
at the recorded resourceVersions (any write to a slice changes its resourceVersion), the pool
has no other inventory, the agent's Lease is live, the Node exists, and every device a claim
holds is published. The decision would then be the one recorded — no slice write — and the
status can differ only in ``allocations`` (claims came or went), which is then all that is
written. Anything else changed: a full reconcile, as before. A new operator version digests
differently, so an upgrade verifies every pool fully once (and writes each status once).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubedra import __version__
from kubedra.api.inventory import DeviceAllocation, PublishedFrom
from kubedra.api.mig import partition_names
from kubedra.controller.inventories import InventoryDecision, status_allocations
from kubedra.controller.leases import LeaseState
from kubedra.controller.state import ClaimUse, stable_metadata

SCHEME = 1
"""Bumped when what the digest covers changes."""


def inputs_digest(raw: Mapping[str, Any], owner_uid: str, hold_down: float,
                  off: Sequence[str] = (), labels: Mapping[str, str] | None = None) -> str:
    """The digest (32 hex digits of SHA-256) of what a decision reads of the raw inventory —
    ``metadata.generation``, ``spec``, ``status.discovered`` but ``observedTime``,
    ``status.retained`` — with the operator's version, the slices' owner UID and
    ``hold_down`` (seconds), and the feature gates the cluster has ``off``
    (:attr:`kubedra.publishing.features.ServedFeatures.off`; left out of the digest when
    none is, so a cluster that serves everything keeps its digests), and the ``labels`` its
    slices carry besides the operator's own (:attr:`kubedra.publishing.pool.DesiredPool.labels`;
    left out when there are none, likewise)."""
    status = raw.get("status") or {}
    discovered = status.get("discovered")
    if isinstance(discovered, Mapping):
        discovered = {k: v for k, v in discovered.items() if k != "observedTime"}
    inputs = [SCHEME, __version__, owner_uid, hold_down, raw["metadata"].get("generation"),
              raw.get("spec"), discovered, status.get("retained")]
    if off:
        inputs.append(list(off))
    if labels:
        inputs.append(dict(labels))
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def record(raw: Mapping[str, Any], decision: InventoryDecision, uses: Sequence[ClaimUse],
           slices_now: Sequence[Mapping[str, Any]], owner_uid: str, hold_down: float,
           off: Sequence[str] = ()) -> PublishedFrom | None:
    """What ``status.publishedFrom`` says after ``decision`` was carried out (``slices_now``:
    the inventory's raw slices after its writes), or None when the decision is not a plain
    publish (see the module docstring) and the next reconcile must be a full one."""
    pool, plan = decision.pool, decision.plan
    if (not decision.ok or decision.withdrawn or decision.draining or decision.retry
            or pool is None or plan is None or pool.held_until is not None
            or any(d.taints for d in pool.devices)):
        return None
    versions = _slice_versions(slices_now)
    published = {d.name for d in pool.devices}
    if set(versions) != set(plan.slice_names) or any(u.device not in published for u in uses):
        return None
    return PublishedFrom(inputs=inputs_digest(raw, owner_uid, hold_down, off, pool.labels),
                         slices=versions)


def _slice_versions(slices: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Name → resourceVersion of each raw slice."""
    return {s["metadata"]["name"]: str(s["metadata"].get("resourceVersion") or "")
            for s in slices}


def same_inputs(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether inventory ``after`` (the object an allocations-only status write returned)
    holds what inventory ``before`` (the cached object the reconcile decided from) held of
    everything but the operator's own status fields: metadata but its resourceVersion,
    managedFields and annotations (:func:`~kubedra.controller.state.stable_metadata`),
    ``spec``, ``status.discovered`` and ``status.retained``. Then the watch event of ``after``
    has nothing a decision reads that ``before`` had not (nothing another writer changed came
    in between), and its reconcile can be skipped."""
    def status(obj: Mapping[str, Any]) -> tuple[Any, Any]:
        found = obj.get("status") or {}
        return found.get("discovered"), found.get("retained")
    return (stable_metadata(before) == stable_metadata(after)
            and before.get("spec") == after.get("spec") and status(before) == status(after))


@dataclass(frozen=True)
class Unchanged:
    """A pool found as published: what the operator remembers of it, and the status
    ``allocations`` to write (None: they are as written)."""

    devices: frozenset[str]
    """Names of the published devices."""
    health: Mapping[str, tuple[str, str | None]]
    """Device name → (health, message) of every device of the inventory."""
    allocations: list[DeviceAllocation] | None


def unchanged_pool(raw: Mapping[str, Any], slices: Sequence[Mapping[str, Any]], *,
                   lease: LeaseState | None, node_exists: bool, pool_inventories: Sequence[str],
                   deleted: Sequence[str], uses: Sequence[ClaimUse], owner_uid: str,
                   hold_down: float, off: Sequence[str] = (),
                   labels: Mapping[str, str] | None = None) -> Unchanged | None:
    """Whether inventory ``raw``'s pool is as its ``status.publishedFrom`` recorded it, from
    the raw cached objects alone (see the module docstring); None when a full reconcile must
    decide.

    Args:
        slices: the inventory's raw slices (the watched ones, corrected by the operator's own
            recent writes).
        lease: the state of its node's agent Lease (None for a pool without node).
        node_exists: whether its Node exists (True for a pool without node).
        pool_inventories: names of the inventories naming its pool (itself included).
        deleted: names of deleted inventories whose slices still publish devices of the pool.
        uses: the devices claims hold in the pool.
        owner_uid, hold_down, off, labels: as for :func:`inputs_digest`.
    """
    status = raw.get("status") or {}
    recorded = status.get("publishedFrom")
    name = raw["metadata"]["name"]
    if not isinstance(recorded, Mapping) or list(pool_inventories) != [name] or deleted \
            or not node_exists:
        return None
    node = (raw.get("spec") or {}).get("nodeName")
    if node and status.get("discovered") is not None and lease != "live":
        return None
    versions = _slice_versions(slices)
    if versions != recorded.get("slices") or \
            recorded.get("inputs") != inputs_digest(raw, owner_uid, hold_down, off, labels):
        return None
    devices = frozenset(d["name"] for s in slices
                        for d in (s.get("spec") or {}).get("devices") or [])
    if any(u.device not in devices for u in uses):
        return None
    discovered = status.get("discovered") or {}
    listed = [*((raw.get("spec") or {}).get("devices") or []), *(discovered.get("devices") or [])]
    health = {d["name"]: (d.get("health") or "Healthy", d.get("healthMessage")) for d in listed}
    for gpu, names in partition_names(discovered).items():
        health.update(dict.fromkeys(names, health[gpu]))
    allocations = status_allocations(uses)
    written = status.get("allocations") or []
    same = [a.to_api() for a in allocations] == list(written)
    return Unchanged(devices=devices, health=health, allocations=None if same else allocations)
