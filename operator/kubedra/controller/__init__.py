"""The operator's reconcilers: plain async functions over a cached view of the cluster.

kopf (in :mod:`kubedra.handlers`) feeds the caches and the work queue; the functions here decide
what to write and call :mod:`kubedra.kube` to write it.
"""
