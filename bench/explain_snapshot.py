"""bench/explain_snapshot: the operator's explainer snapshot of a fleet, built and rebuilt.

The operator explains unschedulable pods (its ``CannotAllocate`` Events) and counts the fleet
(the dashboard's gauges) over :meth:`kubedra.controller.explain_state.ExplainState.snapshot`,
which parses every ResourceSlice of the fleet into one snapshot and keeps it until a slice,
class or taint rule changes. This bench builds the slices of ``bench/status.py``'s fleet (N
nodes of 8 H200, each slice at its own resourceVersion), then times, in one process:

- the first snapshot (every slice parsed), with the memory it holds afterwards
  (``tracemalloc``, MiB) and its peak while building;
- a rebuild after one slice changed (the operator's case on every watch event of a slice);
- both again with the previous parse (every slice through ``ResourceSlice.from_api``, nothing
  reused), side by side.

Usage: ``PYTHONPATH=.:operator .venv/bin/python bench/explain_snapshot.py [--nodes 2000]``.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from typing import Any

from bench.status import fleet_dump
from kubedra.api.resource import ResourceSlice
from kubedra.controller.explain_state import ExplainState, Inputs

MIB = 2**20


class _ParseEverySlice(ExplainState):
    """The explainer as it parsed before: every slice, every time, on its own."""

    def _parsed_slices(self, slices: list[dict[str, Any]]) -> list[ResourceSlice]:
        return [ResourceSlice.from_api(s) for s in slices]


def _measure(state: ExplainState, inputs: Inputs) -> tuple[float, float, float, float]:
    """(first build s, rebuild after one change s, MiB held, MiB peak)."""
    tracemalloc.start()
    start = time.process_time()
    snapshot = state.snapshot(inputs)
    first = time.process_time() - start
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    changed = dict(inputs.slices[0])
    changed["metadata"] = {**changed["metadata"], "resourceVersion": "changed"}
    inputs.slices = [changed, *inputs.slices[1:]]
    inputs.inventory_version += 1
    start = time.process_time()
    state.snapshot(inputs)
    rebuild = time.process_time() - start
    del snapshot
    return first, rebuild, held / MIB, peak / MIB


def main() -> None:
    """Build the fleet, measure both parses, print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    args = parser.parse_args()
    items = fleet_dump(args.nodes, 0)["items"]
    slices = [{**s, "metadata": {**s["metadata"], "resourceVersion": str(i)}}
              for i, s in enumerate(i for i in items if i["kind"] == "ResourceSlice")]
    classes = [i for i in items if i["kind"] == "DeviceClass"]
    nodes = [i for i in items if i["kind"] == "Node"]
    print(f"{args.nodes} nodes, {len(slices)} slices; load {os.getloadavg()[0]:.2f}\n")
    print("| parse | first snapshot (CPU) | rebuild after one slice changed (CPU) | MiB held "
          "| MiB peak |\n| --- | --- | --- | --- | --- |")
    for label, state in (("every slice, every time (before)", _ParseEverySlice()),
                         ("changed slices only, shared values", ExplainState())):
        inputs = Inputs(slices=list(slices), classes=classes, taint_rules=[], allocated=[],
                        nodes=nodes, inventory_version=1, claims_version=1)
        first, rebuild, held, peak = _measure(state, inputs)
        print(f"| {label} | {first:.2f} s | {rebuild:.2f} s | {held:.0f} | {peak:.0f} |")
    print(f"\nload {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
