"""Who may read kubedra's ``/metrics`` on the local v1.37.2 control plane (issue 27, item 3):
the operator and a node agent, each running under its own ServiceAccount, ask the API server
about every scraper (TokenReview, SubjectAccessReview): no token or a forged one gets 401, a
ServiceAccount without ``kubedra-metrics-reader`` 403, one bound to it the metrics over HTTPS;
``/healthz`` answers without a token. A plain-HTTP request gets no answer."""

from __future__ import annotations

import asyncio
import http.client
import urllib.request
from collections.abc import Iterator

import pytest

from e2e.harness import scrape
from e2e.harness.controlplane import free_port
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually

pytestmark = pytest.mark.cluster

NODE = "scrape-h200"
FAMILY = {"operator": "# TYPE kubedra_operator_leader gauge",
          "agent": "# TYPE kubedra_plugin_registered gauge"}
"""A metric family each process serves (the leader's gauge, the kubelet plugin's)."""


@pytest.fixture(scope="module")
def ports(kubedra: Kubedra) -> Iterator[dict[str, int]]:
    """The session's operator restarted with its metrics port on loopback, and an agent for
    ``NODE`` with its own (restored and stopped afterwards); component → port."""
    options = dict(kubedra.operator_options)
    found = {"operator": free_port(), "agent": free_port()}
    kubedra.stop_operator()
    kubedra.start_operator(**{**options, "liveness_port": found["operator"]})
    kubedra.add_node(NODE, {"kubedra.io/gpu": "true"})
    kubedra.start_agent(NODE, metrics_port=found["agent"])
    try:
        yield found
    finally:
        kubedra.stop_agent(NODE)
        kubedra.stop_operator()
        kubedra.start_operator(**options)


async def _answer(kubedra: Kubedra, port: int, path: str, token: str | None = None,
                  ) -> tuple[int, str]:
    """The status and body of GET ``path``, once the process answers at all."""
    async def answered() -> tuple[int, str] | None:
        try:
            return await asyncio.to_thread(scrape.get, kubedra.plane, port, path, token)
        except OSError:  # not listening yet
            return None
    found: tuple[int, str] = await eventually(answered, timeout=60, what=f"{path} on {port}")
    return found


@pytest.mark.parametrize("component", ["operator", "agent"])
async def test_only_a_scraper_bound_to_the_reader_role_gets_the_metrics(
        kubedra: Kubedra, ports: dict[str, int], component: str) -> None:
    port = ports[component]
    plane = kubedra.plane
    assert await _answer(kubedra, port, "/metrics") == (401, "Unauthorized\n")
    assert await _answer(kubedra, port, "/metrics", "not-a-token") == (401, "Unauthorized\n")
    nobody = scrape.scraper_token(plane, "kubedra-test-nobody", reader=False)
    assert await _answer(kubedra, port, "/metrics", nobody) == (
        403, "Authorization denied for user "
             "system:serviceaccount:kubedra-system:kubedra-test-nobody\n")
    status, text = await _answer(kubedra, port, "/metrics", scrape.scraper_token(plane))
    assert status == 200
    assert FAMILY[component] in text.splitlines()
    status, text = await _answer(kubedra, port, "/healthz")  # probes carry no token
    assert status in {200, 503}
    assert text.startswith("{")


@pytest.mark.parametrize("component", ["operator", "agent"])
async def test_the_metrics_port_speaks_only_https(
        kubedra: Kubedra, ports: dict[str, int], component: str) -> None:
    await _answer(kubedra, ports[component], "/healthz")  # listening

    def plain() -> None:
        urllib.request.urlopen(f"http://127.0.0.1:{ports[component]}/metrics", timeout=10)
    with pytest.raises(http.client.RemoteDisconnected):  # the TLS handshake failed
        await asyncio.to_thread(plain)
