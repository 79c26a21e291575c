"""Short builders for allocation scenarios (the JSON of :mod:`kubedra.allocation.scenario`)."""

from __future__ import annotations

from typing import Any

GPU, NIC = "gpu.example.com", "nic.example.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NODE = {"name": "node-a", "labels": {"topology.example.com/zone": "z1"}}

Json = dict[str, Any]


def attrs(**values: Any) -> Json:
    """Attributes from keyword values (``pcieRoot`` becomes the standard qualified name)."""
    found: Json = {}
    for name, value in values.items():
        key = PCIE_ROOT if name == "pcieRoot" else name
        if isinstance(value, bool):
            found[key] = {"bool": value}
        elif isinstance(value, int):
            found[key] = {"int": value}
        elif name.endswith("Version"):
            found[key] = {"version": value}
        else:
            found[key] = {"string": value}
    return found


def device(name: str, *, memory: str | None = None, **fields: Any) -> Json:
    """A device; ``memory`` adds a ``memory`` capacity, other keywords are Device fields."""
    found: Json = {"name": name, **fields}
    if memory is not None:
        found.setdefault("capacity", {})["memory"] = {"value": memory}
    return found


def gpus(count: int, **fields: Any) -> list[Json]:
    """``gpu-0`` … ``gpu-<count-1>`` with attribute ``index``."""
    return [device(f"gpu-{i}", attributes=attrs(index=i), **fields) for i in range(count)]


def resource_slice(name: str, devices: list[Json] | None = None, *, pool: str = "node-a",
                   driver: str = GPU, generation: int = 1, count: int = 1,
                   node: str | None = "node-a", **spec: Any) -> Json:
    """A ResourceSlice; ``node=None`` leaves node selection to ``spec`` (allNodes, ...)."""
    found: Json = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                              "resourceSliceCount": count}}
    if node is not None:
        found["nodeName"] = node
    if devices is not None:
        found["devices"] = devices
    found.update(spec)
    return {"metadata": {"name": name}, "spec": found}


def device_class(name: str, *expressions: str, config: list[Json] | None = None) -> Json:
    """A DeviceClass with CEL selectors."""
    spec: Json = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if config is not None:
        spec["config"] = config
    return {"metadata": {"name": name}, "spec": spec}


def opaque(driver: str, **parameters: Any) -> Json:
    """An opaque configuration entry."""
    return {"opaque": {"driver": driver, "parameters": parameters}}


CLASSES = [device_class("gpu", f'device.driver == "{GPU}"'),
           device_class("nic", f'device.driver == "{NIC}"'),
           device_class("any")]


def exact(name: str, device_class_name: str = "gpu", *selectors: str, **fields: Any) -> Json:
    """A request with ``exactly``."""
    request: Json = {"deviceClassName": device_class_name, **fields}
    if selectors:
        request["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": request}


def sub(name: str, device_class_name: str = "gpu", *selectors: str, **fields: Any) -> Json:
    """A subrequest of ``firstAvailable``."""
    found = exact(name, device_class_name, *selectors, **fields)
    return {"name": name, **found["exactly"]}


def first_available(name: str, *subrequests: Json) -> Json:
    """A request with ``firstAvailable``."""
    return {"name": name, "firstAvailable": list(subrequests)}


def claim(name: str, *requests: Json, constraints: list[Json] | None = None,
          config: list[Json] | None = None) -> Json:
    """A ResourceClaim in namespace ``default``."""
    devices: Json = {"requests": list(requests)}
    if constraints is not None:
        devices["constraints"] = constraints
    if config is not None:
        devices["config"] = config
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def allocated(name: str, *results: Json) -> Json:
    """A claim that is allocated already, with these results."""
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [exact("r", "any")]}},
            "status": {"allocation": {"devices": {"results": list(results)}}}}


def result(device_name: str, pool: str = "node-a", driver: str = GPU, **fields: Any) -> Json:
    """An allocation result entry (``request: r``)."""
    return {"request": "r", "driver": driver, "pool": pool, "device": device_name, **fields}


def scenario(name: str, slices: list[Json], claims: list[Json], *,
             classes: list[Json] | None = None, allocated_claims: list[Json] | None = None,
             taint_rules: list[Json] | None = None, features: dict[str, bool] | None = None,
             node: Json | None = None) -> Json:
    """A scenario on ``node-a`` (zone ``z1``) with the default classes."""
    found: Json = {"name": name, "node": node or NODE, "slices": slices,
                   "classes": classes if classes is not None else CLASSES, "claims": claims,
                   "allocatedClaims": allocated_claims or []}
    if taint_rules:
        found["taintRules"] = taint_rules
    if features:
        found["features"] = features
    return found


def search_explosion(devices: int, name: str = "explosion", *, two_claims: bool = False) -> Json:
    """kubernetes#131730's shape: ``devices`` GPUs ``gpu00``… with int attribute ``idx``, one
    claim with request ``r1`` (any one GPU) and ``r2`` (all but one, those with ``idx`` below
    the last). First fit gives ``r1`` gpu00, ``r2`` then lacks one device, and upstream's
    exhaustive search tries every subset before moving ``r1`` on: its steps double per device.
    ``two_claims``: ``r1`` in claim ``one``, ``r2`` in claim ``many`` (a pod's two claims).
    """
    last = devices - 1
    gpu_list = [device(f"gpu{i:02d}", attributes=attrs(idx=i)) for i in range(devices)]
    requests = [exact("r1", "gpu"),
                exact("r2", "gpu", f'device.attributes["{GPU}"].idx < {last}', count=last)]
    claims = [claim("one", requests[0]), claim("many", requests[1])] if two_claims else \
        [claim("c", *requests)]
    return scenario(name, [resource_slice("node-a-gpus", gpu_list)], claims)
