"""Runs ``dra-reference-allocator`` (upstream's allocator, built from ``hack/allocator``)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Sequence
from typing import Any

REPO = pathlib.Path(__file__).parents[2]


def reference_binary() -> pathlib.Path:
    """Where ``hack/build-binaries.sh`` puts the binary (``$KUBEDRA_CACHE/bin``)."""
    cache = pathlib.Path(os.environ.get("KUBEDRA_CACHE") or REPO / ".cache")
    return cache / "bin" / "dra-reference-allocator"


def run_reference(scenarios: Sequence[dict[str, Any]],
                  timeout: float = 600) -> list[dict[str, Any]]:
    """Upstream's outcome of every scenario, in one process (JSON lines in and out)."""
    lines = "".join(json.dumps(s) + "\n" for s in scenarios)
    done = subprocess.run([str(reference_binary()), "allocate"], input=lines, text=True,
                          capture_output=True, check=True, timeout=timeout)
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line]
    assert len(outcomes) == len(scenarios), done.stderr
    return outcomes
