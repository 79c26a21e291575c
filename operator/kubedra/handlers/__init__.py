"""kopf handlers and indexes only: thin glue from watch events to the work queues of
:mod:`kubedra.controller` (:mod:`.operator`), the caches (:mod:`.indexes`), the registry and
watched resources (:mod:`.resources`), and the ``kubedra operator`` command (:mod:`.command`)."""
