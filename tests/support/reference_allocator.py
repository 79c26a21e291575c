"""Runs ``dra-reference-allocator`` (upstream's allocator, built from ``hack/allocator``), or
another minor's ``dra-reference-allocator-1.<minor>`` (``hack/build-reference-allocators.sh``)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Sequence
from typing import Any

REPO = pathlib.Path(__file__).parents[2]


def reference_binary(minor: str | None = None) -> pathlib.Path:
    """Where ``hack/build-binaries.sh`` puts the binary (``$KUBEDRA_CACHE/bin``), or, for
    ``minor`` (``"1.36"``), where ``hack/build-reference-allocators.sh`` puts that minor's."""
    cache = pathlib.Path(os.environ.get("KUBEDRA_CACHE") or REPO / ".cache")
    return cache / "bin" / ("dra-reference-allocator" + (f"-{minor}" if minor else ""))


def run_reference(scenarios: Sequence[dict[str, Any]], timeout: float = 600,
                  minor: str | None = None) -> list[dict[str, Any]]:
    """Upstream's outcome of every scenario, in one process (JSON lines in and out), by the
    default reference allocator or ``minor``'s."""
    lines = "".join(json.dumps(s) + "\n" for s in scenarios)
    done = subprocess.run([str(reference_binary(minor)), "allocate"], input=lines, text=True,
                          capture_output=True, check=True, timeout=timeout)
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line]
    assert len(outcomes) == len(scenarios), done.stderr
    return outcomes
