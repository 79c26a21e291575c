"""kopf's wait for filled indexes, without waking every waiting object on every object indexed.

kopf (1.45.2, ``kopf/_core/reactor/queueing.py`` and ``processing.py``) holds back every
handler until every index is filled: each object listed at start gets a toggle in one
``ToggleSet(all)``; its worker indexes the object, drops its toggle and waits for the whole set
to be on. Every drop calls ``notify_all`` on the set's condition, so each of the objects
already waiting wakes, takes the condition's lock in turn, finds the set still off and waits
again: N objects listed cost N²/2 wake-ups. At 2,000 objects this is 50 s of one core, at
the 15,000 objects of a 5,000-node cluster (inventories, slices, nodes) hours, before the
first reconcile (``bench/scale.py``'s restart phase, ``bench/RESULTS.md``).

:class:`QuietToggleSet` notifies on adding or dropping a toggle only when that changes the
set's value (on or off), the only thing ``ToggleSet.wait_for`` waits on; toggles turned on or
off themselves notify as before, so waits on one toggle of the set are unchanged. kopf builds
its sets by name from the module ``kopf._cogs.aiokits.aiotoggles`` when the operator starts,
so :func:`install` replaces the class there before ``kopf.operator`` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kopf._cogs.aiokits import aiotoggles


class QuietToggleSet(aiotoggles.ToggleSet):
    """A ``ToggleSet`` whose adds and drops wake its waiters only when its value changes."""

    async def make_toggle(self, __val: bool = False, *, name: str | None = None
                          ) -> aiotoggles.Toggle:
        """Add a new toggle (``__val``: its state) to the set; returns it."""
        toggle = aiotoggles.Toggle(__val, name=name, condition=self._condition)
        await self._change(lambda: self._toggles.add(toggle))
        return toggle

    async def drop_toggle(self, toggle: aiotoggles.Toggle) -> None:
        """Remove ``toggle`` from the set (no error if it is not in it)."""
        await self._change(lambda: self._toggles.discard(toggle))

    async def drop_toggles(self, toggles: Iterable[aiotoggles.Toggle]) -> None:
        """Remove ``toggles`` from the set."""
        await self._change(lambda: self._toggles.difference_update(toggles))

    async def _change(self, change: Callable[[], object]) -> None:
        async with self._condition:
            before = self.is_on()
            change()
            if self.is_on() != before:
                self._condition.notify_all()


def install() -> None:
    """Make kopf build :class:`QuietToggleSet` instead of its ``ToggleSet`` (idempotent; call
    before ``kopf.operator``)."""
    aiotoggles.ToggleSet = QuietToggleSet  # type: ignore[misc]
