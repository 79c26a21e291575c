"""kopf handlers: thin glue from watch events to the reconcilers in :mod:`kubedra.controller`."""
