"""Benchmark: ``kubedra simulate --from`` on issue 24's fleet, beside upstream's allocator.

Usage: ``python -m bench.explain [--nodes 2000] [--claim numa4 --claim gpu8]`` (the reference
allocator must be built: ``make binaries``). Results go to ``bench/RESULTS.md`` ("Round 5").

The dump is :mod:`bench.fleet_dump`'s (``nodes`` x 8 H200, node *k* with ``k mod 3 + 1`` GPUs
held by ``train/job-k``). Per claim, kubedra is the whole command as a user runs it (a fresh
process: imports, reading the JSON, explaining on every node, counting copies, printing); the
reference is ``dra-reference-allocator allocate`` in one process over one scenario per node
(that node's slice, the class, that node's allocated claim, the claim: what the scheduler's
Filter does per node), its JSON decoding included. Both report wall and CPU seconds and peak
RSS (``wait4``); kubedra also the lines it printed. Both must agree on which nodes fit.

With ``--before DIR`` (the ``operator/`` directory of another version, e.g. ``git archive main
operator | tar -x -C /tmp/before``) the same command is also run with that version's code
(``PYTHONPATH=DIR``), right before this one's, so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench import fleet_dump
from bench.allocate.__main__ import reference_binary

REPO = pathlib.Path(__file__).parents[1]


def _timed(argv: list[str], stdin: pathlib.Path | None = None,
           code: pathlib.Path | None = None) -> tuple[dict[str, float], str]:
    """Run ``argv`` (with ``PYTHONPATH=code`` when given); its wall and CPU seconds, peak RSS
    (MiB), and its standard output."""
    env = {**os.environ, "PYTHONPATH": str(code)} if code else None
    with tempfile.TemporaryFile() as out, open(stdin or os.devnull, "rb") as given:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdin=given, stdout=out, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            raise SystemExit(f"{argv[:3]} exited with {process.returncode}")
        out.seek(0)
        text = out.read().decode()
    return ({"wall": round(wall, 2), "cpu": round(usage.ru_utime + usage.ru_stime, 2),
             "rssMiB": round(usage.ru_maxrss / 1024)}, text)


def kubedra(dump: pathlib.Path, claim: pathlib.Path, code: pathlib.Path | None = None
            ) -> dict[str, Any]:
    """``kubedra simulate -f claim --from dump`` (of the code in ``code``, else this one's):
    figures, lines printed, nodes that fit."""
    # ``python -m kubedra``: each version's own entry point (the ``kubedra`` script is this one's)
    command = [sys.executable, "-m", "kubedra", "simulate", "-f", str(claim), "--from", str(dump)]
    figures, text = _timed(command, code=code)
    _, as_json = _timed([*command, "-o", "json"], code=code)
    fits = sorted(c["node"] for c in json.loads(as_json)["explanation"]["candidates"]
                  if c["fits"])
    return {**figures, "lines": len(text.splitlines()), "fits": fits}


def scenarios(dump: pathlib.Path, claim: pathlib.Path, into: pathlib.Path) -> None:
    """One reference scenario per node of ``dump`` for ``claim``, as JSON lines."""
    items = json.loads(dump.read_text())["items"]
    classes = [i for i in items if i["kind"] == "DeviceClass"]
    asked = fleet_dump.yaml.safe_load(claim.read_text())
    slices = {i["spec"]["nodeName"]: i for i in items if i["kind"] == "ResourceSlice"}
    held: dict[str, list[Any]] = {}
    for item in items:
        if item["kind"] == "ResourceClaim":
            for result in item["status"]["allocation"]["devices"]["results"]:
                held.setdefault(result["pool"], []).append(item)
                break
    with into.open("w") as out:
        for node in (i for i in items if i["kind"] == "Node"):
            name = node["metadata"]["name"]
            out.write(json.dumps({
                "name": name, "node": {"name": name, "labels": node["metadata"]["labels"]},
                "slices": [slices[name]], "classes": classes,
                "allocatedClaims": held.get(name, []), "claims": [asked]}) + "\n")


def reference(dump: pathlib.Path, claim: pathlib.Path) -> dict[str, Any]:
    """The reference allocator over every node in one process: figures and nodes that fit."""
    with tempfile.TemporaryDirectory() as tmp:
        lines = pathlib.Path(tmp) / "scenarios.jsonl"
        scenarios(dump, claim, lines)
        figures, text = _timed([str(reference_binary()), "allocate"], stdin=lines)
    outcomes = [json.loads(line) for line in text.splitlines()]
    return {**figures, "fits": sorted(o["name"] for o in outcomes
                                      if o["outcome"] == "allocated")}


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--claim", action="append", choices=sorted(fleet_dump.CLAIMS))
    parser.add_argument("--before", type=pathlib.Path, metavar="DIR",
                        help="also run the operator/ code in DIR, beside")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        dump = fleet_dump.write(pathlib.Path(tmp), args.nodes)
        for name in args.claim or list(fleet_dump.CLAIMS):
            claim = pathlib.Path(tmp) / f"claim-{name}.yaml"
            before = kubedra(dump, claim, args.before) if args.before else None
            ours, theirs = kubedra(dump, claim), reference(dump, claim)
            fits = theirs.pop("fits")
            if ours.pop("fits") != fits:
                raise SystemExit(f"{name}: kubedra and the reference disagree on where it fits")
            if before is not None and before.pop("fits") != fits:
                raise SystemExit(f"{name}: --before and the reference disagree")
            print(json.dumps({"claim": name, "nodes": args.nodes, "kubedra": ours,
                              "before": before, "reference": theirs,
                              "cpuRatio": round(ours["cpu"] / theirs["cpu"], 2),
                              "rssRatio": round(ours["rssMiB"] / theirs["rssMiB"], 2),
                              "load": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
