"""make_api_client's aiohttp session does not read the proxy environment or ~/.netrc per
request (kubernetes-asyncio opens its own with ``trust_env=True``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kubedra.kube import make_api_client


async def test_the_session_ignores_the_environment_and_keeps_the_pool(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443",
                                               "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    api = await make_api_client(kubeconfig)
    async with api:
        session = api.rest_client.pool_manager
        assert session.trust_env is False
        assert session.connector is not None
        assert session.connector.limit == 100  # kubernetes-asyncio's connection_pool_maxsize
        assert not session.closed
    assert session.closed
