"""Record upstream's answers for kubedra.cel's oracle test.

Reads the cases of ``tests/unit/data/cel_cases.json`` (expression, device), evaluates each
with the Go oracle in this folder (upstream's ``dynamic-resource-allocation/cel`` v0.37.2), and
writes ``tests/unit/data/cel_oracle.json``. Run after changing the cases::

    (cd hack/celeval && GOPROXY=off go build -o /tmp/celeval .)
    .venv/bin/python hack/celeval/record.py /tmp/celeval
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "tests" / "unit" / "data"


def main(oracle: str) -> None:
    """Run the oracle on every case and write the recorded answers."""
    cases = json.loads((DATA / "cel_cases.json").read_text())
    devices = cases["devices"]
    lines = [json.dumps({"expression": c["expression"], "device": devices[c["device"]]})
             for c in cases["cases"]]
    out = subprocess.run([oracle], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True, timeout=300).stdout.splitlines()
    answers = [{"expression": c["expression"], "device": c["device"], **json.loads(line)}
               for c, line in zip(cases["cases"], out, strict=True)]
    (DATA / "cel_oracle.json").write_text(json.dumps(answers, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
