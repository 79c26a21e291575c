"""What kubedra discovers from the real H200 capture (hardware/nvidia-h200): the one device
``gpu-0``, as it appears in ``status.discovered`` (a ResourceSlice has the same without
``health``). Expected values of the acceptance criteria."""

import json
import shutil
from pathlib import Path
from typing import Any

H200_CAPTURE = Path(__file__).resolve().parents[2] / "hardware" / "nvidia-h200"

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


def capture_with_second_gpu(folder: Path, product_name: str) -> Path:
    """A copy of the H200 capture in ``folder`` with a second GPU (index 1, minor 1, its own
    UUID), a copy of the first but named ``product_name``; returns ``folder``."""
    shutil.copytree(H200_CAPTURE, folder)
    document = json.loads((folder / "nvml.json").read_text())
    second = json.loads(json.dumps(document["devices"][0]))
    second.update(index=1, UUID="GPU-00000000-0000-0000-0000-000000000001", MinorNumber=1,
                  Name=product_name)
    document["devices"].append(second)
    (folder / "nvml.json").write_text(json.dumps(document))
    return folder
