"""What kubedra discovers from the real H200 capture (hardware/nvidia-h200): the one device
``gpu-0``, as it appears in ``status.discovered`` (a ResourceSlice has the same without
``health``). Expected values of the acceptance criteria."""

from typing import Any

H200_GPU0: dict[str, Any] = {
    "name": "gpu-0",
    "attributes": {
        "type": {"string": "gpu"},
        "productName": {"string": "NVIDIA H200"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "580.159.4"},
        "cudaDriverVersion": {"version": "13.0.0"},
        "uuid": {"string": "GPU-3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d"},
        "minor": {"int": 0},
        "migCapable": {"bool": True},
        "migEnabled": {"bool": False},
        "eccEnabled": {"bool": True},
        "resource.kubernetes.io/pciBusID": {"string": "0000:00:06.0"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    "capacity": {"memory": {"value": "143771Mi"}, "multiprocessors": {"value": "132"}},
    "health": "Healthy",
}
