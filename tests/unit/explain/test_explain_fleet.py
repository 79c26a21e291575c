"""Explain at fleet size (issue 24): nodes alike but for the names of their devices and holding
claims are one group, said to be alike (not "the same"); counts are never grouped away; the
output stays within a screen, on 30 nodes and on 2,000."""

from __future__ import annotations

import json
import pathlib

from click.testing import CliRunner

from bench import fleet_dump
from kubedra.cli import main


def _simulate(tmp_path: pathlib.Path, nodes: int, claim: str, *extra: str) -> str:
    dump = fleet_dump.write(tmp_path, nodes)
    result = CliRunner().invoke(main, ["simulate", "-f", str(tmp_path / f"claim-{claim}.yaml"),
                                       "--from", str(dump), *extra])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_nodes_held_by_different_claims_are_one_group_per_count(tmp_path: pathlib.Path) -> None:
    text = _simulate(tmp_path, 30, "gpu8")
    assert text == """\
ResourceClaim:  default/gpu8
Pods:           none
Verdict:        Unschedulable
Message:        cannot be allocated: gpu-node-0000: request gpu: 7 of 8 matching devices are free (8
                needed): gpu-0 on gpu-node-0000 is allocated to claim train/job-0000 (request gpu)
                (alike on 9 more nodes, each with its own devices and claims: gpu-node-0003,
                gpu-node-0006, gpu-node-0009, gpu-node-0012, gpu-node-0015, …); gpu-node-0001:
                request gpu: 6 of 8 matching devices are free (8 needed): gpu-0 on gpu-node-0001 is
                allocated to claim train/job-0001 (request gpu); gpu-1 on gpu-node-0001 is allocated
                to claim train/job-0001 (request gpu) (alike on 9 more nodes, each with its own
                devices and claims: gpu-node-0004, gpu-node-0007, gpu-node-0010, gpu-node-0013,
                gpu-node-0016, …); gpu-node-0002: request gpu: 5 of 8 matching devices are free (8
                needed): gpu-0 on gpu-node-0002 is allocated to claim train/job-0002 (request gpu);
                gpu-1 on gpu-node-0002 is allocated to claim train/job-0002 (request gpu); gpu-2 on
                gpu-node-0002 is allocated to claim train/job-0002 (request gpu) (alike on 9 more
                nodes, each with its own devices and claims: gpu-node-0005, gpu-node-0008,
                gpu-node-0011, gpu-node-0014, gpu-node-0017, …)
Nodes:          30 evaluated, 0 without ResourceSlices, 0 excluded by the pods' node selection (30
                in total)

NODE                     REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
gpu-node-0000 (+9 more)  gpu      8       8        8         8         7     7         7         7          fails at free
gpu-node-0001 (+9 more)  gpu      8       8        8         8         6     6         6         6          fails at free
gpu-node-0002 (+9 more)  gpu      8       8        8         8         5     5         5         5          fails at free

Why not:
gpu-node-0000 (alike on 9 more nodes, each with its own devices and claims: gpu-node-0003,
  gpu-node-0006, gpu-node-0009, gpu-node-0012, gpu-node-0015, …):
  held by 10 claims: train/job-0000, train/job-0003, train/job-0006, train/job-0009, train/job-0012,
    …
  request gpu: 7 of 8 matching devices are free (8 needed)
    gpu-0 on gpu-node-0000 is allocated to claim train/job-0000 (request gpu)
gpu-node-0001 (alike on 9 more nodes, each with its own devices and claims: gpu-node-0004,
  gpu-node-0007, gpu-node-0010, gpu-node-0013, gpu-node-0016, …):
  held by 10 claims: train/job-0001, train/job-0004, train/job-0007, train/job-0010, train/job-0013,
    …
  request gpu: 6 of 8 matching devices are free (8 needed)
    gpu-0 on gpu-node-0001 is allocated to claim train/job-0001 (request gpu)
      (the same for 1 more device: gpu-1)
gpu-node-0002 (alike on 9 more nodes, each with its own devices and claims: gpu-node-0005,
  gpu-node-0008, gpu-node-0011, gpu-node-0014, gpu-node-0017, …):
  held by 10 claims: train/job-0002, train/job-0005, train/job-0008, train/job-0011, train/job-0014,
    …
  request gpu: 5 of 8 matching devices are free (8 needed)
    gpu-0 on gpu-node-0002 is allocated to claim train/job-0002 (request gpu)
      (the same for 2 more devices: gpu-1, gpu-2)

Copies:         0 copies fit in the cluster now
"""  # noqa: E501


def test_every_node_on_its_own_with_all(tmp_path: pathlib.Path) -> None:
    text = _simulate(tmp_path, 30, "gpu8", "--all")
    assert "(+" not in text
    assert "held by" not in text
    assert "more groups" not in text
    rows = [line.split()[0] for line in text.splitlines() if line.endswith("fails at free")]
    assert sorted(rows) == [f"gpu-node-{i:04d}" for i in range(30)]


def test_copies_are_grouped_by_node_and_devices(tmp_path: pathlib.Path) -> None:
    text = _simulate(tmp_path, 30, "numa4")
    assert text.endswith("""\
Copies:         30 copies fit in the cluster now (1 on each of 30 nodes: gpu-node-0000,
                gpu-node-0001, gpu-node-0002, gpu-node-0003, gpu-node-0004, …)

NODES                     COPIES  DEVICES
gpu-node-0000 (+29 more)  1 each  gpu-4 (gpu), gpu-5 (gpu), gpu-6 (gpu), gpu-7 (gpu)
""")
    as_json = json.loads(_simulate(tmp_path, 30, "numa4", "-o", "json"))
    assert as_json["copies"]["byNode"] == {f"gpu-node-{i:04d}": 1 for i in range(30)}
    assert len(as_json["explanation"]["candidates"]) == 30


def test_two_thousand_nodes_fit_in_a_screen(tmp_path: pathlib.Path) -> None:
    """The issue's 2,000-node dump: the 8-GPU claim in under 60 lines (times go to bench/)."""
    text = _simulate(tmp_path, 2000, "gpu8")
    assert len(text.splitlines()) == 48
    assert "alike on 666 more nodes" in text
    assert "held by 667 claims: train/job-0000, train/job-0003" in text
