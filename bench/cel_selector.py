"""Benchmark: one DRA CEL selector evaluated for one device (kubedra.cel).

Run: ``.venv/bin/python bench/cel_selector.py`` — prints µs per evaluation for a warm device
(converted values cached on the device, as the allocator reuses its devices) and for a fresh
device each time (conversion included), plus the compile time of a cache miss.
"""

from __future__ import annotations

import argparse
import time

from kubedra.api.quantity import Quantity
from kubedra.api.resource import DeviceAttribute
from kubedra.cel import CELDevice, compile_selector
from kubedra.cel.selector import compile_selector as cached_compile

SELECTOR = ('device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("140Gi")) >= 0 && '
            'device.attributes["gpu.kubedra.io"].cudaComputeCapability'
            '.isGreaterThan(semver("9.0.0")) == false')


def _device() -> CELDevice:
    return CELDevice(
        driver="gpu.kubedra.io",
        attributes={
            "productName": DeviceAttribute(string="NVIDIA H200"),
            "cudaComputeCapability": DeviceAttribute(version="9.0.0"),
            "driverVersion": DeviceAttribute(version="570.133.20"),
            "index": DeviceAttribute(int=0),
            "mig": DeviceAttribute(bool=False),
            "resource.kubernetes.io/pcieRoot": DeviceAttribute(string="pci0000:00"),
            "resource.kubernetes.io/pciBusID": DeviceAttribute(string="0000:18:00.0"),
        },
        capacity={"memory": Quantity("143771Mi"), "multiprocessors": Quantity("132")},
    )


def _per_eval(n: int, fresh: bool) -> float:
    selector = compile_selector(SELECTOR)
    devices = [_device() for _ in range(n)] if fresh else [_device()] * n
    start = time.perf_counter()
    for device in devices:
        assert selector.matches(device)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    """Print the figures for bench/RESULTS.md."""
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    _per_eval(200, False)
    warm = min(_per_eval(5000, False) for _ in range(3))
    fresh = min(_per_eval(2000, True) for _ in range(3))
    start = time.perf_counter()
    for i in range(50):
        cached_compile(SELECTOR + f" || {i} == -1")
    compile_us = (time.perf_counter() - start) / 50 * 1e6
    print(f"warm device:  {warm:.1f} us/eval")
    print(f"fresh device: {fresh:.1f} us/eval (value conversion included)")
    print(f"compile (cache miss): {compile_us:.0f} us")


if __name__ == "__main__":
    main()
