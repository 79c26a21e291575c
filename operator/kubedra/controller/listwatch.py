"""A lean cache of one kind: the operator's own list-then-watch loop, in the manner of
client-go's reflector with a transform (``tools/cache/reflector.go``, ``SetTransform``), for
kinds the operator only needs to know about (Nodes, ResourceSlices), so that their events never
enter kopf's per-object machinery.

Each object is turned by a :class:`Decoder` into a small record of what decisions read (for a
Node: name, UID, labels; never managedFields or status) as it arrives, straight from the bytes
of its event or page, and only the records are kept: nothing raw outlives its page or event.
A record equal to the one cached is dropped at once, so an event that changes nothing a
decision reads (a Node's heartbeat) costs its decode and one comparison: no callback, no new
cached object.

Listing: the streaming list (KEP-3157: ``sendInitialEvents=true``,
``resourceVersionMatch=NotOlderThan``; beta and on by default in v1.34 to v1.37), every object an
event decoded alone; where the server refuses it or sends no ``k8s.io/initial-events-end``
bookmark, pages of ``page_size`` objects. A (re)list replaces the cache: keys that are gone are
reported deleted. Then watch from the last resourceVersion seen (bookmarks keep it current);
a stream the server closes is watched again from there, and on 410 Gone (that resourceVersion
was compacted away) the loop lists once again. Other errors back off and list again.

``selector``: a label selector the server applies (the set of objects this process owns,
e.g. the pools of one shard).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kubernetes_asyncio.client import ApiClient, ApiException

from kubedra import kube
from kubedra.logging import get_logger

log = get_logger(__name__)

R = TypeVar("R")

WATCH_TIMEOUT_S = 300
"""Seconds the server keeps one watch open before closing it (then watched again)."""
INITIAL_EVENTS_TIMEOUT_S = 60.0
"""Seconds to wait for a streaming list's end bookmark before falling back to pages."""
BACKOFF_S = 1.0


class Gone(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass(frozen=True)
class WatchEvent(Generic[R]):
    """One watch event as a :class:`Decoder` reads it: ``type`` (``ADDED``, ``MODIFIED``,
    ``DELETED``, ``BOOKMARK``, ``ERROR``), the object's name and resourceVersion, its
    record (None for a bookmark, an error, or an object the decoder leaves out), whether it
    is the bookmark that ends a streaming list's initial events, and an error's code and
    message."""

    type: str
    name: str = ""
    resource_version: str = ""
    record: R | None = None
    ends_initial_events: bool = False
    code: int = 0
    message: str = ""


@dataclass(frozen=True)
class ListPage(Generic[R]):
    """One page of a list: (name, record or None) per item, the ``continue`` token ("" on
    the last page) and the list's resourceVersion."""

    items: list[tuple[str, R | None]] = field(default_factory=list)
    continue_token: str = ""
    resource_version: str = ""


class Decoder(Protocol[R]):
    """Turns the bytes of a watch event or a list page into records."""

    def event(self, line: bytes) -> WatchEvent[R]:
        """One watch event (one line of the stream)."""
        ...

    def page(self, body: bytes) -> ListPage[R]:
        """One list page (a whole response body)."""
        ...


class JsonDecoder(Generic[R]):
    """A :class:`Decoder` by the standard library's ``json`` and a ``transform`` of each
    decoded object (raw object → record, or None to leave it out), for small objects whose
    events are rare enough (Nodes: 0.02 ms each, ``bench/decode.py``)."""

    def __init__(self, transform: Callable[[dict[str, Any]], R | None]) -> None:
        self.transform = transform

    def event(self, line: bytes) -> WatchEvent[R]:
        """See :class:`Decoder`."""
        raw = json.loads(line)
        kind, obj = str(raw.get("type") or ""), raw.get("object") or {}
        if kind == "ERROR":
            return WatchEvent(kind, code=int(obj.get("code") or 0),
                              message=str(obj.get("message", obj)))
        meta = obj.get("metadata") or {}
        ends = kind == "BOOKMARK" and kube.ends_initial_events(raw)
        return WatchEvent(kind, str(meta.get("name") or ""), str(meta.get("resourceVersion") or ""),
                          None if kind == "BOOKMARK" else self.transform(obj), ends)

    def page(self, body: bytes) -> ListPage[R]:
        """See :class:`Decoder`."""
        raw = json.loads(body)
        meta = raw.get("metadata") or {}
        return ListPage([(str(o["metadata"]["name"]), self.transform(o))
                         for o in raw.get("items") or ()],
                        str(meta.get("continue") or ""), str(meta.get("resourceVersion") or ""))


@dataclass
class Counters:
    """Events seen and changes reported since start (``/healthz``, tests)."""

    events: int = 0
    changes: int = 0
    lists: int = 0


class ListWatch(Generic[R]):
    """The cache of one kind: name → record, kept current by :meth:`run`.

    Args:
        api: the API client.
        path: the collection's path (``/api/v1/nodes``).
        decoder: event and page bytes → records (compared with ``==``).
        on_change: called with (name, old record or None, new record or None) when a record
            is added, changed or removed; never for an event that leaves the record equal.
            :attr:`version` is then the resourceVersion of the event (of a delete: the
            delete's) or of the list that reported it.
        selector: label selector applied by the server (None: every object).
        page_size: objects per list page where the server has no streaming list.
    """

    def __init__(self, api: ApiClient, path: str,
                 decoder: Decoder[R],
                 on_change: Callable[[str, R | None, R | None], None], *,
                 selector: str | None = None, page_size: int = 500) -> None:
        self.api = api
        self.path = path
        self.decoder = decoder
        self.on_change = on_change
        self.query = {"labelSelector": selector} if selector else {}
        self.page_size = page_size
        self.records: dict[str, R] = {}
        self.synced = asyncio.Event()
        self.counters = Counters()
        self.streaming: bool | None = None
        """Whether the server served the streaming list (None: not listed yet)."""
        self.version = ""
        """The resourceVersion of what is being applied (see ``on_change``)."""

    def get(self, name: str) -> R | None:
        """The record of ``name``, or None."""
        return self.records.get(name)

    async def run(self) -> None:
        """List, then watch, forever (until cancelled)."""
        while True:
            try:
                version = await self._list()
                while True:
                    version = await self._watch(version)
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("watch expired (410 Gone); listing again", path=self.path)
            except Exception as err:
                log.warning("list/watch failed; listing again", path=self.path, error=str(err))
                await asyncio.sleep(BACKOFF_S)

    async def _list(self) -> str:
        """Replace the cache by a fresh list; returns its resourceVersion."""
        self.counters.lists += 1
        if self.streaming is not False:
            listed = await self._stream_list()
            if listed is not None:
                self.streaming = True
                return listed
            self.streaming = False
            log.info("no streaming list; listing in pages", path=self.path, page=self.page_size)
        return await self._page_list()

    async def _stream_list(self) -> str | None:
        """The streaming list, or None where the server does not serve it."""
        fresh: dict[str, R] = {}
        try:
            async with asyncio.timeout(INITIAL_EVENTS_TIMEOUT_S):
                async for line in kube.watch_lines(self.api, self.path, self.query,
                                                   timeout_s=WATCH_TIMEOUT_S,
                                                   initial_events=True):
                    event = self.decoder.event(line)
                    if event.ends_initial_events:
                        self._replace(fresh, event.resource_version)
                        return event.resource_version
                    if event.type == "ADDED":
                        self._take(fresh, event.name, event.record)
                    elif event.type == "ERROR":
                        return None
        except ApiException as err:
            if err.status in (400, 403, 422):
                return None
            raise
        except TimeoutError:
            return None
        return None

    async def _page_list(self) -> str:
        fresh: dict[str, R] = {}
        query = {**self.query, "limit": str(self.page_size)}
        while True:
            page = self.decoder.page(await kube.list_page(self.api, self.path, query))
            for name, record in page.items:
                self._take(fresh, name, record)
            if not page.continue_token:
                self._replace(fresh, page.resource_version)
                return page.resource_version
            query["continue"] = page.continue_token
            del page

    def _take(self, fresh: dict[str, R], name: str, record: R | None) -> None:
        if record is not None:
            old = self.records.get(name)
            fresh[name] = old if old == record else record  # an equal record is kept once

    def _replace(self, fresh: dict[str, R], version: str = "") -> None:
        """Make ``fresh`` the cache, reporting what differs (client-go's ``Replace``)."""
        old, self.records = self.records, fresh
        self.version = version
        for name in old.keys() | fresh.keys():
            before, after = old.get(name), fresh.get(name)
            if before != after:
                self.counters.changes += 1
                self.on_change(name, before, after)
        self.synced.set()

    async def _watch(self, version: str) -> str:
        """Watch from ``version`` until the server closes the stream; returns the last
        resourceVersion seen.

        Raises:
            Gone: ``version`` is too old.
        """
        async for line in kube.watch_lines(self.api, self.path, self.query,
                                           timeout_s=WATCH_TIMEOUT_S,
                                           resource_version=version):
            event = self.decoder.event(line)
            if event.type == "ERROR":
                if event.code == 410:
                    raise Gone(event.message)
                raise RuntimeError(f"watch error: {event.message}")
            version = event.resource_version or version
            if event.type == "BOOKMARK":
                continue
            self.counters.events += 1
            self._apply(event.name, event.record, deleted=event.type == "DELETED",
                        version=version)
        return version

    def _apply(self, name: str, record: R | None, *, deleted: bool, version: str = "") -> None:
        before = self.records.get(name)
        after = None if deleted else record
        if before == after:
            return  # nothing a decision reads changed: keep the cached record as it is
        if after is None:
            del self.records[name]
        else:
            self.records[name] = after
        self.version = version
        self.counters.changes += 1
        self.on_change(name, before, after)


class Index(Mapping[str, tuple[R, ...]]):
    """A :class:`ListWatch` as a kopf-index-like mapping: name → a one-record tuple (what
    :class:`~kubedra.controller.state.ClusterView` reads)."""

    def __init__(self, cache: ListWatch[R]) -> None:
        self._cache = cache

    def __getitem__(self, name: str) -> tuple[R, ...]:
        return (self._cache.records[name],)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._cache.records))

    def __len__(self) -> int:
        return len(self._cache.records)
