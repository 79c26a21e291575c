"""The node agent: discovery loop, Lease, and the kubelet DRA plugin (gRPC, CDI, checkpoint)."""
