"""Prometheus metrics of the kubelet plugin (all named ``kubedra_plugin_*``).

- ``kubedra_plugin_requests_total{method, api}`` (counter): gRPC calls from the kubelet;
  ``method`` NodePrepareResources or NodeUnprepareResources, ``api`` v1 or v1beta1.
- ``kubedra_plugin_request_duration_seconds{method}`` (histogram): time to answer a call.
- ``kubedra_plugin_claim_duration_seconds{operation, result}`` (histogram): per claim, from
  the start of the kubelet's call until that claim's answer was decided (its read from the API
  server, the wait for the node's lock and its own work included: what the kubelet waits for
  that claim); ``operation`` and ``result`` as in ``kubedra_plugin_claims_total``. Every pair
  starts at 0, so that ``rate()`` sees the node's first claim.
- ``kubedra_plugin_claims_total{operation, result}`` (counter): claims handled; ``operation``
  prepare or unprepare, ``result`` done (work was done), cached (already in that state) or
  error.
- ``kubedra_plugin_claim_errors_total{operation, reason}`` (counter): failed claims by reason
  (see :class:`kubedra.node.claims.ClaimError`).
- ``kubedra_plugin_prepared_claims`` (gauge): claims prepared on this node now.
- ``kubedra_plugin_checkpoint_errors_total`` (counter): checkpoints found corrupt or
  unreadable at start (and rebuilt).
- ``kubedra_plugin_status_writes_skipped_total`` (counter): ``status.devices`` writes the API
  server refuses for every JSON client (a claim whose opaque config is stored as non-canonical
  JSON; see docs/node-plugin.md); the claim is prepared without the ``Prepared`` condition.
- ``kubedra_plugin_cdi_specs_restored_total{kind, result}`` (counter): files of prepared
  claims found missing (at start and every ``--cdi-check-interval`` seconds) and written again
  (``done``) or not (``error``, e.g. the claim is gone); ``kind`` ``claim`` (the claim's CDI
  spec), ``metadata`` (a request's device metadata CDI spec) or ``metadata-file`` (the
  metadata file that spec mounts).
- ``kubedra_plugin_registered`` (gauge): 1 after the kubelet confirmed the registration, 0
  after it reported a failure.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 45.0)
"""Seconds, of a call and of a claim. A claim already prepared answers from the checkpoint
in well under 5 ms; one prepared anew costs a GET of the claim, the CDI spec and checkpoint
writes and the ``status.devices`` write, tens of ms on an idle API server and up to seconds
on a loaded one, more where a MIG partition is created (measured: the demo's H200 prepared in
62 ms, ``e2e/test_dashboard.py`` at a load of 10 on 2 cores); 45 s is the kubelet's call
timeout (``defaultClientCallTimeout``), past which no answer counts."""

OPERATIONS = ("prepare", "unprepare")
RESULTS = ("done", "cached", "error")
"""The values of the ``operation`` and ``result`` labels."""


class PluginMetrics:
    """The plugin's metrics, registered in ``registry`` (the agent passes
    :data:`kubedra.metrics.REGISTRY`; tests pass a fresh one)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "kubedra_plugin_requests", "gRPC calls from the kubelet.",
            ["method", "api"], registry=registry)
        self.duration = Histogram(
            "kubedra_plugin_request_duration_seconds", "Time to answer a kubelet call.",
            ["method"], buckets=DURATION_BUCKETS, registry=registry)
        self.claim_duration = Histogram(
            "kubedra_plugin_claim_duration_seconds",
            "Time from the kubelet's call to a claim's answer, by operation and result.",
            ["operation", "result"], buckets=DURATION_BUCKETS, registry=registry)
        for operation in OPERATIONS:
            for result in RESULTS:
                self.claim_duration.labels(operation, result)
        self.claims = Counter(
            "kubedra_plugin_claims", "Claims handled, by operation and result.",
            ["operation", "result"], registry=registry)
        self.claim_errors = Counter(
            "kubedra_plugin_claim_errors", "Claims that failed, by operation and reason.",
            ["operation", "reason"], registry=registry)
        self.prepared_claims = Gauge(
            "kubedra_plugin_prepared_claims", "Claims prepared on this node.",
            registry=registry)
        self.checkpoint_errors = Counter(
            "kubedra_plugin_checkpoint_errors", "Checkpoints found corrupt or unreadable.",
            registry=registry)
        self.status_writes_skipped = Counter(
            "kubedra_plugin_status_writes_skipped",
            "status.devices writes skipped: the API server refuses them for this claim.",
            registry=registry)
        self.cdi_specs_restored = Counter(
            "kubedra_plugin_cdi_specs_restored",
            "Files of prepared claims found missing, by kind and whether they were written "
            "again.", ["kind", "result"], registry=registry)
        self.registered = Gauge(
            "kubedra_plugin_registered", "1 once the kubelet confirmed the registration.",
            registry=registry)
