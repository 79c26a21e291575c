"""``kubedra operator``: run the kopf operator (publishing and claim reconciliation)."""

from __future__ import annotations

import asyncio
import contextlib

import click
import kopf

from kubedra.controller.runtime import Runtime
from kubedra.handlers.operator import Memo
from kubedra.handlers.resources import registry
from kubedra.logging import configure_logging
from kubedra.options import common_options
from kubedra.settings import settings_from_flags


@click.command("operator", short_help="Run the operator (publish slices, reconcile claims).")
@common_options
@click.option("--liveness-port", type=int, default=8080, show_default=True,
              help="Port of /healthz (0 disables it)")
def operator_command(liveness_port: int, **flags: object) -> None:
    """Run the operator: publish DeviceInventories as ResourceSlices, reconcile claims."""
    settings = settings_from_flags(**flags)
    configure_logging(settings.log_format, settings.log_level)
    liveness = f"http://0.0.0.0:{liveness_port}/healthz" if liveness_port else None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(kopf.operator(registry=registry, clusterwide=True, standalone=True,
                                  memo=Memo(runtime=Runtime(settings)),
                                  liveness_endpoint=liveness))
