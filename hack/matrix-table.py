#!/usr/bin/env python3
"""Print the compatibility table of docs/operating.md ("Kubernetes versions") from the JUnit
files ``make test-matrix`` writes (``.cache/matrix/<release>.xml``): one row per test, one
column per release, each cell ``pass``, ``skip``, ``FAIL`` or ``error`` with the test's
seconds, and a first row with each release's totals and wall time (the JUnit suite's). A
release ``<plane>-kubelet-<kubelet>`` is a run of ``make test-skew`` (``1.37.2-kubelet-1.35.4``:
a v1.37.2 control plane with a v1.35.4 kubelet), headed ``v1.37.2, kubelet v1.35.4``.

Usage: hack/matrix-table.py [--dir .cache/matrix] 1.34.4 1.35.4 1.36.3 1.37.2 \
    [1.37.2-kubelet-1.36.3 1.37.2-kubelet-1.35.4]
A release without a JUnit file gets ``not run`` in every cell. Exit status 0; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

Outcome = tuple[str, float]
"""(``pass``/``skip``/``FAIL``/``error``, seconds) of one test case."""


def outcomes(junit: Path) -> tuple[dict[str, Outcome], float]:
    """Test id (``file::name``) → outcome, and the suite's seconds, of one JUnit file."""
    suite = ET.parse(junit).getroot()
    if suite.tag == "testsuites":
        suite = suite[0]
    found: dict[str, Outcome] = {}
    for case in suite.iter("testcase"):
        module = (case.get("classname") or "").replace(".", "/")
        kinds = {child.tag for child in case}
        state = ("error" if "error" in kinds else "FAIL" if "failure" in kinds
                 else "skip" if "skipped" in kinds else "pass")
        found[f"{module}.py::{case.get('name')}"] = (state, float(case.get("time") or 0))
    return found, float(suite.get("time") or 0)


def heading(release: str) -> str:
    """The column heading of ``release``: ``v1.34.4``, or ``v1.37.2, kubelet v1.35.4``."""
    plane, _, kubelet = release.partition("-kubelet-")
    return f"v{plane}, kubelet v{kubelet}" if kubelet else f"v{plane}"


def table(releases: list[str], directory: Path) -> str:
    """The Markdown table for ``releases`` from ``directory``'s JUnit files."""
    results: dict[str, dict[str, Outcome]] = {}
    totals: dict[str, str] = {}
    for release in releases:
        junit = directory / f"{release}.xml"
        if not junit.exists():
            results[release], totals[release] = {}, "not run"
            continue
        results[release], seconds = outcomes(junit)
        counts = {s: sum(1 for o, _ in results[release].values() if o == s)
                  for s in ("pass", "skip", "FAIL", "error")}
        totals[release] = ", ".join(f"{n} {s}" for s, n in counts.items() if n) \
            + f" in {seconds:.0f} s"
    # the first release's tests in its order, then each next release's new ones
    tests = list(dict.fromkeys(t for found in results.values() for t in found))
    lines = ["| test | " + " | ".join(heading(r) for r in releases) + " |",
             "| --- |" + " --- |" * len(releases),
             "| **all** | " + " | ".join(totals[r] for r in releases) + " |"]
    for test in tests:
        cells = []
        for release in releases:
            if not results[release]:
                cells.append("not run")
            elif test not in results[release]:
                cells.append("—")
            else:
                state, seconds = results[release][test]
                cells.append(f"{state} ({seconds:.1f} s)")
        lines.append(f"| `{test}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _release(text: str) -> str:
    """A release (``1.36.3``) or a skew run (``1.37.2-kubelet-1.35.4``), as make names them."""
    if not re.fullmatch(r"\d+\.\d+\.\d+(-kubelet-\d+\.\d+\.\d+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a release X.Y.Z or "
                                         "X.Y.Z-kubelet-X.Y.Z")
    return text


def _folder(text: str) -> Path:
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a folder (make test-matrix writes "
                                         ".cache/matrix/)")
    return Path(text)


def main(argv: list[str]) -> int:
    """Print the table; returns the exit status (2, argparse's, on bad usage)."""
    parser = argparse.ArgumentParser(prog="hack/matrix-table.py")
    parser.add_argument("releases", nargs="+", metavar="RELEASE", type=_release)
    parser.add_argument("--dir", type=_folder, default=Path(".cache/matrix"))
    args = parser.parse_args(argv)
    print(table(args.releases, args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
