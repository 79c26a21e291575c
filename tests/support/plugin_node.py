"""A node for kubelet-plugin tests: the kubelet's directories, a CDI directory, a boot ID
file and stand-in device nodes under a short temporary root (unix socket paths must stay under
108 bytes), and plugins built on them the way the agent builds its plugin."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from e2e.harness.realnode import stand_in_devices
from kubedra.api.inventory import InventoryDevice
from kubedra.node.edits import NVIDIA_CONTROL_NODES
from kubedra.node.metrics import PluginMetrics
from kubedra.node.mig import MigInstance, MigPartitioner, MigPlacement
from kubedra.node.plugin import KubeletPlugin, kubelet_plugin
from kubedra.settings import Settings

STAND_IN_NODES = [*(f"/dev/nvidia{minor}" for minor in (*range(16), 17)), *NVIDIA_CONTROL_NODES,
                  *(f"/dev/nvidia-caps/nvidia-cap{minor}" for minor in range(100, 132))]
"""Device nodes every PluginNode has under its ``device_root``: GPUs 0-15 and 17, the NVIDIA control
nodes and the capability nodes :class:`FakeMigPartitioner` hands out."""


class PluginNode:
    """Directories of one node and the state a test sets: ``devices`` (the agent's current
    inventory) and the boot ID. Each :meth:`plugin` is a fresh agent process's plugin (new
    metrics registry, state read from disk). Its device nodes are stand-ins under
    ``device_root`` (:data:`STAND_IN_NODES`)."""

    def __init__(self, name: str = "node-1", driver: str = "gpu.kubedra.io") -> None:
        self.name = name
        self.driver = driver
        self.root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
        self.registry_dir = self.root / "plugins_registry"
        self.plugins_dir = self.root / "plugins"
        self.cdi_dir = self.root / "cdi"
        self.boot_id_path = self.root / "boot_id"
        self.device_root = self.root / "host"
        stand_in_devices(self.device_root, STAND_IN_NODES)
        self.registry_dir.mkdir()
        self.boot_id_path.write_text("boot-1\n")
        self.devices: dict[str, InventoryDevice] = {}
        self.metrics_registry = CollectorRegistry()

    @property
    def data_dir(self) -> Path:
        return self.plugins_dir / self.driver

    def reboot(self, boot_id: str) -> None:
        """A new boot ID and an empty CDI directory (it is a tmpfs on a real node)."""
        self.boot_id_path.write_text(boot_id + "\n")
        shutil.rmtree(self.cdi_dir, ignore_errors=True)

    def current_devices(self) -> Mapping[str, InventoryDevice]:
        return dict(self.devices)

    def plugin(self, api: ApiClient, pod_uid: str | None = None,
               mig: MigPartitioner | None = None) -> KubeletPlugin:
        """A new plugin (not started) talking to the API as ``api``, built from settings as
        the agent builds it."""
        self.metrics_registry = CollectorRegistry()
        settings = Settings(driver=self.driver, kubelet_registry_dir=self.registry_dir,
                            kubelet_plugins_dir=self.plugins_dir, cdi_dir=self.cdi_dir,
                            boot_id_path=self.boot_id_path, device_root=self.device_root,
                            pod_uid=pod_uid)
        return kubelet_plugin(settings, api, node_name=self.name, pool=lambda: self.name,
                              devices=self.current_devices,
                              metrics=PluginMetrics(self.metrics_registry), mig=mig)

    def metric(self, name: str, **labels: str) -> float:
        """A sample of the newest plugin's metrics (0 when never set)."""
        return self.metrics_registry.get_sample_value(name, labels) or 0.0

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class FakeMigPartitioner:
    """A MIG partitioner without a GPU: instance IDs count up per parent, capability minors are
    derived from them; ``live`` holds the instances that exist now."""

    def __init__(self) -> None:
        self.live: dict[str, MigInstance] = {}
        self.created = 0

    def create(self, placement: MigPlacement) -> MigInstance:
        self.created += 1
        gi = self.created
        instance = MigInstance(placement=placement, uuid=f"MIG-fake-{gi}", gpu_instance_id=gi,
                               compute_instance_id=0, gpu_instance_cap_minor=100 + 2 * gi,
                               compute_instance_cap_minor=101 + 2 * gi)
        self.live[instance.uuid] = instance
        return instance

    def destroy(self, instance: MigInstance) -> None:
        self.live.pop(instance.uuid, None)
