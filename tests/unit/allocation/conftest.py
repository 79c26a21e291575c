"""Installs the TEMPORARY CEL stand-in while ``kubedra.cel`` is not on main (delete then)."""

import importlib.util
import pathlib
import sys

if importlib.util.find_spec("kubedra.cel") is None:
    _spec = importlib.util.spec_from_file_location(
        "kubedra.cel", pathlib.Path(__file__).with_name("cel_standin.py"))
    assert _spec is not None
    assert _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["kubedra.cel"] = _module
    _spec.loader.exec_module(_module)
