"""kubedra: a Kubernetes operator that manages specialised hardware through DRA.

Packages by DRA phase (``resource.k8s.io/v1``), lower layers never importing higher ones; the
order is an import contract (``[tool.importlinter]`` in ``pyproject.toml``, run by
``make lint``):

====================  ============  ==================================================
package               DRA phase     what
====================  ============  ==================================================
``api``               all phases    pydantic models: resource.k8s.io/v1, DeviceInventory
``discovery``         modelling     hardware → devices (pci, nvml, snapshot, static)
``publishing``        modelling     inventory → pool → ResourceSlices, as a pure plan
``cel``               requesting    the DRA CEL environment of selectors
``allocation``        scheduling    the structured allocator; one public face
``explain``           scheduling    why a claim is pending; what-if simulate
``controller``        (operator)    reconcilers: pure decisions, then one executor
``node``              activation    the node agent and kubelet plugin (beside the
                                    operator: neither imports the other)
``handlers``          (operator)    kopf handlers and indexes only
``cli``               —             the ``kubedra`` command
====================  ============  ==================================================

Shared services below every phase: :mod:`kubedra.kube` (every API call),
:mod:`kubedra.settings`, :mod:`kubedra.options` (click options), :mod:`kubedra.logging`,
:mod:`kubedra.metrics`.
"""

from kubedra import client_imports

__version__ = "0.1.0"

client_imports.install()  # before anything imports the Kubernetes client
