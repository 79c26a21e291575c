"""The Kubernetes client's packages imported on use: ``kubernetes_asyncio`` (36.1.0) imports in
its package modules every API class and every model of the whole Kubernetes API, 963 modules
and 32 MiB of the operator's memory (its RSS after its imports: 117 MiB with them, 85 MiB
without; ``bench/RESULTS.md``, scale, round 20), of which kubedra uses a dozen APIs and a few
models (kopf imports two of them, ``V1ObjectMeta`` and ``V1OwnerReference``, at its own
import).

:func:`install` puts in ``sys.modules`` the package modules :data:`PACKAGES` as modules of
their own whose names are found on first use: the names a package module's ``__init__.py``
imports (``from kubernetes_asyncio.client.api.core_v1_api import CoreV1Api``, ``import
kubernetes_asyncio.client as client``) are read from that file, and a name is imported when
it is first looked up (``client.CoreV1Api``, ``from kubernetes_asyncio.client import
ApiClient``, the API client's ``getattr(kubernetes_asyncio.client.models, "V1Lease")`` when it
decodes an answer). Submodules are found on the package's own path, so
``kubernetes_asyncio.client.api_client`` is the library's module itself. Called by
``kubedra/__init__.py``, before anything imports the client; where the client was imported
already it leaves it as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.api",
            "kubernetes_asyncio.client.models")
"""The client's package modules that import whole families of modules, parents first."""

_FROM = re.compile(r"^from (kubernetes_asyncio(?:\.\w+)+) import (\w+)\s*$", re.MULTILINE)
_AS = re.compile(r"^import (kubernetes_asyncio(?:\.\w+)+) as (\w+)\s*$", re.MULTILINE)
_VERSION = re.compile(r"^__version__ = \"([^\"]+)\"\s*$", re.MULTILINE)


class LazyPackage(types.ModuleType):
    """A package module whose public names are imported on first lookup (see the module
    docstring)."""

    def __init__(self, name: str, init: Path, path: list[str]) -> None:
        super().__init__(name)
        self.__file__ = str(init)
        self.__path__ = path
        self.__package__ = name
        self._kubedra_names: dict[str, tuple[str, str | None]] | None = None

    def _names(self) -> dict[str, tuple[str, str | None]]:
        """Name → (module, the name in it, or None: the module itself), as the package's
        ``__init__.py`` imports them (read once)."""
        if self._kubedra_names is None:
            text = Path(str(self.__file__)).read_text(encoding="utf-8")
            names: dict[str, tuple[str, str | None]] = {
                name: (module, name) for module, name in _FROM.findall(text)}
            names.update({name: (module, None) for module, name in _AS.findall(text)})
            self._kubedra_names = names
        return self._kubedra_names

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") or attribute == "_kubedra_names":
            raise AttributeError(attribute)
        found = self._names().get(attribute)
        if found is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attribute!r}")
        module_name, member = found
        module = importlib.import_module(module_name)
        value = module if member is None else getattr(module, member)
        setattr(self, attribute, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._names()})


def install() -> None:
    """Put :data:`PACKAGES` in ``sys.modules`` as :class:`LazyPackage` modules, unless the
    client is imported already (or not installed: nothing to do)."""
    if any(name in sys.modules for name in PACKAGES):
        return
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)  # its parent is the lazy one put in just before
        if spec is None or spec.origin is None or spec.submodule_search_locations is None:
            return
        init = Path(spec.origin)
        module = LazyPackage(name, init, list(spec.submodule_search_locations))
        if version := _VERSION.search(init.read_text(encoding="utf-8")):
            module.__version__ = version.group(1)  # type: ignore[attr-defined]
        module.__spec__ = spec
        module.__loader__ = spec.loader
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
