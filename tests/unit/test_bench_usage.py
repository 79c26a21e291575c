"""The bench/ scripts' command lines: ``--help`` prints usage and runs nothing (it ran the
bench, on search_steps upstream's allocator for a minute of CPU on a shared machine), and a
bad argument is a usage error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import timed
from bench.status import fleet_dump

ROOT = Path(__file__).resolve().parents[2]
BENCHES = ["cel_selector", "search_steps", "index_readiness", "memtrace", "decide",
           "listed_hold"]


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'operator'}"}
    return subprocess.run([sys.executable, "-m", f"bench.{module}", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("module", BENCHES)
def test_help_prints_usage_and_runs_nothing(module: str) -> None:
    done = _run(module, "--help")
    assert (done.returncode, done.stdout.split()[:2], done.stderr) == (
        0, ["usage:", f"{module}.py"], "")


@pytest.mark.parametrize(("module", "args"), [
    ("cel_selector", ["--runs", "3"]), ("search_steps", ["18"]), ("index_readiness", ["many"]),
    ("memtrace", ["--dir", "x", "--interval", "soon", "kubedra"]),
    ("decide", ["--rounds", "many"]), ("listed_hold", ["--nodes", "many"])])
def test_a_bad_argument_is_a_usage_error(module: str, args: list[str]) -> None:
    done = _run(module, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1].startswith(f"{module}.py: error: ")



def test_a_timed_commands_standard_error_stays_out_of_the_table(
        capfd: pytest.CaptureFixture[str]) -> None:
    """bench/status's rows each had ``kubedra status``'s note on standard error among them."""
    runs = timed([sys.executable, "-c", "import sys; sys.stderr.write('note: x')"], 2,
                 dict(os.environ))
    assert (len(runs), capfd.readouterr()) == (2, ("", ""))


def test_the_status_bench_dump_records_a_version_as_kubedra_dump_does() -> None:
    assert fleet_dump(1, 0)["serverVersion"] == "v1.37.2"
