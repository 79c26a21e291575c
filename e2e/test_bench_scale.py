"""bench/scale.py at a tiny size (3 nodes of 8 H200, every phase, seconds each), so the bench
cannot rot unnoticed: exact slice counts for kubedra and the Go peer, no write on restart or in
steady state, every churned device published, one claim status write per claim, and the
explanation of a claim nothing can satisfy."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scale import Options, run

pytestmark = pytest.mark.cluster

NODES = 3


def test_scale_bench_tiny(tmp_path: Path) -> None:
    result = run(Options(nodes=NODES, steady_s=3, churn_s=4, churn_percent=2000, claims=4,
                         claim_rate=10, peer_hold_s=0, scheduler_qps=200), tmp_path)

    assert (result["devices"], result["slices"]) == (8 * NODES, NODES)  # 8 GPUs: one slice
    # kube-scheduler started with --kube-api-qps=200 --kube-api-burst=400 (a flag it refused
    # would have failed the control plane's start) and allocated every claim below
    assert result["scheduler_client_flags"] == ["--kube-api-qps=200", "--kube-api-burst=400"]
    # kwok's Nodes post status every 300-330 s (a kubelet's nodeStatusReportFrequency), so
    # kube-controller-manager's grace covers that plus its default 50 s
    assert result["node_monitor_flags"] == ["--node-monitor-grace-period=380s"]
    # hack/benchagents created every agent's Lease and renewed each once per period (a third
    # of the Lease duration), the nodes spread evenly over it, for as long as it ran; a turn
    # skipped while the previous renewal is in flight is counted late. The run's length
    # follows the machine's load, so the count is held to the periods that fit in it.
    assert result["agent_leases"] == NODES
    periods = int(result["agents_renewing_s"] // (result["agents_lease_duration_s"] / 3))
    assert periods >= 1, result["agents_renewing_s"]
    assert result["lease_renewals"] + result["late_lease_renewals"] >= periods * NODES
    assert result["failed_lease_renewals"] == 0
    assert result["peer"]["slices"] == NODES
    assert result["peer"]["slice_writes"] == NODES
    publish = result["publish"]
    assert (publish["slices"], publish["slice_writes"]) == (NODES, NODES)
    assert publish["status_writes"] == NODES
    restart = result["restart"]
    assert restart["operator_writes"] == 0, restart["requests"]
    # every pool verified by its status.publishedFrom, none by a full reconcile
    assert restart["reconciled"] >= NODES
    assert restart["unchanged"] == restart["reconciled"]
    assert result["steady"]["slice_writes"] == 0
    assert result["steady"]["operator_writes"] == 0, result["steady"]["requests"]
    assert result["steady"]["leader"]["kept"], result["steady"]["leader"]
    churn = result["churn"]
    assert churn["latency"]["n"] >= 3
    assert churn["requests"].get("update resourceslices") == churn["latency"]["n"]
    claims = result["claims"]
    assert claims["allocated_to_ready"]["n"] == 4
    # every claim's latency split at the audit log's timestamps: kube-scheduler's allocation
    # and the operator's Ready write found for each, and the operator's reconciles counted
    for part in ("created_to_allocated_written", "allocated_to_ready_written",
                 "allocated_to_operator_write", "operator_write", "ready_written_to_seen"):
        assert claims[part]["n"] == 4, (part, claims[part])
    assert claims["allocated_to_operator_write"]["max"] <= claims["allocated_to_ready_written"][
        "max"]
    assert claims["claim_reconciles"] >= 4
    assert claims["scheduler_cpu_ms_per_claim"] > 0
    assert claims["apiserver_cpu_ms_per_claim"] > 0
    assert claims["scheduler_throttled_requests"] == 0  # 4 claims at 200 QPS
    # kube-scheduler's allocations and bindings, from the audit log
    scheduled = claims["scheduler_writes"]
    assert (scheduled.get("update resourceclaims/status"), scheduled.get("create pods/binding")
            ) == (4, 4), scheduled
    assert claims["claim_writes_per_claim"] == 1.0, claims["requests"]
    explain = result["explain"]
    assert "too-big" in explain["explain_first_line"]
