"""Reading the live cluster through kubectl, for explain, simulate and dump.

The command line reads the cluster with ``kubectl get --raw PATH``, one process per list, all
running at once: kubectl does what the kubeconfig asks (contexts, client certificates, tokens,
exec credential plugins, the in-cluster service account) and prints the API server's own JSON,
which is then read exactly as a dump is. Importing the Kubernetes client instead costs about a
second of every run (``kubernetes_asyncio.client`` imports every API group and model; see
bench/RESULTS.md, "cli"). ``kubectl dra`` runs as a kubectl plugin, so kubectl is on ``PATH``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SERVER_ERROR = re.compile(r"Error from server \((\w+)\)")
"""How kubectl prints an API error: ``Error from server (Forbidden): …``."""


class KubectlError(RuntimeError):
    """kubectl is missing or a request failed.

    Attributes:
        reason: the API's reason (``NotFound``, ``Forbidden``, …) when the API server refused,
            else ``None`` (no kubectl, no connection, a bad kubeconfig).
        message: what kubectl printed (its last line of stderr), or why it did not run.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.message, self.reason = message, reason


class KubectlMissing(KubectlError):
    """kubectl is not on ``PATH``."""


@dataclass(frozen=True)
class Kubectl:
    """kubectl with the user's kubeconfig (``None``: kubectl's own default, ``$KUBECONFIG``,
    ``~/.kube/config``, then the in-cluster service account)."""

    kubeconfig: Path | None = None

    def _command(self, *args: str) -> list[str]:
        binary = shutil.which("kubectl")
        if binary is None:
            raise KubectlMissing("kubectl not found on PATH (reading a live cluster needs it; "
                               "explain from a dump with --from does not)")
        config = ["--kubeconfig", str(self.kubeconfig)] if self.kubeconfig else []
        return [binary, *config, *args]

    def get(self, paths: Sequence[str]) -> list[Any]:
        """The API server's JSON at each of ``paths`` (e.g. ``/api/v1/nodes``), in order; the
        requests run at once. A path the server does not serve (``NotFound``) gives ``None``.

        Raises:
            KubectlError: kubectl is missing, or a request failed otherwise (the first failure).
        """
        commands = [self._command("get", "--raw", path) for path in paths]
        running = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for c in commands]
        results, failures = [], []
        for process in running:
            out, err = process.communicate()
            if process.returncode == 0:
                results.append(json.loads(out))
                continue
            failure = _failure(err)
            results.append(None)
            if failure.reason != "NotFound":
                failures.append(failure)
        if failures:
            raise failures[0]
        return results

    def context_namespace(self) -> str:
        """The namespace of the kubeconfig's current context, or ``default`` when it names
        none or there is no usable kubeconfig (as kubectl itself does).

        Raises:
            KubectlError: kubectl is missing.
        """
        done = subprocess.run(
            self._command("config", "view", "--minify", "-o", "jsonpath={..context.namespace}"),
            capture_output=True, text=True, check=False)
        return (done.stdout.strip() if done.returncode == 0 else "") or "default"


def _failure(stderr: bytes) -> KubectlError:
    lines = stderr.decode(errors="replace").strip().splitlines()
    message = lines[-1] if lines else "kubectl failed"
    found = _SERVER_ERROR.search(message)
    return KubectlError(message, found.group(1) if found else None)
