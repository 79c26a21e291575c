"""Generated capture variants through the ``snapshot`` backend (issue 13, item 4): the real H200
capture mutated by hypothesis (tests/support/capture_strategies.py). Each variant either fails
discovery with a :class:`DiscoveryError` naming the file or field, or gives devices that
make a valid DeviceInventory report whose pool publishes every reported device — never another
exception, which would stop the agent's discovery loop.

``KUBEDRA_FUZZ_CAPTURES`` sets the number of variants (default 100), each discovered with
``mig: none`` and ``mig: partitions``; the outcome counts go to ``.cache/fuzz/captures.json``
(tests/support/fuzz_report.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from kubedra.api.inventory import DeviceInventory, DiscoveredState, DiscoverySettings
from kubedra.api.resource import ResourceSlice
from kubedra.discovery import DiscoveryError, discover
from kubedra.publishing.pool import build_pool
from kubedra.publishing.slices import split_pool
from tests.support.capture_strategies import capture_variants, write_variant
from tests.support.fuzz_report import fuzz_examples, write_fuzz_report
from tests.support.h200 import H200_CAPTURE

EXAMPLES = fuzz_examples("KUBEDRA_FUZZ_CAPTURES", 100)


def _outcome(variant: dict[str, object], mig: str) -> str:
    """Discover a variant; ``error``, ``published`` (n devices) or ``empty``."""
    with tempfile.TemporaryDirectory() as folder:
        capture = write_variant(Path(folder) / "capture", variant)
        try:
            result = discover(f"snapshot:{capture}", DiscoverySettings.model_validate(
                {"mig": mig}))
        except DiscoveryError as err:
            error = str(err)
        else:
            error = None
    if error is not None:
        assert str(capture) in error or error.startswith("malformed "), error
        return "discovery error"
    state = DiscoveredState(devices=result.devices, counter_sets=result.counter_sets or None,
                            rejected=result.rejected or None, backend="snapshot")
    inventory = DeviceInventory.from_api({
        "metadata": {"name": "fuzz-gpu.kubedra.io"},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "fuzz"},
        "status": {"discovered": state.to_api()}})
    pool = build_pool(inventory)
    assert pool.left_out == list(result.rejected), "the report holds a device the pool refuses"
    assert [d.name for d in pool.devices] == sorted(d.name for d in result.devices)
    for content in split_pool(pool):
        ResourceSlice.from_api({"metadata": {"name": "s"}, "spec": {
            "driver": pool.driver, "nodeName": "fuzz",
            "pool": {"name": pool.name, "generation": 1, "resourceSliceCount": 1},
            "devices": [d.to_api() for d in content.devices],
            "sharedCounters": [c.to_api() for c in content.counter_sets] or None}})
    if result.rejected:
        return "published, some left out"
    return "published" if result.devices else "empty"


def test_capture_variants_fail_discovery_clearly_or_publish_every_reported_device() -> None:
    outcomes: Counter[str] = Counter()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(variant=capture_variants())
    def one(variant: dict[str, object]) -> None:
        for mig in ("none", "partitions"):
            outcomes[_outcome(variant, mig)] += 1

    one()
    write_fuzz_report("captures", outcomes)


@pytest.mark.parametrize("content", [
    [], {"name": "NVIDIA H200"}, {"name": "NVIDIA H200", "profiles": 5},
    {"name": "NVIDIA H200", "profiles": [7]},
    {"name": "NVIDIA H200", "profiles": [{"id": [19], "placements": []}]},
    {"name": "NVIDIA H200", "profiles": [{"id": 19, "placements": [{"start": "0"}]}]}])
def test_a_malformed_placements_file_is_a_discovery_error(tmp_path: Path, content: object
                                                          ) -> None:
    """Found by the fuzzing above: the placements were read without checking their shape, so
    a malformed file raised TypeError or KeyError, which the agent's discovery loop does not
    expect, instead of a DiscoveryError naming the file."""
    capture = tmp_path / "capture"
    shutil.copytree(H200_CAPTURE, capture)
    (capture / "mig_placements.json").write_text(json.dumps(content))
    with pytest.raises(DiscoveryError, match=f"malformed capture file {capture}/mig_placements"):
        discover(f"snapshot:{capture}", DiscoverySettings.model_validate({"mig": "partitions"}))
