"""ResourceSlices as the operator keeps them: a :class:`~kubedra.controller.listwatch.ListWatch`
of compact typed records, decoded by msgspec straight from the bytes of each event or page,
and the indexes the reconcilers look them up by.

A record (:class:`SliceRecord`) holds the metadata decisions read (name, UID,
resourceVersion, generation, labels, owner references) and the spec as the API server wrote
it, with the attribute, capacity and counter values of its devices shared across every slice
(:class:`~kubedra.controller.compact.Compactor`); ``managedFields``, annotations and the rest
of the metadata are never turned into objects (the decoder has no field for them:
``bench/decode.py``, a typed record 10 to 35x cheaper than the standard library's ``json``).
The spec stays whole because the publisher compares it with the desired one and explanations
allocate from it.

Slices of every driver are cached (explanations read them all); those labelled
:data:`~kubedra.publishing.sync.MANAGED_BY` are the operator's, indexed by the inventory they
are labelled with (:data:`~kubedra.publishing.sync.INVENTORY_LABEL`) and by pool. The label
selector of the pools this process owns (``Settings.pool_selector``) is applied by the API
server, so another process's slices are never seen, never taken for slices of a deleted
inventory, and never deleted (:mod:`kubedra.api.selector`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from kubedra.controller.compact import Compactor
from kubedra.controller.listwatch import ListPage, ListWatch, WatchEvent
from kubedra.kube import INITIAL_EVENTS_END
from kubedra.publishing.sync import INVENTORY_LABEL, MANAGED_BY

SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


class SliceMeta(msgspec.Struct, frozen=True, gc=False):
    """What decisions read of a slice's ``metadata``."""

    name: str = ""
    uid: str = ""
    resourceVersion: str = ""
    generation: int = 0
    labels: dict[str, str] = {}
    ownerReferences: list[dict[str, Any]] = []


class SliceRecord(msgspec.Struct, frozen=True, gc=False):
    """A ResourceSlice as cached: :class:`SliceMeta` and the spec (devices compacted)."""

    metadata: SliceMeta
    spec: dict[str, Any] = {}

    def as_api(self) -> dict[str, Any]:
        """The slice as a plain dict in the API's shape (``metadata`` holding only the
        fields of :class:`SliceMeta`; ``spec`` shared with the record: never change it)."""
        meta = self.metadata
        return {"metadata": {"name": meta.name, "uid": meta.uid,
                             "resourceVersion": meta.resourceVersion,
                             "generation": meta.generation, "labels": meta.labels,
                             "ownerReferences": meta.ownerReferences},
                "spec": self.spec}

    def ours(self) -> bool:
        """Whether the operator published it (labelled :data:`MANAGED_BY`)."""
        labels = self.metadata.labels
        return all(labels.get(k) == v for k, v in MANAGED_BY.items())

    def inventory(self) -> str | None:
        """The inventory an operator's slice is labelled with (None for another's)."""
        return self.metadata.labels.get(INVENTORY_LABEL) if self.ours() else None

    def pool(self) -> tuple[str, str]:
        """(driver, pool name)."""
        pool = self.spec.get("pool") or {}
        return (str(self.spec.get("driver", "")), str(pool.get("name", "")))


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _BookmarkMeta(msgspec.Struct):
    resourceVersion: str = ""
    annotations: dict[str, str] = {}


class _Bookmark(msgspec.Struct):
    metadata: _BookmarkMeta = msgspec.field(default_factory=_BookmarkMeta)


class _Status(msgspec.Struct):
    code: int = 0
    message: str = ""


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_token: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[SliceRecord] = []


class SliceDecoder:
    """A :class:`~kubedra.controller.listwatch.Decoder` of ResourceSlices into
    :class:`SliceRecord` s; equal device values (and owner references) are shared across
    every record it makes."""

    def __init__(self) -> None:
        self._events = msgspec.json.Decoder(_Event)
        self._records = msgspec.json.Decoder(SliceRecord)
        self._bookmarks = msgspec.json.Decoder(_Bookmark)
        self._statuses = msgspec.json.Decoder(_Status)
        self._lists = msgspec.json.Decoder(_List)
        self._compactor = Compactor()
        self._owners: dict[str, list[dict[str, Any]]] = {}

    def event(self, line: bytes) -> WatchEvent[SliceRecord]:
        """See :class:`~kubedra.controller.listwatch.Decoder`."""
        event = self._events.decode(line)
        if event.type == "ERROR":
            status = self._statuses.decode(event.object)
            return WatchEvent("ERROR", code=status.code, message=status.message)
        if event.type == "BOOKMARK":
            meta = self._bookmarks.decode(event.object).metadata
            return WatchEvent("BOOKMARK", resource_version=meta.resourceVersion,
                              ends_initial_events=meta.annotations.get(INITIAL_EVENTS_END)
                              == "true")
        record = self._compact(self._records.decode(event.object))
        return WatchEvent(event.type, record.metadata.name, record.metadata.resourceVersion,
                          record)

    def page(self, body: bytes) -> ListPage[SliceRecord]:
        """See :class:`~kubedra.controller.listwatch.Decoder`."""
        listed = self._lists.decode(body)
        items: list[tuple[str, SliceRecord | None]] = []
        for record in listed.items:
            record = self._compact(record)
            items.append((record.metadata.name, record))
        return ListPage(items, listed.metadata.continue_token, listed.metadata.resourceVersion)

    def _compact(self, record: SliceRecord) -> SliceRecord:
        meta = record.metadata
        owners = meta.ownerReferences
        if owners:
            owners = self._owners.setdefault(msgspec.json.encode(owners).decode(), owners)
        labels = {sys.intern(k): sys.intern(v) if k != INVENTORY_LABEL else v
                  for k, v in meta.labels.items()}
        return SliceRecord(
            metadata=msgspec.structs.replace(meta, labels=labels, ownerReferences=owners),
            spec=self._compactor.holder(record.spec, "devices", "sharedCounters"))


class _Sets(Mapping[Any, tuple[str, ...]]):
    """A kopf-index-like view of ``key → set of names`` (sorted tuples)."""

    def __init__(self, sets: dict[Any, set[str]]) -> None:
        self._sets = sets

    def __getitem__(self, key: Any) -> tuple[str, ...]:
        return tuple(sorted(self._sets[key]))

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._sets))

    def __len__(self) -> int:
        return len(self._sets)


class _Bodies(Mapping[str, tuple[dict[str, Any], ...]]):
    """A kopf-index-like view of the cache: slice name → a one-body tuple."""

    def __init__(self, records: Callable[[], dict[str, SliceRecord]]) -> None:
        self._records = records

    def __getitem__(self, name: str) -> tuple[dict[str, Any], ...]:
        return (self._records()[name].as_api(),)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._records()))

    def __len__(self) -> int:
        return len(self._records())


class SliceCache:
    """The slice cache and its indexes: ``by_inventory`` (inventory name → names of the
    operator's slices labelled with it), ``by_pool`` ((driver, pool) → the inventory names
    those slices are labelled with), ``all`` (every slice, by name, as plain dicts).

    ``on_change(record before or None, record after or None, resourceVersion)`` is called
    after the indexes took in a change (the resourceVersion of a delete is the delete's).
    """

    def __init__(self, api: Any, on_change: Callable[[SliceRecord | None, SliceRecord | None,
                                                      str], None], *,
                 selector: str | None = None, page_size: int = 500) -> None:
        self.watch: ListWatch[SliceRecord] = ListWatch(api, SLICES_PATH, SliceDecoder(),
                                                       self._changed, selector=selector,
                                                       page_size=page_size)
        self._on_change = on_change
        self._by_inventory: dict[str, set[str]] = {}
        self._by_pool: dict[tuple[str, str], dict[str, set[str]]] = {}
        self.by_inventory: Mapping[str, tuple[str, ...]] = _Sets(self._by_inventory)
        self.by_pool: Mapping[tuple[str, str], tuple[str, ...]] = _PoolSets(self._by_pool)
        self.all: Mapping[str, tuple[dict[str, Any], ...]] = _Bodies(lambda: self.watch.records)

    def _changed(self, name: str, before: SliceRecord | None, after: SliceRecord | None) -> None:
        if before is not None:
            self._drop(name, before)
        if after is not None:
            self._add(name, after)
        self._on_change(before, after, self.watch.version)

    def _add(self, name: str, record: SliceRecord) -> None:
        owner = record.inventory()
        if owner:
            self._by_inventory.setdefault(owner, set()).add(name)
            self._by_pool.setdefault(record.pool(), {}).setdefault(owner, set()).add(name)

    def _drop(self, name: str, record: SliceRecord) -> None:
        owner = record.inventory()
        if not owner:
            return
        names = self._by_inventory.get(owner)
        if names is not None:
            names.discard(name)
            if not names:
                del self._by_inventory[owner]
        pool = self._by_pool.get(record.pool())
        if pool is not None and owner in pool:
            pool[owner].discard(name)
            if not pool[owner]:
                del pool[owner]
            if not pool:
                del self._by_pool[record.pool()]


class _PoolSets(Mapping[tuple[str, str], tuple[str, ...]]):
    """``(driver, pool) → inventory names`` over ``pool → inventory → slice names``."""

    def __init__(self, pools: dict[tuple[str, str], dict[str, set[str]]]) -> None:
        self._pools = pools

    def __getitem__(self, key: tuple[str, str]) -> tuple[str, ...]:
        return tuple(sorted(self._pools[key]))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(list(self._pools))

    def __len__(self) -> int:
        return len(self._pools)
