"""The differential corpus as each older minor's scheduler decides it, recorded.

``tests/allocation_corpus/minors/<minor>.jsonl`` holds, per scenario of the corpus (the drawn
scenarios of ``generated.jsonl`` and the hand-written edge cases), the outcome of that minor's
reference allocator (``dra-reference-allocator-<minor>``, ``hack/build-reference-allocators.sh``):
``{"name", "upstream": outcome}``. ``upstream-table-<minor>.jsonl`` beside it is upstream's own
allocator test table of that minor's module (``ALLOCATOR_MINOR=<minor>
hack/allocator-table/record.sh``). ``make test`` compares kubedra against these recordings
without building the per-minor binaries (minutes each, cold); where a binary is built, a test
checks that its recording is still current. Re-record after changing the corpus or
``hack/allocator``::

    hack/build-reference-allocators.sh
    .venv/bin/python -m tests.support.minor_corpus 1.34 1.35 1.36 1.38
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

from tests.support.edge_cases import CASES
from tests.support.reference_allocator import run_reference
from tests.support.scenario_strategies import CORPUS

MINORS = ("1.34", "1.35", "1.36", "1.38")
"""The minors recorded besides the default one (1.37, whose binary ``make test`` builds); 1.38's
reference allocator is v1.38.0-beta.0's (``hack/allocator/go.1.38.mod``)."""

DIRECTORY = CORPUS.parent / "minors"


def corpus_scenarios() -> list[dict[str, Any]]:
    """Every scenario the recordings cover: the drawn corpus, then the edge cases."""
    return [json.loads(line) for line in CORPUS.read_text().splitlines()] + \
        [case.scenario for case in CASES]


def outcomes_path(minor: str) -> pathlib.Path:
    """The recorded outcomes of ``minor``."""
    return DIRECTORY / f"{minor}.jsonl"


def table_path(minor: str) -> pathlib.Path:
    """``minor``'s own upstream table."""
    return DIRECTORY / f"upstream-table-{minor}.jsonl"


def recorded(minor: str) -> dict[str, dict[str, Any]]:
    """``minor``'s recorded outcomes, by scenario name."""
    lines = outcomes_path(minor).read_text().splitlines()
    return {entry["name"]: entry["upstream"] for entry in map(json.loads, lines)}


def upstream_table(minor: str) -> list[dict[str, Any]]:
    """``minor``'s upstream table, one scenario per case with its outcome under ``upstream``."""
    return [json.loads(line) for line in table_path(minor).read_text().splitlines()]


def record(minor: str) -> pathlib.Path:
    """Run ``minor``'s reference allocator on the corpus and write its outcomes."""
    scenarios = corpus_scenarios()
    outcomes = run_reference(scenarios, minor=minor)
    DIRECTORY.mkdir(exist_ok=True)
    path = outcomes_path(minor)
    path.write_text("".join(json.dumps({"name": s["name"], "upstream": o}, sort_keys=True) + "\n"
                            for s, o in zip(scenarios, outcomes, strict=True)))
    return path


if __name__ == "__main__":
    wanted = sys.argv[1:] or list(MINORS)
    if unknown := [name for name in wanted if name not in MINORS]:
        sys.exit(f"usage: python -m tests.support.minor_corpus [MINOR ...]: MINOR is one of "
                 f"{', '.join(MINORS)} (not {', '.join(unknown)})")
    for name in wanted:
        try:
            print(f"minor_corpus: {record(name)}")
        except FileNotFoundError as err:
            sys.exit(f"minor_corpus: {err.filename} is not built: run "
                     "hack/build-reference-allocators.sh first")
