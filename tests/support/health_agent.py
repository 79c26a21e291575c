"""``python -m tests.support.health_agent agent <options>``: ``kubedra agent`` whose discovery
can flip a device's health, so that a test turns a replayed GPU Unhealthy and back.

After each real discovery the agent reads :func:`faults_file` (``device-faults.json`` next to
the kubelet's plugins directory, i.e. in the node's directory): a JSON object mapping device
names to a message. Every device named there is reported ``Unhealthy`` with that message;
a missing file means no faults. Everything else is the agent as shipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubedra.api.inventory import DiscoveryResult
from kubedra.cli import main
from kubedra.node import agent
from kubedra.settings import Settings

_shipped = agent.discover


def faults_file(plugins_dir: Path) -> Path:
    """Where the faults are read from, for an agent with kubelet plugins directory
    ``plugins_dir``."""
    return plugins_dir.parent / "device-faults.json"


def _with_faults(*args: Any, **kwargs: Any) -> DiscoveryResult:
    result = _shipped(*args, **kwargs)
    path = faults_file(Settings().kubelet_plugins_dir)
    faults: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    for device in result.devices:
        if device.name in faults:
            device.health, device.health_message = "Unhealthy", faults[device.name]
    return result


if __name__ == "__main__":
    agent.discover = _with_faults
    main()
