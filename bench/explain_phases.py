"""bench/explain_phases: ``kubedra explain --from`` a fleet's dump, whole and by phase, CPU.

The dump is ``bench/status.py``'s fleet (N nodes of 8 H200, one pending 8-GPU claim
``train/eight-0``, JSON as ``kubedra dump`` writes it). Each run is a fresh process:

- ``whole``: ``python -m kubedra explain resourceclaim eight-0 -n train --from DUMP`` as a user
  runs it, user + sys CPU seconds from ``wait4`` (interpreter start and the process's end
  included);
- the phases, in one process with the collector off as the command runs
  (:func:`kubedra.explain.command.one_shot`), ``time.process_time`` around each step of
  ``_explain``: ``imports`` (the modules the command imports before reading: the command, the
  dump reader, the explainer, the renderer), ``read`` (``read_dump``: the JSON decoded),
  ``snapshot`` (the claim and every slice, class and allocated claim parsed into models, the
  :class:`~kubedra.api.slice_decoding.SliceDecoder` included; the allocator's modules imported
  on first use), ``explain`` (every node), ``render`` (the text); and whether PyYAML was
  imported.

With ``--before DIR`` (another version's ``operator/``, e.g. ``git archive main operator | tar
-x -C /tmp/before``) each run of that version comes right before this one's, so both see the
same load. Prints a Markdown table of medians over ``--runs`` runs.

Usage: ``PYTHONPATH=.:operator .venv/bin/python bench/explain_phases.py [--nodes 2000]
[--runs 5] [--before DIR]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PHASES = ("imports", "read", "snapshot", "explain", "render")
ARGS = ["explain", "resourceclaim", "eight-0", "-n", "train"]


def _phases(dump: Path) -> dict[str, Any]:
    """The phases' CPU seconds of one explanation of ``dump`` in this (fresh) process."""
    import gc

    gc.disable()
    marks = [time.process_time()]
    from kubedra.explain.claims import explain_claim
    from kubedra.explain.command import _snapshot
    from kubedra.explain.render import render_explanation
    from kubedra.explain.sources import pods_using, read_dump
    marks.append(time.process_time())
    objects = read_dump([dump])
    marks.append(time.process_time())
    claim = objects.claim("train", "eight-0")
    assert claim is not None
    snapshot = _snapshot(objects, None)
    marks.append(time.process_time())
    explanation = explain_claim(snapshot, claim, pods_using(claim, objects.pods))
    marks.append(time.process_time())
    text = render_explanation(explanation, every_node=False)
    marks.append(time.process_time())
    figures: dict[str, Any] = dict(zip(PHASES, (b - a for a, b in itertools.pairwise(marks)),
                                       strict=True))
    figures["lines"] = len(text.splitlines())
    figures["yaml"] = "yaml" in sys.modules
    return figures


def _whole(dump: Path, code: str) -> float:
    """CPU seconds of the whole command, of the code in ``code``."""
    env = {**os.environ, "PYTHONPATH": code, "KUBECONFIG": os.devnull}
    with open(os.devnull, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "kubedra", *ARGS, "--from", str(dump)],
                                   stdout=out, stderr=out, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"explain ({code}) exited with {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime


def _phases_of(dump: Path, code: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([".", code])}
    done = subprocess.run([sys.executable, __file__, "--child", str(dump)], env=env, check=True,
                          capture_output=True, text=True)
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def main() -> None:
    """Write the dump, run each version ``--runs`` times alternately, print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=Path, metavar="DIR")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_phases(args.child)))
        return
    from bench.status import fleet_dump

    versions = [("this code", "operator")]
    if args.before:
        versions.insert(0, ("before", str(args.before)))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in versions}
    with tempfile.TemporaryDirectory() as folder:
        dump = Path(folder) / "fleet.json"
        dump.write_text(json.dumps(fleet_dump(args.nodes, 0)))
        load = os.getloadavg()[0]
        for _ in range(args.runs):
            for label, code in versions:
                figures = _phases_of(dump, code)
                figures["whole"] = _whole(dump, code)
                runs[label].append(figures)
    print(f"{args.nodes} nodes; {args.runs} runs each; load {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end\n")
    columns = ("whole", *PHASES)
    print("| code | " + " | ".join(f"{c} CPU s" for c in columns) + " | yaml imported | lines |")
    print("| --- |" + " ---: |" * len(columns) + " --- | ---: |")
    for label, found in runs.items():
        medians = [statistics.median(r[c] for r in found) for c in columns]
        print(f"| {label} | " + " | ".join(f"{m:.3f}" for m in medians)
              + f" | {found[0]['yaml']} | {found[0]['lines']} |")


if __name__ == "__main__":
    main()
