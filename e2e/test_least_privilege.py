"""Least privilege, proven on the API server (issue 13, item 5): what each kubedra
ServiceAccount may do, as the API server itself lists it (SelfSubjectRulesReview under the
account's own token), equals the table below — nothing more; and the node agent's files
(plugin sockets, checkpoint) are not writable by other users."""

from __future__ import annotations

import asyncio
import socket
import stat
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from e2e.harness import scrape
from e2e.harness.kubedra import NAMESPACE, Kubedra
from e2e.harness.wait import eventually
from kubedra.kube import make_api_client

pytestmark = pytest.mark.cluster

Rule = tuple[str, str, str, str]
"""(API group, resource, verb, resource name or "")."""

DEFAULT: set[Rule] = {
    ("authentication.k8s.io", "selfsubjectreviews", "create", ""),
    ("authorization.k8s.io", "selfsubjectaccessreviews", "create", ""),
    ("authorization.k8s.io", "selfsubjectrulesreviews", "create", ""),
    ("certificates.k8s.io", "clustertrustbundles", "get", ""),
    ("certificates.k8s.io", "clustertrustbundles", "list", ""),
    ("certificates.k8s.io", "clustertrustbundles", "watch", ""),
}
"""What every authenticated user may do (system:basic-user, and reading the cluster's public
trust bundles)."""


def _rules(group: str, resources: str, verbs: str, names: str = "") -> set[Rule]:
    return {(group, r, v, n) for r in resources.split() for v in verbs.split()
            for n in (names.split() or [""])}


REVIEWS = (_rules("authentication.k8s.io", "tokenreviews", "create")
           | _rules("authorization.k8s.io", "subjectaccessreviews", "create"))
"""What serving /metrics to authorized scrapers only takes (kubedra.metrics_auth): asking the
API server who a bearer token is and whether that user may get /metrics."""


EXPECTED: dict[str, set[Rule]] = {
    "kubedra-operator": DEFAULT | REVIEWS
    | _rules("kubedra.io", "deviceinventories", "get list watch")
    | _rules("kubedra.io", "deviceinventories/status", "get patch")
    | _rules("apiextensions.k8s.io", "customresourcedefinitions", "get",
             "deviceinventories.kubedra.io")
    | _rules("resource.k8s.io", "resourceslices", "get list watch create update delete")
    | _rules("resource.k8s.io", "resourceclaims", "get list watch")
    | _rules("resource.k8s.io", "resourceclaims/status", "patch")
    | _rules("resource.k8s.io", "resourceclaims/driver", "arbitrary-node:patch",
             "gpu.kubedra.io pci.kubedra.io")
    | _rules("resource.k8s.io", "deviceclasses devicetaintrules", "list watch")
    | _rules("", "nodes pods", "list watch")
    | _rules("", "events", "create")
    | _rules("coordination.k8s.io", "leases", "get list watch create")
    | _rules("coordination.k8s.io", "leases", "update", "kubedra-operator"),
    "kubedra-agent": DEFAULT | REVIEWS
    | _rules("kubedra.io", "deviceinventories", "get create")
    | _rules("kubedra.io", "deviceinventories/status", "patch")
    | _rules("resource.k8s.io", "resourceclaims", "get")
    | _rules("resource.k8s.io", "resourceclaims/status", "patch")
    | _rules("resource.k8s.io", "resourceclaims/driver", "associated-node:patch",
             "gpu.kubedra.io pci.kubedra.io")
    | _rules("", "events", "create")
    | _rules("", "nodes", "get")
    | _rules("coordination.k8s.io", "leases", "get create update"),
}
"""Everything each ServiceAccount may do in the operator's namespace and cluster-wide. Notably
absent: Secrets, ConfigMaps, pods/exec, anything on ResourceClaim allocations, any write to a
DeviceInventory by the agent beyond creating its own node's (agent-policy.yaml) or by the
operator beyond its status, and any Lease update by the operator but its own leader-election
Lease ``kubedra-operator``."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _allowed(kubedra: Kubedra, account: str) -> set[Rule]:
    config = kubedra.plane.kubeconfig_for_service_account(NAMESPACE, account)
    api = await make_api_client(config)
    async with api:
        review = await client.AuthorizationV1Api(api).create_self_subject_rules_review(
            {"spec": {"namespace": NAMESPACE}})
    found: set[Rule] = set()
    for rule in review.status.resource_rules:
        for group in rule.api_groups or [""]:
            for resource in rule.resources or []:
                for verb in rule.verbs:
                    for name in rule.resource_names or [""]:
                        found.add((group, resource, verb, name))
    return found


@pytest.mark.parametrize("account", sorted(EXPECTED))
async def test_each_service_account_may_do_exactly_what_the_table_says(
        kubedra: Kubedra, account: str) -> None:
    allowed = await _allowed(kubedra, account)
    assert sorted(allowed - EXPECTED[account]) == []
    assert sorted(EXPECTED[account] - allowed) == []
    assert not any(r[1] in {"secrets", "pods/exec", "configmaps"} or r[2] == "*"
                   for r in allowed)


async def test_agent_files_are_not_writable_by_others_and_its_endpoints_leak_no_token(
        kubedra: Kubedra) -> None:
    node = "perm-node"
    kubedra.add_node(node)
    port = _free_port()
    kubedra.start_agent(node, metrics_port=port)
    try:
        async def files() -> list[Any] | None:
            found = [p for p in kubedra.node_dir(node).rglob("*")
                     if p.name.endswith(".sock")]
            return found if len(found) == 2 else None
        sockets = await eventually(files, timeout=60, what="the agent's plugin sockets")
        checked = [*sockets, *kubedra.node_dir(node).rglob("checkpoint.json"),
                   *kubedra.node_dir(node).rglob("*.json")]
        for path in checked:
            mode = path.stat().st_mode
            assert not mode & stat.S_IWOTH, f"{path} is world-writable ({oct(mode)})"
        config = yaml.safe_load(next(kubedra.plane.workdir.glob(
            f"sa-{NAMESPACE}-kubedra-agent-kubedra-agent-{node}.kubeconfig")).read_text())
        token = config["users"][0]["user"]["token"]
        reader = scrape.scraper_token(kubedra.plane)
        for path in ("/metrics", "/healthz"):
            status, text = await asyncio.to_thread(scrape.get, kubedra.plane, port, path,
                                                   reader)
            assert status == 200
            for secret in (token, reader):
                assert secret not in text
                assert secret[:16] not in text
            assert "bearer" not in text.lower()
    finally:
        kubedra.stop_agent(node)
