"""The text of ``kubedra status``: a screenful, however large the fleet.

Nodes (or pools) whose rows read the same but for their names are one group, shown once as
``gpu-node-0000 (+665 more)``; at most :data:`GROUPS_SHOWN` groups are shown (the JSON form
has every node and pool).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.explain.render import table
from kubedra.explain.status import Counts, FleetStatus, ModelKey, PendingGroup, Rows

GROUPS_SHOWN = 20
"""Groups of nodes or pools shown before the rest are counted."""

CLAIMS_NAMED = 3
"""Pending claims named per group."""

MESSAGE_WIDTH = 100

_COLUMNS = ["DRIVER", "MODEL", "PUBLISHED", "ALLOCATED", "CLAIMS", "FREE", "UNHEALTHY",
            "DRAINING", "WITHDRAWN"]


def _model(key: ModelKey) -> list[str]:
    driver, model, profile = key
    return [driver, model if profile is None else f"{model} (MIG {profile})"]


def _cells(key: ModelKey, counts: Counts) -> list[str]:
    return [*_model(key), *(str(n) for n in counts.numbers())]


def _ordered(rows: Rows) -> list[ModelKey]:
    return sorted(rows, key=lambda k: (k[0], k[1], k[2] is not None, k[2] or ""))


def _grouped(named: Sequence[tuple[str, Rows]], every: bool) -> list[tuple[list[str], Rows]]:
    """Names with the same rows (counts compared, not claim names) as one group; the largest
    groups first, then by first name."""
    groups: dict[object, tuple[list[str], Rows]] = {}
    for name, rows in named:
        key: object = name if every else tuple((k, rows[k].numbers()) for k in _ordered(rows))
        groups.setdefault(key, ([], rows))[0].append(name)
    return sorted(groups.values(), key=lambda g: (-len(g[0]), g[0][0]))


def _group_table(title: str, named: Sequence[tuple[str, Rows]], every: bool) -> list[str]:
    groups = _grouped(named, every)
    rows = [[title, *_COLUMNS]]
    for names, counts in groups[:GROUPS_SHOWN]:
        label = names[0] + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")
        for i, key in enumerate(_ordered(counts)):
            rows.append([label if i == 0 else "", *_cells(key, counts[key])])
    lines = table(rows).splitlines()
    if len(groups) > GROUPS_SHOWN:
        rest = groups[GROUPS_SHOWN:]
        lines.append(f"… {len(rest)} more groups ({sum(len(g[0]) for g in rest)} "
                     f"{title.lower()}s): -o json lists each")
    return lines


def _pending_lines(pending: Sequence[PendingGroup]) -> list[str]:
    total = sum(len(g.claims) for g in pending)
    if not total:
        return ["Pending claims: none"]
    rows = [["VERDICT", "FAILED AT", "CLAIMS"]]
    for group in pending:
        named = ", ".join(group.claims[:CLAIMS_NAMED]) + (
            ", …" if len(group.claims) > CLAIMS_NAMED else "")
        rows.append([group.verdict, group.failed_at or "-",
                     f"{len(group.claims)}: {named}"])
    lines = [f"Pending claims: {total} (kubectl dra explain resourceclaim NAME -n NS says why)",
             *table(rows).splitlines()]
    for group in pending[:GROUPS_SHOWN]:
        message = f"{group.claims[0]}: {group.message}"
        if len(message) > MESSAGE_WIDTH:
            message = message[:MESSAGE_WIDTH - 1] + "…"
        lines.append(f"  {message}")
    return lines


def render_status(status: FleetStatus, *, by: str = "model", every: bool = False) -> str:
    """The text of ``kubedra status`` (``by``: ``model``, ``node`` or ``pool``; ``every``:
    each node or pool on its own line group, not folded with those that read the same)."""
    lines = [f"Nodes: {status.nodes} ({status.nodes_with_devices} with devices)", ""]
    totals = status.totals()
    if by == "node":
        lines += _group_table("NODE", [(n or "-", r) for n, r in status.by_node().items()],
                              every)
    elif by == "pool":
        lines += _group_table("POOL", [(f"{p.driver}/{p.pool}", p.rows) for p in status.pools
                                       if p.reason is None], every)
    elif totals:
        lines += table([_COLUMNS, *(_cells(k, totals[k]) for k in _ordered(totals))]
                       ).splitlines()
    else:
        lines.append("No devices published.")
    for pool in status.unusable():
        lines.append(f"Pool {pool.driver}/{pool.pool} ({pool.devices} devices) cannot be "
                     f"used: {pool.reason}")
    if status.pools_on_no_node:
        named = ", ".join(f"{p.driver}/{p.pool}" for p in status.pools_on_no_node[:CLAIMS_NAMED])
        lines.append(f"Pools of nodes that do not exist: {len(status.pools_on_no_node)} "
                     f"({named}{', …' if len(status.pools_on_no_node) > CLAIMS_NAMED else ''})")
    return "\n".join([*lines, "", *_pending_lines(status.pending)]) + "\n"
