"""A real Prometheus (Debian's ``prometheus``, ``/usr/bin/prometheus``) on loopback, started
as a component of a :class:`ControlPlane`, scraping local targets every second as a
Prometheus in the cluster scrapes kubedra (over HTTPS, with a ServiceAccount token); and its
HTTP query API."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from typing import Any

import yaml

from e2e.harness.controlplane import Component, ControlPlane, free_port
from e2e.harness.scrape import scraper_token


class Prometheus:
    """Prometheus scraping ``targets`` (job name → ``host:port`` on loopback) over HTTPS,
    trusting the plane's CA, with the bearer token of ServiceAccount ``scraper``
    (:func:`e2e.harness.scrape.scraper_token`: bound to ``kubedra-metrics-reader``).

    Raises (from :meth:`start`):
        FileNotFoundError: no ``prometheus`` on ``PATH`` (``make promtool`` installs it).
    """

    def __init__(self, plane: ControlPlane, targets: dict[str, str], *,
                 scraper: str = "kubedra-test-prometheus") -> None:
        self.plane = plane
        self.targets = targets
        self.scraper = scraper
        self.port = 0
        self.component: Component | None = None

    def start(self) -> None:
        """Start it; it is stopped with the control plane (or by :meth:`stop`)."""
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus is missing: run hack/install-promtool.sh")
        folder = self.plane.workdir / "prometheus"
        (folder / "data").mkdir(parents=True, exist_ok=True)
        token = folder / "token"  # as a pod's projected ServiceAccount token file
        token.write_text(scraper_token(self.plane, self.scraper))
        token.chmod(0o600)
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{
                      "job_name": job, "static_configs": [{"targets": [t]}],
                      "scheme": "https",
                      "authorization": {"type": "Bearer", "credentials_file": str(token)},
                      "tls_config": {"ca_file": str(self.plane.pki / "ca.crt")},
                  } for job, t in self.targets.items()]}
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.component = self.plane.spawn("prometheus", [
            binary, f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}"])

    def stop(self) -> None:
        """Stop it now."""
        if self.component is not None:
            self.plane.stop_component(self.component)
            self.component = None

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The instant vector of ``expression`` now (``data.result`` of ``/api/v1/query``).

        Raises:
            OSError: Prometheus does not answer; ValueError: the query failed.
        """
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expression}))
        with urllib.request.urlopen(url, timeout=5) as response:
            found = json.loads(response.read())
        if found.get("status") != "success":
            raise ValueError(f"{expression}: {found}")
        result: list[dict[str, Any]] = found["data"]["result"]
        return result
