"""bench/decode: decoding the API objects a fleet's operator reads, side by side.

For each object (an 8-H200 MIG node's DeviceInventory as listed, with managedFields; an 8-GPU
one; a kwok Node; a ResourceSlice of 64 MIG devices), one list page of ``--page`` of them and
each alone, decoded by the standard library's ``json``, ``orjson`` and ``msgspec`` (untyped,
and into a Struct holding only metadata name, UID, resourceVersion and labels, as a lean
cache's record), and validated by pydantic (kubedra's ``DeviceInventory`` model) where it
applies. Prints a JSON object: CPU milliseconds per page (best of ``--repeat``) and the
longest single call, which is what holds the interpreter lock.

Usage::

    PYTHONPATH=.:operator .venv/bin/python -m bench.decode [--page 100]

Decoders that are not installed are reported as ``"missing"``.
"""


import argparse
import importlib
import json
import time
from collections.abc import Callable
from typing import Any

from bench.scale import h200_node, inventory_body, node_name, published_slices

Json = dict[str, Any]


def _managed_fields(discovered: Json) -> list[Json]:
    """An agent's managedFields entry for ``status.discovered`` (as the API server lists it)."""
    devices = {f'k:{{"name":"{d["name"]}"}}': {".": {}, "f:attributes": {
        f"f:{k}": {} for k in d.get("attributes", {})}, "f:capacity": {
        f"f:{k}": {} for k in d.get("capacity", {})}} for d in discovered["devices"]}
    return [{"manager": "kubedra-agent", "operation": "Apply", "subresource": "status",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:discovered": {
                 "f:devices": devices}}}}]


def samples() -> dict[str, str]:
    """Name → one object's JSON."""
    out = {}
    for name, mig in (("inventory_mig", True), ("inventory_8gpu", False)):
        discovered = h200_node(1, mig)
        body = inventory_body(node_name(1))
        body["metadata"].update(uid="0" * 36, resourceVersion="123",
                                managedFields=_managed_fields(discovered))
        out[name] = json.dumps({**body, "status": {"discovered": discovered}})
        if mig:
            spec = published_slices(node_name(1), discovered)[0]
            out["slice_mig"] = json.dumps({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": "s", "uid": "1" * 36, "resourceVersion": "9"},
                "spec": {"driver": "gpu.kubedra.io", "nodeName": node_name(1),
                         "pool": {"name": node_name(1), "generation": 1,
                                  "resourceSliceCount": 5}, **spec}})
    out["node"] = json.dumps({
        "apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node_name(1), "uid": "2" * 36, "resourceVersion": "77",
            "labels": {"type": "kwok", "kubernetes.io/hostname": node_name(1)},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
        "spec": {}, "status": {
            "conditions": [{"type": t, "status": "False", "reason": "r", "message": "m" * 40,
                            "lastHeartbeatTime": "2026-12-01T00:00:00Z",
                            "lastTransitionTime": "2026-12-01T00:00:00Z"}
                           for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure",
                                     "NetworkUnavailable")],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.2"}],
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "nodeInfo": {k: "v" * 20 for k in ("architecture", "bootID", "kernelVersion",
                                                 "kubeletVersion", "machineID",
                                                 "operatingSystem", "osImage",
                                                 "systemUUID")}}})
    return out


def decoders() -> dict[str, Callable[[bytes], Any] | None]:
    """Name → decode(bytes), None where the package is missing."""
    out: dict[str, Callable[[bytes], Any] | None] = {"json": json.loads}
    try:
        orjson = importlib.import_module("orjson")
        out["orjson"] = orjson.loads
    except ImportError:
        out["orjson"] = None
    try:
        msgspec = importlib.import_module("msgspec")

        class Meta(msgspec.Struct, gc=False):
            name: str
            uid: str = ""
            resourceVersion: str = ""
            labels: dict[str, str] = {}

        class Obj(msgspec.Struct, gc=False):
            metadata: Meta

        class Page(msgspec.Struct, gc=False):
            items: list[Obj]

        untyped, one, page = (msgspec.json.Decoder(), msgspec.json.Decoder(Obj),
                              msgspec.json.Decoder(Page))
        out["msgspec"] = untyped.decode
        out["msgspec_record"] = lambda data: (page if data.startswith(b'{"items"')
                                              else one).decode(data)
    except ImportError:
        out["msgspec"] = out["msgspec_record"] = None
    return out


def best(call: Callable[[], Any], repeat: int) -> float:
    """Fewest CPU seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--page", type=int, default=100, help="objects per list page")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from kubedra.api.inventory import DeviceInventory

    result: Json = {"page": args.page, "objects": {}}
    for name, text in samples().items():
        one = text.encode()
        page = ('{"items":[' + ",".join([text] * args.page) + "]}").encode()
        row: Json = {"bytes": len(one), "page_mb": round(len(page) / 1e6, 1)}
        for decoder, decode in decoders().items():
            if decode is None:
                row[decoder] = "missing"
                continue
            row[decoder] = {
                "page_ms": round(1000 * best(lambda d=decode, p=page: d(p), args.repeat), 1),
                "one_ms": round(1000 * best(lambda d=decode, o=one: d(o), args.repeat * 10), 2)}
        if name.startswith("inventory"):
            obj = json.loads(one)
            row["pydantic_validate_one_ms"] = round(1000 * best(
                lambda o=obj: DeviceInventory.from_api(o), args.repeat), 2)
        result["objects"][name] = row
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
