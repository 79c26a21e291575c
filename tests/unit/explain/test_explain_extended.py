"""The claim kube-scheduler makes for a pod's extended resources (KEP-5004), by its rules."""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.api.resource import DeviceClass
from kubedra.explain.extended import class_for, extended_resource_claim, extended_resource_requests


def device_class(name: str, extended: str | None = None, created: str = "2026-01-01T00:00:00Z"
                 ) -> DeviceClass:
    return DeviceClass.model_validate({"metadata": {"name": name, "creationTimestamp": created},
                                       "spec": {"extendedResourceName": extended}})


CLASSES = [device_class("gpu.kubedra.io", "nvidia.com/gpu"),
           device_class("pci.kubedra.io")]


def container(name: str, requests: dict[str, int], restart: str | None = None
              ) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": {
        k: str(v) for k, v in requests.items()}}}
    if restart:
        c["restartPolicy"] = restart
    return c


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None
        ) -> dict[str, Any]:
    return {"metadata": {"name": "legacy", "namespace": "ns"},
            "spec": {"containers": containers, "initContainers": init or []}}


def requests(p: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(r.name, r.exactly.device_class_name, r.exactly.count)
            for r in extended_resource_requests(p, CLASSES) if r.exactly]


GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(("the_pod", "expected"), [
    # the real node's reporting pod: the init container reuses main's request
    (pod([container("main", {GPU: 1})], init=[container("report", {GPU: 1})]),
     [("container-1-request-0", "gpu.kubedra.io", 1)]),
    # an init container needing more gets a request of its own for the rest
    (pod([container("main", {GPU: 1})], init=[container("prep", {GPU: 3})]),
     [("container-0-request-0", "gpu.kubedra.io", 2),
      ("container-1-request-0", "gpu.kubedra.io", 1)]),
    # two regular containers: one request each; the index counts sorted resource names
    (pod([container("a", {"cpu": 1, GPU: 2}), container("b", {GPU: 1})]),
     [("container-0-request-1", "gpu.kubedra.io", 2),
      ("container-1-request-0", "gpu.kubedra.io", 1)]),
    # a sidecar is long-lived: its own request
    (pod([container("main", {GPU: 1})], init=[container("side", {GPU: 1}, "Always")]),
     [("container-0-request-0", "gpu.kubedra.io", 1),
      ("container-1-request-0", "gpu.kubedra.io", 1)]),
    # the implicit name of a class
    (pod([container("main", {"deviceclass.resource.kubernetes.io/pci.kubedra.io": 1})]),
     [("container-0-request-0", "pci.kubedra.io", 1)]),
    # nothing backed by DRA
    (pod([container("main", {"cpu": 1, "example.com/fpga": 1})]), []),
])
def test_requests_follow_the_schedulers_rules(the_pod: dict[str, Any],
                                              expected: list[tuple[str, str, int]]) -> None:
    assert requests(the_pod) == expected


def test_the_newest_class_wins_a_shared_name() -> None:
    classes = [device_class("old", "nvidia.com/gpu", "2026-01-01T00:00:00Z"),
               device_class("new", "nvidia.com/gpu", "2026-02-01T00:00:00Z")]
    chosen = class_for("nvidia.com/gpu", classes)
    assert chosen is not None
    assert chosen.metadata.name == "new"
    assert class_for("example.com/fpga", classes) is None


def test_claim_is_named_for_the_pod_and_marked_as_the_schedulers() -> None:
    claim = extended_resource_claim(pod([container("main", {GPU: 1})]), CLASSES)
    assert claim is not None
    assert claim.to_api()["metadata"] == {
        "name": "legacy-extended-resources", "namespace": "ns",
        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}}
    assert extended_resource_claim(pod([container("main", {"cpu": 1})]), CLASSES) is None
