"""How fast upstream's allocator takes its search steps, to calibrate explain's time-out bounds.

kubedra predicts kube-scheduler's filter time-out from the number of steps upstream's search
takes (``kubedra.allocation.search_steps``); this measures how many steps a second the v1.37.2
allocator (``dra-reference-allocator``, the scheduler's code) takes on this machine, per
scenario, in wall time and per CPU second of its process, and how fast kubedra counts them.

Usage: ``PYTHONPATH=operator:. .venv/bin/python bench/search_steps.py`` (needs ``make
binaries``). Scenarios: kubernetes#131730's shape with 18, 20 and 25 GPUs (cut at the
scheduler's 10 s), the slowest edge case, and the stored upstream time-outs.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import time
from typing import Any

from kubedra.allocation import FILTER_TIMEOUT_SECONDS
from kubedra.allocation.scenario import scenario_search_time
from tests.support.edge_cases import CASES
from tests.support.reference_allocator import reference_binary
from tests.support.scenario_builders import search_explosion
from tests.support.scenario_strategies import TIMEOUTS


def upstream(scenario: dict[str, Any]) -> tuple[dict[str, Any], float, float]:
    """Upstream's outcome, wall seconds and CPU seconds (user + system) of its process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([str(reference_binary()), "allocate"], input=json.dumps(scenario) + "\n",
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), wall, cpu


def main() -> None:
    """Print one row per scenario."""
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    limit = {"timeoutSeconds": FILTER_TIMEOUT_SECONDS}
    scenarios = [{**search_explosion(n, f"explosion-{n}"), **limit} for n in (18, 20, 25)]
    scenarios += [c.scenario for c in CASES if c.scenario["name"] == "later-claim-impossible-alone"]
    scenarios += [{**json.loads(line), **limit} for line in TIMEOUTS.read_text().splitlines()]
    print("| scenario | upstream outcome | steps | wall s | CPU s | steps/s wall | steps/CPU s "
          "| kubedra counts | kubedra s | kubedra says |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for scenario in scenarios:
        outcome, wall, cpu = upstream(scenario)
        start = time.perf_counter()
        judged, steps = scenario_search_time(scenario)
        ours = time.perf_counter() - start
        counted = f"{steps.steps:,}" + ("" if steps.finished else " (stopped)")
        print(f"| {scenario['name']} | {outcome['outcome']} | {outcome['steps']:,} | {wall:.2f} "
              f"| {cpu:.2f} | {outcome['steps'] / wall:,.0f} | {outcome['steps'] / cpu:,.0f} "
              f"| {counted} | {ours:.2f} | {judged.value} |", flush=True)


if __name__ == "__main__":
    main()
