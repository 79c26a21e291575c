"""Local Kubernetes control plane for kubedra's tests and demo (see :mod:`.controlplane`)."""

from e2e.harness.controlplane import (
    KUBERNETES_VERSION,
    KWOK_NODE_LABEL,
    ControlPlane,
    ControlPlaneError,
    default_bin_dir,
)

__all__ = ["KUBERNETES_VERSION", "KWOK_NODE_LABEL", "ControlPlane", "ControlPlaneError",
           "default_bin_dir"]
