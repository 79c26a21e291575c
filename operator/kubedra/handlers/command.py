"""``kubedra operator``: run the kopf operator (publishing and claim reconciliation) on the
replica that holds the leader-election Lease (:mod:`kubedra.controller.leadership`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import uuid

import click
import kopf

from kubedra import kube, lease_api
from kubedra.controller.leadership import ElectionTiming, Leadership, LostLeadership
from kubedra.controller.metrics import OperatorCollector
from kubedra.controller.runtime import Runtime
from kubedra.handlers import index_readiness
from kubedra.handlers.operator import Memo, health
from kubedra.handlers.resources import registry
from kubedra.logging import configure_logging, get_logger
from kubedra.metrics import REGISTRY, start_metrics_server
from kubedra.metrics_auth import CertificateError, secure_serving
from kubedra.options import common_options
from kubedra.settings import Settings, settings_from_flags

log = get_logger(__name__)


@click.command("operator", short_help="Run the operator (publish slices, reconcile claims).")
@common_options
@click.option("--liveness-port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port of /healthz and /metrics, HTTPS unless --metrics-secure=false "
                   "(0 disables it)")
@click.option("--health-socket", type=click.Path(dir_okay=False),
              help="Also serve /healthz and /metrics on this Unix socket, for an exec probe "
                   "(`kubedra probe --socket PATH`) where replicas share a host network")
@click.option("--drain-grace", type=click.FloatRange(min=0), default=None,
              help="Seconds a device leaving its pool stays published with the "
                   "kubedra.io/draining NoSchedule taint before it is taken out, so that "
                   "kube-scheduler sees it tainted first [env KUBEDRA_DRAIN_GRACE; default 30]")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Reconcile only while holding the Lease kubedra-operator (run several "
                   "replicas); --no-leader-elect reconciles at once (one replica only)")
def operator_command(liveness_port: int, health_socket: str | None, leader_elect: bool,
                     **flags: object) -> None:
    """Run the operator: publish DeviceInventories as ResourceSlices, reconcile claims."""
    settings = settings_from_flags(**flags)
    configure_logging(settings.log_format, settings.log_level)
    with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, SIGTERM
        try:
            asyncio.run(run_operator(settings, liveness_port, leader_elect, health_socket))
        except (kube.KubeconfigError, CertificateError) as err:
            raise click.ClickException(str(err)) from None


async def run_operator(settings: Settings, liveness_port: int, leader_elect: bool,
                       health_socket: str | None = None) -> None:
    """Serve ``/healthz`` (``{"ok": true, "role": "leader"|"standby", "identity": ...,
    "electionStallSeconds": ..., ...}``, the election's figures:
    :meth:`kubedra.controller.election_figures.ElectionFigures.to_json`) and, on the leader,
    ``"kubedra":`` :func:`kubedra.handlers.operator.health`, where kopf's probe put it) and
    run kopf while leading. A replica that loses its Lease exits at once (status 1): the
    kubelet restarts it as a standby."""
    async def lead() -> None:
        index_readiness.install()
        await kopf.operator(registry=registry, clusterwide=True, standalone=True, memo=memo)

    # unique per process, as client-go's "<hostname>_<uuid>": a leader's container restarted
    # in place must not take its predecessor's Lease as its own
    identity = f"{settings.pod_name or socket.gethostname()}_{uuid.uuid4()}"
    # the election runs in a process of its own, with its own API client
    leadership = Leadership(functools.partial(lease_api.connect,
                                              await kube.api_endpoint(settings.kubeconfig)),
                            settings.namespace, identity, ElectionTiming(
                                lease_duration=settings.leader_lease_duration,
                                renew_deadline=settings.leader_renew_deadline,
                                retry_period=settings.leader_retry_period),
                            setup=functools.partial(configure_logging, settings.log_format,
                                                    settings.log_level))
    if not leader_elect:
        leadership.assume_leading()
    memo = Memo(runtime=Runtime(settings, may_write=leadership.may_write))

    def report() -> dict[str, object]:
        return {"ok": True, **leadership.report(), **leadership.figures_json(),
                **({"kubedra": health(memo.runtime)} if leadership.leading else {})}
    collector = OperatorCollector(memo.runtime, lambda: leadership.leading)
    REGISTRY.register(collector)
    serving = bool(liveness_port or health_socket)
    # the scrapers' reviews go through a client of their own: kopf's is made later, the
    # election's lives in its thread
    reviews = await kube.make_api_client(settings.kubeconfig) \
        if serving and settings.metrics_secure else None
    try:
        server = await start_metrics_server(
            liveness_port or None, report, socket_path=health_socket,
            secure=secure_serving(reviews, settings)) if serving else None
    except BaseException:
        if reviews is not None:
            await reviews.close()
        raise
    # SIGTERM stops a standby at once (PID 1 in a container ignores it otherwise); kopf, while
    # it runs, handles SIGTERM itself and returns, and the Lease is released
    main = asyncio.current_task()
    assert main is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    try:
        if leader_elect:
            await leadership.run(lead, on_lost=functools.partial(_exit_fenced, leadership))
        else:
            await lead()
    finally:
        REGISTRY.unregister(collector)
        if server is not None:
            await server.cleanup()
        if reviews is not None:
            await reviews.close()


def _exit_fenced(leadership: Leadership, err: LostLeadership) -> None:
    """Exit the process at once (status 1), from the election thread: no write after this
    point, not even from cleanup, however busy the reconcilers' event loop is. The log says
    how long the election thread ever waited for the interpreter: a long stall means the
    operator starved it, a short one that the API server did not answer the renewals."""
    log.error("leadership lost: exiting", error=str(err), **{
        key: value for key, value in leadership.figures_json().items() if value != ""})
    os._exit(1)
