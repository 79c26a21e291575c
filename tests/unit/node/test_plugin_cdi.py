"""CDI specs: version rules, name rules, atomic files, and the CDI project's JSON schema."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from kubedra.node.cdi import (
    CDIDevice,
    CDISpec,
    ContainerEdits,
    DeviceNode,
    Mount,
    host_node_problem,
    minimum_version,
    qualified_name,
    read_spec,
    remove_spec,
    transient_spec_path,
    validate_spec,
    write_spec,
)
from tests.support.cdi_schema import schema_errors


def spec(*, kind: str = "gpu.kubedra.io/claim", name: str = "gpu-0",
         edits: ContainerEdits | None = None, annotations: dict[str, str] | None = None,
         version: str = "0.3.0") -> CDISpec:
    return CDISpec(cdi_version=version, kind=kind, annotations=annotations, devices=[
        CDIDevice(name=name, container_edits=edits or ContainerEdits(env=["A=1"]))])


@pytest.mark.parametrize(("value", "want"), [
    (spec(), "0.3.0"),
    (spec(edits=ContainerEdits(mounts=[Mount(host_path="/a", container_path="/b",
                                             type="bind")])), "0.4.0"),
    (spec(edits=ContainerEdits(mounts=[Mount(host_path="/a", container_path="/b")])), "0.3.0"),
    (spec(name="0a1b-gpu-0"), "0.5.0"),
    (spec(edits=ContainerEdits(device_nodes=[DeviceNode(path="/dev/x", host_path="/dev/y")])),
     "0.5.0"),
    (spec(annotations={"kubedra.io/claim-uid": "u"}), "0.6.0"),
    (spec(kind="gpu.kubedra.io/claim.v2"), "0.6.0"),
    (CDISpec(cdi_version="0.3.0", kind="a/b", devices=[CDIDevice(
        name="d", annotations={"x": "y"})]), "0.6.0"),
])
def test_minimum_version_follows_cdi_rules(value: CDISpec, want: str) -> None:
    assert minimum_version(value) == want


@pytest.mark.parametrize(("value", "message"), [
    (spec(kind="gpu.kubedra.io"),
     "CDI kind 'gpu.kubedra.io' is not <vendor>/<class> with valid names"),
    (spec(kind="1vendor/claim"),
     "CDI kind '1vendor/claim' is not <vendor>/<class> with valid names"),
    (spec(kind="vendor/claim-"),
     "CDI kind 'vendor/claim-' is not <vendor>/<class> with valid names"),
    (spec(name="-gpu"), "CDI device name '-gpu' is invalid"),
    (spec(name="gpu/0"), "CDI device name 'gpu/0' is invalid"),
    (spec(edits=ContainerEdits(env=["=x"])), "CDI env entry '=x' is not NAME=value"),
    (spec(edits=ContainerEdits(env=["NOVALUE"])), "CDI env entry 'NOVALUE' is not NAME=value"),
    (spec(version="0.2.1"), "CDI version '0.2.1' is not one of ('0.3.0', '0.4.0', '0.5.0', "
     "'0.6.0', '0.7.0', '0.8.0', '1.0.0', '1.1.0')"),
    (spec(name="7-gpu", version="0.4.0"),
     "CDI spec uses fields of version 0.5.0 but says 0.4.0"),
])
def test_validate_rejects_what_cdi_rejects(value: CDISpec, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        validate_spec(value)


def test_duplicate_device_names_are_rejected() -> None:
    value = CDISpec(cdi_version="0.3.0", kind="a/b", devices=[CDIDevice(name="d"),
                                                              CDIDevice(name="d")])
    with pytest.raises(ValueError, match=r"^CDI spec 'a/b' has duplicate device names"):
        validate_spec(value)


def test_names_and_paths() -> None:
    assert qualified_name("gpu.kubedra.io/claim", "u-gpu-0") == "gpu.kubedra.io/claim=u-gpu-0"
    assert transient_spec_path(Path("/var/run/cdi"), "gpu.kubedra.io/claim", "a/b") == Path(
        "/var/run/cdi/gpu.kubedra.io-claim_a_b.json")


def test_write_is_atomic_valid_json_and_schema_valid(tmp_path: Path) -> None:
    value = spec(name="9f1c-gpu-0", version="0.6.0", annotations={"kubedra.io/claim-uid": "9f1c"},
                 edits=ContainerEdits(env=["NVIDIA_VISIBLE_DEVICES=GPU-1"], device_nodes=[
                     DeviceNode(path="/dev/nvidia0"), DeviceNode(path="/dev/nvidiactl")]))
    path = tmp_path / "cdi" / "gpu.kubedra.io-claim_9f1c.json"
    write_spec(path, value)
    assert sorted(os.listdir(path.parent)) == [path.name]
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    document = json.loads(path.read_text())
    assert document == {
        "cdiVersion": "0.6.0", "kind": "gpu.kubedra.io/claim",
        "annotations": {"kubedra.io/claim-uid": "9f1c"},
        "devices": [{"name": "9f1c-gpu-0", "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=GPU-1"],
            "deviceNodes": [{"path": "/dev/nvidia0"}, {"path": "/dev/nvidiactl"}]}}]}
    assert schema_errors(document) == []
    assert read_spec(path) == value
    # replacing keeps one file and never leaves temporaries behind
    write_spec(path, value.model_copy(update={"kind": "gpu.kubedra.io/claim"}))
    assert sorted(os.listdir(path.parent)) == [path.name]
    assert remove_spec(path) is True
    assert remove_spec(path) is False
    assert os.listdir(path.parent) == []


def test_invalid_spec_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    with pytest.raises(ValueError, match=r"^CDI device name"):
        write_spec(path, spec(name="bad name"))
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_schema_check_can_fail() -> None:
    assert schema_errors({"cdiVersion": "0.3.0", "kind": "a/b",
                          "devices": [{"name": "d"}]}) == [
        "devices/0: 'containerEdits' is a required property"]


def test_host_node_problem_is_what_a_runtime_refuses(tmp_path: Path) -> None:
    """As CDI's fillMissingInfo: the host node (hostPath, else path) must be a block,
    character or FIFO device unless the spec gives its type and major."""
    char = tmp_path / "nvidia0"
    os.mknod(char, 0o666 | stat.S_IFCHR, os.stat("/dev/null").st_rdev)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    plain = tmp_path / "plain"
    plain.write_text("")
    link = tmp_path / "link"
    link.symlink_to(char)
    missing = tmp_path / "missing"
    assert host_node_problem(DeviceNode(path="/dev/nvidia0", host_path=str(char))) is None
    assert host_node_problem(DeviceNode(path=str(char))) is None
    assert host_node_problem(DeviceNode(path="/dev/f", host_path=str(fifo))) is None
    assert host_node_problem(DeviceNode(path="/dev/x", host_path=str(missing))) == (
        f"device node {missing} does not exist on this host")
    assert host_node_problem(DeviceNode(path="/dev/x", host_path=str(plain))) == (
        f"{plain} is not a device node")
    assert host_node_problem(DeviceNode(path="/dev/x", host_path=str(link))) == (
        f"{link} is not a device node")  # lstat: a link is not a device
    assert host_node_problem(DeviceNode(path=str(missing), type="c", major=195)) is None
    assert host_node_problem(DeviceNode(path=str(missing), type="p")) is None
    assert host_node_problem(DeviceNode(path=str(missing), type="c")) is not None
