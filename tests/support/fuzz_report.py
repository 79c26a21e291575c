"""Outcome counts of the fuzz tests (issue 13, item 4), for docs/reliability.md.

Each fuzz test counts its inputs by outcome and writes them with :func:`write_fuzz_report` to
``$KUBEDRA_FUZZ_REPORT_DIR/<kind>.json`` (default ``.cache/fuzz/``):
``{"examples": N, "outcomes": {outcome: count}}``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

REPORT_DIR = Path(os.environ.get("KUBEDRA_FUZZ_REPORT_DIR",
                                 Path(__file__).resolve().parents[2] / ".cache" / "fuzz"))


def fuzz_examples(variable: str, default: int) -> int:
    """The example count of one fuzz test: ``$<variable>``, else ``default``."""
    return int(os.environ.get(variable, str(default)))


def write_fuzz_report(kind: str, outcomes: Counter[str]) -> Path:
    """Write the counts of ``kind`` (e.g. ``captures``); returns the file written."""
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    path = REPORT_DIR / f"{kind}.json"
    path.write_text(json.dumps({"examples": sum(outcomes.values()),
                                "outcomes": dict(sorted(outcomes.items()))}, indent=2) + "\n")
    return path
