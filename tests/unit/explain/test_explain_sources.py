"""Explaining from a dump: reading kubectl's and kubedra's dumps, and what ``kubedra dump``
keeps of each object."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from test_explain_claims import TOO_BIG

from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cli import main
from kubedra.explain.claims import explain_claim
from kubedra.explain.command import one_shot
from kubedra.explain.kubectl import KubectlError
from kubedra.explain.snapshot import ObjectError
from kubedra.explain.sources import (
    SLICE_PAGE,
    ClusterObjects,
    ClusterReading,
    DumpError,
    dump_document,
    dump_text,
    pods_using,
    read_dump,
)
from tests.support.explain_builders import gpu_claim, h200_slices, node, shipped_classes

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "too-big", "namespace": "demo", "uid": "u-1",
                    "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}]},
       "spec": {"nodeSelector": {"type": "kwok"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "type", "operator": "In", "values": ["kwok"]}]}]}},
                    "podAntiAffinity": {"x": 1}},
                "containers": [{"name": "c", "image": "i",
                                "env": [{"name": "TOKEN", "value": "secret"}]}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
       "status": {"phase": "Pending",
                  "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "too-big"}]}}


def _kubectl_list(*items: dict[str, object]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items),
                           "metadata": {"resourceVersion": ""}})


def _cluster(tmp_path: Path) -> Path:
    """kubectl's dump of the demo cluster, as one file."""
    typed = [{"kind": k, "apiVersion": v} for k, v in
             (("ResourceSlice", "resource.k8s.io/v1"), ("DeviceClass", "resource.k8s.io/v1"))]
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             **gpu_claim("too-big", TOO_BIG)}
    items = [{**typed[0], **s} for s in h200_slices("demo-h200")]
    items += [{**typed[1], **c} for c in shipped_classes()]
    items += [claim, {"apiVersion": "v1", "kind": "Node", **node("demo-h200", type="kwok")}, POD,
              {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]
    path = tmp_path / "cluster.yaml"
    path.write_text(_kubectl_list(*items))
    return path


def test_a_kubectl_list_is_read_by_kind_and_other_kinds_are_skipped(tmp_path: Path) -> None:
    objects = read_dump([_cluster(tmp_path)])
    counts = {kind: len(found) for kind, found in objects.by_kind().items()}
    assert counts == {"ResourceSlice": 1, "DeviceClass": len(shipped_classes()),
                      "DeviceTaintRule": 0, "ResourceClaim": 1, "Node": 1, "Pod": 1}


def test_a_directory_api_lists_and_several_files(tmp_path: Path) -> None:
    folder = tmp_path / "dump"
    folder.mkdir()
    (folder / "slices.json").write_text(yaml.safe_dump(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
         "items": h200_slices("demo-h200")}))
    (folder / "nodes.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Node", **node("a")}) + "---\n" + yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Node", **node("b")}))
    (folder / "notes.txt").write_text("not read")
    single = tmp_path / "pod.yaml"
    single.write_text(yaml.safe_dump(POD))
    objects = read_dump([folder, single])
    assert [s["kind"] for s in objects.slices] == ["ResourceSlice"]
    assert [n["metadata"]["name"] for n in objects.nodes] == ["a", "b"]
    assert [p["metadata"]["name"] for p in objects.pods] == ["too-big"]


def test_unreadable_dumps_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DumpError, match=f"^{tmp_path}/missing: no such file or directory$"):
        read_dump([tmp_path / "missing"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(DumpError, match=r"bad.yaml: not a Kubernetes object or list \(no kind\)$"):
        read_dump([bad])


def test_dump_keeps_only_what_explain_reads() -> None:
    objects = ClusterObjects(pods=[POD], nodes=[{
        "metadata": {"name": "n", "labels": {"a": "b"}, "annotations": {"x": "y"}},
        "status": {"capacity": {"cpu": "4"}}}])
    assert dump_document(objects) == {"apiVersion": "v1", "kind": "List", "serverVersion": "",
                                      "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "too-big", "namespace": "demo", "uid": "u-1"},
         "spec": {"nodeSelector": {"type": "kwok"},
                  "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                  "affinity": {"nodeAffinity": POD["spec"]["affinity"]["nodeAffinity"]}},
         "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "too-big"}]}},
    ]}


def test_dump_writes_json_that_reads_back_as_the_same_objects(tmp_path: Path) -> None:
    """``kubedra dump`` writes JSON (indented two spaces): read twenty times faster than
    YAML by ``--from`` (bench/RESULTS.md, round 6), and YAML to any YAML reader."""
    objects = read_dump([_cluster(tmp_path)])
    text = dump_text(objects)
    assert text.startswith('{\n  "apiVersion": "v1",\n  "kind": "List",\n  "serverVersion": "",\n'
                           '  "items": [\n')
    assert json.loads(text) == yaml.safe_load(text) == dump_document(objects)
    dumped = tmp_path / "cluster.yaml"
    dumped.write_text(text)
    read_back = read_dump([dumped]).by_kind().values()
    assert [o for found in read_back for o in found] == dump_document(objects)["items"]


def test_yaml_that_starts_like_json_is_read_as_yaml(tmp_path: Path) -> None:
    flow = tmp_path / "node.yaml"
    flow.write_text("{kind: Node, apiVersion: v1, metadata: {name: a}}\n")
    assert read_dump([flow]).nodes == [{"kind": "Node", "apiVersion": "v1",
                                        "metadata": {"name": "a"}}]
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "Node", "metadata": {"name": ')
    with pytest.raises(DumpError, match=r"^.*broken.json:2:1: did not find expected node "
                                        r"content \(while parsing a flow node\)$"):
        read_dump([broken])


def test_one_shot_commands_run_without_the_cycle_collector_and_restore_it() -> None:
    def failing() -> None:
        raise RuntimeError(str(gc.isenabled()))

    assert gc.isenabled()
    assert one_shot(gc.isenabled)() is False
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match=r"^False$"):
        one_shot(failing)()
    assert gc.isenabled()
    gc.disable()
    try:
        one_shot(gc.isenabled)()
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_the_executables_end_at_once_after_all_their_output(tmp_path: Path) -> None:
    """``kubedra`` and ``kubectl-dra`` end their process when the command has written its
    output (no atexit handler runs), and every byte of it arrives through a pipe; run from
    click's test runner the same command returns."""
    dump = str(_cluster(tmp_path))
    args = ["explain", "resourceclaim", "too-big", "-n", "demo", "--from", dump, "-o", "json"]
    expected = CliRunner().invoke(main, args)
    assert expected.exit_code == 0, expected.output
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    binaries = Path(sys.executable).parent
    runs = {
        "kubedra": [str(binaries / "kubedra"), *args],
        "kubectl-dra": [str(binaries / "kubectl-dra"), *args],
        "atexit": [sys.executable, "-c", "import atexit, sys; atexit.register(print, 'atexit "
                   "ran'); from kubedra.cli import run; sys.argv[1:] = " + repr(args) + "; run()"],
    }
    for name, command in runs.items():
        ran = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        assert (name, ran.returncode, ran.stdout, ran.stderr) == (name, 0, expected.stdout,
                                                                  expected.stderr)


def test_explain_from_a_json_dump_never_imports_pyyaml(tmp_path: Path) -> None:
    """A JSON dump (what ``kubedra dump`` writes) is read without importing PyYAML (about
    15 ms of CPU, bench/RESULTS.md "Cold start"); a YAML dump imports it.
    Each in a fresh interpreter, so that other tests' imports do not count."""
    yaml_dump = _cluster(tmp_path)
    json_dump = tmp_path / "cluster.json"
    json_dump.write_text(dump_text(read_dump([yaml_dump])))
    probe = ("import sys\nfrom kubedra.cli import main\n"
             "main(['explain', 'resourceclaim', 'too-big', '-n', 'demo', '--from', sys.argv[1]],"
             " standalone_mode=False)\nprint('yaml' in sys.modules)")
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    for dump, imported in ((json_dump, "False"), (yaml_dump, "True")):
        ran = subprocess.run([sys.executable, "-c", probe, str(dump)], capture_output=True,
                             text=True, env=env, check=True, timeout=60)
        lines = ran.stdout.splitlines()
        assert (lines[2], lines[-1]) == ("Verdict:        Unschedulable", imported)


def test_pods_of_other_namespaces_do_not_use_the_claim() -> None:
    claim = ResourceClaim.from_api(gpu_claim("too-big", TOO_BIG))
    elsewhere = {**POD, "metadata": {**POD["metadata"], "namespace": "other"}}
    assert [str(p) for p in pods_using(claim, [elsewhere, POD])] == ["demo/too-big"]


def test_explain_from_a_dump_needs_no_cluster(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    dump = str(_cluster(tmp_path))
    result = CliRunner().invoke(main, ["explain", "resourceclaim", "too-big", "-n", "demo",
                                       "--from", dump])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:3] == [
        "ResourceClaim:  demo/too-big", "Pods:           demo/too-big",
        "Verdict:        Unschedulable"]
    result = CliRunner().invoke(main, ["explain", "resourceclaim", "nope", "-n", "demo",
                                       "--from", dump])
    assert (result.exit_code, result.output) == (
        1, 'Error: resourceclaim "nope" in namespace "demo" not found\n')


def test_overlapping_sources_count_each_object_once_and_the_last_read_wins(
        tmp_path: Path) -> None:
    whole = _cluster(tmp_path)
    folder = tmp_path / "dump"
    folder.mkdir()
    (folder / "cluster.yaml").write_text(whole.read_text())
    relabelled = {"apiVersion": "v1", "kind": "Node", **node("demo-h200", type="kwok")}
    relabelled["metadata"]["labels"]["zone"] = "b"
    again = tmp_path / "again.yaml"
    again.write_text(_kubectl_list(POD, relabelled))

    objects = read_dump([folder, whole, again])

    counts = {kind: len(found) for kind, found in objects.by_kind().items()}
    assert counts == {"ResourceSlice": 1, "DeviceClass": len(shipped_classes()),
                      "DeviceTaintRule": 0, "ResourceClaim": 1, "Node": 1, "Pod": 1}
    assert objects.nodes[0]["metadata"]["labels"]["zone"] == "b"


def test_simulate_from_overlapping_sources_counts_devices_once(tmp_path: Path) -> None:
    whole = str(_cluster(tmp_path))
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                     **gpu_claim("any")}))
    result = CliRunner().invoke(main, ["simulate", "-f", str(claim), "--from", whole,
                                       "--from", whole])
    assert result.exit_code == 0, result.output
    assert "Copies:         1 copy fits in the cluster now" in result.stdout


@pytest.mark.parametrize("args", [
    ["explain", "resourceclaim", "too-big", "-n", "demo"],
    ["explain", "pod", "too-big", "-n", "demo"],
    ["simulate", "-f", "{claim}"],
], ids=["explain resourceclaim", "explain pod", "simulate"])
def test_a_node_that_does_not_exist_is_named(args: list[str], tmp_path: Path) -> None:
    dump = str(_cluster(tmp_path))
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump(gpu_claim("any")))
    result = CliRunner().invoke(main, [*(a.format(claim=claim) for a in args), "--from", dump,
                                       "--node", "demo-h200", "--node", "nosuch"])
    assert (result.exit_code, result.output) == (
        1, 'Error: --node: node "nosuch" does not exist\n')


def test_a_dump_records_the_server_version_and_explain_decides_by_it(tmp_path: Path) -> None:
    """``kubedra dump`` records the API server's version, and ``--from`` says it decides as
    it; a dump without one (as kubectl writes it, or an old kubedra dump) decides as 1.37 and
    says so on standard error;
    ``--kube-version`` chooses (1.35's note: its scheduler's pool order varies)."""
    objects = read_dump([_cluster(tmp_path)])
    objects.server_version = "v1.36.3"
    dumped = tmp_path / "recorded.json"
    dumped.write_text(dump_text(objects))
    assert read_dump([dumped]).server_version == "v1.36.3"
    assert read_dump([_cluster(tmp_path)]).server_version == ""
    args = ["explain", "resourceclaim", "too-big", "-n", "demo", "--from"]
    runs = {name: CliRunner().invoke(main, [*args, str(path), *extra]) for name, path, extra in (
        ("recorded", dumped, []), ("old", _cluster(tmp_path), []),
        ("1.35", _cluster(tmp_path), ["--kube-version", "1.35"]),
        ("1.33", _cluster(tmp_path), ["--kube-version", "v1.33.1"]))}
    assert {name: (r.exit_code, r.stderr.splitlines()[-1:]) for name, r in runs.items()} == {
        "recorded": (0, ["note: deciding as Kubernetes 1.36's scheduler, the version the dump "
                         f"records: v1.36.3 ({dumped}) (choose with --kube-version)"]),
        "old": (0, ["note: the Kubernetes version is not known; deciding as 1.37's scheduler "
                    "(choose with --kube-version)"]),
        "1.35": (0, ["note: Kubernetes 1.35's scheduler tries resource pools in an order that "
                     "differs run by run; where several pools could serve a request it may "
                     "pick other devices than shown"]),
        "1.33": (2, ["Error: Invalid value for '--kube-version': Kubernetes 1.33 is not one "
                     "kubedra decides as (1.34 to 1.38)"])}
    assert runs["recorded"].stdout == runs["old"].stdout


def _recorded(tmp_path: Path, name: str, version: str) -> Path:
    """The demo cluster's dump as ``kubedra dump`` writes it, recording ``version``."""
    objects = read_dump([_cluster(tmp_path)])
    objects.server_version = version
    path = tmp_path / name
    path.write_text(dump_text(objects))
    return path


def test_dumps_of_different_kubernetes_minors_are_refused_unless_one_is_chosen(
        tmp_path: Path) -> None:
    """Dumps that record different minors are not merged as whichever was read last: the
    command names each file's version and asks for --kube-version; patches of one minor
    decide alike, and a dump that records none (kubectl's) takes the other's."""
    old, new = _recorded(tmp_path, "a.json", "v1.35.4"), _recorded(tmp_path, "b.json", "v1.37.2")
    patch = _recorded(tmp_path, "c.json", "v1.37.1")
    args = ["explain", "resourceclaim", "too-big", "-n", "demo"]
    mixed = CliRunner().invoke(main, [*args, "--from", str(old), "--from", str(new)])
    assert (mixed.exit_code, mixed.output) == (1, (
        f"Error: --from: the dumps are of different Kubernetes versions: v1.35.4 ({old}), "
        f"v1.37.2 ({new}); choose the one to decide as with --kube-version\n"))
    chosen = CliRunner().invoke(main, [*args, "--from", str(old), "--from", str(new),
                                       "--kube-version", "1.36"])
    assert (chosen.exit_code, chosen.stderr) == (0, "")
    alike = CliRunner().invoke(main, [*args, "--from", str(patch), "--from", str(new),
                                      "--from", str(_cluster(tmp_path))])
    assert (alike.exit_code, alike.stderr) == (0, (
        f"note: deciding as Kubernetes 1.37's scheduler, the version the dumps record: "
        f"v1.37.1 ({patch}), v1.37.2 ({new}) (choose with --kube-version)\n"))


def test_simulate_from_a_dump_says_which_version_it_decides_as(tmp_path: Path) -> None:
    dump = _recorded(tmp_path, "cluster.json", "v1.36.3")
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                     **gpu_claim("any")}))
    result = CliRunner().invoke(main, ["simulate", "-f", str(claim), "--from", str(dump)])
    assert (result.exit_code, result.stderr) == (0, (
        f"note: deciding as Kubernetes 1.36's scheduler, the version the dump records: "
        f"v1.36.3 ({dump}) (choose with --kube-version)\n"))


def test_yaml_that_does_not_parse_is_one_line_with_file_line_and_column(tmp_path: Path) -> None:
    """PyYAML's message is four lines (the context and the problem, each with its mark, of
    ``<unicode string>`` for a dump): one line, ``file:line:column: problem``, for a dump and
    for simulate's claim file; a file that is not UTF-8 says so (it was a traceback for -f)."""
    dump, claim = tmp_path / "dump.yaml", tmp_path / "claim.yaml"
    dump.write_text("kind: List\nitems:\n  - kind: Node\n   metadata: {}\n")
    claim.write_text("kind: ResourceClaim\nmetadata: {name: x\nspec: 1\n")
    binary = tmp_path / "claim.bin"
    binary.write_bytes(b"kind: \xff\n")
    runs = {
        "dump": ["explain", "resourceclaim", "x", "--from", str(dump)],
        "claim": ["simulate", "-f", str(claim), "--from", str(_cluster(tmp_path))],
        "binary dump": ["explain", "resourceclaim", "x", "--from", str(binary)],
        "binary claim": ["simulate", "-f", str(binary), "--from", str(_cluster(tmp_path))]}
    outputs = {name: (r.exit_code, r.output) for name, r in (
        (name, CliRunner().invoke(main, args)) for name, args in runs.items())}
    assert outputs == {
        "dump": (1, f"Error: {dump}:4:4: did not find expected '-' indicator (while parsing a "
                    "block collection that starts at 3:3)\n"),
        "claim": (1, f"Error: {claim}:3:5: expected ',' or '}}', but got ':' (while parsing a "
                     "flow mapping that starts at 2:11)\n"),
        "binary dump": (1, f"Error: {binary}: not UTF-8 text (byte 0xff at offset 6)\n"),
        "binary claim": (1, f"Error: {binary}: not UTF-8 text (byte 0xff at offset 6)\n")}


def test_a_directory_without_dump_files_is_named(tmp_path: Path) -> None:
    """``--from`` a directory with no ``.yaml``/``.yml``/``.json`` file read nothing, and the
    claim was then "not found", as if the cluster had none."""
    (tmp_path / "notes.txt").write_text("a dump elsewhere")
    with pytest.raises(DumpError) as refused:
        read_dump([tmp_path])
    assert str(refused.value) == (f"{tmp_path}: a directory without .yaml, .yml or .json "
                                  "files (a dump is one of those, or a directory of them)")


def test_a_server_version_that_is_not_a_string_is_named(tmp_path: Path) -> None:
    """``serverVersion: 1.36`` (a YAML number) was skipped, and the dump then decided as 1.37
    with a note that the version was not known."""
    dump = tmp_path / "dump.yaml"
    dump.write_text("kind: List\nserverVersion: 1.36\nitems: []\n")
    with pytest.raises(DumpError) as refused:
        read_dump([dump])
    assert str(refused.value) == (f"{dump}: serverVersion 1.36 is not a version string: quote "
                                  "it (serverVersion: \"v1.36.3\")")


def test_the_json_forms_say_which_version_they_decide_as(tmp_path: Path) -> None:
    """``kubeVersion`` in ResourceClaimExplanation, PodExplanation and (in its explanation)
    ResourceClaimSimulation: the minor whose scheduler the answer is of, live or from a dump."""
    dump = str(_recorded(tmp_path, "cluster.json", "v1.36.3"))
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump(gpu_claim("any")))
    runs = {
        "claim": ["explain", "resourceclaim", "too-big", "-n", "demo"],
        "pod": ["explain", "pod", "too-big", "-n", "demo"],
        "simulate": ["simulate", "-f", str(claim)]}
    found = {}
    for name, args in runs.items():
        for extra in ([], ["--kube-version", "1.35"]):
            result = CliRunner().invoke(main, [*args, "--from", dump, "-o", "json", *extra])
            assert result.exit_code == 0, result.output
            answer = json.loads(result.stdout)
            found[name, bool(extra)] = answer.get("explanation", answer).get("kubeVersion")
    assert found == {(name, chosen): "1.35" if chosen else "1.36" for name in runs
                     for chosen in (False, True)}


def _edited(dump: Path, kind: str, edit: Callable[[dict[str, Any]], None]) -> Path:
    """``dump`` with the first object of ``kind`` changed by ``edit``, as a hand would."""
    document = yaml.safe_load(dump.read_text())
    edit(next(i for i in document["items"] if i["kind"] == kind))
    dump.write_text(yaml.safe_dump(document))
    return dump


def _quantity(s: dict[str, Any]) -> None:
    s["spec"]["devices"][0]["capacity"]["memory"] = {"value": "lots"}


def _labels(n: dict[str, Any]) -> None:
    n["metadata"]["labels"] = ["gpu"]


def _count(c: dict[str, Any]) -> None:
    c["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"


def _selectors(c: dict[str, Any]) -> None:
    c["spec"]["selectors"] = "all"


def _node_selector(p: dict[str, Any]) -> None:
    p["spec"]["nodeSelector"] = ["gpu"]


@pytest.mark.parametrize(("kind", "edit", "refusal"), [
    ("Pod", _node_selector,
     "cannot read Pod demo/too-big: spec.nodeSelector: Input should be a map of strings to "
     "strings"),
    ("ResourceSlice", _quantity,
     "cannot read ResourceSlice demo-h200-gpu.kubedra.io-00000: spec.devices[0].capacity.memory."
     "value: Value error, quantities must match the regular expression "
     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': 'lots'"),
    ("Node", _labels,
     "cannot read Node demo-h200: metadata.labels: Input should be a map of strings to strings"),
    ("ResourceClaim", _count,
     "cannot read ResourceClaim demo/too-big: spec.devices.requests[0].exactly.count: Input "
     "should be a valid integer, unable to parse string as an integer"),
    ("DeviceClass", _selectors,
     "cannot read DeviceClass gpu.kubedra.io: spec.selectors: Input should be a valid list"),
])
@pytest.mark.parametrize("command", [
    ["explain", "resourceclaim", "too-big", "-n", "demo"], ["explain", "pod", "too-big", "-n",
                                                            "demo"],
    ["status"], ["simulate", "-f", "{claim}"]])
def test_an_object_of_a_dump_that_does_not_parse_is_named_with_its_field(
        kind: str, edit: Callable[[dict[str, Any]], None], refusal: str, command: list[str],
        tmp_path: Path) -> None:
    """A dump edited by hand (or written by another tool) with a field the API server would
    never have stored was a pydantic traceback."""
    if (kind, command[0]) == ("Pod", "simulate"):
        pytest.skip("simulate reads no pods")
    dump = _edited(_cluster(tmp_path), kind, edit)
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump({"kind": "ResourceClaim", **gpu_claim("c")}))
    result = CliRunner().invoke(main, [*(a.format(claim=claim) for a in command), "--from",
                                       str(dump)])
    assert (result.exit_code, result.stdout, result.stderr.splitlines()[-1]) == (
        1, "", f"Error: {refusal}")


class _Proxy:
    """A :class:`~kubedra.explain.kubectl.KubectlProxy` serving the objects of a dump: the
    slices a page of ``page`` at a time, every other list whole; ``refusing`` maps a path to
    the error its request gets."""

    def __init__(self, objects: ClusterObjects, page: int,
                 refusing: dict[str, KubectlError] | None = None) -> None:
        self.lists = {"/apis/resource.k8s.io/v1/deviceclasses": objects.classes,
                      "/apis/resource.k8s.io/v1/devicetaintrules": objects.taint_rules,
                      "/apis/resource.k8s.io/v1/resourceclaims": objects.claims,
                      "/api/v1/nodes": objects.nodes, "/api/v1/namespaces/demo/pods": objects.pods}
        self.slices, self.page, self.refusing = objects.slices, page, refusing or {}
        self.asked: list[tuple[str, int]] = []

    def pages(self, path: str, limit: int) -> Iterator[list[Any]]:
        self.asked.append((path, limit))
        if path in self.refusing:
            raise self.refusing[path]
        for start in range(0, len(self.slices), self.page):
            yield self.slices[start:start + self.page]

    def get(self, paths: list[str], accept: str = "") -> list[Any]:
        if refused := [self.refusing[p] for p in paths if p in self.refusing]:
            raise refused[0]
        return [{"gitVersion": "v1.37.2"} if p == "/version" else {"items": self.lists[p]}
                for p in paths]


def test_live_slices_parsed_page_by_page_are_the_dumps_models(tmp_path: Path) -> None:
    """Read page by page and parsed as they come, the slices are the models a dump's slices
    become, so the snapshot (and every explanation of it) is the dump's; every other kind is
    read as listed."""
    dumped = read_dump([_cluster(tmp_path)])
    dumped.slices += [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **s}
                      for n in ("demo-h200-b", "demo-h200-c") for s in h200_slices(n)]
    proxy = _Proxy(dumped, page=2)
    reading = ClusterReading(proxy, "demo")  # type: ignore[arg-type]
    objects = reading.objects(parse_slices=True)
    assert proxy.asked == [("/apis/resource.k8s.io/v1/resourceslices", SLICE_PAGE)]
    assert (objects.slices, objects.classes, objects.claims, objects.nodes, objects.pods,
            objects.server_version) == (dumped.slices, dumped.classes, dumped.claims,
                                        dumped.nodes, dumped.pods, "v1.37.2")
    assert len(dumped.slices) == 3
    assert objects.parsed_slices == [ResourceSlice.from_api(s) for s in dumped.slices]
    first, third = (s.spec.devices[0].attributes for s in objects.parsed_slices[::2])
    assert first["productName"] is third["productName"]  # one decoder shares equal values
    claim = dumped.claim("demo", "too-big")
    assert claim is not None
    assert explain_claim(objects.snapshot(), claim, []).to_json() == explain_claim(
        dumped.snapshot(), claim, []).to_json()
    unparsed = ClusterReading(_Proxy(dumped, page=1), "demo").objects()  # type: ignore[arg-type]
    assert (unparsed.slices, unparsed.parsed_slices) == (dumped.slices, None)


def test_a_live_slice_that_does_not_parse_is_named_as_from_a_dump(tmp_path: Path) -> None:
    """A slice that does not parse (no API server stores one; a proxy in between might
    change it) leaves the slices unparsed, so the snapshot parses them and names it, as it
    does a dump's."""
    dumped = read_dump([_edited(_cluster(tmp_path), "ResourceSlice", _quantity)])
    objects = ClusterReading(_Proxy(dumped, page=1), "demo").objects(  # type: ignore[arg-type]
        parse_slices=True)
    assert objects.parsed_slices is None
    with pytest.raises(ObjectError) as live:
        objects.snapshot()
    with pytest.raises(ObjectError) as dump:
        dumped.snapshot()
    assert str(live.value) == str(dump.value)
    assert str(live.value).startswith(
        "ResourceSlice demo-h200-gpu.kubedra.io-00000: spec.devices[0].capacity.memory.value: ")


def test_the_slices_failure_is_told_first(tmp_path: Path) -> None:
    """Every list refused: the error is the slice list's, the first asked (as when the lists
    were read one after another), though the others are read in another thread meanwhile."""
    dumped = read_dump([_cluster(tmp_path)])
    refusing = {path: KubectlError(f"Error from server (Forbidden): {path}", "Forbidden")
                for path in ("/apis/resource.k8s.io/v1/resourceslices",
                             "/apis/resource.k8s.io/v1/deviceclasses")}
    reading = ClusterReading(_Proxy(dumped, 1, refusing), "demo")  # type: ignore[arg-type]
    with pytest.raises(KubectlError) as refused:
        reading.objects(parse_slices=True)
    assert refused.value.message == ("Error from server (Forbidden): "
                                     "/apis/resource.k8s.io/v1/resourceslices")
    del refusing["/apis/resource.k8s.io/v1/resourceslices"]
    with pytest.raises(KubectlError) as refused:
        ClusterReading(_Proxy(dumped, 1, refusing), "demo").objects()  # type: ignore[arg-type]
    assert refused.value.message == ("Error from server (Forbidden): "
                                     "/apis/resource.k8s.io/v1/deviceclasses")
