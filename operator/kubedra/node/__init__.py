"""The node agent: discovery loop, Lease, DeviceInventory status, and the kubelet DRA plugin."""
