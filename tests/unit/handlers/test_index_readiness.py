"""kopf's wait for filled indexes: objects indexed one after another while the others wait
cost a number of checks linear in the objects, not quadratic (kopf's own ``ToggleSet``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest
from kopf._cogs.aiokits import aiotoggles

from kubedra.handlers import index_readiness
from kubedra.handlers.index_readiness import QuietToggleSet

OBJECTS = 200


async def _index_one_by_one(toggle_set: aiotoggles.ToggleSet) -> None:
    """kopf's start: the listing holds the set off (a blocker toggle); each listed object gets
    a toggle, is indexed (drops it) and waits for the whole set while the next arrives."""
    blocker = await toggle_set.make_toggle(name="listing")
    waiting = []

    async def indexed(toggle: aiotoggles.Toggle) -> None:
        await toggle_set.drop_toggle(toggle)
        await toggle_set.wait_for(True)
    for i in range(OBJECTS):
        toggle = await toggle_set.make_toggle(name=f"object-{i}")
        waiting.append(asyncio.create_task(indexed(toggle)))
        await asyncio.sleep(0)  # the object's worker runs before the next event is read
    assert not any(task.done() for task in waiting)
    await toggle_set.drop_toggle(blocker)
    await asyncio.wait_for(asyncio.gather(*waiting), timeout=10)


class Counting:
    """``all`` that counts its calls (one per check of the set's value)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, states: Iterable[bool]) -> bool:
        self.calls += 1
        return all(states)


async def test_objects_indexed_one_by_one_cost_checks_linear_in_the_objects() -> None:
    quiet, stock = Counting(), Counting()
    await _index_one_by_one(QuietToggleSet(quiet))
    await _index_one_by_one(aiotoggles.ToggleSet(stock))

    assert quiet.calls <= 6 * (OBJECTS + 1)  # add, drop: 2 checks each; a waiter: 1, 1 at the end
    assert stock.calls > OBJECTS * OBJECTS / 4  # every drop wakes every waiter


async def test_a_wait_for_the_set_off_wakes_when_a_toggle_is_added() -> None:
    toggle_set = QuietToggleSet(all)
    waiter = asyncio.create_task(toggle_set.wait_for(False))
    await asyncio.sleep(0)
    assert not waiter.done()  # an empty set is on

    toggle = await toggle_set.make_toggle(name="object")
    await asyncio.wait_for(waiter, timeout=5)
    await toggle_set.drop_toggles([toggle])
    assert toggle_set.is_on()


async def test_a_wait_for_one_toggle_of_the_set_still_wakes_when_it_turns() -> None:
    toggle_set = QuietToggleSet(all)
    toggle = await toggle_set.make_toggle(name="object")
    waiter = asyncio.create_task(toggle.wait_for(True))
    await asyncio.sleep(0)
    await toggle.turn_to(True)
    await asyncio.wait_for(waiter, timeout=5)


def test_install_makes_kopf_build_the_quiet_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiotoggles, "ToggleSet", aiotoggles.ToggleSet)  # restored after
    index_readiness.install()
    from kopf._core.reactor import orchestration  # builds its sets as aiotoggles.ToggleSet(all)

    assert orchestration.aiotoggles.ToggleSet is QuietToggleSet
