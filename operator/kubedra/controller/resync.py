"""The operator's periodic resync: every inventory reconciled once per interval without an
event, spread evenly over the interval rather than all at once.

Every change the operator acts on comes as a watch event (inventories, slices, Nodes, agent
Leases) or a time it set itself (Lease expiry, hold-downs, drain graces), so the resync only
covers what a missed event or a defect would leave; it is no decision's trigger. At 5,000
nodes one resync of every inventory took a third of the operator's steady-state CPU when
it came every 5 minutes, as a burst of 5,000 reconciles (``bench/RESULTS.md``, scale, round
14); controller-runtime's default resync is 10 hours (``SyncPeriod``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

RESYNC_INTERVAL_S = 1800.0
"""Seconds in which every inventory is reconciled once, events or not."""


class ResyncRound:
    """Which inventories to reconcile at each tick so that each is reconciled once per
    ``interval_s`` seconds (a round), in even shares of the round's names.

    A round takes the names there are when it starts; an inventory created during it is
    reconciled by its own event, and in the next round.
    """

    def __init__(self, interval_s: float = RESYNC_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._round: list[str] = []
        self._share = 0.0
        """Names per second of the round under way."""
        self._owed = 0.0
        """Names due but not yet given (a fraction of one, carried to the next tick)."""

    def due(self, names: Callable[[], Iterable[str]], elapsed_s: float) -> list[str]:
        """The names due after ``elapsed_s`` more seconds; a new round (``names()``, sorted)
        starts when the last one is done."""
        if not self._round:
            self._round = sorted(names(), reverse=True)  # popped from the end: a to z
            self._share = len(self._round) / self.interval_s
            self._owed = 0.0
        self._owed += self._share * elapsed_s
        count = min(len(self._round), math.floor(self._owed))
        self._owed -= count
        return [self._round.pop() for _ in range(count)]
