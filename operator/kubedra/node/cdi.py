"""CDI (Container Device Interface) specs: model, version rules, names, atomic files.

A DRA driver hands the kubelet fully qualified CDI device IDs (``vendor/class=name``); the
container runtime resolves them against spec files in ``/var/run/cdi`` (the CDI *dynamic*
directory) and applies the device's ``containerEdits`` to the container. kubedra writes one
transient spec per prepared claim (``<vendor>-<class>_<claim UID>.json``) and removes it on
unprepare; device names start with the claim UID so a runtime's cache never resolves a stale
spec. Rules follow the CDI specification v1.1.0 (cncf-tags/container-device-interface:
``SPEC.md``, ``specs-go/config.go``, ``specs-go/version.go``, ``pkg/parser/parser.go``,
``pkg/cdi/spec.go``). Only the container edits kubedra uses are modelled: env, deviceNodes and
mounts.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from kubedra.node.files import write_atomically

CDI_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
"""Spec versions kubedra may write, oldest first (0.1.0 and 0.2.0 lack features runtimes need)."""

_VENDOR_OR_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")


class CDIModel(BaseModel):
    """CDI JSON: camelCase keys, unset fields left out, unknown fields rejected (as CDI does)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json(self) -> str:
        """Compact JSON as written to disk (camelCase, no ``null`` values)."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


class DeviceNode(CDIModel):
    """A device node to create in the container. Type, major and minor default to the host
    node's at ``path`` (or ``host_path``), which the runtime stats when the container starts."""

    path: str
    host_path: str | None = None
    type: str | None = None
    major: int | None = None
    minor: int | None = None
    permissions: str | None = None


class Mount(CDIModel):
    """A bind (or other) mount into the container."""

    host_path: str
    container_path: str
    options: list[str] | None = None
    type: str | None = None


class ContainerEdits(CDIModel):
    """Changes a runtime makes to a container: ``env`` entries are ``NAME=value``."""

    env: list[str] | None = None
    device_nodes: list[DeviceNode] | None = None
    mounts: list[Mount] | None = None


class CDIDevice(CDIModel):
    """One named device of a spec."""

    name: str
    annotations: dict[str, str] | None = None
    container_edits: ContainerEdits = Field(default_factory=ContainerEdits)


class CDISpec(CDIModel):
    """A CDI spec file: ``kind`` is ``<vendor>/<class>``."""

    cdi_version: str
    kind: str
    annotations: dict[str, str] | None = None
    devices: list[CDIDevice]
    container_edits: ContainerEdits | None = None


def minimum_version(spec: CDISpec) -> str:
    """The oldest CDI version whose fields cover ``spec`` (CDI ``specs-go/version.go``).

    0.4.0 added ``mounts[].type``; 0.5.0 ``deviceNodes[].hostPath`` and device names starting
    with a digit; 0.6.0 annotations and a class name containing a dot. Later versions added
    only fields this model does not have (intelRdt, additionalGids, netDevices).
    """
    edits = [d.container_edits for d in spec.devices]
    if spec.container_edits is not None:
        edits.append(spec.container_edits)
    _, _, cls = spec.kind.partition("/")
    if spec.annotations or any(d.annotations for d in spec.devices) or "." in cls:
        return "0.6.0"
    if any(d.name[:1].isdigit() for d in spec.devices) or any(
            n.host_path for e in edits for n in e.device_nodes or []):
        return "0.5.0"
    if any(m.type for e in edits for m in e.mounts or []):
        return "0.4.0"
    return "0.3.0"


def validate_spec(spec: CDISpec) -> None:
    """Check what a CDI runtime checks when it loads ``spec``.

    Raises:
        ValueError: bad kind, vendor, class or device name; duplicate device names; an env entry
            without ``NAME=``; or a ``cdiVersion`` unknown or lower than :func:`minimum_version`.
    """
    vendor, sep, cls = spec.kind.partition("/")
    if not sep or not _VENDOR_OR_CLASS.match(vendor) or not _VENDOR_OR_CLASS.match(cls):
        raise ValueError(f"CDI kind {spec.kind!r} is not <vendor>/<class> with valid names")
    names = [d.name for d in spec.devices]
    for name in names:
        if not _DEVICE_NAME.match(name):
            raise ValueError(f"CDI device name {name!r} is invalid")
    if len(set(names)) != len(names):
        raise ValueError(f"CDI spec {spec.kind!r} has duplicate device names: {names}")
    edits = [d.container_edits for d in spec.devices] + (
        [spec.container_edits] if spec.container_edits else [])
    for e in edits:
        for entry in e.env or []:
            if entry.find("=") <= 0:
                raise ValueError(f"CDI env entry {entry!r} is not NAME=value")
    if spec.cdi_version not in CDI_VERSIONS:
        raise ValueError(f"CDI version {spec.cdi_version!r} is not one of {CDI_VERSIONS}")
    needed = minimum_version(spec)
    if CDI_VERSIONS.index(spec.cdi_version) < CDI_VERSIONS.index(needed):
        raise ValueError(f"CDI spec uses fields of version {needed} but says {spec.cdi_version}")


def host_node_problem(node: DeviceNode) -> str | None:
    """Why a runtime would refuse ``node`` when the container starts, or None.

    The runtime takes a node's type, major and minor from the host node at ``hostPath`` (or
    ``path``), found with ``lstat``, unless the spec gives a type and a major (or type ``p``);
    a missing node or one that is not a block, character or FIFO device fails the container
    (CDI ``pkg/cdi/container-edits_unix.go``, ``fillMissingInfo``: "failed to stat CDI host
    device"). Checked at prepare, so the claim fails with this message instead of the pod
    ending in CreateContainerError after prepare reported success.
    """
    if node.type and (node.major or node.type == "p"):
        return None
    host = node.host_path or node.path
    try:
        mode = os.lstat(host).st_mode
    except FileNotFoundError:
        return f"device node {host} does not exist on this host"
    except OSError as err:
        return f"device node {host} cannot be read: {err.strerror}"
    if not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)):
        return f"{host} is not a device node"
    return None


def qualified_name(kind: str, device: str) -> str:
    """The fully qualified CDI device ID ``<vendor>/<class>=<device>`` the kubelet passes on."""
    return f"{kind}={device}"


def transient_spec_path(cdi_dir: Path, kind: str, transient_id: str) -> Path:
    """Path of a transient spec: ``<dir>/<vendor>-<class>_<id>.json`` (CDI
    ``GenerateTransientSpecName``; ``/`` in the id becomes ``_``)."""
    vendor, _, cls = kind.partition("/")
    return cdi_dir / f"{vendor}-{cls}_{transient_id.replace('/', '_')}.json"


def write_spec(path: Path, spec: CDISpec) -> None:
    """Validate ``spec`` and write it to ``path`` (0644) atomically, so a runtime never reads a
    partial spec (the temporary file's ``.tmp`` suffix is not one runtimes load).

    Raises:
        ValueError: from :func:`validate_spec`.
        OSError: the directory or file cannot be written.
    """
    validate_spec(spec)
    write_atomically(path, spec.to_json(), 0o644)


def read_spec(path: Path) -> CDISpec:
    """Parse a spec file written by :func:`write_spec`.

    Raises:
        OSError: unreadable. pydantic.ValidationError: not a CDI spec of this model.
    """
    return CDISpec.model_validate_json(path.read_bytes())


def remove_spec(path: Path) -> bool:
    """Delete a spec file; True if it existed (removing a missing file is not an error)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
