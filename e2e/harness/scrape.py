"""kubedra's ``/metrics`` and ``/healthz`` read as a scraper in a cluster reads them: over
HTTPS, trusting the serving certificate the harness gives the operator and the agents (signed
by the plane's CA), with the token of a ServiceAccount that the ClusterRole
``kubedra-metrics-reader`` is bound to, minted with the TokenRequest API."""

from __future__ import annotations

import shutil
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from e2e.harness.controlplane import ControlPlane, ControlPlaneError

NAMESPACE = "kubedra-system"
READER_ROLE = "kubedra-metrics-reader"
"""The ClusterRole of manifests/rbac-metrics.yaml: ``get`` on the non-resource URL /metrics."""
SCRAPER = "kubedra-test-scraper"
"""The ServiceAccount the tests' scrapers (and the harness's Prometheus) use."""


def serving_cert_dir(plane: ControlPlane) -> Path | None:
    """``<workdir>/metrics-tls`` with ``tls.crt`` and ``tls.key`` for ``127.0.0.1`` and
    ``localhost``, signed by the plane's CA (issued on the first call); None when this process
    did not start the plane (its CA key is not known): the processes then make self-signed
    certificates, which :func:`client_tls` does not trust."""
    folder = plane.workdir / "metrics-tls"
    if not (folder / "tls.key").exists():
        if plane.ca is None:
            return None
        pair = plane.ca.issue("metrics-serving", "kubedra-metrics",
                              server_hosts=("127.0.0.1", "localhost"))
        folder.mkdir(exist_ok=True)
        shutil.copyfile(pair.cert, folder / "tls.crt")
        shutil.copyfile(pair.key, folder / "tls.key")
    return folder


def client_tls(plane: ControlPlane) -> ssl.SSLContext:
    """A TLS client context that trusts the plane's CA only (and checks the host name)."""
    return ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))


def scraper_token(plane: ControlPlane, name: str = SCRAPER, *, reader: bool = True,
                  duration_s: int = 3600) -> str:
    """A token (TokenRequest, ``duration_s``) of ServiceAccount ``kubedra-system/<name>``,
    created when missing; with ``reader`` a ClusterRoleBinding ``<name>`` binds it to
    :data:`READER_ROLE` (without, the account has no binding at all).

    Raises:
        ControlPlaneError: a request failed.
    """
    _create(plane, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    if reader:
        _create(plane, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]})
    review = plane.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": duration_s}})
    token: str = review["status"]["token"]
    return token


def _create(plane: ControlPlane, path: str, body: dict[str, object]) -> None:
    try:
        plane.request("POST", path, body)
    except ControlPlaneError as err:
        if "HTTP 409" not in str(err):
            raise


def get(plane: ControlPlane, port: int, path: str, token: str | None = None
        ) -> tuple[int, str]:
    """GET ``https://127.0.0.1:<port><path>`` (trusting :func:`client_tls`), with
    ``Authorization: Bearer <token>`` when ``token`` is given; the HTTP status and the body
    (error answers too).

    Raises:
        OSError: nothing answers, or the TLS handshake failed.
    """
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=client_tls(plane)) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
