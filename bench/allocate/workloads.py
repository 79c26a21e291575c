"""Benchmark inputs for ``bench/allocate``: clusters, what is allocated already, and claims.

All are deterministic (seeded) and shaped after the real NVIDIA H200 capture in
``shared/hardware/nvidia-h200`` (product name, 143771Mi of memory, MIG profiles and placements):

- ``gpus``: nodes with 8 whole GPUs each, one-GPU claims with a CEL selector;
- ``pcie``: nodes with 8 devices on 2 PCIe roots, claims of 4 devices that must share a root
  (``matchAttribute``), most nodes with no root entirely free (kubernetes#131730);
- ``mig``: nodes with 8 GPUs as MIG partitions (every profile and placement of the H200) that
  consume shared counters (one counter set per GPU: its 8 memory slices, memory and SMs).
"""

from __future__ import annotations

import random
from typing import Any

DRIVER = "gpu.kubedra.io"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PRODUCT = "NVIDIA H200"
GPU_MEMORY = "143771Mi"

Json = dict[str, Any]

# (profile, memory slices it occupies, memory MiB, SMs, placement starts) of the H200
MIG_PROFILES = [
    ("1g.18gb", 1, 16384, 16, [0, 1, 2, 3, 4, 5, 6]),
    ("2g.35gb", 2, 33280, 32, [0, 2, 4]),
    ("3g.71gb", 4, 71424, 60, [0, 4]),
    ("4g.71gb", 4, 71424, 64, [0]),
    ("7g.141gb", 8, 143360, 132, [0]),
    ("1g.18gb+me", 1, 16384, 16, [0, 1, 2, 3, 4, 5, 6]),
    ("1g.35gb", 2, 33280, 26, [0, 2, 4, 6]),
]

GPU_CLASS = {"metadata": {"name": "gpu.kubedra.io"}, "spec": {"selectors": [
    {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def _slice(name: str, node: str, devices: list[Json] | None = None, count: int = 1,
           **spec: Any) -> Json:
    found: Json = {"driver": DRIVER, "pool": {"name": node, "generation": 1,
                                              "resourceSliceCount": count}, "nodeName": node}
    if devices is not None:
        found["devices"] = devices
    found.update(spec)
    return {"metadata": {"name": name}, "spec": found}


def _gpu(node_index: int, index: int, root: str) -> Json:
    bus = f"0000:{(node_index * 8 + index) % 256:02x}:00.0"
    return {"name": f"gpu-{index}", "attributes": {
        "productName": {"string": PRODUCT}, "index": {"int": index}, "minor": {"int": index},
        "uuid": {"string": f"GPU-{node_index:04d}-{index:02d}"},
        "driverVersion": {"version": "580.95.5"},
        "resource.kubernetes.io/pciBusID": {"string": bus}, PCIE_ROOT: {"string": root}},
        "capacity": {"memory": {"value": GPU_MEMORY}}}


def _claim(name: str, count: int, selector: str | None,
           constraints: list[Json] | None = None) -> Json:
    request: Json = {"deviceClassName": "gpu.kubedra.io", "count": count}
    if selector:
        request["selectors"] = [{"cel": {"expression": selector}}]
    devices: Json = {"requests": [{"name": "gpu", "exactly": request}]}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
            "spec": {"devices": devices}}


def _allocated(taken: list[tuple[str, str]]) -> list[Json]:
    """One allocated claim per taken (node, device)."""
    return [{"metadata": {"name": f"taken-{i}", "namespace": "bench"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.kubedra.io"}}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]}}}}
            for i, (node, device) in enumerate(taken)]


def _nodes(count: int) -> list[Json]:
    return [{"name": f"node-{i:03d}", "labels": {"kubernetes.io/hostname": f"node-{i:03d}"}}
            for i in range(count)]


def gpus(selector: str, *, nodes: int = 500, fill: float = 0.0, claims: int = 20,
         seed: int = 1) -> Json:
    """(a) ``nodes`` nodes with 8 GPUs; ``fill`` of all GPUs allocated at random."""
    rnd = random.Random(seed)
    node_list = _nodes(nodes)
    slices = [_slice(f"{n['name']}-gpus", n["name"],
                     [_gpu(i, g, f"pci-{g // 4}") for g in range(8)])
              for i, n in enumerate(node_list)]
    everything = [(n["name"], f"gpu-{g}") for n in node_list for g in range(8)]
    taken = rnd.sample(everything, round(fill * len(everything)))
    return {"slices": slices, "classes": [GPU_CLASS], "allocatedClaims": _allocated(taken),
            "nodes": node_list,
            "claims": [_claim(f"claim-{i}", 1, selector) for i in range(claims)]}


def pcie(selector: str | None, *, nodes: int = 500, free_nodes: float = 0.04,
         claims: int = 10, seed: int = 2) -> Json:
    """(b) 8 devices on 2 PCIe roots per node; claims of 4 devices on one root. On most nodes
    one device of each root is taken, so 6 devices are free but no root has 4; a few nodes
    (``free_nodes``) have one root entirely free."""
    rnd = random.Random(seed)
    node_list = _nodes(nodes)
    slices = [_slice(f"{n['name']}-gpus", n["name"],
                     [_gpu(i, g, f"pci-{g // 4}") for g in range(8)])
              for i, n in enumerate(node_list)]
    taken = []
    for node in node_list:
        if rnd.random() < free_nodes:
            taken.extend((node["name"], f"gpu-{g}") for g in rnd.choice([[0, 1], [4, 5]]))
        else:
            taken.extend((node["name"], f"gpu-{rnd.randrange(r * 4, r * 4 + 4)}")
                         for r in range(2))
    match_root = [{"matchAttribute": PCIE_ROOT}]
    return {"slices": slices, "classes": [GPU_CLASS], "allocatedClaims": _allocated(taken),
            "nodes": node_list,
            "claims": [_claim(f"claim-{i}", 4, selector, match_root) for i in range(claims)]}


def _mig_devices(gpu: int) -> list[Json]:
    devices = []
    for profile, size, memory, sms, starts in MIG_PROFILES:
        for start in starts:
            counters = {f"memory-slice-{s}": {"value": "1"} for s in range(start, start + size)}
            counters["memory"] = {"value": f"{memory}Mi"}
            counters["multiprocessors"] = {"value": str(sms)}
            devices.append({
                "name": f"gpu-{gpu}-mig-{profile.replace('.', '-').replace('+', '-')}-{start}",
                "attributes": {"profile": {"string": profile}, "parentIndex": {"int": gpu},
                               "productName": {"string": PRODUCT}},
                "capacity": {"memory": {"value": f"{memory}Mi"}},
                "consumesCounters": [{"counterSet": f"gpu-{gpu}", "counters": counters}]})
    return devices


# Layouts a GPU may carry already (profile, start), all valid under the counters.
MIG_LAYOUTS = [[], [], [("7g.141gb", 0)], [("3g.71gb", 0), ("3g.71gb", 4)],
               [("4g.71gb", 0), ("2g.35gb", 4)], [("1g.18gb", s) for s in range(7)],
               [("2g.35gb", 0), ("2g.35gb", 2), ("1g.18gb", 4)]]


def mig(selector: str, *, nodes: int = 100, claims: int = 20, seed: int = 3) -> Json:
    """(c) 8 H200 per node as MIG partitions sharing per-GPU counters; GPUs carry random
    layouts already (about half of the capacity is taken)."""
    rnd = random.Random(seed)
    node_list = _nodes(nodes)
    slices = []
    taken = []
    for node in node_list:
        name = node["name"]
        devices = [d for gpu in range(8) for d in _mig_devices(gpu)]
        chunks = [devices[i:i + 64] for i in range(0, len(devices), 64)]
        count = len(chunks) + 1
        slices.append(_slice(f"{name}-counters", name, count=count, sharedCounters=[
            {"name": f"gpu-{gpu}", "counters": {
                **{f"memory-slice-{s}": {"value": "1"} for s in range(8)},
                "memory": {"value": "143360Mi"}, "multiprocessors": {"value": "132"}}}
            for gpu in range(8)]))
        slices.extend(_slice(f"{name}-mig-{i}", name, chunk, count=count)
                      for i, chunk in enumerate(chunks))
        for gpu in range(8):
            for profile, start in rnd.choice(MIG_LAYOUTS):
                device = f"gpu-{gpu}-mig-{profile.replace('.', '-')}-{start}"
                taken.append((name, device))
    wanted = ["1g.18gb", "3g.71gb", "2g.35gb", "1g.18gb"]
    return {"slices": slices, "classes": [GPU_CLASS], "allocatedClaims": _allocated(taken),
            "nodes": node_list,
            "claims": [_claim(f"claim-{i}", 1, selector.replace("PROFILE", wanted[i % 4]))
                       for i in range(claims)]}
