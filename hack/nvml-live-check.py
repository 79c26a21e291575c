#!/usr/bin/env python3
"""Live check of the nvml discovery backend on a machine with NVIDIA GPUs (issue 6, item 4).

    .venv/bin/python hack/nvml-live-check.py capture FOLDER   # write a capture of this machine
    .venv/bin/python hack/nvml-live-check.py check FOLDER     # live nvml vs snapshot:FOLDER

``capture`` writes FOLDER in the format of ``../shared/hardware/nvidia-h200/`` (nvml.json,
mig_placements.json, sysfs_pci.json, proc_nvidia.json). ``check`` runs the ``nvml`` backend
(pynvml and /sys) and the ``snapshot:FOLDER`` replay with ``mig: none`` and with
``mig: partitions``, and prints every difference. Nothing volatile is published, so any
difference is a failure. Exit codes: 0 equal, 1 different, 2 discovery failed.
Both only read: nothing changes MIG mode, resets a GPU or writes outside FOLDER.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kubedra.api.inventory import MigMode
from kubedra.discovery.backends import screen
from kubedra.discovery.capture import differences, write_capture
from kubedra.discovery.errors import DiscoveryError
from kubedra.discovery.nvidia import nvidia_discovery
from kubedra.discovery.nvml_live import LiveNvml
from kubedra.discovery.recorded import RecordedNvml, RecordedSysfs
from kubedra.discovery.sysfs import LiveSysfs
from kubedra.logging import configure_logging

MIG_MODES: tuple[MigMode, ...] = ("none", "partitions")


def capture(folder: Path, nvml: Any, sysfs_root: Path, proc_root: Path) -> int:
    """Write a capture of this machine into ``folder``; 0 on success."""
    for path in write_capture(folder, LiveNvml(nvml), LiveSysfs(sysfs_root), proc_root):
        print(f"wrote {path}")
    return 0


def check(folder: Path, nvml: Any, sysfs_root: Path) -> int:
    """Compare the live inventory with the replay of ``folder``; 0 when equal, 1 otherwise."""
    different = False
    for mig in MIG_MODES:
        live = screen(nvidia_discovery(LiveNvml(nvml), LiveSysfs(sysfs_root), mig))
        replay = screen(nvidia_discovery(RecordedNvml(folder), RecordedSysfs(folder), mig))
        found = differences(replay, live)
        print(f"mig={mig}: {len(live.devices)} devices, {len(live.counter_sets)} counter sets "
              f"live; {'equal' if not found else f'{len(found)} differences'} "
              f"(first: snapshot:{folder}, second: nvml)")
        for line in found:
            print(f"  {line}")
        different = different or bool(found)
    return 1 if different else 0


def main(argv: list[str] | None = None, nvml: Any = None) -> int:
    """Command line; ``nvml`` replaces pynvml (unit tests pass a recorded stand-in)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["capture", "check"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--sysfs-root", type=Path, default=Path("/sys"))
    parser.add_argument("--proc-root", type=Path, default=Path("/proc"))
    args = parser.parse_args(argv)
    configure_logging("console", "WARNING")
    try:
        if args.mode == "capture":
            return capture(args.folder, nvml, args.sysfs_root, args.proc_root)
        return check(args.folder, nvml, args.sysfs_root)
    except (DiscoveryError, ValidationError) as err:
        print(f"discovery failed: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
