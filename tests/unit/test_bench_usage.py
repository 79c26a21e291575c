"""The bench/ scripts' command lines: ``--help`` prints usage and runs nothing (it ran the
bench, on search_steps upstream's allocator for a minute of CPU on a shared machine), and a
bad argument is a usage error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES = ["cel_selector", "search_steps", "index_readiness"]


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
    ("cel_selector", ["--runs", "3"]), ("search_steps", ["18"]), ("index_readiness", ["many"])])
def test_a_bad_argument_is_a_usage_error(module: str, args: list[str]) -> None:
    done = _run(module, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1].startswith(f"{module}.py: error: ")
