"""The CDI spec of one prepared claim, and the way back from such a spec to the claim.

Spec file ``<cdi dir>/<driver>-claim_<claim UID>.json``, kind ``<driver>/claim``, one CDI
device per allocation result named ``<claim UID>-<device>`` (``-<shareID>`` appended for a
shared device), so the kubelet gets ``<driver>/claim=<claim UID>-<device>`` back. Annotations
on the spec (claim namespace, name, UID) and on each device (pool, device, requests, share ID,
admin access, MIG instance) make the spec self-describing: when the checkpoint is lost the
agent rebuilds it from the specs on disk (:func:`prepared_claim_from_spec`).
"""

from __future__ import annotations

from pathlib import Path

from kubedra.node.cdi import (
    CDIDevice,
    CDISpec,
    ContainerEdits,
    minimum_version,
    qualified_name,
    transient_spec_path,
)
from kubedra.node.checkpoint import PreparedClaim, PreparedDevice
from kubedra.node.mig import MigInstance

CDI_CLASS = "claim"
ANNOTATION_PREFIX = "kubedra.io/"
CLAIM_NAMESPACE = ANNOTATION_PREFIX + "claim-namespace"
CLAIM_NAME = ANNOTATION_PREFIX + "claim-name"
CLAIM_UID = ANNOTATION_PREFIX + "claim-uid"
POOL = ANNOTATION_PREFIX + "pool"
DEVICE = ANNOTATION_PREFIX + "device"
REQUESTS = ANNOTATION_PREFIX + "requests"
SHARE_ID = ANNOTATION_PREFIX + "share-id"
MIG_INSTANCE = ANNOTATION_PREFIX + "mig-instance"
ADMIN_ACCESS = ANNOTATION_PREFIX + "admin-access"


def cdi_kind(driver: str) -> str:
    """``<driver>/claim``: the driver name is the CDI vendor."""
    return f"{driver}/{CDI_CLASS}"


def spec_path(cdi_dir: Path, driver: str, claim_uid: str) -> Path:
    """Where the spec of claim ``claim_uid`` lives."""
    return transient_spec_path(cdi_dir, cdi_kind(driver), claim_uid)


def cdi_device_name(claim_uid: str, device: str, share_id: str | None) -> str:
    """``<claim UID>-<device>[-<shareID>]``: unique per claim and allocation result."""
    return f"{claim_uid}-{device}" + (f"-{share_id}" if share_id else "")


def with_cdi_ids(driver: str, claim_uid: str, device: PreparedDevice) -> PreparedDevice:
    """``device`` with its CDI device ID filled in."""
    name = cdi_device_name(claim_uid, device.device_name, device.share_id)
    return device.model_copy(update={"cdi_device_ids": [qualified_name(cdi_kind(driver), name)]})


def claim_spec(driver: str, claim: PreparedClaim, edits: list[ContainerEdits]) -> CDISpec:
    """The spec for ``claim`` whose devices got ``edits`` (same order), at the lowest CDI
    version its fields need."""
    devices = []
    for device, edit in zip(claim.devices, edits, strict=True):
        annotations = {POOL: device.pool_name, DEVICE: device.device_name,
                       REQUESTS: ",".join(device.request_names)}
        if device.share_id:
            annotations[SHARE_ID] = device.share_id
        if device.admin_access:
            annotations[ADMIN_ACCESS] = "true"
        if device.mig is not None:
            annotations[MIG_INSTANCE] = device.mig.model_dump_json(by_alias=True)
        devices.append(CDIDevice(
            name=cdi_device_name(claim.uid, device.device_name, device.share_id),
            annotations=annotations, container_edits=edit))
    spec = CDISpec(cdi_version="", kind=cdi_kind(driver), devices=devices, annotations={
        CLAIM_NAMESPACE: claim.namespace, CLAIM_NAME: claim.name, CLAIM_UID: claim.uid})
    return spec.model_copy(update={"cdi_version": minimum_version(spec)})


def prepared_claim_from_spec(driver: str, spec: CDISpec, boot_id: str) -> PreparedClaim:
    """Recover a claim's record from its spec (state ``PrepareStarted``: whether its status was
    written is unknown, so a repeated prepare redoes it).

    Raises:
        KeyError: an annotation written by :func:`claim_spec` is missing.
        pydantic.ValidationError: the MIG instance annotation is not valid.
    """
    notes = spec.annotations or {}
    devices = []
    for d in spec.devices:
        ann = d.annotations or {}
        mig = ann.get(MIG_INSTANCE)
        devices.append(with_cdi_ids(driver, notes[CLAIM_UID], PreparedDevice(
            request_names=[r for r in ann[REQUESTS].split(",") if r],
            pool_name=ann[POOL], device_name=ann[DEVICE], cdi_device_ids=[],
            share_id=ann.get(SHARE_ID), admin_access=(ann.get(ADMIN_ACCESS) == "true") or None,
            mig=MigInstance.model_validate_json(mig) if mig else None)))
    return PreparedClaim(uid=notes[CLAIM_UID], namespace=notes[CLAIM_NAMESPACE],
                         name=notes[CLAIM_NAME], state="PrepareStarted", boot_id=boot_id,
                         devices=devices)
