"""The Kubernetes client's packages imported on use (:mod:`kubedra.client_imports`): the
operator's imports load a few dozen of the client's modules, not its 963, and every name the
client's packages export is still there, found on first use (``bench/RESULTS.md``, scale,
round 20). Each check runs in a fresh interpreter: this one may have the client imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> dict[str, object]:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter; its answer."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, check=True, timeout=120,
                          env={"PYTHONPATH": f"{ROOT}:{ROOT / 'operator'}", "PATH": "/usr/bin"})
    answer: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return answer


def test_the_operators_imports_load_a_few_of_the_clients_modules() -> None:
    answer = _run("""
        import json, sys
        import kubedra.handlers.command
        client = [m for m in sys.modules if m.startswith("kubernetes_asyncio")]
        print(json.dumps({"client": len(client), "models": sorted(
            m for m in client if m.startswith("kubernetes_asyncio.client.models."))}))
    """)
    assert int(str(answer["client"])) < 40  # the whole client: 963 modules
    assert answer["models"] == ["kubernetes_asyncio.client.models.v1_object_meta",
                                "kubernetes_asyncio.client.models.v1_owner_reference"]  # kopf's


def test_every_name_of_the_clients_packages_is_found_on_use() -> None:
    answer = _run("""
        import asyncio, json, re
        from pathlib import Path
        import kubedra
        import kubernetes_asyncio
        from kubernetes_asyncio import client, config
        from kubernetes_asyncio.client import ApiClient, CoreV1Api, V1Lease
        from kubernetes_asyncio.client.api_client import ApiClient as Direct
        exported = {}
        for package in (kubernetes_asyncio, client, client.api, client.models):
            text = Path(package.__file__).read_text()
            names = re.findall(r"^from kubernetes_asyncio[.\\w]* import (\\w+)$", text, re.M)
            names += re.findall(r"^import kubernetes_asyncio[.\\w]* as (\\w+)$", text, re.M)
            exported[package.__name__] = [len(names), sum(
                getattr(package, n) is not None for n in names), set(names) <= set(dir(package))]
        class Answer:  # what the API client decodes: a Lease as the API server sends it
            data = json.dumps({"metadata": {"name": "kubedra-operator"},
                               "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}})
        async def decode():
            async with ApiClient() as api:
                return api.deserialize(Answer(), "V1Lease")
        lease = asyncio.run(decode())
        print(json.dumps({"exported": exported, "version": kubernetes_asyncio.__version__,
                          "same": ApiClient is Direct, "config": callable(config.load_kube_config),
                          "lease": [type(lease) is V1Lease, lease.metadata.name,
                                    lease.spec.holder_identity,
                                    lease.spec.lease_duration_seconds],
                          "api": CoreV1Api.__module__}))
    """)
    assert answer["version"] == "36.1.0"
    assert answer["same"] is True
    assert answer["config"] is True
    assert answer["api"] == "kubernetes_asyncio.client.api.core_v1_api"
    assert answer["lease"] == [True, "kubedra-operator", "me", 15]
    exported = answer["exported"]
    assert isinstance(exported, dict)
    assert set(exported) == {"kubernetes_asyncio", "kubernetes_asyncio.client",
                             "kubernetes_asyncio.client.api", "kubernetes_asyncio.client.models"}
    for count, found, listed in exported.values():
        assert count == found
        assert listed is True
    assert exported["kubernetes_asyncio.client.models"][0] > 700  # every model of the API


def test_a_client_imported_before_is_left_as_it_is() -> None:
    answer = _run("""
        import json, sys
        import kubernetes_asyncio.client
        count = len([m for m in sys.modules if m.startswith("kubernetes_asyncio")])
        import kubedra
        from kubedra.client_imports import LazyPackage
        print(json.dumps({"lazy": isinstance(sys.modules["kubernetes_asyncio.client"],
                                             LazyPackage), "count": count}))
    """)
    assert answer["lazy"] is False
    assert int(str(answer["count"])) > 800  # every API and model
