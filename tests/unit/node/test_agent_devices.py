"""What the agent hands the kubelet plugin: the pool its inventory names and every device the
pool may publish, declared and discovered (issue 16, items 5 and 6)."""

from __future__ import annotations

from kubedra.api.inventory import DeviceInventory, DiscoveredState, InventoryDevice
from kubedra.api.resource import DeviceAttribute
from kubedra.node.agent import Agent
from kubedra.settings import Settings


def _agent(spec: dict[str, object], discovered: list[str]) -> Agent:
    agent = Agent(Settings(node_name="node-1"), api=None)  # type: ignore[arg-type]
    agent.inventory = DeviceInventory.from_api({
        "metadata": {"name": "node-1-pci.kubedra.io"},
        "spec": {"driver": "pci.kubedra.io", "nodeName": "node-1", **spec}})
    agent.discovered = DiscoveredState(devices=[InventoryDevice(name=n) for n in discovered])
    return agent


def test_before_the_first_scan_the_pool_is_the_node_and_there_are_no_devices() -> None:
    agent = Agent(Settings(node_name="node-1"), api=None)  # type: ignore[arg-type]
    assert (agent.pool(), agent.devices()) == ("node-1", {})


def test_the_pool_is_spec_pool_else_the_node_name() -> None:
    assert _agent({"pool": "dx-shard"}, []).pool() == "dx-shard"
    assert _agent({}, []).pool() == "node-1"


def test_declared_devices_come_first_then_discovered_ones() -> None:
    declared = {"name": "nic-0", "attributes": {"speed": {"string": "100G"}}}
    shadowing = {"name": "pci-1", "attributes": {"declared": {"bool": True}}}
    agent = _agent({"devices": [declared, shadowing]}, ["pci-1", "pci-2"])
    devices = agent.devices()
    assert list(devices) == ["nic-0", "pci-1", "pci-2"]
    assert devices["nic-0"].attributes == {"speed": DeviceAttribute(string_value="100G")}
    assert devices["pci-1"].attributes == {"declared": DeviceAttribute(bool_value=True)}
