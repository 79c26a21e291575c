"""``kubedra discover`` (and ``python -m kubedra discover``) print the DiscoveryResult."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubedra.api.inventory import DiscoverySettings
from kubedra.cli import main
from kubedra.discovery import discover
from tests.support.sysfs_tree import build_sysfs

H200 = Path(__file__).resolve().parents[3] / "hardware" / "nvidia-h200"


def test_snapshot_as_json_and_yaml() -> None:
    expected = discover(f"snapshot:{H200}", DiscoverySettings(mig="partitions")).to_api()
    runner = CliRunner()
    as_json = runner.invoke(main, ["discover", "--backend", f"snapshot:{H200}",
                                   "--mig", "partitions", "-o", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == expected
    assert len(expected["devices"]) == 26
    as_yaml = runner.invoke(main, ["discover", "--backend", f"snapshot:{H200}",
                                   "--mig", "partitions", "-o", "yaml"])
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.stdout) == expected


def test_pci_with_filters_and_sysfs_root(tmp_path: Path) -> None:
    records = json.loads((H200 / "sysfs_pci.json").read_text())
    root = build_sysfs(tmp_path, records)
    result = CliRunner().invoke(main, ["discover", "--backend", "pci", "--sysfs-root", str(root),
                                       "--pci-vendor", "0x1af4", "--pci-class", "0x02"])
    assert result.exit_code == 0, result.output
    assert [d["name"] for d in json.loads(result.stdout)["devices"]] == ["pci-0000-00-03-0"]


def test_unknown_backend_fails_with_the_reason() -> None:
    result = CliRunner().invoke(main, ["discover", "--backend", "gpu"])
    assert result.exit_code == 1
    assert "unknown discovery backend 'gpu': use pci, nvml, snapshot:<folder> or static" in (
        result.output)


def test_python_dash_m_kubedra_works_the_same() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "kubedra", "discover", "--backend", "static"],
        capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(completed.stdout) == {"devices": [], "counterSets": [], "rejected": []}


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_present(), reason="this machine has NVML")
def test_nvml_backend_without_nvml_fails_cleanly() -> None:
    """The real pynvml on a machine without the NVIDIA driver: a clear error, exit 1."""
    result = CliRunner().invoke(main, ["discover", "--backend", "nvml"])
    assert result.exit_code == 1
    assert "NVML cannot be initialised: NVML Shared Library Not Found" in result.output


@pytest.mark.parametrize(("flag", "value", "field"), [
    ("--pci-class", "zz", "classes[0]"), ("--pci-class", "0x0302ab12", "classes[0]"),
    ("--pci-vendor", "nvidia", "vendors[0]")])
def test_a_pci_filter_that_is_not_hex_is_refused_in_one_line(flag: str, value: str,
                                                              field: str) -> None:
    """``--pci-class zz`` matched nothing and printed no devices, as if there were none."""
    result = CliRunner().invoke(main, ["discover", "--backend", "pci", flag, value])
    digits = 6 if flag == "--pci-class" else 4
    assert (result.exit_code, result.output) == (1, (
        f"Error: {flag} {value!r}: pci.{field}: String should match pattern "
        f"'^(0[xX])?[0-9a-fA-F]{{1,{digits}}}$'\n"))


def test_the_inventory_schema_has_the_pci_filters_patterns() -> None:
    from kubedra.api.crd import inventory_crd

    schema = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    pci = schema["properties"]["spec"]["properties"]["discovery"]["properties"]["pci"]
    assert {name: pci["properties"][name]["items"].get("pattern") for name in (
        "vendors", "classes")} == {"vendors": "^(0[xX])?[0-9a-fA-F]{1,4}$",
                                   "classes": "^(0[xX])?[0-9a-fA-F]{1,6}$"}
