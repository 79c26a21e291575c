"""The one error type of :mod:`kubedra.discovery`."""

from __future__ import annotations


class DiscoveryError(RuntimeError):
    """A discovery source could not be read or made no sense.

    Raised for an unknown backend name, a missing or malformed capture file, NVML failing to
    initialise, or a device whose model would break an API limit. The node agent reports it and
    keeps the inventory it last published.
    """
