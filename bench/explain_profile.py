"""bench/explain_profile: where the time of a live explanation goes (issue 24 item 2), run by
``bench/explain_live.py --profile DIR`` on its cluster after its figures.

Two profiles, each in this process under :mod:`cProfile` (``DIR/cli.pstats``,
``DIR/operator.pstats``) and as wall seconds per phase (returned, and printed by the bench),
and the wall clock of the CLI as a user runs it (``DIR/cli-wall.raw``: py-spy's collapsed
stacks, ``--idle --threads`` at :data:`WALL_SAMPLES_PER_S`, of ``kubectl-dra explain`` in a
process of its own: where each thread is, waiting included, over the whole command):

- ``cli``: ``kubectl dra explain resourceclaim NAME -n NS`` as the plugin runs it (click's
  runner, so the command returns instead of ending the process), plus the bytes and seconds of
  each list it reads through kubectl's proxy;
- ``operator``: the operator's evaluation of the pod (:func:`kubedra.controller.explanations.
  explain_messages` on an :class:`~kubedra.controller.explain_state.ExplainState`, collector
  paused, as its explainer thread runs it): preparing the snapshot (as at the operator's
  start), the first question, and one after a slice changed, on what the operator's caches
  hold (the lists of the same kinds).
"""

from __future__ import annotations

import cProfile
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from click.testing import CliRunner

WALL_SAMPLES_PER_S = 200
"""py-spy's samples per second and thread of the CLI's wall profile."""


def profile(kubeconfig: Path, namespace: str, claim: str, pod: str, out: Path) -> dict[str, Any]:
    """Profile the CLI's and the operator's explanation of ``claim`` (used by ``pod``);
    pstats files into ``out``; returns the phases' wall seconds."""
    from kubedra.cli import kubectl_dra
    from kubedra.explain import kubectl as kubectl_reader

    out.mkdir(parents=True, exist_ok=True)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    bin_dir = Path(sys.executable).parent
    start = time.perf_counter()
    subprocess.run([str(bin_dir / "py-spy"), "record", "--idle", "--threads", "-r",
                    str(WALL_SAMPLES_PER_S), "-f", "raw", "-o", str(out / "cli-wall.raw"), "--",
                    str(bin_dir / "kubectl-dra"), "explain", "resourceclaim", claim, "-n",
                    namespace], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall_s = time.perf_counter() - start
    lists: list[dict[str, Any]] = []
    real_get = kubectl_reader.KubectlProxy.get

    def timed_get(self: Any, paths: Any, **options: Any) -> list[Any]:
        results = []
        for path in paths:
            start = time.perf_counter()
            results += real_get(self, [path], **options)
            lists.append({"path": path, "s": round(time.perf_counter() - start, 3)})
        return results
    real_pages = getattr(kubectl_reader.KubectlProxy, "pages", None)  # code since explain4

    def timed_pages(self: Any, path: str, limit: int) -> Iterator[list[Any]]:
        start = time.perf_counter()
        assert real_pages is not None
        for page in real_pages(self, path, limit):
            lists.append({"path": path, "page": len(page),
                          "s": round(time.perf_counter() - start, 3)})
            yield page
    kubectl_reader.KubectlProxy.get = timed_get  # type: ignore[method-assign]
    if real_pages is not None:
        kubectl_reader.KubectlProxy.pages = timed_pages  # type: ignore[method-assign]
    try:
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        result = CliRunner().invoke(kubectl_dra, ["explain", "resourceclaim", claim,
                                                  "-n", namespace])
        profiler.disable()
        cli_s = time.perf_counter() - start
    finally:
        kubectl_reader.KubectlProxy.get = real_get  # type: ignore[method-assign]
        if real_pages is not None:
            kubectl_reader.KubectlProxy.pages = real_pages  # type: ignore[method-assign]
    profiler.dump_stats(out / "cli.pstats")
    return {"cli_wall_profiled_s": round(wall_s, 2), "cli_s": round(cli_s, 2),
            "cli_exit": result.exit_code, "cli_lists": lists,
            "operator": _operator(kubeconfig, namespace, claim, pod, out)}


def _operator(kubeconfig: Path, namespace: str, claim: str, pod: str, out: Path
              ) -> dict[str, Any]:
    from kubedra.controller.explain_state import ExplainState, Inputs
    from kubedra.controller.explanations import explain_messages
    from kubedra.explain import PodPlacement
    from kubedra.explain.command import one_shot
    from kubedra.explain.kubectl import Kubectl
    from kubedra.explain.sources import read_cluster

    with Kubectl(kubeconfig).proxy() as proxy:
        objects = read_cluster(proxy, namespace)
    claims = [c for c in objects.claims if c["metadata"]["name"] == claim]
    placement = PodPlacement.from_api(next(p for p in objects.pods
                                           if p["metadata"]["name"] == pod))
    inputs = Inputs(slices=objects.slices, classes=objects.classes,
                    taint_rules=objects.taint_rules,
                    allocated=[c for c in objects.claims if (c.get("status") or {})
                               .get("allocation")],
                    nodes=objects.nodes, inventory_version=1, claims_version=1)
    state = ExplainState()
    start = time.perf_counter()
    one_shot(state.prepare)(inputs)
    figures = {"prepare_s": round(time.perf_counter() - start, 2)}
    changed = dict(inputs.slices[0], metadata={**inputs.slices[0]["metadata"],
                                               "resourceVersion": "changed"})
    for question in ("first", "after_a_slice_changed"):
        if question != "first":
            inputs.slices, inputs.inventory_version = [changed, *inputs.slices[1:]], 2
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        one_shot(explain_messages)(state, inputs, claims, placement)
        profiler.disable()
        figures[f"{question}_question_s"] = round(time.perf_counter() - start, 2)
        profiler.dump_stats(out / f"operator-{question}.pstats")
    return figures
