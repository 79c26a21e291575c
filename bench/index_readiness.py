"""bench/index_readiness: kopf's wait for filled indexes at start, kopf's ``ToggleSet`` against
kubedra's :class:`~kubedra.handlers.index_readiness.QuietToggleSet`, side by side.

Replays what kopf does for N listed objects: each gets a toggle, is indexed (drops it) and
waits for the whole set while the listing goes on; the listing ends last. Prints the CPU
seconds of each, per N::

    PYTHONPATH=operator .venv/bin/python -m bench.index_readiness 500 1000 2000
"""

from __future__ import annotations

import argparse
import asyncio
import time

from kopf._cogs.aiokits import aiotoggles

from kubedra.handlers.index_readiness import QuietToggleSet


async def index_objects(objects: int, toggle_set: aiotoggles.ToggleSet) -> float:
    """CPU seconds until every one of ``objects`` has seen the set filled."""
    listing = await toggle_set.make_toggle(name="listing")

    async def indexed(toggle: aiotoggles.Toggle) -> None:
        await asyncio.sleep(0)
        await toggle_set.drop_toggle(toggle)
        await toggle_set.wait_for(True)
    start = time.process_time()
    waiting = []
    for i in range(objects):
        toggle = await toggle_set.make_toggle(name=str(i))
        waiting.append(asyncio.create_task(indexed(toggle)))
        await asyncio.sleep(0)
    await toggle_set.drop_toggle(listing)
    await asyncio.gather(*waiting)
    return time.process_time() - start


def main() -> None:
    """One line per object count from the command line (default 500 1000 2000)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("objects", type=int, nargs="*", default=[500, 1000, 2000],
                        help="object counts (default 500 1000 2000)")
    for objects in parser.parse_args().objects:
        stock = asyncio.run(index_objects(objects, aiotoggles.ToggleSet(all)))
        quiet = asyncio.run(index_objects(objects, QuietToggleSet(all)))
        print(f"{objects} objects: kopf ToggleSet {stock:.2f} s CPU, QuietToggleSet "
              f"{quiet:.3f} s ({stock / quiet:.0f} times less)", flush=True)


if __name__ == "__main__":
    main()
