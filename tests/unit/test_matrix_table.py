"""hack/matrix-table.py: the compatibility table of docs/operating.md from make test-matrix's
JUnit files."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("matrix_table", ROOT / "hack/matrix-table.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4" time="61.000">
<testcase classname="e2e.test_main_job" name="test_a" time="1.25" />
<testcase classname="e2e.test_main_job" name="test_b" time="2.0"><failure message="x"/></testcase>
<testcase classname="e2e.test_mig" name="test_c" time="0.0"><skipped message="off"/></testcase>
<testcase classname="e2e.test_mig" name="test_d" time="0.5"><error message="y"/></testcase>
</testsuite></testsuites>"""


def test_one_row_per_test_one_column_per_release(tmp_path: Path) -> None:
    (tmp_path / "1.34.4.xml").write_text(JUNIT)
    assert _script().table(["1.34.4", "1.35.4"], tmp_path).splitlines() == [
        "| test | v1.34.4 | v1.35.4 |",
        "| --- | --- | --- |",
        "| **all** | 1 pass, 1 skip, 1 FAIL, 1 error in 61 s | not run |",
        "| `e2e/test_main_job.py::test_a` | pass (1.2 s) | not run |",
        "| `e2e/test_main_job.py::test_b` | FAIL (2.0 s) | not run |",
        "| `e2e/test_mig.py::test_c` | skip (0.0 s) | not run |",
        "| `e2e/test_mig.py::test_d` | error (0.5 s) | not run |",
    ]


def test_a_skew_run_is_headed_with_its_kubelet_and_its_tests_get_rows(tmp_path: Path) -> None:
    (tmp_path / "1.37.2.xml").write_text(JUNIT)
    (tmp_path / "1.37.2-kubelet-1.35.4.xml").write_text(
        '<testsuites><testsuite time="9.0"><testcase classname="e2e.test_real_node" '
        'name="test_e" time="3.0" /></testsuite></testsuites>')
    lines = _script().table(["1.37.2", "1.37.2-kubelet-1.35.4"], tmp_path).splitlines()
    assert lines[0] == "| test | v1.37.2 | v1.37.2, kubelet v1.35.4 |"
    assert lines[2] == "| **all** | 1 pass, 1 skip, 1 FAIL, 1 error in 61 s | 1 pass in 9 s |"
    assert lines[3] == "| `e2e/test_main_job.py::test_a` | pass (1.2 s) | — |"
    assert lines[-1] == "| `e2e/test_real_node.py::test_e` | — | pass (3.0 s) |"


def test_a_release_that_is_not_one_or_a_missing_folder_is_bad_usage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``banana`` made a column ``vbanana`` of ``not run``, and so did every release when
    ``--dir`` named no folder: a table that looked measured and was not."""
    outcomes = {}
    for args in (["banana"], ["1.37.2-kubelet-x"], ["--dir", str(tmp_path / "none"), "1.37.2"]):
        with pytest.raises(SystemExit) as ended:
            _script().main(args)
        outcomes[args[-1] if len(args) == 1 else "--dir"] = (
            ended.value.code, capsys.readouterr().err.splitlines()[-1])
    assert outcomes == {
        "banana": (2, "hack/matrix-table.py: error: argument RELEASE: 'banana' is not a "
                      "release X.Y.Z or X.Y.Z-kubelet-X.Y.Z"),
        "1.37.2-kubelet-x": (2, "hack/matrix-table.py: error: argument RELEASE: "
                                "'1.37.2-kubelet-x' is not a release X.Y.Z or X.Y.Z-kubelet-X.Y.Z"),
        "--dir": (2, f"hack/matrix-table.py: error: argument --dir: {tmp_path / 'none'} is not "
                     "a folder (make test-matrix writes .cache/matrix/)")}
