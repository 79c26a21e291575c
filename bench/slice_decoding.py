"""bench/slice_decoding: :class:`kubedra.api.slice_decoding.SliceDecoder` over a fleet's slices.

The ResourceSlices of ``bench/status.py``'s fleet (N nodes of 8 H200, 14 attributes and 1
capacity per GPU) are decoded by one SliceDecoder, the collector off as in the one-shot
commands; the median CPU seconds of ``--repeat`` runs. The dump is read as ``--from`` reads it
(:func:`kubedra.explain.sources.read_dump`); with ``--dump PATH`` the slices of that dump are
decoded instead (``bench/fleet_dump.py``'s ``fleet.json``: a uuid, PCI bus ID and minor of its
own per GPU). With ``--before DIR`` (another version's ``operator/``, e.g. ``git archive main
operator | tar -x -C /tmp/before``) each version runs in a process of its own, alternately, so
both see the same load.

Usage: ``PYTHONPATH=.:operator .venv/bin/python bench/slice_decoding.py [--nodes 2000]
[--repeat 5] [--before DIR] [--dump PATH]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.status import fleet_dump


def _decode(path: Path, repeat: int) -> float:
    """Median CPU seconds to decode every slice of the dump at ``path``."""
    from kubedra.api.slice_decoding import SliceDecoder
    from kubedra.explain.sources import read_dump
    slices = read_dump([path]).slices
    gc.disable()
    runs = []
    for _ in range(repeat):
        start = time.process_time()
        decoder = SliceDecoder()
        for data in slices:
            decoder.decode(data)
        runs.append(time.process_time() - start)
    return statistics.median(runs)


def main() -> None:
    """Write the dump, decode it with each version, print a Markdown table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", type=Path, metavar="DIR")
    parser.add_argument("--dump", type=Path, metavar="PATH",
                        help="decode this dump's slices [default: bench/status.py's fleet]")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(_decode(args.child, args.repeat))
        return
    with tempfile.TemporaryDirectory() as folder:
        dump = args.dump or Path(folder) / "fleet.json"
        if not args.dump:
            dump.write_text(json.dumps(fleet_dump(args.nodes, 0)))
        versions = [("this code", "operator")]
        if args.before:
            versions.insert(0, ("before", str(args.before)))
        print(f"{args.dump or f'{args.nodes} nodes'}; load {os.getloadavg()[0]:.2f}\n\n"
              "| code | CPU median |\n| --- | --- |")
        for label, code in versions:
            command = [sys.executable, __file__, "--child", str(dump),
                       "--repeat", str(args.repeat)]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([".", code])}
            seconds = float(subprocess.run(command, env=env, check=True, capture_output=True,
                                           text=True).stdout)
            print(f"| {label} | {seconds:.3f} s |")


if __name__ == "__main__":
    main()
