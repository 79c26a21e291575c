"""What a diagnosis reports: per request on one node, how many devices pass each check.

The checks in the order the diagnosis applies them (:class:`Stage`): ``devices`` (in the node's
usable pools) → ``in_class`` (class selectors) → ``match_request`` (request selectors,
per-device node selection, binding conditions) → ``free`` (not allocated) → ``capacity`` (can
hold the requested capacity) → ``counters`` (the pool's shared counters left) → ``untainted``
(no untolerated taint). Each count is of devices that passed every earlier check, so the first
count that drops below what the request needs names the obstacle.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final


class Stage(enum.StrEnum):
    """One check of the funnel; its value is the name explain shows (camelCased there)."""

    DEVICES = "devices"
    IN_CLASS = "in_class"
    MATCH_REQUEST = "match_request"
    FREE = "free"
    CAPACITY = "capacity"
    COUNTERS = "counters"
    UNTAINTED = "untainted"


STAGES: Final = tuple(Stage)
"""The checks in funnel order; a device's verdict is the first it fails (or :data:`FITS`)."""

FITS: Final = "fits"
"""The verdict of a device that passes every check."""


@dataclass(slots=True)
class RequestDiagnosis:
    """The funnel of one request (or subrequest) on one node.

    Attributes:
        counts: devices passing each stage of :data:`STAGES` (and all stages before it).
        verdicts: per device (``driver/pool/device``), the first stage it fails, or ``fits``.
        constraints: per claim constraint covering this request, the largest number of fitting
            devices that satisfy it together (``matchAttribute``: the biggest group sharing a
            value; ``distinctAttribute``: the number of distinct values).
        unusable_pools: pools the search skips, with why (``incomplete (1 of 2 slices
            published)``, ``invalid: ...``, ``being updated (...)``).
        errors: selector or node selector errors seen while checking.
        outdated: devices that only an outdated slice of their pool has and that would pass
            the class and the request's selectors: (``driver/pool``, slice, its generation, the
            pool's generation, device names). The scheduler ignores them.
    """

    claim: str
    request: str
    node: str
    needed: int
    counts: dict[str, int] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    constraints: dict[str, int] = field(default_factory=dict)
    unusable_pools: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    outdated: list[tuple[str, str, int, int, list[str]]] = field(default_factory=list)

    @property
    def fitting(self) -> int:
        """Devices that pass every check."""
        return self.counts.get(STAGES[-1], 0)
