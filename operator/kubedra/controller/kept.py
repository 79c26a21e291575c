"""What the operator's kopf indexes keep of a DeviceInventory or a ResourceClaim: one small
immutable :class:`KeptObject` per object, made in the index function from the watch event's
body, so that nothing raw stays in the index.

A record holds the object's identity as typed fields (namespace, name, UID, resourceVersion,
creationTimestamp) and everything else a decision reads (``spec``, ``status`` and the metadata
but ``managedFields`` and ``annotations``, which no reconcile or explanation reads) packed: the
JSON text (msgspec) compressed with raw deflate against a *preset dictionary* shared by every
record of the same :class:`Packer`. The dictionary is the JSON of one object of the kind, so
what every node's inventory repeats (the device attributes, capacities and counters of a GPU
model, the operator's conditions) is kept once, in the dictionary, and each record holds only
what differs (names, UIDs, PCI addresses, versions). ``bench/cache_memory.py`` measures it:
an inventory of 8 H200 with its operator status is 17.1 KiB as a compacted dict, 7.0 KiB as
JSON bytes and 0.6 KiB as a record (0.2 to 0.3 KiB of it the packed bytes); an allocated claim
9.2 KiB and 0.8 KiB (``bench/RESULTS.md``, round 10).

:meth:`KeptObject.body` gives the object back as plain dicts and lists (a fresh copy at each
call, equal to what the API server sent but the two fields left out); opening costs a
decompression and a decode, tens of microseconds for an 8-GPU inventory.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

DICTIONARY_LIMIT = 32 * 1024
"""Bytes of preset dictionary deflate can use (its window)."""

LEFT_OUT_METADATA = frozenset({"managedFields", "annotations"})
"""Metadata fields a record does not keep: nothing the operator decides reads them."""

_WBITS = -15  # raw deflate: no zlib header or checksum, the record holds its own bytes
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


@dataclass(frozen=True, slots=True)
class KeptObject:
    """An API object as the operator's indexes keep it (see the module docstring)."""

    namespace: str
    """``metadata.namespace`` (empty for a cluster-scoped object)."""
    name: str
    uid: str
    resource_version: str
    creation_timestamp: str
    """``metadata.creationTimestamp`` as the API gives it (RFC 3339), empty when absent."""
    packed: bytes = field(repr=False)
    """The object's JSON, raw deflate against ``dictionary``."""
    dictionary: bytes = field(repr=False, compare=False)
    """The preset dictionary ``packed`` was made with (shared with the other records of its
    :class:`Packer`; at most :data:`DICTIONARY_LIMIT` bytes)."""

    def body(self) -> dict[str, Any]:
        """The object as plain dicts and lists (a new copy: callers may change it)."""
        opener = zlib.decompressobj(_WBITS, zdict=self.dictionary)
        text = opener.decompress(self.packed) + opener.flush()
        body: dict[str, Any] = _decode(text)
        return body


class Packer:
    """Makes :class:`KeptObject` records of one kind of object, sharing one preset dictionary.

    The dictionary is the JSON of the largest object packed so far (its last
    :data:`DICTIONARY_LIMIT` bytes), replaced when an object comes that is more than twice
    as large: the first events of a fleet may be inventories the agents have not reported
    into yet. Records made with an earlier dictionary keep theirs, so a replacement is safe
    at any time; at most a handful are ever made (each at least twice the size of the last).
    """

    def __init__(self, level: int = 1) -> None:
        """``level``: deflate's compression level (1: fastest; the dictionary, not the level,
        is what makes records small)."""
        self.level = level
        self.dictionary = b""
        self._primed = zlib.compressobj(level, zlib.DEFLATED, _WBITS)
        """A compressor with the dictionary set, copied for each record (half the time of
        setting the dictionary again)."""

    def keep(self, obj: Mapping[str, Any]) -> KeptObject:
        """The record of API object ``obj`` (a dict or a kopf body of dicts and lists)."""
        meta = obj.get("metadata") or {}
        kept = {**obj, "metadata": {k: v for k, v in meta.items()
                                    if k not in LEFT_OUT_METADATA}}
        text = _encode(kept)
        if len(text) > 2 * len(self.dictionary) and len(self.dictionary) < DICTIONARY_LIMIT:
            self.dictionary = text[-DICTIONARY_LIMIT:]
            self._primed = zlib.compressobj(self.level, zlib.DEFLATED, _WBITS,
                                            zdict=self.dictionary)
        packer = self._primed.copy()
        return KeptObject(
            namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            creation_timestamp=str(meta.get("creationTimestamp") or ""),
            packed=packer.compress(text) + packer.flush(), dictionary=self.dictionary)


def opened(value: KeptObject | Mapping[str, Any]) -> dict[str, Any]:
    """The object of an index value: a record opened (:meth:`KeptObject.body`), or a plain
    dict as it is (tests and benches give views of dicts)."""
    if isinstance(value, KeptObject):
        return value.body()
    return value if isinstance(value, dict) else dict(value)
