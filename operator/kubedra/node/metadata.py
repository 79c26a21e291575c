"""Device metadata for containers (KEP-5304, beta in 1.37): a file per prepared request that
tells the container which devices it got, bind-mounted read-only through CDI.

Layout, names and format are those of upstream's kubelet plugin helper
(k8s.io/dynamic-resource-allocation v0.37.2: ``kubeletplugin/metadata.go``,
``api/metadata/helpers.go``, ``api/metadata/v1beta1/types.go``), so consumers written for any
driver that uses the helper read kubedra's files too:

============================  =================================================================
host file                     ``<plugin data dir>/dra-device-metadata/<namespace>_<claim>/
                              <request>/metadata.json`` (``<request>`` is the base request)
in the container              ``/var/run/kubernetes.io/dra-device-attributes/resourceclaims/
                              <claim>/<request>/<driver>-metadata.json``, or for a claim made
                              from a template (annotation ``resource.kubernetes.io/
                              pod-claim-name``) ``…/resourceclaimtemplates/<pod claim name>/
                              <request>/<driver>-metadata.json``
CDI spec                      ``<cdi dir>/<driver>_metadata_<claim UID>_<request>.json``, kind
                              ``<driver>/metadata``, device ``<claim UID>_<request>`` with one
                              read-only bind mount; its ID is added to the first device of the
                              request in the answer to the kubelet
============================  =================================================================

The file is a JSON stream: the same ``DeviceMetadata`` object once per API version, newest
first (``metadata.resource.k8s.io/v1beta1``, then ``v1alpha1``; both have the same fields)::

    {"apiVersion": "metadata.resource.k8s.io/v1beta1", "kind": "DeviceMetadata",
     "metadata": {"name": <claim>, "namespace": …, "uid": …, "generation": 1},
     "podClaimName": <pod claim name, only for claims from a template>,
     "requests": [{"name": "gpu", "devices": [{"driver": "gpu.kubedra.io", "pool": "node-1",
                   "name": "gpu-0", "attributes": {"uuid": {"string": "GPU-…"},
                   "resource.kubernetes.io/pciBusID": {"string": "0000:00:06.0"}, …}}]}]}

Attributes are the device's attributes as discovery published them in the ResourceSlice
(unqualified names are in the driver's domain, as there).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubedra.api.inventory import InventoryDevice
from kubedra.node import cdi
from kubedra.node.files import write_atomically

METADATA_VERSIONS = ("metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1")
"""``apiVersion`` of each object in a metadata file, in file order (newest first)."""
KIND = "DeviceMetadata"
HOST_SUBDIR = "dra-device-metadata"
CONTAINER_DIR = "/var/run/kubernetes.io/dra-device-attributes"
CLAIMS_SUBDIR = "resourceclaims"
TEMPLATES_SUBDIR = "resourceclaimtemplates"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
CDI_CLASS = "metadata"


@dataclass(frozen=True)
class MetadataClaim:
    """The claim a metadata file is about: ``pod_claim_name`` is the pod's name for a claim
    made from a template (the annotation ``resource.kubernetes.io/pod-claim-name``)."""

    namespace: str
    name: str
    uid: str
    pod_claim_name: str | None = None


@dataclass(frozen=True)
class MetadataDevice:
    """One prepared device of a request: ``request`` is ``<request>[/<subrequest>]``."""

    request: str
    pool: str
    device: InventoryDevice


def base_request(request: str) -> str:
    """``gpu/big`` → ``gpu`` (upstream ``resourceclaim.BaseRequestRef``)."""
    return request.split("/", 1)[0]


def claim_dir(data_dir: Path, namespace: str, name: str) -> Path:
    """The host directory of a claim's metadata files."""
    return data_dir / HOST_SUBDIR / f"{namespace}_{name}"


def host_file(data_dir: Path, claim: MetadataClaim, request: str) -> Path:
    """The host path of the metadata file of base request ``request``."""
    return claim_dir(data_dir, claim.namespace, claim.name) / request / "metadata.json"


def container_file(driver: str, claim: MetadataClaim, request: str) -> str:
    """Where the container finds the metadata file of base request ``request``."""
    if claim.pod_claim_name:
        return (f"{CONTAINER_DIR}/{TEMPLATES_SUBDIR}/{claim.pod_claim_name}/{request}/"
                f"{driver}-metadata.json")
    return f"{CONTAINER_DIR}/{CLAIMS_SUBDIR}/{claim.name}/{request}/{driver}-metadata.json"


def spec_path(cdi_dir: Path, driver: str, claim_uid: str, request: str) -> Path:
    """The CDI spec that mounts the metadata file of base request ``request``."""
    return cdi_dir / f"{driver}_metadata_{claim_uid}_{request}.json"


def cdi_id(driver: str, claim_uid: str, request: str) -> str:
    """The CDI device ID of that spec's one device."""
    return cdi.qualified_name(f"{driver}/{CDI_CLASS}", f"{claim_uid}_{request}")


def metadata_stream(driver: str, claim: MetadataClaim, request: str,
                    devices: list[MetadataDevice]) -> str:
    """The metadata file's content for ``request`` (``<request>[/<subrequest>]``, as the
    allocation names it) and its ``devices``: one JSON object per version, one per line."""
    body: dict[str, Any] = {
        "metadata": {"name": claim.name, "namespace": claim.namespace, "uid": claim.uid,
                     "generation": 1}}
    if claim.pod_claim_name:
        body["podClaimName"] = claim.pod_claim_name
    body["requests"] = [{"name": request, "devices": [
        {"driver": driver, "pool": d.pool, "name": d.device.name,
         **({"attributes": {k: v.to_api() for k, v in sorted(d.device.attributes.items())}}
            if d.device.attributes else {})}
        for d in devices]}]
    return "".join(json.dumps({"kind": KIND, "apiVersion": version, **body}) + "\n"
                   for version in METADATA_VERSIONS)


def write_claim_metadata(driver: str, data_dir: Path, cdi_dir: Path, claim: MetadataClaim,
                         devices: list[MetadataDevice]) -> dict[str, str]:
    """Write the metadata file and CDI spec of every request of ``devices``; returns the CDI
    device ID by base request.

    Raises:
        OSError: a file cannot be written. ValueError: the CDI spec is invalid.
    """
    by_request: dict[str, list[MetadataDevice]] = {}
    for d in devices:
        by_request.setdefault(d.request, []).append(d)
    ids = {}
    for request, members in by_request.items():
        base = base_request(request)
        path = host_file(data_dir, claim, base)
        write_atomically(path, metadata_stream(driver, claim, request, members), 0o644)
        spec = cdi.CDISpec(cdi_version="", kind=f"{driver}/{CDI_CLASS}", devices=[cdi.CDIDevice(
            name=f"{claim.uid}_{base}", container_edits=cdi.ContainerEdits(mounts=[cdi.Mount(
                host_path=str(path), container_path=container_file(driver, claim, base),
                options=["ro", "bind"])]))])
        cdi.write_spec(spec_path(cdi_dir, driver, claim.uid, base),
                       spec.model_copy(update={"cdi_version": cdi.minimum_version(spec)}))
        ids[base] = cdi_id(driver, claim.uid, base)
    return ids


def remove_claim_metadata(driver: str, data_dir: Path, cdi_dir: Path, namespace: str,
                          name: str, uid: str) -> None:
    """Remove a claim's metadata files and CDI specs (nothing there is not an error)."""
    shutil.rmtree(claim_dir(data_dir, namespace, name), ignore_errors=True)
    for path in cdi_dir.glob(f"{driver}_metadata_{uid}_*.json"):
        cdi.remove_spec(path)
