"""Inventory → pool → ResourceSlices: pure functions, no API calls.

:mod:`.pool` merges an inventory's declared and discovered devices into the desired pool and
validates it; :mod:`.slices` splits a pool into slice specs; :mod:`.sync` compares them with the
slices that exist and plans the API writes, following upstream's resourceslice controller.
"""
