"""Where explain and simulate read the cluster from: the API server, or a dump of it.

Both give :class:`ClusterObjects`, the objects as the API server returns them (plain dicts), so
an explanation from a dump is the one the live cluster gives. A dump is what ``kubectl get
resourceslices,deviceclasses,devicetaintrules,resourceclaims,nodes,pods -A -o yaml`` writes
(one ``List``, or single objects, YAML or JSON, in one file or many, or in a directory), or
what ``kubedra dump`` writes: the same kinds, with only the fields explain reads (a pod's
containers, and anything in them, never leave the cluster; Secrets are never read), and the
API server's version, so that explain decides as that cluster's scheduler.

A live cluster is read through kubectl (:mod:`kubedra.explain.kubectl`), which prints the API
server's lists as JSON; those objects are then read as a dump's are.
"""

from __future__ import annotations

import queue
import sys
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from kubedra.explain.kubectl import METADATA_LIST, KubectlProxy

if TYPE_CHECKING:  # imported where used: reading starts before the allocator is imported
    from kubedra.allocation import AllocatorFeatures
    from kubedra.api.resource import ResourceClaim, ResourceSlice
    from kubedra.explain.snapshot import ClusterSnapshot, PodPlacement

DUMP_KINDS = {"ResourceSlice": "resource.k8s.io/v1", "DeviceClass": "resource.k8s.io/v1",
              "DeviceTaintRule": "resource.k8s.io/v1", "ResourceClaim": "resource.k8s.io/v1",
              "Node": "v1", "Pod": "v1"}
"""The kinds explain reads, with the API version a dump writes them in."""

_LIST_PATHS = {"ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
               "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
               "DeviceTaintRule": "/apis/resource.k8s.io/v1/devicetaintrules",
               "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims"}
"""Where the API server lists each kind but Node and Pod, of all namespaces, in the field
order of :class:`ClusterObjects`."""

SLICE_PAGE = 250
"""ResourceSlices per page of the live list (:class:`ClusterReading`)."""

_NODES_PATH = "/api/v1/nodes"
"""Nodes, listed as metadata only (:data:`~kubedra.explain.kubectl.METADATA_LIST`): explain
reads a Node's name and labels, nothing of its status (2 KB of a kwok Node's 2.5; the
bulk of a real one's: images, conditions, addresses)."""

_JSON = msgspec.json.Decoder()
"""Decodes a JSON dump into plain dicts and lists: the fastest of ``json``, ``orjson`` and
``msgspec`` on the 2,000-node dump, and the smallest result (``bench/decode.py --fleet``)."""

SERVER_VERSION = "serverVersion"
"""The key of a dump's ``List`` that records the API server's ``gitVersion``."""

DUMP_SUFFIXES = (".yaml", ".yml", ".json")
"""Files of a dump directory that are read (in name order); others are skipped."""


class DumpError(ValueError):
    """A dump cannot be read: a missing path, a file that is not YAML/JSON, an object without
    ``kind``. The message names the file."""


@dataclass
class ClusterObjects:
    """The objects explain reads, by kind, as the API server returns them."""

    slices: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    taint_rules: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    server_version: str = ""
    """The API server's ``gitVersion`` (``v1.36.3``); "" when a dump does not record it."""
    recorded_versions: list[tuple[str, Path]] = field(default_factory=list)
    """Read from dumps: each ``gitVersion`` a file records, with the file, in reading order
    (several files may come from clusters of different versions: :meth:`versions_text`)."""
    parsed_slices: list[ResourceSlice] | None = None
    """The slices as models, parsed while the live list came
    (:meth:`ClusterReading.objects`), in the order of :attr:`slices`; ``None`` when they were
    not (a dump), or when one does not parse (:meth:`snapshot` then parses them all, and
    names it)."""

    def versions_text(self) -> str:
        """The versions the dumps record, each with its files (``v1.35.4 (a.json), v1.37.2
        (b.json)``)."""
        files: dict[str, list[str]] = {}
        for version, source in self.recorded_versions:
            files.setdefault(version, []).append(str(source))
        return ", ".join(f"{v} ({', '.join(f)})" for v, f in files.items())

    def mixed_minors(self) -> bool:
        """Whether the dumps record more than one Kubernetes minor (patches of one minor
        decide alike: :class:`kubedra.allocation.KubeVersion`)."""
        return len({".".join(v.removeprefix("v").split(".")[:2])
                    for v, _ in self.recorded_versions}) > 1

    def by_kind(self) -> dict[str, list[dict[str, Any]]]:
        """The lists keyed by kind (the keys of :data:`DUMP_KINDS`)."""
        return {"ResourceSlice": self.slices, "DeviceClass": self.classes,
                "DeviceTaintRule": self.taint_rules, "ResourceClaim": self.claims,
                "Node": self.nodes, "Pod": self.pods}

    def snapshot(self, features: AllocatorFeatures | None = None) -> ClusterSnapshot:
        """The allocator's view of these objects, deciding with ``features`` (those of the
        cluster's scheduler: :func:`kubedra.allocation.features_of_server`; default:
        :data:`~kubedra.allocation.DEFAULT_FEATURES`).

        Raises:
            kubedra.explain.snapshot.ObjectError: an object does not parse (named, with each
                field).
        """
        from kubedra.allocation import DEFAULT_FEATURES
        from kubedra.explain.snapshot import ClusterSnapshot

        features = DEFAULT_FEATURES if features is None else features
        return ClusterSnapshot.from_api(self.slices, self.classes, self.taint_rules,
                                        self.claims, self.nodes, features,
                                        parsed_slices=self.parsed_slices)

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        """ResourceClaim ``namespace/name``, or None.

        Raises:
            kubedra.explain.snapshot.ObjectError: it does not parse.
        """
        from kubedra.api.resource import ResourceClaim
        from kubedra.explain.snapshot import parsed

        for claim in self.claims:
            meta = claim.get("metadata") or {}
            if meta.get("namespace") == namespace and meta.get("name") == name:
                return parsed("ResourceClaim", ResourceClaim.from_api, claim)
        return None


def pods_using(claim: ResourceClaim, pods: Iterable[Mapping[str, Any]]) -> list[PodPlacement]:
    """The pods of the claim's namespace that use it (in ``reservedFor`` or referencing it),
    by name."""
    from kubedra.explain.snapshot import PodPlacement

    namespace, name = claim.metadata.namespace or "", claim.metadata.name or ""
    reserved = {r.uid for r in claim.status.reserved_for or () if r.resource == "pods"}
    found = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") != namespace:
            continue
        placement = PodPlacement.from_api(pod)
        if name in placement.claims or meta.get("uid") in reserved:
            found.append(placement)
    return sorted(found, key=lambda p: p.name)


def read_cluster(proxy: KubectlProxy, pods_namespace: str | None, *, with_pods: bool = True
                 ) -> ClusterObjects:
    """Read every object explain needs (:class:`ClusterReading`), and wait for them.

    Raises:
        KubectlError: kubectl is missing, or a list failed.
    """
    return ClusterReading(proxy, pods_namespace, with_pods=with_pods).objects()


class ClusterReading:
    """Reading every object explain needs from the live cluster, started at once: one list
    per kind, through kubectl's proxy, in two threads that wait on their sockets most of the
    time. One lists the ResourceSlices, :data:`SLICE_PAGE` a page (:meth:`KubectlProxy.pages`),
    and hands each page over as it comes (:meth:`slice_pages`), so that the caller parses a
    page while the API server makes the next; the other lists every other kind, then the
    server's version (``/version``). Pods only of ``pods_namespace`` (``None``: of all
    namespaces), and none unless ``with_pods``. A kind the API server does not serve
    (DeviceTaintRule before 1.37) has no objects.

    Nodes are listed as metadata only (their name and labels are what explain reads); a Node
    of :attr:`ClusterObjects.nodes` then has ``kind`` ``PartialObjectMetadata`` and no spec
    or status.

    Needs ``list`` on resourceslices, deviceclasses, devicetaintrules, resourceclaims (all
    namespaces), nodes and pods.
    """

    def __init__(self, proxy: KubectlProxy, pods_namespace: str | None, *,
                 with_pods: bool = True) -> None:
        self._pages: queue.SimpleQueue[list[dict[str, Any]] | None] = queue.SimpleQueue()
        self._slices: list[dict[str, Any]] = []
        self._slices_read = False
        paths = [_LIST_PATHS[k] for k in ("DeviceClass", "DeviceTaintRule", "ResourceClaim")]
        if with_pods:
            paths.append(f"/api/v1/namespaces/{pods_namespace}/pods" if pods_namespace
                         else "/api/v1/pods")
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kubectl-dra-read")
        self._slice_list = pool.submit(self._list_slices, proxy)
        self._other_lists = pool.submit(_other_lists, proxy, paths)
        pool.shutdown(wait=False)  # the threads end with their lists

    def _list_slices(self, proxy: KubectlProxy) -> None:
        try:
            for page in proxy.pages(_LIST_PATHS["ResourceSlice"], SLICE_PAGE):
                self._pages.put(page)
        finally:
            self._pages.put(None)  # the last page (a failure is the future's)

    def slice_pages(self) -> Iterator[list[dict[str, Any]]]:
        """Each page of ResourceSlices, in the API server's order, as it comes; once (a
        second call, or :meth:`objects` after this, gives no page again).

        Raises:
            KubectlError: the slice list failed.
        """
        while not self._slices_read:
            page = self._pages.get()
            if page is None:
                self._slices_read = True
                self._slice_list.result()  # raises the list's failure
                return
            self._slices.extend(page)
            yield page

    def objects(self, *, parse_slices: bool = False) -> ClusterObjects:
        """Every object read, once every list is (the slices' failure first, then the
        others', in the order :func:`_other_lists` asks). With ``parse_slices``, each page of
        slices not yet handed over is parsed as it comes, with one
        :class:`~kubedra.api.slice_decoding.SliceDecoder`, into
        :attr:`ClusterObjects.parsed_slices` (unless a slice does not parse: the snapshot
        names it, as from a dump).

        Raises:
            KubectlError: a list failed.
        """
        models: list[ResourceSlice] | None = None
        if parse_slices:
            from kubedra.api.slice_decoding import SliceDecoder
            from kubedra.explain.snapshot import ObjectError, parsed

            decoder, models = SliceDecoder(), []
        for page in self.slice_pages():
            if models is not None:
                try:
                    models += [parsed("ResourceSlice", decoder.decode, s) for s in page]
                except ObjectError:
                    models = None
        found, version, nodes = self._other_lists.result()
        objects = ClusterObjects(server_version=(version or {}).get("gitVersion") or "")
        objects.slices.extend(self._slices)
        lists = objects.by_kind()
        for kind, listed in zip(["DeviceClass", "DeviceTaintRule", "ResourceClaim", "Pod"],
                                found, strict=False):
            lists[kind].extend((listed or {}).get("items") or [])
        objects.nodes.extend((nodes or {}).get("items") or [])
        if models is not None and len(models) == len(objects.slices):
            objects.parsed_slices = models
        return objects


def _other_lists(proxy: KubectlProxy, paths: list[str]) -> tuple[list[Any], Any, Any]:
    """The lists at ``paths``, the server's version and the Nodes as metadata."""
    *found, version = proxy.get([*paths, "/version"])
    (nodes,) = proxy.get([_NODES_PATH], accept=METADATA_LIST)
    return found, version, nodes


# --- dumps ---------------------------------------------------------------------------------------

def _dump_files(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in DUMP_SUFFIXES)
        if not found:
            raise DumpError(f"{path}: a directory without {', '.join(DUMP_SUFFIXES[:-1])} or "
                            f"{DUMP_SUFFIXES[-1]} files (a dump is one of those, or a directory "
                            "of them)")
        return found
    if path.is_file():
        return [path]
    raise DumpError(f"{path}: no such file or directory")


def _objects(document: Any, source: Path) -> Iterator[dict[str, Any]]:
    """The objects of one YAML document: a ``List`` is unpacked, and so is an API list
    (``ResourceSliceList``), whose items carry no kind of their own."""
    if document is None:
        return
    if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
        raise DumpError(f"{source}: not a Kubernetes object or list (no kind)")
    kind = document["kind"]
    if kind.endswith("List") and isinstance(document.get("items"), list):
        item_kind = kind.removesuffix("List")
        for item in document["items"]:
            if item_kind and isinstance(item, dict) and "kind" not in item:
                item = {"kind": item_kind, **item}
            yield from _objects(item, source)
        return
    yield document


def _identity(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """What makes two dumped objects the same object: kind, namespace and name (an object's
    uid identifies it too, but kubedra's dump keeps no uid of a node); an object without a
    name is its own."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        return ("", str(meta.get("uid") or id(obj)))
    return (obj["kind"], meta.get("namespace") or "", name)


def _documents(source: Path) -> list[Any]:
    """The documents of a file: JSON (a subset of YAML, as ``kubectl get -o json`` and
    ``kubedra dump`` write it) through the JSON decoder, twenty times faster than YAML's
    on a 13 MB dump (with Python's garbage collector off; sixty with it on); else YAML,
    with libyaml's safe loader when PyYAML has it (three times faster than PyYAML's own on
    a large dump, bench/RESULTS.md round 6). PyYAML is imported only for a file that is
    not JSON: reading JSON dumps never imports it (bench/RESULTS.md "Cold start").

    Raises:
        DumpError: the file cannot be read, is not UTF-8, or is neither JSON nor YAML
            (:func:`unreadable`).
    """
    try:
        data = source.read_bytes()
    except OSError as err:
        raise DumpError(unreadable(source, err)) from None
    if data.lstrip()[:1] in (b"{", b"["):
        try:
            return [_JSON.decode(data)]
        except msgspec.DecodeError:
            pass
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return list(yaml.load_all(data.decode(), Loader=loader))
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise DumpError(unreadable(source, err)) from None


def unreadable(source: Path | str, err: Exception) -> str:
    """One line for a file that cannot be read as YAML: ``file:line:column: problem (while
    parsing … that starts at line:column)`` for a YAML syntax error (PyYAML's own message is
    four lines, the marks of a decoded dump naming ``<unicode string>``), ``file: not UTF-8
    text (byte 0xff at offset 6)``, else ``file: <the error>``."""
    yaml = sys.modules.get("yaml")  # a YAML error comes only after PyYAML was imported
    if (yaml is not None and isinstance(err, yaml.MarkedYAMLError)
            and err.problem_mark is not None):
        mark, context = err.problem_mark, ""
        at = err.context_mark
        if err.context and at is not None and (at.line, at.column) != (mark.line, mark.column):
            context = f" ({err.context} that starts at {at.line + 1}:{at.column + 1})"
        elif err.context:
            context = f" ({err.context})"
        return f"{source}:{mark.line + 1}:{mark.column + 1}: {err.problem}{context}"
    if isinstance(err, UnicodeDecodeError):
        return f"{source}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"
    return f"{source}: " + " ".join(str(err).split())


def read_dump(paths: Iterable[Path]) -> ClusterObjects:
    """The objects explain reads from files or directories of YAML/JSON (other kinds are
    skipped). Sources may overlap (a dump directory and a file holding some of the same
    objects): an object that appears more than once (same kind, namespace and name) counts
    once, and the one read last wins, in its first place. Each version a file records is
    kept (:attr:`ClusterObjects.recorded_versions`; ``server_version`` is the last).

    Raises:
        DumpError: a path does not exist, a directory has no such file, a file does not
            parse, an object has no kind, a ``serverVersion`` is not a string.
    """
    found: dict[tuple[str, ...], dict[str, Any]] = {}
    recorded: list[tuple[str, Path]] = []
    for path in paths:
        for source in _dump_files(path):
            for document in _documents(source):
                version = document.get(SERVER_VERSION) if isinstance(document, dict) else None
                if version is not None and not isinstance(version, str):
                    raise DumpError(f"{source}: {SERVER_VERSION} {version} is not a version "
                                    f'string: quote it ({SERVER_VERSION}: "v1.36.3")')
                if version:
                    recorded.append((version, source))
                for obj in _objects(document, source):
                    if obj["kind"] in DUMP_KINDS:
                        found[_identity(obj)] = obj
    objects = ClusterObjects(server_version=recorded[-1][0] if recorded else "",
                             recorded_versions=recorded)
    lists = objects.by_kind()
    for obj in found.values():
        lists[obj["kind"]].append(obj)
    return objects


def _trimmed(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with what explain reads of it, ``apiVersion`` and ``kind`` set."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    head = {"apiVersion": DUMP_KINDS[kind], "kind": kind}
    if kind == "Node":
        return {**head, "metadata": {k: meta[k] for k in ("name", "labels") if k in meta}}
    if kind == "Pod":
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        affinity = (spec.get("affinity") or {}).get("nodeAffinity")
        kept_spec = {k: spec[k] for k in ("nodeName", "nodeSelector", "resourceClaims")
                     if k in spec}
        if affinity:
            kept_spec["affinity"] = {"nodeAffinity": affinity}
        kept_status = {k: status[k] for k in ("resourceClaimStatuses",) if k in status}
        return {**head, "metadata": {k: meta[k] for k in ("name", "namespace", "uid")
                                     if k in meta},
                "spec": kept_spec, "status": kept_status}
    return {**head, **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")},
            "metadata": meta}


def dump_text(objects: ClusterObjects) -> str:
    """:func:`dump_document` as JSON, two spaces an indent, as ``--from`` reads it fastest
    (JSON is YAML too: any YAML reader reads it)."""
    encoded = msgspec.json.format(msgspec.json.encode(dump_document(objects)), indent=2)
    return encoded.decode() + "\n"


def dump_document(objects: ClusterObjects) -> dict[str, Any]:
    """A ``List`` of every object, trimmed to what explain reads (as ``kubedra dump`` writes),
    and the API server's version (``serverVersion``, which ``--from`` decides by).

    Pods keep their name, namespace, uid, node name, node selector, node affinity and claims;
    nodes their name and labels; the DRA objects everything but ``managedFields``.
    """
    items = [_trimmed(kind, obj) for kind, found in objects.by_kind().items() for obj in found]
    return {"apiVersion": "v1", "kind": "List", SERVER_VERSION: objects.server_version,
            "items": items}
