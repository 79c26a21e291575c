"""Terminal output of ``kubedra explain`` and ``kubedra simulate`` (``-o table``).

A header (claim, pods, verdict, the short form), a table with one row per evaluated node and
request (the funnel of checks, then the result), and, per node that does not fit, the reasons
for the devices that failed the deciding check, with the selector conjunct that failed. For an
allocated claim: the chosen devices and what each selector read from them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from kubedra.explain.model import ClaimExplanation, NodeOutcome, RequestOutcome
from kubedra.explain.simulate import Simulation

_FUNNEL_COLUMNS = ("DEVICES", "IN-CLASS", "SELECTED", "FREE", "CAPACITY", "COUNTERS",
                   "UNTAINTED")
_WIDTH = 100


def table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as left-aligned columns separated by two spaces (the first row is the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                         strict=True)).rstrip()
                     for row in rows)


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(text, width=_WIDTH, initial_indent=indent,
                         subsequent_indent=indent + "  ", break_on_hyphens=False,
                         break_long_words=False)


def _result(node: NodeOutcome, request: RequestOutcome) -> str:
    if node.error is not None:
        return "error"
    if node.fits:
        picked = [d["device"] for d in node.devices if d["request"] == request.request]
        return "fits: " + ", ".join(picked) if picked else "fits"
    if request.failed_at is None:
        return "ok"
    return f"fails at {request.failed_at}"


def _funnel_rows(candidates: Sequence[NodeOutcome]) -> list[list[str]]:
    rows = [["NODE", "REQUEST", "NEEDED", *_FUNNEL_COLUMNS, "RESULT"]]
    for node in candidates:
        if node.error is not None:
            rows.append([node.node, "-", "-", *(["-"] * len(_FUNNEL_COLUMNS)), "error"])
        for request in node.requests:
            rows.append([node.node, request.request, str(request.needed),
                         *(str(v) for v in request.funnel.values()), _result(node, request)])
    return rows


def _reasons(node: NodeOutcome) -> list[str]:
    lines = [f"{node.node}:"]
    if node.error is not None:
        lines.append(_wrap(f"error: {node.error}", "  "))
        return lines
    failed = [r for r in node.requests if r.failed_at is not None]
    for request in failed:
        lines.append(_wrap(request.message, "  "))
        for finding in request.devices:
            lines.append(_wrap(finding.reason, "    "))
            if finding.selector is not None:  # not wrapped: it is CEL to copy
                lines.append(f"      selector of {finding.selector['source']}: "
                             f"{finding.selector['conjunct']}")
    if not failed:
        lines.append(_wrap(node.message, "  "))
    return lines


def _field(label: str, value: str) -> str:
    """``Label:  value``, the value aligned and wrapped under itself."""
    return textwrap.fill(value, width=_WIDTH, initial_indent=f"{label + ':':<16}",
                         subsequent_indent=" " * 16, break_on_hyphens=False,
                         break_long_words=False)


def _header(explanation: ClaimExplanation) -> list[str]:
    return [_field("ResourceClaim", f"{explanation.namespace}/{explanation.name}"),
            _field("Pods", ", ".join(explanation.pods) or "none"),
            _field("Verdict", explanation.verdict),
            _field("Message", explanation.message)]


def render_explanation(explanation: ClaimExplanation) -> str:
    """The table form of an explanation."""
    lines = _header(explanation)
    if explanation.allocation is not None:
        lines.append(_field("Node", explanation.allocation_node or "any (see the claim)"))
        for chosen in explanation.allocation:
            lines.append("")
            lines.append(f"{chosen.device} (pool {chosen.pool}, driver {chosen.driver}) for "
                         f"request {chosen.request}, class {chosen.device_class}:")
            lines.extend(_wrap(f"{r.source}: {r.reason}", "  ") for r in chosen.reasons)
        return "\n".join(lines) + "\n"
    counts = explanation.nodes
    lines.append(_field("Nodes", f"{counts.evaluated} evaluated, {counts.without_devices} "
                               f"without ResourceSlices, {counts.excluded_by_pods} excluded by "
                               f"the pods' node selection ({counts.total} in total)"))
    if explanation.candidates:
        lines += ["", table(_funnel_rows(explanation.candidates))]
        failing = [c for c in explanation.candidates if not c.fits]
        if failing:
            lines += ["", "Why not:"]
            for node in failing:
                lines.extend(_reasons(node))
    return "\n".join(lines) + "\n"


def render_simulation(simulation: Simulation) -> str:
    """The table form of a simulation."""
    text = render_explanation(simulation.explanation)
    lines = ["", _field("Copies", simulation.message())]
    if simulation.copies:
        rows = [["COPY", "NODE", "DEVICES"]]
        rows += [[str(i + 1), node, ", ".join(f"{d['device']} ({d['request']})"
                                               for d in devices)]
                 for i, (node, devices) in enumerate(simulation.copies)]
        lines += ["", table(rows)]
    return text + "\n".join(lines) + "\n"
