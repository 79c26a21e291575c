"""bench/memtrace: the snapshots of a traced process (the operator under ``bench/scale.py
--tracemalloc``) name what holds its memory, and two of them compare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import memtrace

ROOT = Path(__file__).resolve().parents[2]
HELD = 4 * 2**20
"""Bytes the tests allocate in one line (4 MiB)."""


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start(4)
    yield
    tracemalloc.stop()


def _allocate() -> list[bytes]:
    return [bytes(1024) for _ in range(HELD // 1024)]  # the line the report must name


def test_a_snapshot_names_the_line_holding_the_memory(traced: None, tmp_path: Path) -> None:
    held = _allocate()
    memtrace.Tracer(tmp_path, interval=1.0, step=0.1).write("peak")
    assert memtrace.write_reports(tmp_path) == [tmp_path / "peak.txt"]
    text = (tmp_path / "peak.txt").read_text()
    by_line = text.split("## top 40 by lineno")[1].splitlines()[1]
    size_mib = float(by_line.split()[0])
    assert (size_mib >= HELD / 2**20, "test_memtrace.py:" in by_line, len(held)) == (
        True, True, HELD // 1024)
    figures = dict(line.split(": ", 1) for line in text.split("\n\n")[0].splitlines()[1:])
    assert float(figures["malloc_in_use"].split()[0]) >= HELD / 2**20
    assert float(figures["VmRSS"].split()[0]) >= HELD / 2**20
    assert tracemalloc.Snapshot.load(str(tmp_path / "peak.tracemalloc")).traces


def test_a_requested_snapshot_is_written_and_the_request_removed(traced: None,
                                                                 tmp_path: Path) -> None:
    tracer = memtrace.Tracer(tmp_path, interval=0.05, step=0.1)
    threading.Thread(target=tracer.run, daemon=True).start()
    done = memtrace.request(tmp_path, "end")
    deadline = time.monotonic() + 30
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (done.exists(), (tmp_path / "end.request").exists(),
            (tmp_path / "peak.json").exists()) == (True, False, True)
    figures = json.loads(done.read_text())
    assert float(figures["VmRSS_after_malloc_trim"].split()[0]) > 0


def test_the_comparison_shows_what_grew_between_two_snapshots(traced: None,
                                                              tmp_path: Path) -> None:
    tracer = memtrace.Tracer(tmp_path, interval=1.0, step=0.1)
    tracer.write("before")
    held = _allocate()
    tracer.write("after")
    text = memtrace.compare(tmp_path / "before.tracemalloc", tmp_path / "after.tracemalloc",
                            by="lineno", top=3)
    first = text.splitlines()[1]
    assert (float(first.split()[0]) >= HELD / 2**20, "test_memtrace.py:" in first,
            len(held)) == (True, True, HELD // 1024)


def test_a_module_runs_traced_with_its_own_arguments(tmp_path: Path) -> None:
    """The module (timeit, its statements as arguments) runs traced, and waits for the first
    peak snapshot."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'operator'}"}
    peak = tmp_path / "out" / "peak.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.memtrace", "--dir", str(tmp_path / "out"),
         "--interval", "0.05", "timeit", "-n", "1", "-r", "1",
         "import pathlib, time, tracemalloc; assert tracemalloc.is_tracing()",
         f"peak, deadline = pathlib.Path({str(peak)!r}), time.monotonic() + 60",
         "while not peak.exists() and time.monotonic() < deadline: time.sleep(0.05)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert "1 loop" in done.stdout
    assert peak.exists()


class _Holder:
    def __init__(self, body: dict[str, object]) -> None:
        self.body = body


def test_holders_names_what_keeps_an_api_object_alive() -> None:
    held = _Holder({"kind": "MemtraceProbe", "metadata": {"name": "x"}})
    holders = [held]
    text = memtrace.holders()
    assert "MemtraceProbe: 1 alive" in text.splitlines()
    chain = text.split("## MemtraceProbe: holders of 1 of them\n")[1].splitlines()[0]
    assert chain == "1 x _Holder <- list"  # the list is held by this running function's local
    assert holders == [held]
    assert held.body["kind"] == "MemtraceProbe"


def test_without_tracing_a_request_writes_the_figures_only(tmp_path: Path) -> None:
    assert not tracemalloc.is_tracing()
    memtrace.Tracer(tmp_path, interval=1.0, step=0.1).write("end", trim=True)
    figures = json.loads((tmp_path / "end.json").read_text())
    assert (sorted(p.name for p in tmp_path.iterdir()), figures["traced_frames"]) == (
        ["end.json"], "0")
    assert float(figures["VmRSS_after_malloc_trim"].split()[0]) > 0
