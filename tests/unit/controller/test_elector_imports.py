"""The elector process imports neither kubernetes-asyncio nor pydantic: kubernetes-asyncio's
generated client alone made the elector 88 MiB of RSS, 40 MiB without it
(``bench/RESULTS.md``, the elector's memory). The spawned process imports what unpickling its
arguments needs: the election module, the Lease client and the logging setup. (The client's
package modules are in ``sys.modules`` as soon as kubedra is, names found on use:
:mod:`kubedra.client_imports`; none of the client's own modules is loaded.)"""

from __future__ import annotations

import subprocess
import sys

from e2e.harness.controlplane import REPO_ROOT


def test_the_elector_imports_no_kubernetes_client() -> None:
    code = ("import sys, kubedra.controller.election, kubedra.lease_api, kubedra.logging; "
            "from kubedra.client_imports import LazyPackage; "
            "print(sorted({m.partition('.')[0] for m, module in sys.modules.items() "
            "if m.partition('.')[0] in ('kubernetes_asyncio', 'pydantic', 'kopf') "
            "and not isinstance(module, LazyPackage)}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO_ROOT, env={"PYTHONPATH": str(REPO_ROOT / "operator")})
    assert out.stdout.strip() == "[]"
