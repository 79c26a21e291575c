"""NodePrepareResources / NodeUnprepareResources: the work behind the kubelet's calls.

Prepare, per claim: read the claim (before taking the lock, like upstream's kubeletplugin
helper), check it (:mod:`kubedra.node.claims`) and its opaque config (:mod:`kubedra.node.config`),
refuse a device another claim still holds on this node, or that shares counters with one
beyond their value (:mod:`kubedra.node.exclusivity`), create MIG instances for MIG placement
devices, write the claim's CDI spec (:mod:`kubedra.node.claimspec`) and each request's device
metadata file with its CDI spec (:mod:`kubedra.node.metadata`, KEP-5304), apply the
``Prepared`` condition to the claim's ``status.devices`` entries of our driver (server-side
apply, field manager ``kubedra-agent``; the operator's ``Ready`` condition on the same entries
is its own), and answer with the CDI device IDs per device. A claim already prepared in this
boot, with its spec on disk and the same devices, is answered from the checkpoint without any
write.

Unprepare, per claim: withdraw the status entries (if the claim still exists with that UID),
destroy MIG instances made in this boot, delete the metadata and the spec, forget the claim. A
claim this node does not know is already unprepared.

Both are idempotent, run one call at a time (an asyncio lock plus ``flock`` on
``<plugin data dir>/serialize.lock``, which also serializes a second agent instance during a
rolling update, as upstream's ``serialize.lock``), and answer every claim of the request: a
claim's failure is its own error string and never fails the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kubernetes_asyncio.client import ApiClient, ApiException
from pydantic import ValidationError

from kubedra import kube
from kubedra.api.inventory import AGENT_FIELD_MANAGER, InventoryDevice
from kubedra.api.resource import AllocatedDeviceStatus, Condition, CounterSet, ResourceClaim
from kubedra.api.time import timestamp, utcnow
from kubedra.logging import get_logger
from kubedra.node import cdi, metadata
from kubedra.node.checkpoint import (
    CHECKPOINT_FILE,
    CheckpointData,
    CheckpointError,
    PreparedClaim,
    PreparedDevice,
    load_checkpoint,
    read_boot_id,
    save_checkpoint,
)
from kubedra.node.claims import AllocatedDevice, ClaimError, allocated_devices, claim_key
from kubedra.node.claimspec import (
    cdi_kind,
    claim_spec,
    prepared_claim_from_spec,
    spec_path,
    with_cdi_ids,
)
from kubedra.node.config import ConfigError, DriverConfig, driver_configs, effective_config
from kubedra.node.edits import (
    HOST_ROOT,
    DeviceError,
    DeviceType,
    container_edits,
    device_type,
    mig_placement,
    resolve_device,
)
from kubedra.node.exclusivity import find_conflict, pool_counters
from kubedra.node.metrics import PluginMetrics
from kubedra.node.mig import MigError, MigInstance, MigPartitioner
from kubedra.settings import DEFAULT_BOOT_ID_PATH, DEFAULT_CDI_DIR

log = get_logger(__name__)

PREPARED_CONDITION = "Prepared"
PREPARED_REASON = "DevicePrepared"
LOCK_FILE = "serialize.lock"
RESTORED_KINDS = ("claim", "metadata", "metadata-file")
"""The files prepare writes for a claim, as ``kind`` of
``kubedra_plugin_cdi_specs_restored_total``: the claim's CDI spec (``<driver>/claim``), each
request's device metadata CDI spec (``<driver>/metadata``) and the metadata file it mounts."""


@dataclass(frozen=True)
class ClaimRef:
    """A claim as the kubelet names it."""

    namespace: str
    name: str
    uid: str


@dataclass
class PrepareResult:
    """The answer for one claim: its devices, or an error message."""

    devices: list[PreparedDevice]
    error: str = ""


@dataclass
class PluginPaths:
    """Where the plugin keeps files: ``data_dir`` (checkpoint, lock; the kubelet's
    ``<plugins dir>/<driver>``), ``cdi_dir`` (specs) and the kernel's ``boot_id`` file; and
    where the host's device nodes are (``device_root``, see
    :func:`kubedra.node.edits.host_device_node`)."""

    data_dir: Path
    cdi_dir: Path = DEFAULT_CDI_DIR
    boot_id: Path = DEFAULT_BOOT_ID_PATH
    device_root: Path = HOST_ROOT


def _now() -> str:
    return timestamp(utcnow())


def _device_key(d: PreparedDevice) -> tuple[str, str, str | None]:
    return d.pool_name, d.device_name, d.share_id


class ClaimPreparer:
    """Prepares and unprepares claims for one driver on one node.

    Args:
        api: API client of the agent's service account.
        driver: our driver name, e.g. ``gpu.kubedra.io``.
        node_name: this node (for messages).
        pool: returns this node's pool name (``spec.pool`` of its inventory, else the node
            name).
        devices: returns the node's current devices by name (declared and discovered).
        counter_sets: returns the pool's shared counter sets (declared, then discovered),
            what the devices' ``consumesCounters`` draw from.
        paths: data, CDI and boot ID locations.
        metrics: where to count.
        mig: creates MIG instances; ``None`` when the node has no MIG placement devices (a
            claim for one then fails with reason ``MIG``).
    """

    def __init__(self, *, api: ApiClient, driver: str, node_name: str, pool: Callable[[], str],
                 devices: Callable[[], Mapping[str, InventoryDevice]], paths: PluginPaths,
                 metrics: PluginMetrics, mig: MigPartitioner | None = None,
                 counter_sets: Callable[[], list[CounterSet]] = list) -> None:
        self._api = api
        self._driver = driver
        self._node = node_name
        self._pool = pool
        self._devices = devices
        self._counter_sets = counter_sets
        self._paths = paths
        self._metrics = metrics
        self._mig = mig
        self._lock = asyncio.Lock()
        self._boot_id = ""
        self._checkpoint = CheckpointData()
        self.checkpoint_problem: str | None = None
        """Why the checkpoint had to be rebuilt at start, or None."""

    @property
    def _checkpoint_path(self) -> Path:
        return self._paths.data_dir / CHECKPOINT_FILE

    async def start(self) -> None:
        """Read the boot ID and the checkpoint (see :meth:`_load`).

        Raises:
            OSError: the boot ID cannot be read or the data directory cannot be written.
        """
        self._boot_id = read_boot_id(self._paths.boot_id)
        self._paths.data_dir.mkdir(parents=True, exist_ok=True)
        async with self._serialized():
            self._update_gauge()
        log.info("plugin state loaded", claims=len(self._checkpoint.claims),
                 boot_id=self._boot_id)

    def prepared_claims(self) -> dict[str, PreparedClaim]:
        """A copy of the claims in the checkpoint, by UID."""
        return dict(self._checkpoint.claims)

    async def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        """Prepare ``claims``; the result has an entry for every claim UID."""
        started = time.monotonic()
        fetched = await asyncio.gather(*(self._fetch(c) for c in claims))
        results: dict[str, PrepareResult] = {}
        async with self._serialized():
            devices = self._devices()
            for ref, claim in zip(claims, fetched, strict=True):
                try:
                    if isinstance(claim, ClaimError):
                        raise claim
                    prepared, done = await self._prepare_claim(ref, claim, devices)
                    results[ref.uid] = PrepareResult(prepared)
                    self._answered("prepare", "done" if done else "cached", started)
                except Exception as err:  # every claim gets an answer
                    results[ref.uid] = PrepareResult([], self._failed("prepare", ref, err,
                                                                      started))
            self._update_gauge()
        return results

    async def unprepare(self, claims: list[ClaimRef]) -> dict[str, str]:
        """Unprepare ``claims``; the result maps every claim UID to an error ("" = done)."""
        started = time.monotonic()
        results: dict[str, str] = {}
        async with self._serialized():
            for ref in claims:
                try:
                    done = await self._unprepare_claim(ref)
                    results[ref.uid] = ""
                    self._answered("unprepare", "done" if done else "cached", started)
                except Exception as err:  # every claim gets an answer
                    results[ref.uid] = self._failed("unprepare", ref, err, started)
            self._update_gauge()
        return results

    async def restore_missing_files(self) -> int:
        """Write again every file prepare wrote for a claim prepared in this boot that is gone
        (deleted by hand or by a tool that cleans the CDI directory), each kind on its own
        (:data:`RESTORED_KINDS`): the claim is read again and, when its CDI spec is gone (or
        its allocation changed), prepared again as a repeated prepare would (its edits
        computed anew, with the same CDI device IDs and MIG instances); otherwise only its
        device metadata (files and CDI specs) is written again. A claim unprepared meanwhile
        is left alone. Each file is counted in
        ``kubedra_plugin_cdi_specs_restored_total{kind, result}`` (result done or error).

        Returns:
            How many files were written again.
        """
        async with self._serialized():
            missing = [c for c in self._checkpoint.claims.values() if self._missing_files(c.uid)]
        refs = [ClaimRef(c.namespace, c.name, c.uid) for c in missing]
        fetched = await asyncio.gather(*(self._fetch(ref) for ref in refs))
        restored = 0
        async with self._serialized():
            devices = self._devices()
            for ref, claim in zip(refs, fetched, strict=True):
                files = self._missing_files(ref.uid)
                if not files:
                    continue  # unprepared, or prepared again, meanwhile
                key = claim_key(ref.namespace, ref.name)
                try:
                    if isinstance(claim, ClaimError):
                        raise claim
                    await self._restore(ref, claim, devices, files)
                except Exception as err:  # one claim never stops the others
                    for kind, path in files:
                        self._metrics.cdi_specs_restored.labels(kind, "error").inc()
                        log.warning("a file of a prepared claim is missing and cannot be written "
                                    "again", claim=key, uid=ref.uid, kind=kind, path=str(path),
                                    error=str(err))
                    continue
                for kind, path in files:
                    restored += 1
                    self._metrics.cdi_specs_restored.labels(kind, "done").inc()
                    log.warning("a file of a prepared claim was missing; written again",
                                claim=key, uid=ref.uid, kind=kind, path=str(path))
        return restored

    def _missing_files(self, uid: str) -> list[tuple[str, Path]]:
        """The files prepare wrote for claim ``uid``, prepared in this boot, that are gone, each
        with its kind (:data:`RESTORED_KINDS`); empty for a claim not prepared in this boot."""
        known = self._checkpoint.claims.get(uid)
        if (known is None or known.state != "PrepareCompleted"
                or known.boot_id != self._boot_id):
            return []
        expected = [("claim", spec_path(self._paths.cdi_dir, self._driver, uid))]
        target = metadata.MetadataClaim(known.namespace, known.name, uid)
        for request in sorted({r for d in known.devices for r in d.request_names}):
            expected += [
                ("metadata", metadata.spec_path(self._paths.cdi_dir, self._driver, uid, request)),
                ("metadata-file", metadata.host_file(self._paths.data_dir, target, request))]
        return [(kind, path) for kind, path in expected if not path.exists()]

    async def _restore(self, ref: ClaimRef, claim: ResourceClaim,
                       devices: Mapping[str, InventoryDevice],
                       files: list[tuple[str, Path]]) -> None:
        """Write ``files`` of a prepared claim again (see :meth:`restore_missing_files`)."""
        known = self._checkpoint.claims[ref.uid]
        allocated = allocated_devices(claim, ref.uid, self._driver, self._pool(), devices)
        same = ([(a.result.pool, a.result.device, a.result.share_id) for a in allocated]
                == [_device_key(d) for d in known.devices])
        if not same or any(kind == "claim" for kind, _ in files):
            await self._prepare_claim(ref, claim, devices)
        else:
            self._write_metadata(claim, ref, allocated,
                                 [d.model_copy(deep=True) for d in known.devices])

    # --- prepare ----------------------------------------------------------------------------

    async def _fetch(self, ref: ClaimRef) -> ResourceClaim | ClaimError:
        key = claim_key(ref.namespace, ref.name)
        try:
            return await kube.get_resource_claim(self._api, ref.namespace, ref.name)
        except ApiException as err:
            if kube.is_not_found(err):
                return ClaimError("NotFound", f"claim {key} does not exist")
            return ClaimError("APIError", f"reading claim {key}: {err.status} {err.reason}")

    async def _prepare_claim(self, ref: ClaimRef, claim: ResourceClaim,
                             devices: Mapping[str, InventoryDevice]
                             ) -> tuple[list[PreparedDevice], bool]:
        """Prepare one checked claim; returns its devices and whether any work was done."""
        allocated = allocated_devices(claim, ref.uid, self._driver, self._pool(), devices)
        allocation = claim.status.allocation
        try:
            configs = driver_configs(
                (allocation.devices.config if allocation and allocation.devices else None)
                or [], self._driver)
        except ConfigError as err:
            raise ClaimError("InvalidConfig", f"claim {claim_key(ref.namespace, ref.name)}: "
                             f"{err}") from None
        wanted = [with_cdi_ids(self._driver, ref.uid, PreparedDevice(
            request_names=[a.result.request.split("/", 1)[0]], pool_name=a.result.pool,
            device_name=a.result.device, cdi_device_ids=[], share_id=a.result.share_id,
            admin_access=a.result.admin_access or None))
            for a in allocated]
        known = self._checkpoint.claims.get(ref.uid)
        path = spec_path(self._paths.cdi_dir, self._driver, ref.uid)
        if (known is not None and known.state == "PrepareCompleted"
                and known.boot_id == self._boot_id and path.exists()
                and [_device_key(d) for d in known.devices] == [_device_key(d) for d in wanted]):
            return known.devices, False
        conflict = find_conflict(ref.uid, wanted, self._checkpoint.claims, pool=self._pool(),
                                 devices=devices, counters=pool_counters(self._counter_sets()))
        if conflict is not None:
            raise ClaimError("DeviceInUse", conflict.message(claim_key(ref.namespace, ref.name)))

        reusable = self._mig_instances(known)
        await self._destroy_mig([m for k, m in reusable.items()
                                 if k not in {_device_key(d) for d in wanted}])
        for d in wanted:
            d.mig = reusable.get(_device_key(d))
        record = PreparedClaim(uid=ref.uid, namespace=ref.namespace, name=ref.name,
                               state="PrepareStarted", boot_id=self._boot_id, devices=wanted)
        self._checkpoint.claims[ref.uid] = record
        self._save()
        for a, d in zip(allocated, record.devices, strict=True):
            if d.mig is None and self._device_type(a) == "mig":
                if d.admin_access:
                    raise ClaimError("AdminAccess", f"device {a.result.device} of claim "
                                     f"{claim_key(ref.namespace, ref.name)} is a MIG "
                                     "placement: admin access to it is not supported (its "
                                     "instance belongs to the claim that uses it)")
                d.mig = await self._create_mig(a, devices)
                self._save()
        edits = self._edits(ref, allocated, record.devices, configs)
        missing = [problem for e in edits for n in e.device_nodes or []
                   if (problem := cdi.host_node_problem(n))]
        if missing:
            raise ClaimError("DeviceNodeMissing", f"claim {claim_key(ref.namespace, ref.name)}: "
                             f"{'; '.join(missing)} (the container runtime would refuse the "
                             "container)")
        try:
            cdi.write_spec(path, claim_spec(self._driver, record, edits))
        except (OSError, ValueError) as err:
            raise ClaimError("CDIWrite", f"writing CDI spec {path}: {err}") from err
        self._write_metadata(claim, ref, allocated, record.devices)
        await self._apply_status(ref, record.devices)
        record.state = "PrepareCompleted"
        record.prepared_at = _now()
        self._save()
        log.info("claim prepared", claim=claim_key(ref.namespace, ref.name), uid=ref.uid,
                 devices=[d.device_name for d in record.devices])
        return record.devices, True

    def _write_metadata(self, claim: ResourceClaim, ref: ClaimRef,
                        allocated: list[AllocatedDevice], devices: list[PreparedDevice]) -> None:
        """Write each request's device metadata file and CDI spec and add the spec's CDI ID to
        the first device of the request, as upstream's helper does."""
        pod_claim = (claim.metadata.annotations or {}).get(metadata.POD_CLAIM_NAME_ANNOTATION)
        target = metadata.MetadataClaim(ref.namespace, ref.name, ref.uid, pod_claim)
        try:
            ids = metadata.write_claim_metadata(
                self._driver, self._paths.data_dir, self._paths.cdi_dir, target,
                [metadata.MetadataDevice(a.result.request, a.result.pool, a.device)
                 for a in allocated])
        except (OSError, ValueError) as err:
            raise ClaimError("MetadataWrite", f"writing device metadata of claim "
                             f"{claim_key(ref.namespace, ref.name)}: {err}") from err
        for d in devices:
            cdi_id = ids.pop(d.request_names[0], None)
            if cdi_id is not None:
                d.cdi_device_ids = [*d.cdi_device_ids, cdi_id]

    def _mig_instances(self, known: PreparedClaim | None
                       ) -> dict[tuple[str, str, str | None], MigInstance]:
        """MIG instances a claim's record holds from this boot (older ones are gone)."""
        if known is None or known.boot_id != self._boot_id:
            return {}
        return {_device_key(d): d.mig for d in known.devices if d.mig is not None}

    def _device_type(self, a: AllocatedDevice) -> DeviceType:
        try:
            return device_type(a.device, self._driver)
        except DeviceError as err:
            raise ClaimError("InvalidDevice", str(err)) from None

    async def _create_mig(self, a: AllocatedDevice,
                          devices: Mapping[str, InventoryDevice]) -> MigInstance:
        if self._mig is None:
            raise ClaimError("MIG", f"device {a.result.device} is a MIG placement, but this "
                             "agent has no MIG partitioner (no NVIDIA driver?)")
        try:
            placement = mig_placement(a.device, self._driver, devices)
            return await asyncio.to_thread(self._mig.create, placement)
        except DeviceError as err:
            raise ClaimError("InvalidDevice", str(err)) from None
        except MigError as err:
            raise ClaimError("MIG", f"device {a.result.device}: {err}") from None

    async def _destroy_mig(self, instances: list[MigInstance]) -> None:
        for instance in instances:
            if self._mig is None:
                raise ClaimError("MIG", f"cannot destroy MIG device {instance.uuid}: "
                                 "this agent has no MIG partitioner")
            try:
                await asyncio.to_thread(self._mig.destroy, instance)
            except MigError as err:
                raise ClaimError("MIG", str(err)) from None

    def _edits(self, ref: ClaimRef, allocated: list[AllocatedDevice],
               devices: list[PreparedDevice],
               configs: list[DriverConfig]) -> list[cdi.ContainerEdits]:
        resolved, merged = [], []
        try:
            for a, d in zip(allocated, devices, strict=True):
                r = resolve_device(a.device, self._driver, a.result.request, d.mig)
                resolved.append(r)
                merged.append(effective_config(configs, a.result.request, r.type, r.name))
        except DeviceError as err:
            raise ClaimError("InvalidDevice", str(err)) from None
        except ConfigError as err:
            raise ClaimError("InvalidConfig", f"claim {claim_key(ref.namespace, ref.name)}: "
                             f"{err}") from None
        return container_edits(resolved, merged, self._paths.device_root)

    async def _apply_status(self, ref: ClaimRef, devices: list[PreparedDevice]) -> None:
        """Apply our ``status.devices`` entries of the claim: ``Prepared`` for each device, or
        none at all when ``devices`` is empty."""
        now = _now()
        entries = [AllocatedDeviceStatus(
            driver=self._driver, pool=d.pool_name, device=d.device_name, share_id=d.share_id,
            conditions=[Condition(
                type=PREPARED_CONDITION, status="True", reason=PREPARED_REASON,
                message=f"prepared on node {self._node} as CDI device {d.cdi_device_ids[0]}",
                last_transition_time=now)])
            for d in devices]
        try:
            await kube.apply_claim_device_status(
                self._api, ref.namespace, ref.name, [e.to_api() for e in entries],
                AGENT_FIELD_MANAGER)
        except ApiException as err:
            if kube.refuses_claim_status_writes(err):
                self._metrics.status_writes_skipped.inc()
                log.warning("the API server refuses status writes to this claim: its opaque "
                            "config is not canonical JSON (see docs/node-plugin.md); "
                            "status.devices left unchanged",
                            claim=claim_key(ref.namespace, ref.name), uid=ref.uid)
                return
            raise ClaimError("StatusWrite", f"writing status.devices of claim "
                             f"{claim_key(ref.namespace, ref.name)}: "
                             f"{kube.api_error_message(err)}") from None

    # --- unprepare --------------------------------------------------------------------------

    async def _unprepare_claim(self, ref: ClaimRef) -> bool:
        """Unprepare one claim; returns whether there was anything to undo."""
        known = self._checkpoint.claims.get(ref.uid)
        path = spec_path(self._paths.cdi_dir, self._driver, ref.uid)
        if known is None and not path.exists():
            return False
        await self._withdraw_status(ref)
        await self._destroy_mig(list(self._mig_instances(known).values()))
        metadata.remove_claim_metadata(self._driver, self._paths.data_dir, self._paths.cdi_dir,
                                       ref.namespace, ref.name, ref.uid)
        cdi.remove_spec(path)
        self._checkpoint.claims.pop(ref.uid, None)
        self._save()
        log.info("claim unprepared", claim=claim_key(ref.namespace, ref.name), uid=ref.uid)
        return True

    async def _withdraw_status(self, ref: ClaimRef) -> None:
        """Remove our status entries, unless the claim is gone, is another object now, or has
        no entries of our driver (nothing to write then)."""
        claim = await self._fetch(ref)
        if isinstance(claim, ClaimError):
            if claim.reason == "NotFound":
                return
            raise claim
        ours = [d for d in claim.status.devices or [] if d.driver == self._driver]
        if claim.metadata.uid == ref.uid and ours:
            await self._apply_status(ref, [])

    # --- shared -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _serialized(self) -> AsyncIterator[None]:
        """Hold the in-process lock and the ``flock`` on ``serialize.lock``, then (re)load the
        checkpoint: during a rolling update another agent instance may have changed it."""
        async with self._lock:
            fd = os.open(self._paths.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
            locking = asyncio.ensure_future(asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX))
            try:
                await asyncio.shield(locking)
            except BaseException:
                locking.add_done_callback(lambda _: os.close(fd))
                raise
            try:
                self._load()
                yield
            finally:
                os.close(fd)  # closing releases the flock

    def _load(self) -> None:
        """Read the checkpoint; one that cannot be used is reported (log, metric,
        ``checkpoint_problem``), set aside and rebuilt from the CDI specs on disk."""
        try:
            self._checkpoint = load_checkpoint(self._checkpoint_path)
        except CheckpointError as err:
            self.checkpoint_problem = str(err)
            self._metrics.checkpoint_errors.inc()
            log.error("checkpoint unusable, rebuilding it from CDI specs", error=str(err))
            self._checkpoint = self._rebuild_from_specs()
            self._replace_bad_checkpoint()

    def _rebuild_from_specs(self) -> CheckpointData:
        """A checkpoint recovered from this driver's specs in the CDI directory."""
        rebuilt = CheckpointData()
        pattern = spec_path(self._paths.cdi_dir, self._driver, "*").name
        for path in sorted(self._paths.cdi_dir.glob(pattern)):
            try:
                spec = cdi.read_spec(path)
                if spec.kind != cdi_kind(self._driver):
                    continue
                claim = prepared_claim_from_spec(self._driver, spec, self._boot_id)
            except (OSError, ValueError, KeyError) as err:
                log.error("cannot recover a claim from CDI spec", path=str(path), error=str(err))
                continue
            rebuilt.claims[claim.uid] = claim
        return rebuilt

    def _replace_bad_checkpoint(self) -> None:
        """Move the unusable file aside (``checkpoint.json.bad``, for diagnosis) and write the
        rebuilt one. If even that fails the plugin runs on: claims then fail with reason
        ``Internal`` until the disk is writable again."""
        path = self._checkpoint_path
        try:
            bad = path.with_name(path.name + ".bad")
            if bad.is_dir() and not bad.is_symlink():
                shutil.rmtree(bad)
            if path.exists() or path.is_symlink():
                os.replace(path, bad)
            save_checkpoint(path, self._checkpoint)
        except OSError as err:
            self.checkpoint_problem = f"{self.checkpoint_problem}; cannot rewrite it: {err}"
            log.error("cannot rewrite the checkpoint", error=str(err))

    def _save(self) -> None:
        try:
            save_checkpoint(self._checkpoint_path, self._checkpoint)
        except OSError as err:
            raise ClaimError("Internal", f"writing checkpoint {self._checkpoint_path}: {err}"
                             ) from err

    def _answered(self, operation: str, result: str, started: float) -> None:
        """Count a claim's answer and the time since its call ``started``
        (``time.monotonic()`` seconds)."""
        self._metrics.claims.labels(operation, result).inc()
        self._metrics.claim_duration.labels(operation, result).observe(
            time.monotonic() - started)

    def _failed(self, operation: str, ref: ClaimRef, err: Exception, started: float) -> str:
        """Count and log a claim's failure (its call ``started`` at that
        ``time.monotonic()``); the message for the kubelet."""
        if isinstance(err, ClaimError):
            reason, message = err.reason, str(err)
        elif isinstance(err, ValidationError):
            reason, message = "Internal", f"claim {claim_key(ref.namespace, ref.name)}: {err}"
        else:
            reason = "Internal"
            message = f"claim {claim_key(ref.namespace, ref.name)}: {type(err).__name__}: {err}"
            log.exception("unexpected failure", operation=operation, uid=ref.uid)
        self._answered(operation, "error", started)
        self._metrics.claim_errors.labels(operation, reason).inc()
        log.warning(f"{operation} failed", claim=claim_key(ref.namespace, ref.name),
                    uid=ref.uid, reason=reason, error=message)
        return message

    def _update_gauge(self) -> None:
        self._metrics.prepared_claims.set(sum(
            1 for c in self._checkpoint.claims.values() if c.state == "PrepareCompleted"))
