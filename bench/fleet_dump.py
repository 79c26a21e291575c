"""The fleet of issue 24, as a dump for ``kubedra simulate --from`` / ``explain --from``.

Usage: ``python -m bench.fleet_dump [--nodes 2000] [--out DIR]`` writes ``DIR/fleet.json`` (a
``List`` of the DeviceClass ``gpu.kubedra.io`` from ``manifests/``, the Nodes, their
ResourceSlices and the allocated claims) and the two claims ``DIR/claim-numa4.yaml`` and
``DIR/claim-gpu8.yaml``.

Node *k* (``gpu-node-0000`` …) has 8 H200 GPUs with the attributes kubedra publishes for the
capture in ``hardware/nvidia-h200`` (uuid, PCI bus ID and minor number per GPU), plus
``resource.kubernetes.io/numaNode`` 0 for ``gpu-0``…``gpu-3`` and 1 for ``gpu-4``…``gpu-7``;
its GPUs ``gpu-0``…``gpu-(k mod 3)`` are allocated to one claim ``train/job-k``.

The claims: ``numa4`` asks for 4 GPUs with at least 140Gi, all on one NUMA node (fits on every
node); ``gpu8`` asks for 8 GPUs (fits on none).
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

import yaml

from kubedra.api.inventory import DiscoverySettings
from kubedra.discovery.backends import discover

Json = dict[str, Any]
REPO = pathlib.Path(__file__).parents[1]
DRIVER = "gpu.kubedra.io"
CAPTURE = REPO / "hardware" / "nvidia-h200"
NUMA = "resource.kubernetes.io/numaNode"
GPUS = 8

CLAIMS: dict[str, Json] = {
    "numa4": {"name": "gpu", "exactly": {
        "deviceClassName": DRIVER, "count": 4, "selectors": [{"cel": {"expression": (
            f'device.capacity["{DRIVER}"].memory.compareTo(quantity("140Gi")) >= 0')}}]}},
    "gpu8": {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 8}},
}


def node_name(index: int) -> str:
    """``gpu-node-0042``."""
    return f"gpu-node-{index:04d}"


def capture_gpu() -> Json:
    """The capture's one GPU as kubedra publishes it (``devices[0]`` of its slice)."""
    result = discover(f"snapshot:{CAPTURE}", DiscoverySettings(mig="none"))
    device: Json = result.devices[0].model_dump(mode="json", by_alias=True, exclude_none=True)
    device.pop("health", None)
    return device


def node_objects(index: int, gpu: Json) -> list[Json]:
    """Node ``index``: its Node, its ResourceSlice and its claim ``train/job-<index>``."""
    name = node_name(index)
    devices = []
    for g in range(GPUS):
        attributes = dict(gpu["attributes"])
        attributes["uuid"] = {"string": f"GPU-{index:08x}-0000-4000-8000-{g:012x}"}
        attributes["minor"] = {"int": g}
        attributes["resource.kubernetes.io/pciBusID"] = {"string": f"0000:{g + 1:02x}:00.0"}
        attributes[NUMA] = {"int": g // 4}
        devices.append({"name": f"gpu-{g}", "attributes": attributes,
                        "capacity": gpu["capacity"]})
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
              "metadata": {"name": f"{name}-{DRIVER}-0"},
              "spec": {"driver": DRIVER, "nodeName": name, "devices": devices,
                       "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}}
    held = index % 3 + 1
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"job-{index:04d}", "namespace": "train",
                          "uid": f"00000000-0000-4000-8000-{index:012d}"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": DRIVER, "count": held}}]}},
             "status": {"allocation": {
                 "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": name,
                                          "device": f"gpu-{g}"} for g in range(held)]},
                 "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                     {"key": "metadata.name", "operator": "In", "values": [name]}]}]}}}}
    return [node, slice_, claim]


def claim_document(name: str) -> Json:
    """The ResourceClaim ``default/<name>`` of :data:`CLAIMS`."""
    devices: Json = {"requests": [CLAIMS[name]]}
    if name == "numa4":
        devices["constraints"] = [{"requests": ["gpu"], "matchAttribute": NUMA}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def device_class() -> Json:
    """The DeviceClass ``gpu.kubedra.io`` as installed."""
    loaded: Json = yaml.safe_load((REPO / "manifests" / "deviceclasses" / f"{DRIVER}.yaml")
                                  .read_text())
    return loaded


def fleet(nodes: int) -> Json:
    """The dump: a ``List`` of the class and ``nodes`` nodes' objects."""
    gpu = capture_gpu()
    items = [device_class()]
    for index in range(nodes):
        items += node_objects(index, gpu)
    return {"apiVersion": "v1", "kind": "List", "serverVersion": "v1.37.2", "items": items}


def write(out: pathlib.Path, nodes: int) -> pathlib.Path:
    """Write the dump and both claims into ``out``; return the dump's path."""
    out.mkdir(parents=True, exist_ok=True)
    dump = out / "fleet.json"
    dump.write_text(json.dumps(fleet(nodes)))
    for name in CLAIMS:
        (out / f"claim-{name}.yaml").write_text(yaml.safe_dump(claim_document(name)))
    return dump


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/kubedra-fleet"))
    args = parser.parse_args()
    print(write(args.out, args.nodes))


if __name__ == "__main__":
    main()
