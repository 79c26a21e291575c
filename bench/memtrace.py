"""bench/memtrace: run a Python module under ``tracemalloc`` and write snapshots of what it holds
at its peaks and when asked (``bench/scale.py --tracemalloc DIR`` runs the operator so).

Run mode (the module's own arguments follow its name)::

    python -m bench.memtrace --dir DIR [--frames 16] [--interval 0.5] [--step 0.1] \\
        kubedra operator --kubeconfig ...

``tracemalloc`` starts before the module is imported, keeping ``--frames`` frames per
allocation (``--frames 0``: no tracing, the figures of each requested snapshot only: the
allocator's figures of an untraced process). A thread of the process then looks every
``--interval`` seconds at the memory tracemalloc traces and writes

* ``peak.tracemalloc`` / ``peak.json`` whenever the traced memory has grown by ``--step`` (a
  fraction) since the last peak written, each replacing the last, so that the files left hold
  the highest point the thread saw (within ``--step`` and ``--interval``);
* ``<label>.tracemalloc`` / ``<label>.json`` when a file ``<label>.request`` appears in
  ``DIR`` (the bench asks for ``end`` when a phase is done), then deletes the request. After
  such a snapshot it calls glibc's ``malloc_trim(0)`` and records the RSS after it: what the
  allocator kept of freed memory (``malloc_trim(3)``);
* ``holders.txt`` when ``holders.request`` appears: the API objects (dicts with a ``kind`` and
  ``metadata``) alive, by kind, and what holds them (:func:`holders`; the garbage collector's
  frozen objects are unfrozen to be seen, so ask for it last).

The ``.tracemalloc`` file is the whole snapshot (``Snapshot.dump``); the ``.json`` file the
process's figures then (traced memory now and at its peak, ``VmRSS``, ``VmHWM``, glibc's
``mallinfo2``: bytes in use, free in the heap, mmapped). Grouping millions of traces is a
minute of pure Python, so it is done afterwards, in another process::

    python -m bench.memtrace report DIR       # DIR/<label>.txt for each snapshot
    python -m bench.memtrace compare BEFORE.tracemalloc AFTER.tracemalloc [--top 25] \\
        [--by lineno|filename|traceback]

``report`` writes the figures and the top allocations by line, by file and by traceback
(``tracemalloc.Snapshot.statistics``); ``compare`` prints the largest differences
(``Snapshot.compare_to``). tracemalloc slows the process (every allocation records its
traceback) and costs memory of its own, which ``VmRSS`` shows but the traced figures do not:
measure RSS in a run without it. Taking and dumping a snapshot holds the interpreter lock for
seconds at thousands of nodes (the operator's event loop waits).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import functools
import gc
import json
import linecache
import runpy
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

REPORT_TOP = 40
"""Entries per grouping in a ``.txt`` report."""
TRACEBACK_TOP = 25
"""Tracebacks in a ``.txt`` report (each printed with its frames)."""
_HIDDEN = (tracemalloc.Filter(False, tracemalloc.__file__),
           tracemalloc.Filter(False, linecache.__file__),
           tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
           tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"))
"""What a report leaves out: tracemalloc's own allocations and the import machinery's (code
objects of the modules imported)."""


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc ≥ 2.33; ``mallinfo(3)``): sizes in bytes."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def malloc_info() -> dict[str, int]:
    """glibc's ``mallinfo2()`` of this process, in bytes: ``heap`` (``arena``: what the
    arenas got from the system), ``in_use`` (``uordblks``), ``free`` (``fordblks``: freed,
    kept by the allocator), ``mmapped`` (``hblkhd``: large blocks, returned on free),
    ``top_releasable`` (``keepcost``); ``{}`` without glibc. Python's own small-object
    arenas (pymalloc, 1 MiB each, mmapped) are in none of them."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return {}
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {"heap": info.arena, "in_use": info.uordblks, "free": info.fordblks,
            "mmapped": info.hblkhd, "top_releasable": info.keepcost}


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: give freed heap memory back to the system (True if some
    was)."""
    libc = _libc()
    return bool(libc is not None and hasattr(libc, "malloc_trim") and libc.malloc_trim(0))


def proc_status_kib(*keys: str) -> dict[str, int]:
    """Fields of ``/proc/self/status`` in kB (``VmRSS``, ``VmHWM``)."""
    found: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _sep, value = line.partition(":")
        if key in keys:
            found[key] = int(value.split()[0])
    return found


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def report(snapshot: tracemalloc.Snapshot, label: str, figures: dict[str, str]) -> str:
    """The text of a ``.txt`` report: ``figures`` (name → value), then the top allocations of
    ``snapshot`` by line, by file and by traceback."""
    shown = snapshot.filter_traces(_HIDDEN)
    lines = [f"# {label}", *(f"{k}: {v}" for k, v in figures.items()),
             f"traced_in_snapshot: {_mib(sum(t.size for t in snapshot.traces))}", ""]
    for key in ("lineno", "filename"):
        stats = shown.statistics(key)
        lines.append(f"## top {REPORT_TOP} by {key} (of {len(stats)}; "
                     f"{_mib(sum(s.size for s in stats))} in {sum(s.count for s in stats)} "
                     "blocks)")
        lines += [f"{_mib(s.size):>11} {s.count:>9} blocks  {s.traceback[0]}"
                  for s in stats[:REPORT_TOP]]
        lines.append("")
    lines.append(f"## top {TRACEBACK_TOP} by traceback (innermost frame last)")
    for stat in shown.statistics("traceback")[:TRACEBACK_TOP]:
        lines.append(f"{_mib(stat.size)} in {stat.count} blocks")
        lines += [f"    {frame}" for frame in stat.traceback]
    return "\n".join(lines) + "\n"


HOLDER_SAMPLES = 12
"""Objects of each kind whose holders :func:`holders` follows."""
HOLDER_DEPTH = 6
"""Steps of referrers :func:`holders` follows from each object."""


def _describe(obj: object) -> str:
    """One step of a holder chain: the type, and for frames their function and line, for
    dicts a few keys."""
    if isinstance(obj, type(sys._getframe())):
        return f"frame {obj.f_code.co_name} {obj.f_code.co_filename}:{obj.f_lineno}"
    if isinstance(obj, dict):
        return f"dict keys={list(obj)[:4]}"
    return type(obj).__qualname__


def holders() -> str:
    """The API objects alive (dicts with ``kind`` and ``metadata``) by kind, and the
    ``metadata`` dicts (with ``managedFields``) alive without their object, and for a few of
    each the chain of their first referrers (:data:`HOLDER_DEPTH` steps): who holds the
    raw bodies. A chain ends early where the holder is no object the collector tracks: most
    often a local variable of a running coroutine or function (the frames of running code
    are not objects). Unfreezes the collector's frozen objects (``gc.get_objects`` does not
    list them)."""
    gc.unfreeze()
    here = sys._getframe()
    found: dict[str, list[dict[str, object]]] = {}
    tracked = gc.get_objects()
    for obj in tracked:
        if type(obj) is dict and isinstance(obj.get("kind"), str) and "metadata" in obj:
            found.setdefault(str(obj["kind"]), []).append(obj)
        elif type(obj) is dict and "managedFields" in obj:  # an object's metadata, alone
            found.setdefault("metadata (with managedFields)", []).append(obj)
    del tracked, obj  # holders of everything
    lines = [f"{kind}: {len(objs)} alive" for kind, objs in sorted(found.items())]
    ignored = {id(found), id(here), *(id(v) for v in found.values())}
    for kind, objs in sorted(found.items()):
        chains: dict[str, int] = {}
        for index in range(min(len(objs), HOLDER_SAMPLES)):  # a slice would hold them
            steps: list[str] = []
            current: object = objs[index]
            for _ in range(HOLDER_DEPTH):
                referrers = [r for r in gc.get_referrers(current) if id(r) not in ignored
                             and r is not steps]
                if not referrers:
                    break
                current = referrers[0]
                del referrers  # a referrer of the next step's object, else
                steps.append(_describe(current))
            chains[" <- ".join(steps)] = chains.get(" <- ".join(steps), 0) + 1
        lines.append(f"## {kind}: holders of {min(len(objs), HOLDER_SAMPLES)} of them")
        lines += [f"{n} x {chain}" for chain, n in sorted(chains.items(), key=lambda c: -c[1])]
    return "\n".join(lines) + "\n"


class Tracer:
    """The snapshot thread of a traced process (see the module's docstring)."""

    def __init__(self, directory: Path, *, interval: float, step: float) -> None:
        self.directory = directory
        self.interval = interval
        self.step = step
        self.next_peak = 0
        """Traced bytes at which the next peak snapshot is written."""
        self.started = time.monotonic()

    def run(self) -> None:
        """Watch the traced memory and the requests, forever (a daemon thread)."""
        while True:
            time.sleep(self.interval)
            current, _peak = tracemalloc.get_traced_memory()
            if tracemalloc.is_tracing() and current >= self.next_peak:
                self.write("peak")
                self.next_peak = int(current * (1 + self.step))
            for request in sorted(self.directory.glob("*.request")):
                if request.stem == "holders":
                    self._replace("holders.txt", functools.partial(_write_text, holders()))
                else:
                    self.write(request.stem, trim=True)
                request.unlink()

    def write(self, label: str, *, trim: bool = False) -> None:
        """Snapshot now: ``<label>.tracemalloc`` and ``<label>.json`` (each written whole,
        then renamed over the last, the figures last; without tracing, the figures only);
        ``trim``: then ``malloc_trim`` and the RSS after it."""
        taken = time.monotonic()
        snapshot = tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None
        current, peak = tracemalloc.get_traced_memory()
        status = proc_status_kib("VmRSS", "VmHWM")
        figures = {"seconds_since_start": f"{taken - self.started:.1f}",
                   "traced_now": _mib(current), "traced_peak": _mib(peak),
                   "traced_frames": str(tracemalloc.get_traceback_limit()
                                        if tracemalloc.is_tracing() else 0),
                   "VmRSS": _mib(status["VmRSS"] * 1024), "VmHWM": _mib(status["VmHWM"] * 1024),
                   "python_blocks": str(sys.getallocatedblocks()),
                   **{f"malloc_{k}": _mib(v) for k, v in malloc_info().items()}}
        if trim:
            malloc_trim()
            figures["VmRSS_after_malloc_trim"] = _mib(proc_status_kib("VmRSS")["VmRSS"] * 1024)
        if snapshot is not None:
            self._replace(f"{label}.tracemalloc", functools.partial(_dump, snapshot))
        figures["snapshot_s"] = f"{time.monotonic() - taken:.1f}"
        self._replace(f"{label}.json", lambda path: path.write_text(json.dumps(figures)))

    def _replace(self, name: str, write: Callable[[Path], object]) -> None:
        partial = self.directory / f".{name}.partial"
        write(partial)
        partial.replace(self.directory / name)


def _dump(snapshot: tracemalloc.Snapshot, path: Path) -> None:
    snapshot.dump(str(path))


def _write_text(text: str, path: Path) -> None:
    path.write_text(text)


def request(directory: Path, label: str) -> Path:
    """Ask the traced process writing to ``directory`` for a snapshot ``label`` (or, for
    ``holders``, :func:`holders`); returns the file it writes last (``<label>.json``,
    ``holders.txt``; an old one is removed first)."""
    done = directory / ("holders.txt" if label == "holders" else f"{label}.json")
    done.unlink(missing_ok=True)
    (directory / f"{label}.request").touch()
    return done


def write_reports(directory: Path) -> list[Path]:
    """``<label>.txt`` (:func:`report`) for every ``<label>.tracemalloc`` in ``directory``,
    with the figures of its ``<label>.json``; returns the reports written."""
    written = []
    for dump in sorted(directory.glob("*.tracemalloc")):
        figures_file = dump.with_suffix(".json")
        figures = json.loads(figures_file.read_text()) if figures_file.exists() else {}
        written.append(dump.with_suffix(".txt"))
        written[-1].write_text(report(tracemalloc.Snapshot.load(str(dump)), dump.stem,
                                      figures))
    return written


def compare(before: Path, after: Path, *, by: str, top: int) -> str:
    """The ``top`` largest differences, grouped ``by``, from snapshot ``before`` to
    ``after``."""
    old = tracemalloc.Snapshot.load(str(before)).filter_traces(_HIDDEN)
    new = tracemalloc.Snapshot.load(str(after)).filter_traces(_HIDDEN)
    total = sum(t.size for t in new.traces) - sum(t.size for t in old.traces)
    lines = [f"# {before} -> {after}, by {by}: {_mib(total)} in all"]
    for diff in new.compare_to(old, by)[:top]:
        lines.append(f"{_mib(diff.size_diff):>11} ({_mib(diff.size):>11} now) "
                     f"{diff.count_diff:>+9} blocks  {diff.traceback[0]}")
        if by == "traceback":
            lines += [f"    {frame}" for frame in diff.traceback]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Trace a module (``--dir DIR MODULE ARGS...``), write the reports of a directory's
    snapshots (``report DIR``) or compare two snapshots (``compare``)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["report"]:
        parser = argparse.ArgumentParser(prog="memtrace.py report",
                                         description="a .txt report of every snapshot")
        parser.add_argument("dir", type=Path)
        for path in write_reports(parser.parse_args(args[1:]).dir):
            print(path)
        return
    if args[:1] == ["compare"]:
        parser = argparse.ArgumentParser(prog="memtrace.py compare",
                                         description="largest differences of two snapshots")
        parser.add_argument("before", type=Path)
        parser.add_argument("after", type=Path)
        parser.add_argument("--by", choices=("lineno", "filename", "traceback"),
                            default="lineno")
        parser.add_argument("--top", type=int, default=25)
        options = parser.parse_args(args[1:])
        print(compare(options.before, options.after, by=options.by, top=options.top), end="")
        return
    parser = argparse.ArgumentParser(prog="memtrace.py",
                                     description=__doc__.split("\n\n")[0],
                                     epilog="or: memtrace.py report DIR; "
                                     "memtrace.py compare BEFORE AFTER [--by ...]")
    parser.add_argument("--dir", type=Path, required=True, help="where snapshots are written")
    parser.add_argument("--frames", type=int, default=16,
                        help="frames kept per allocation (0: no tracing, the figures only)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between looks")
    parser.add_argument("--step", type=float, default=0.1,
                        help="growth of the traced memory (a fraction) between peak snapshots")
    parser.add_argument("module", help="the module to run, as python -m runs it")
    parser.add_argument("module_args", nargs=argparse.REMAINDER)
    options = parser.parse_args(args)
    options.dir.mkdir(parents=True, exist_ok=True)
    if options.frames:
        tracemalloc.start(options.frames)
    tracer = Tracer(options.dir, interval=options.interval, step=options.step)
    threading.Thread(target=tracer.run, name="memtrace", daemon=True).start()
    sys.argv = [options.module, *options.module_args]
    runpy.run_module(options.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
