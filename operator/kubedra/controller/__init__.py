"""The operator's reconcilers: decisions apart from I/O.

- :mod:`.inventories` and :mod:`.claims`: pure functions from typed inputs (models, the cached
  view) to a typed decision, with the status and the Event that follow; unit-tested per reason;
- :mod:`.executor`: the one place that reads the caches, performs a decision (API calls through
  :mod:`kubedra.kube`) and remembers what was published;
- :mod:`.runtime`: the workers that drain the work queues (:mod:`.queue`), and the tick that
  notices agent Lease expiry (:mod:`.leases`);
- :mod:`.state`: the cached view (kopf indexes, fed by :mod:`kubedra.handlers`) and what the
  operator remembers; :mod:`.explanations`: Events that explain pending claims.
"""
