"""bench/py_spy: the operator sampled by py-spy during each phase of a bench, and what a
profile's samples were doing.

:class:`PhaseProfiles` runs ``py-spy record --nonblocking -r 50 -f raw`` (py-spy is in the
project's test extra; attaching needs root or ``CAP_SYS_PTRACE``) on one process until
stopped, one file per phase: ``DIR/<phase>.raw``, or ``DIR/<phase>.<n>.raw`` for the n-th
process profiled in that phase (a restart starts another operator). A raw file holds py-spy's
collapsed stacks, one ``frame;frame;…;frame count`` line per distinct stack, outermost first.

``python -m bench.py_spy FILE.raw [--top N]`` prints, for the N functions most often on the
stack, the share of samples with that function anywhere on the stack (inclusive) and on top
(self).
"""

from __future__ import annotations

import argparse
import collections
import signal
import subprocess
import sys
from pathlib import Path

SAMPLES_PER_S = 50


class PhaseProfiles:
    """py-spy records of one process at a time into ``directory`` (None: profile nothing)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        self.taken: collections.Counter[str] = collections.Counter()

    def start(self, pid: int, phase: str) -> Path | None:
        """Stop the running record, if any, and sample ``pid`` for ``phase``; returns the file
        it writes (None without a directory)."""
        if self.directory is None:
            return None
        self.stop()
        self.directory.mkdir(parents=True, exist_ok=True)
        count = self.taken[phase]
        self.taken[phase] += 1
        out = self.directory / (f"{phase}.raw" if count == 0 else f"{phase}.{count}.raw")
        py_spy = Path(sys.executable).with_name("py-spy")
        self.process = subprocess.Popen(
            [str(py_spy), "record", "--nonblocking", "-r", str(SAMPLES_PER_S), "-f", "raw",
             "-o", str(out), "-p", str(pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return out

    def stop(self, timeout: float = 60.0) -> None:
        """End the running record (SIGINT: py-spy writes its file, then exits)."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def shares(raw: str) -> tuple[int, dict[str, float], dict[str, float]]:
    """From py-spy's collapsed stacks: (samples, inclusive share, self share) per frame, each
    share a fraction of all samples; a frame recursing on one stack counts once for it."""
    total = 0
    inclusive: collections.Counter[str] = collections.Counter()
    on_top: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        inclusive.update({frame: count for frame in set(frames)})
        on_top[frames[-1]] += count
    if total == 0:
        return 0, {}, {}
    return (total, {f: n / total for f, n in inclusive.items()},
            {f: n / total for f, n in on_top.items()})


def main() -> None:
    """Print the top frames of one raw profile."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    total, inclusive, on_top = shares(args.raw.read_text())
    # py-spy samples every thread that is not idle, SAMPLES_PER_S times a second: the count
    # is neither wall nor CPU time (a thread waiting in epoll with --nonblocking counts too)
    print(f"{total} samples of threads not idle, at {SAMPLES_PER_S} Hz per thread")
    print("inclusive   self  frame")
    for frame, share in sorted(inclusive.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{100 * share:8.1f}% {100 * on_top.get(frame, 0.0):6.1f}%  {frame}")


if __name__ == "__main__":
    main()
