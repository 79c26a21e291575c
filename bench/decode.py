"""bench/decode: decoding the API objects a fleet's operator reads, side by side.

For each object (an 8-H200 MIG node's DeviceInventory as listed, with managedFields; an 8-GPU
one; a kwok Node; a ResourceSlice of 64 MIG devices), one list page of ``--page`` of them and
each alone, decoded by the standard library's ``json``, ``orjson`` and ``msgspec`` (untyped,
and into a Struct holding only metadata name, UID, resourceVersion and labels, as a lean
cache's record), and validated by pydantic (kubedra's ``DeviceInventory`` model) where it
applies. Prints a JSON object: CPU milliseconds per page (best of ``--repeat``) and the
longest single call, which is what holds the interpreter lock.

With ``--fleet N`` it decodes instead the whole dump that ``kubedra explain/simulate/status
--from`` read (:mod:`bench.fleet_dump`'s N nodes x 8 H200, as JSON and as YAML): ``json``,
``orjson`` and ``msgspec`` on the JSON, PyYAML's libyaml loader (``CSafeLoader``) and
``yaml_rs`` on the YAML, each with Python's cyclic garbage collector on (the default) and off
(as those commands run), CPU seconds of one decode in a fresh process (the fewest of ``--repeat``
processes) and its peak RSS (MiB, ``VmHWM``: the process's, interpreter and input bytes
included).

Usage::

    PYTHONPATH=.:operator .venv/bin/python -m bench.decode [--page 100]
    PYTHONPATH=.:operator .venv/bin/python -m bench.decode --fleet 2000

Decoders that are not installed are reported as ``"missing"``.
"""


import argparse
import importlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
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


DUMP_DECODERS = {
    "json": ("json", "import json; decode = json.loads"),
    "orjson": ("json", "import orjson; decode = orjson.loads"),
    "msgspec": ("json", "import msgspec; decode = msgspec.json.Decoder().decode"),
    "libyaml": ("yaml", "import yaml\n"
                        "decode = lambda b: yaml.load(b, Loader=yaml.CSafeLoader)"),
    "yaml_rs": ("yaml", "import yaml_rs; decode = lambda b: yaml_rs.loads(b.decode())"),
}
"""Name -> (the dump's format, the code that defines ``decode(bytes)``)."""

_ONE_DECODE = """
import gc, sys, time
{setup}
data = open(sys.argv[1], "rb").read()
if sys.argv[2] == "off":
    gc.disable()
start = time.process_time()
decode(data)
cpu = time.process_time() - start
peak = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")]
print(cpu, int(peak[0]) // 1024)
"""


def fleet_rows(nodes: int, repeat: int) -> Json:
    """Decode :mod:`bench.fleet_dump`'s dump of ``nodes`` nodes by every decoder of
    :data:`DUMP_DECODERS`, garbage collector on and off, each ``repeat`` times in a fresh
    process."""
    import yaml

    from bench.fleet_dump import fleet

    document = fleet(nodes)
    result: Json = {"nodes": nodes, "load": round(os.getloadavg()[0], 2), "decoders": {}}
    with tempfile.TemporaryDirectory() as folder:
        files = {"json": pathlib.Path(folder) / "fleet.json",
                 "yaml": pathlib.Path(folder) / "fleet.yaml"}
        files["json"].write_text(json.dumps(document))
        files["yaml"].write_text(yaml.dump(document, Dumper=yaml.CSafeDumper))
        result["MiB"] = {k: round(f.stat().st_size / 2**20, 1) for k, f in files.items()}
        for name, (kind, setup) in DUMP_DECODERS.items():
            row: Json = {}
            for collector in ("on", "off"):
                runs = []
                for _ in range(repeat):
                    done = subprocess.run(
                        [sys.executable, "-c", _ONE_DECODE.format(setup=setup),
                         str(files[kind]), collector], capture_output=True, text=True,
                        check=False)
                    if done.returncode:
                        break
                    runs.append(done.stdout.split())
                if not runs:
                    row = {"missing": done.stderr.strip().splitlines()[-1]}
                    break
                row[f"gc_{collector}"] = {"cpu_s": round(min(float(c) for c, _ in runs), 2),
                                          "rssMiB": max(int(r) for _, r in runs)}
            result["decoders"][name] = row
    result["loadAfter"] = round(os.getloadavg()[0], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--page", type=int, default=100, help="objects per list page")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fleet", type=int, default=0, metavar="NODES",
                        help="decode the fleet dump of NODES nodes instead")
    args = parser.parse_args()
    if args.fleet:
        print(json.dumps(fleet_rows(args.fleet, args.repeat), indent=1))
        return
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
