"""Device discovery: backends that turn hardware (or a capture of it) into inventory devices.

The node agent calls one function, :func:`discover` (backend name, the inventory's
``spec.discovery`` settings, sysfs root → :class:`~kubedra.api.inventory.DiscoveryResult`),
and reports the result in ``status.discovered``. Backends and their sources:
:mod:`kubedra.discovery.backends`; PCI: :mod:`~kubedra.discovery.sysfs`,
:mod:`~kubedra.discovery.pci`; NVIDIA: :mod:`~kubedra.discovery.nvml`,
:mod:`~kubedra.discovery.nvml_live`, :mod:`~kubedra.discovery.recorded`,
:mod:`~kubedra.discovery.nvidia`, :mod:`~kubedra.api.mig` (MIG partitions); captures and
the live check: :mod:`~kubedra.discovery.capture`; the ``kubedra discover`` command:
:mod:`~kubedra.discovery.command`.
"""

from kubedra.discovery.backends import GPU_DRIVER, PCI_DRIVER, discover
from kubedra.discovery.errors import DiscoveryError

__all__ = ["GPU_DRIVER", "PCI_DRIVER", "DiscoveryError", "discover"]
