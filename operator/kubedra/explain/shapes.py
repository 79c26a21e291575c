"""Nodes that fail (or fit) the same way but for names: one group, said truthfully.

Two nodes have the same *shape* when their table rows and reasons read the same once the names
of the node, of its devices and of the claims holding them are masked: ``gpu-0 on node-7 is
allocated to claim train/job-7`` and ``gpu-0 on node-8 is allocated to claim train/job-8``
(counts are never masked, so a node with 6 free GPUs is never grouped with one with 7). A
group whose nodes read the same with only the node's name masked is "the same"; one whose
devices or holding claims differ is "alike", and says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from kubedra.explain.model import NodeOutcome
from kubedra.explain.node_shapes import Plan, plan, renamed

_WORD = re.compile(r"[\w.-]+")
"""A run of the characters of a Kubernetes name: where a whole name may stand."""

_CLAIM = re.compile(r"\bclaim ([\w.-]+/[\w.-]+)")
"""How a holder names its claim (``claim train/job-7 (request gpu)``, ``gpu-0-mig-… of claim
t/small (request gpu)``)."""

NODES_NAMED = 5
"""Names listed after a count (``train/job-0000, …``)."""


def holders(node: NodeOutcome) -> list[str]:
    """The claims (``namespace/name``) holding the node's failing devices, in order, once."""
    found = (_CLAIM.search(label) for request in node.requests for finding in request.devices
             for label in [*finding.held_by, *(h for c in finding.counters for h in c.held_by)])
    return list(dict.fromkeys(m[1] for m in found if m))


def names(node: NodeOutcome) -> frozenset[str]:
    """The words the shape masks: the node's name, its devices' names, its holders' names."""
    words = {node.node}
    words.update(d["device"] for d in node.devices)
    for request in node.requests:
        words.update(f.device for f in request.devices)
        words.update(d.rpartition("/")[2] for d in request.fitting_devices)
    for claim in holders(node):
        words.update(claim.split("/"))
    return frozenset(words)


_PIECES = re.compile(r"([\w.-]+)")
""":data:`_WORD` as a split: text between words at even positions, the words at odd ones."""


def masked(text: str, words: frozenset[str]) -> str:
    """``text`` with every whole occurrence of one of ``words`` replaced by ``\\0``.

    Split and joined rather than ``re.sub`` with a function, which calls back into Python
    for every word: 44,000 texts of a 2,000-node explanation took most of its rendering so
    (bench/RESULTS.md, "Live explain at 2,000 kwok nodes")."""
    pieces = _PIECES.split(text)
    pieces[1::2] = ["\0" if word in words else word for word in pieces[1::2]]
    return "".join(pieces)


class MaskedTexts:
    """Per node, its texts (``texts``: e.g. its table rows and reasons, or its message) with
    the names :func:`names` gives masked, or with only the node's name masked; made once
    per node.

    A node whose outcome is the first of its shape's with names replaced
    (:attr:`~kubedra.explain.model.NodeOutcome.renamed_from`) gets the first node's masked
    texts with the same names replaced, when that is what masking its own texts would give
    (:attr:`~kubedra.explain.model.Renaming.reproduces_texts`): its texts are then the first
    node's with those names replaced, and so are the names masked, so masking and replacing
    may be done in either order. Most of those names are masked, which leaves nothing to
    replace: making and masking every node's texts was most of rendering 2,000 nodes
    (bench/RESULTS.md, "Live explain: masked texts per shape")."""

    def __init__(self, texts: Callable[[NodeOutcome], Sequence[str]]) -> None:
        self._texts = texts
        self._found: dict[tuple[int, bool], tuple[str, ...]] = {}
        self._plans: dict[tuple[int, bool], list[Plan]] = {}

    def of(self, node: NodeOutcome, *, node_only: bool = False) -> tuple[str, ...]:
        """The node's texts masked (keyed by the outcome's ``id``: the outcomes live as long
        as this); with ``node_only``, only the node's name masked."""
        key = (id(node), node_only)
        found = self._found.get(key)
        if found is None:
            copied = node.renamed_from
            if copied is not None and copied.reproduces_texts:
                first = self.of(copied.first, node_only=node_only)
                at = (id(copied.first), node_only)
                plans = self._plans.get(at)
                if plans is None:
                    plans = self._plans[at] = [plan(t, copied.names) for t in first]
                found = tuple(renamed(t, p, copied.words) for t, p in zip(first, plans,
                                                                          strict=True))
            else:
                words = frozenset([node.node]) if node_only else names(node)
                found = tuple(masked(t, words) for t in self._texts(node))
            self._found[key] = found
        return found


def others(group: Sequence[NodeOutcome], same: bool) -> str:
    """``(the same on 2 more nodes: b, c)``, or for nodes alike but for the names of their
    devices and claims, ``(alike on 2 more nodes, each with its own devices and claims: b,
    c)``; naming at most :data:`NODES_NAMED` nodes."""
    rest = [n.node for n in group[1:]]
    noun = "more node" if len(rest) == 1 else "more nodes"
    how = f"the same on {len(rest)} {noun}" if same else \
        f"alike on {len(rest):,} {noun}, each with its own devices and claims"
    return f"({how}: {named(rest)})"


def named(items: Sequence[str]) -> str:
    """At most :data:`NODES_NAMED` of ``items``, then ``…``."""
    return ", ".join(items[:NODES_NAMED]) + (", …" if len(items) > NODES_NAMED else "")


def holders_line(group: Iterable[NodeOutcome]) -> str | None:
    """``held by 667 claims: train/job-0000, …`` when a group's nodes are held by more than
    one claim in all, else None."""
    claims = list(dict.fromkeys(c for node in group for c in holders(node)))
    if len(claims) < 2:
        return None
    return f"held by {len(claims):,} claims: {named(claims)}"
