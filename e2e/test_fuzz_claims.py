"""Bad input, fuzzed against the real API server (issue 13, item 4): ResourceClaims for
``kubedra explain`` and ``kubedra simulate`` — garbage CEL selectors, huge and negative counts,
unknown and invalid classes, odd ``firstAvailable`` alternatives, constraints over unknown
requests and attributes, odd capacity requests, allocation modes and tolerations.

Each generated claim is created on the API server. Refused, it must be refused naming a
``spec.`` field (or, a quantity that does not parse, as undecodable: 400 saying why, not
where); ``simulate -f`` of it then (``--from`` a dump of the cluster) must refuse it too, with
one ``Error:`` line naming the fields. Accepted, ``explain`` reads it from the live cluster
(through kubectl, as ``kubectl dra explain`` does) and ``simulate`` from the dump: each
answers (JSON, with a message) or fails with one ``Error:`` line — never a traceback, never
another exception. The operator, which watches every claim, never crashes, and a control
inventory's slices keep their resourceVersions.

Bounded in ``make test`` (``KUBEDRA_FUZZ_CLAIMS``, default 15); counts in
``.cache/fuzz/claims.json`` (tests/support/fuzz_report.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import strategies as st
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.fuzzing import fuzz, undisturbed
from e2e.harness.controlplane import ControlPlane
from e2e.harness.kubedra import Kubedra
from kubedra.explain.command import dump_command, explain_command, simulate_command
from tests.support.fuzz_report import fuzz_examples, write_fuzz_report
from tests.support.inventory_strategies import quantities

pytestmark = pytest.mark.cluster

EXAMPLES = fuzz_examples("KUBEDRA_FUZZ_CLAIMS", 15)
DRIVER = "pci.kubedra.io"

expressions = st.one_of(st.sampled_from([
    f'device.driver == "{DRIVER}"', f'device.attributes["{DRIVER}"].model == "fuzz"',
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("1Gi")) >= 0', "true", "false",
    "1 +", "device.nope", '"not a bool"', f'device.attributes["{DRIVER}"].missing == 1',
    "device.attributes", "[1, 2].all(x, x > 0)" * 40, "1 / 0 == 1", "",
    "device.nope\u0085 == 1"]),  # NEL: a line break to str.splitlines, not to a terminal
    st.text(max_size=60))
classes = st.one_of(st.sampled_from(["pci.kubedra.io", "gpu.kubedra.io",
                                     "no-such-class.kubedra.io"]),
                    st.sampled_from(["", "Bad_Class", "x" * 300]))
request_names = st.one_of(st.sampled_from(["a", "b"]),
                          st.sampled_from(["Bad Name", "", "a/b", "x" * 70]))
tolerations = st.lists(st.fixed_dictionaries({}, optional={
    "key": st.sampled_from(["kubedra.io/unhealthy", "bad key!", ""]),
    "operator": st.sampled_from(["Exists", "Equal", "Maybe"]),
    "value": st.text(max_size=10), "effect": st.sampled_from(["NoSchedule", "NoExecute", "X"]),
    "tolerationSeconds": st.integers(-5, 2**40)}), max_size=2)
device_fields = {
    "selectors": st.lists(st.builds(lambda e: {"cel": {"expression": e}}, expressions),
                          max_size=2),
    "count": st.one_of(st.integers(1, 4), st.integers(-1, 10),
                       st.sampled_from([2**31, 2**63 - 1, 10**6])),
    "allocationMode": st.sampled_from(["ExactCount", "All", "Some", ""]),
    "adminAccess": st.booleans(), "tolerations": tolerations,
    "capacity": st.builds(lambda q: {"requests": {"memory": q}},
                          st.one_of(st.sampled_from(["1Gi", "3Gi", "0"]), quantities))}
exactly = st.fixed_dictionaries({"deviceClassName": classes}, optional=device_fields)
alternative = st.fixed_dictionaries({"name": request_names, "deviceClassName": classes},
                                    optional=device_fields)
requests = st.fixed_dictionaries({"name": request_names}, optional={
    "exactly": exactly, "firstAvailable": st.lists(alternative, max_size=3)})
constraints = st.lists(st.fixed_dictionaries({}, optional={
    "requests": st.lists(st.sampled_from(["a", "b", "nope", "a/x", ""]), max_size=3),
    "matchAttribute": st.sampled_from([f"{DRIVER}/model", "model", "bad attr!", ""]),
    "distinctAttribute": st.sampled_from([f"{DRIVER}/index", "index", ""])}), max_size=2)
claim_specs = st.fixed_dictionaries({"devices": st.fixed_dictionaries(
    {"requests": st.lists(requests, max_size=3)},
    optional={"constraints": constraints})})


@pytest.fixture(autouse=True)
def kubectl_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl (from the test extras) on ``PATH``, as for ``kubectl dra``."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}"
                               f"{os.environ.get('PATH', '')}")


def _verdict(result: Result, what: str) -> str:
    """``explained`` (JSON with a message per request) or ``error`` (one ``Error:`` line).

    Raises:
        AssertionError: anything else: a traceback, another exception, a malformed answer.
    """
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        what, result.output, result.exc_info)
    assert "Traceback" not in result.output, (what, result.output)
    if result.exit_code == 1:  # after the note of the version a dump records, if any
        # an error line, not necessarily the last: the error may quote the claim's text (a
        # CEL error shows the expression with a caret under it, on lines of its own; U+0085
        # or U+2028 in the text, which str.splitlines splits); failed so in 2 of 4 runs
        assert re.search(r"(?m)^Error: ", result.stderr), (what, result.output)
        return "error"
    assert result.exit_code == 0, (what, result.output)
    answer = json.loads(result.stdout)
    explanation = answer.get("explanation", answer)
    assert explanation["message"], (what, answer)
    return "explained"


def _simulate(claim_file: Path, dump: Path) -> str:
    return _verdict(CliRunner().invoke(simulate_command, [
        "-f", str(claim_file), "--from", str(dump), "-o", "json", "--max-copies", "50"]),
        "simulate")


async def _try(plane: ControlPlane, api: ApiClient, namespace: str, name: str,
               spec: dict[str, Any], folder: Path, dump: Path) -> str:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    claim_file = folder / f"{name}.yaml"
    claim_file.write_text(yaml.safe_dump(body))
    resource = client.ResourceV1Api(api)
    try:
        await resource.create_namespaced_resource_claim(namespace, body)
    except ApiException as err:
        refusal: tuple[int, str] | None = (err.status, str(err.body))
    else:
        refusal = None
    if refusal is not None:
        # 400: the body does not decode (a quantity that does not parse: the message says
        # why, not where); 422: invalid, the message names the field
        assert (refusal[0] == 422 and "spec." in refusal[1]) or (
            refusal[0] == 400 and "cannot be handled as a ResourceClaim" in refusal[1]
            and "quantit" in refusal[1]), refusal
        simulated = await asyncio.to_thread(_simulate, claim_file, dump)
        assert simulated == "error", "simulate answered for a claim the API server refuses"
        return ("refused" if refusal[0] == 422 else "undecodable") + "; simulate: error"
    try:
        explained = await asyncio.to_thread(lambda: _verdict(CliRunner().invoke(
            explain_command, ["resourceclaim", name, "-n", namespace, "-o", "json",
                              "--kubeconfig", str(plane.admin_kubeconfig)]), "explain"))
        simulated = await asyncio.to_thread(_simulate, claim_file, dump)
        return f"accepted; explain: {explained}; simulate: {simulated}"
    finally:
        await resource.delete_namespaced_resource_claim(name, namespace)


async def test_fuzzed_claims_are_refused_or_explained_without_a_traceback(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, tmp_path: Path) -> None:
    async with undisturbed(kubedra, admin_api, "fuzz-claims", {
            "driver": DRIVER, "allNodes": True, "pool": "fuzz-claims",
            "counterSets": [{"name": "set-a", "counters": {"slots": {"value": "2"}}}],
            "devices": [{"name": f"dev-{i}", "attributes": {
                "model": {"string": "fuzz"}, "index": {"int": i}},
                "capacity": {"memory": {"value": "2Gi"}},
                "consumesCounters": [{"counterSet": "set-a",
                                      "counters": {"slots": {"value": "1"}}}]}
                for i in range(3)]}):
        dump = tmp_path / "cluster.yaml"
        dumped = await asyncio.to_thread(CliRunner().invoke, dump_command, [
            "-o", str(dump), "--kubeconfig", str(kubedra.plane.admin_kubeconfig)])
        assert dumped.exit_code == 0, dumped.output
        outcomes = await fuzz(claim_specs, EXAMPLES, lambda spec, i: _try(
            kubedra.plane, admin_api, namespace, f"fuzz-claim-{i}", spec, tmp_path, dump))
    write_fuzz_report("claims", outcomes)
