"""Terminal output of ``kubedra explain`` and ``kubedra simulate`` (``-o table``).

A header (claim, pods, verdict, the short form), a table with one row per evaluated node and
request (the funnel of checks, then the result), and, per node that does not fit, the reasons
for the devices that failed the deciding check, with the selector conjunct that failed; per
node where kube-scheduler's own search may or does time out, why, and the rewrites of the claim
that make it finish ("Scheduler search"). Nodes whose rows and reasons read the same but for
their name are one group (``node-000 (+299 more)``): a claim that fails the same way on 300
nodes takes as many lines as on one. Fitting nodes come first. Devices of a node that fail the
same way are folded into the first. For an allocated claim: the chosen devices and what each
selector read from them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from kubedra.explain.claims import request_notes
from kubedra.explain.model import (
    ClaimExplanation,
    DeviceFinding,
    NodeCounts,
    NodeOutcome,
    RequestOutcome,
)
from kubedra.explain.pods import PodExplanation, PodNodeOutcome
from kubedra.explain.shapes import MaskedTexts, holders_line, masked, others
from kubedra.explain.simulate import Simulation

_FUNNEL_COLUMNS = ("DEVICES", "IN-CLASS", "SELECTED", "FREE", "CAPACITY", "COUNTERS",
                   "UNTAINTED")
_WIDTH = 100
DEVICES_NAMED = 5
"""Devices named when devices failing the same way are folded into one."""


def table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as left-aligned columns separated by two spaces (the first row is the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                         strict=True)).rstrip()
                     for row in rows)


def _wrap(text: str, indent: str, first_indent: str | None = None,
          subsequent: str | None = None) -> str:
    """``text`` wrapped at :data:`_WIDTH` under ``indent``, line by line: the source and caret
    lines of a CEL error (`` | …``) are kept as they are, so that the caret stays under the
    column it points at."""
    later = indent + "  " if subsequent is None else subsequent
    lines = []
    for i, line in enumerate(text.split("\n")):
        start = (indent if first_indent is None else first_indent) if i == 0 else later
        if line.startswith(" | "):
            lines.append(later + line)
            continue
        lines.append(textwrap.fill(line, width=_WIDTH, initial_indent=start,
                                   subsequent_indent=later, break_on_hyphens=False,
                                   break_long_words=False))
    return "\n".join(lines)


def _result(node: NodeOutcome, request: RequestOutcome) -> str:
    if node.error is not None:
        return "error"
    if node.times_out() or node.may_time_out():
        return ("times out; " if node.times_out() else "may time out; ") + \
            _plain_result(node, request)
    return _plain_result(node, request)


def _plain_result(node: NodeOutcome, request: RequestOutcome) -> str:
    if node.fits:
        picked = [d["device"] for d in node.devices if d["request"] == request.request]
        if request.chosen is False:  # another alternative of firstAvailable was chosen
            return f"fails at {request.failed_at}" if request.failed_at is not None \
                else "fits, not chosen"
        mark = " (chosen)" if request.chosen else ""
        return ("fits: " + ", ".join(picked) if picked else "fits") + mark
    if request.failed_at is None:
        return "ok"
    return f"fails at {request.failed_at}"


def _request_cells(node: NodeOutcome) -> list[list[str]]:
    if node.error is not None:
        return [["-", "-", *(["-"] * len(_FUNNEL_COLUMNS)), "error"]]
    return [[request.request, "all" if request.all_devices else str(request.needed),
             *(str(v) for v in request.funnel.values()),
             _result(node, request)] for request in node.requests]


class _Texts(dict[int, list[str]]):
    """The rows and reasons of each node, as :func:`_shape` masks them, made once per node
    for one rendering (keyed by the outcome's ``id``: the outcomes live as long as it), and
    masked once per node (:attr:`masked`)."""

    def __init__(self) -> None:
        super().__init__()
        self.masked = MaskedTexts(self.of)

    def of(self, node: NodeOutcome) -> list[str]:
        """The node's texts: its rows' cells joined by tabs, then its reasons' lines."""
        found = self.get(id(node))
        if found is None:
            found = self[id(node)] = ["\t".join(cells) for cells in
                                      [*_request_cells(node), _reasons(node)[1:]]]
        return found




def group_nodes(candidates: Sequence[NodeOutcome], *, every_node: bool = False,
                texts: _Texts | None = None) -> list[list[NodeOutcome]]:
    """The evaluated nodes in the order the table shows them, grouped by shape
    (:mod:`kubedra.explain.shapes`: rows and reasons that read the same but for the names of
    the node, its devices and the claims holding them; with ``every_node``, each node is its
    own group). Fitting nodes first, then the largest groups; by name within. ``texts``: the
    nodes' texts made so far in this rendering."""
    texts = _Texts() if texts is None else texts
    groups: dict[tuple[str, ...], list[NodeOutcome]] = {}
    for node in candidates:
        key = (node.node,) if every_node else texts.masked.of(node)
        groups.setdefault(key, []).append(node)
    return sorted(groups.values(), key=lambda g: (not g[0].fits, -len(g), g[0].node))


def _others(group: Sequence[NodeOutcome], texts: _Texts) -> str:
    """:func:`kubedra.explain.shapes.others`: "the same" when the nodes read the same with
    only their names masked, else "alike"."""
    first = texts.masked.of(group[0], node_only=True)
    return others(group, all(texts.masked.of(n, node_only=True) == first
                             for n in group[1:]))


MAX_GROUPS = 8
"""Groups of nodes shown in the table and in "Why not" unless ``--all``."""


def _shown(groups: list[list[NodeOutcome]], every_node: bool
           ) -> tuple[list[list[NodeOutcome]], list[str]]:
    """The groups to show, and the line that counts those left out (``--all`` shows them)."""
    if every_node or len(groups) <= MAX_GROUPS:
        return groups, []
    rest = groups[MAX_GROUPS:]
    count = sum(len(g) for g in rest)
    return groups[:MAX_GROUPS], [f"… {len(rest):,} more groups of nodes ({count:,} nodes); "
                                 "--all shows every node"]


def _funnel_rows(groups: Sequence[Sequence[NodeOutcome]]) -> list[list[str]]:
    rows = [["NODE", "REQUEST", "NEEDED", *_FUNNEL_COLUMNS, "RESULT"]]
    for group in groups:
        label = group[0].node + (f" (+{len(group) - 1} more)" if len(group) > 1 else "")
        rows.extend([label, *cells] for cells in _request_cells(group[0]))
    return rows


def _finding_lines(request: RequestOutcome) -> list[str]:
    """The failing devices of a request; devices failing the same way fold into the first."""
    folded: dict[tuple[str, str], list[DeviceFinding]] = {}
    for finding in request.devices:
        selector = finding.selector["conjunct"] if finding.selector is not None else ""
        key = (masked(finding.reason, frozenset([finding.device])), selector)
        folded.setdefault(key, []).append(finding)
    lines = []
    for same in folded.values():
        finding = same[0]
        lines.append(_wrap(finding.reason, "    "))
        if len(same) > 1:
            listed = ", ".join(f.device for f in same[1:DEVICES_NAMED + 1]) + (
                ", …" if len(same) > DEVICES_NAMED + 1 else "")
            lines.append(_wrap(f"(the same for {len(same) - 1} more "
                               f"{'device' if len(same) == 2 else 'devices'}: {listed})",
                               "      "))
        if finding.selector is not None:  # not wrapped: it is CEL to copy
            lines.append(f"      selector of {finding.selector['source']}: "
                         f"{finding.selector['conjunct']}")
    return lines


def _reasons(node: NodeOutcome) -> list[str]:
    lines = [f"{node.node}:"]
    if node.error is not None:
        lines.append(_wrap(f"error: {node.error}", "  "))
        return lines
    failed = [r for r in node.requests if r.failed_at is not None]
    for request in failed:
        lines.append(_wrap(request.message, "  "))
        lines.extend(_finding_lines(request))
        lines.extend(_wrap(note, "    ") for note in request_notes(request))
    if not failed:
        lines.append(_wrap(node.message, "  "))
    return lines


def _search_lines(node: NodeOutcome) -> list[str]:
    """Why kube-scheduler's search may or does time out on the node, and the rewrites of the
    claim that make it finish."""
    search = node.search
    if search is None or search.outcome == "Finishes":
        return []
    lines = [f"{node.node}:", _wrap(search.reason, "  ")]
    if search.suggestions:
        lines.append("  To have kube-scheduler find the allocation:")
        lines.extend(_wrap(f"- {s}", "    ") for s in search.suggestions)
    return lines


def _field(label: str, value: str) -> str:
    """``Label:  value``, the value aligned and wrapped under itself."""
    return _wrap(value, "", first_indent=f"{label + ':':<16}", subsequent=" " * 16)


def _header(explanation: ClaimExplanation) -> list[str]:
    return [_field("ResourceClaim", f"{explanation.namespace}/{explanation.name}"),
            _field("Pods", ", ".join(explanation.pods) or "none"),
            _field("Verdict", explanation.verdict),
            _field("Message", explanation.message)]


def render_explanation(explanation: ClaimExplanation, *, every_node: bool = False) -> str:
    """The table form of an explanation: nodes that read the same are grouped (see
    :func:`group_nodes`) unless ``every_node``."""
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
                               f"the pods' node selection{_held(counts)} ({counts.total} in "
                               "total)"))
    if explanation.candidates:
        texts = _Texts()
        groups, left_out = _shown(group_nodes(explanation.candidates, every_node=every_node,
                                              texts=texts), every_node)
        lines += ["", table(_funnel_rows(groups)), *left_out]
        searches = [g for g in groups if _search_lines(g[0])]
        if searches:
            lines += ["", "Scheduler search:"]
            for group in searches:
                found = _search_lines(group[0])
                if len(group) > 1:
                    found[0] = _wrap(f"{group[0].node} {_others(group, texts)}:", "")
                lines.extend(found)
        failing = [g for g in groups if not g[0].fits]
        if failing:
            lines += ["", "Why not:"]
            for group in failing:
                reasons = _reasons(group[0])
                if group[0].error is not None and group[0].error in explanation.message:
                    reasons[1:] = ["  error: the one in the Message above"]
                if len(group) > 1:
                    reasons[0] = _wrap(f"{group[0].node} {_others(group, texts)}:", "")
                    held = holders_line(group)
                    if held:
                        reasons.insert(1, _wrap(held, "  "))
                lines.extend(reasons)
            lines.extend(left_out)
    return "\n".join(lines) + "\n"


def _held(counts: NodeCounts) -> str:
    if not counts.holding_claims:
        return ""
    return (f", {counts.excluded_by_claims} excluded by the pods' allocated claims "
            f"{', '.join(counts.holding_claims)}")


def render_simulation(simulation: Simulation, *, every_node: bool = False) -> str:
    """The table form of a simulation (``every_node`` as for :func:`render_explanation`)."""
    text = render_explanation(simulation.explanation, every_node=every_node)
    lines = ["", _field("Copies", simulation.message())]
    if simulation.copies and (every_node or len(simulation.copies) <= COPIES_LISTED):
        rows = [["COPY", "NODE", "DEVICES"]]
        rows += [[str(i + 1), node, ", ".join(f"{d['device']} ({d['request']})"
                                               for d in devices)]
                 for i, (node, devices) in enumerate(simulation.copies)]
        lines += ["", table(rows)]
    elif simulation.copies:
        lines += ["", table(_copy_rows(simulation))]
    return text + "\n".join(lines) + "\n"


COPIES_LISTED = 10
"""Copies listed one per row; more are grouped (:func:`_copy_rows`) unless ``--all``."""


def _copy_rows(simulation: Simulation) -> list[list[str]]:
    """The copies grouped: nodes that take the same number of copies on the same devices are
    one row (``gpu-node-0000 (+999 more)``)."""
    placed: dict[str, list[str]] = {}
    for node, devices in simulation.copies:
        placed.setdefault(node, []).append(", ".join(f"{d['device']} ({d['request']})"
                                                     for d in devices))
    groups: dict[tuple[str, ...], list[str]] = {}
    for node, copies in placed.items():
        groups.setdefault(tuple(copies), []).append(node)
    rows = [["NODES", "COPIES", "DEVICES"]]
    for same, nodes in sorted(groups.items(), key=lambda g: (-len(g[1]), g[1][0])):
        label = nodes[0] + (f" (+{len(nodes) - 1:,} more)" if len(nodes) > 1 else "")
        rows.append([label, f"{len(same)} each" if len(nodes) > 1 else str(len(same)),
                     "; ".join(same)])
    return rows


def _pod_reasons(node: PodNodeOutcome) -> list[str]:
    """Why the pod's claims do not fit on the node: for each claim that does not fit alone,
    its own explanation's reasons (the requests and their devices); else the node's message
    (excluded, an error, claims that compete)."""
    lines = [f"{node.node}:"]
    alone = [(name, outcome) for name, outcome in node.claims.items() if not outcome.fits]
    if not alone or (node.search is not None and node.search.outcome != "Finishes"):
        lines.append(_wrap(node.message, "  "))
    for name, outcome in alone:
        lines.append(f"  claim {name} does not fit:")
        lines.extend("  " + line for line in _reasons(outcome)[1:])
    return lines


def render_pod_explanation(explanation: PodExplanation) -> str:
    """The table form of a pod's explanation: one row per node (the claims that fit alone,
    the result), then why the claims do not fit together on each node."""
    claims = ", ".join(explanation.pending) or "none"
    lines = [_field("Pod", explanation.pod),
             _field("Claims", f"{claims} (to allocate)"
                    + (f"; {', '.join(explanation.allocated)} (allocated)"
                       if explanation.allocated else "")
                    + (f"; {', '.join(explanation.missing)} (not found)"
                       if explanation.missing else "")),
             _field("Verdict", explanation.verdict), _field("Message", explanation.message)]
    if explanation.nodes:
        rows = [["NODE", "FIT-ALONE", "RESULT"]]
        for node in explanation.nodes:
            alone = f"{sum(o.fits for o in node.claims.values())} of {len(node.claims)}" \
                if node.claims else "-"
            result = "fits" if node.fits else "excluded" if node.excluded else "fails"
            if node.search is not None and node.search.outcome != "Finishes":
                result = ("times out; " if node.times_out() else "may time out; ") + result
            rows.append([node.node, alone, result])
        lines += ["", table(rows)]
        failing = [n for n in explanation.nodes if not n.fits]
        if failing:
            lines += ["", "Why not:"]
            for node in failing:
                lines.extend(_pod_reasons(node))
    return "\n".join(lines) + "\n"
