"""structlog configuration, done once per process by :func:`configure_logging`.

Both renderers write one event per line to stderr: ``json`` for machines (the default in the
manifests; an exception's traceback is the line's ``exception`` field), ``console`` for people
(an exception's plain Python traceback follows its line). The standard library's ``logging``
(used by kopf, grpc and kubernetes-asyncio) goes through the same renderer.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["json", "console"]

_configured = False


def configure_logging(fmt: LogFormat = "console", level: str = "INFO") -> None:
    """Route structlog and stdlib logging to stderr with one renderer.

    Args:
        fmt: ``json`` (one JSON object a line) or ``console`` (coloured key=value).
        level: a stdlib level name such as ``INFO`` or ``DEBUG``.

    Calling it again reconfigures (tests and ``kubedra`` subcommands may do so).
    """
    global _configured
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # An exception (``log.exception``, and kopf's and kubernetes-asyncio's own ``exc_info``)
    # becomes the ``exception`` field of the JSON line; without format_exc_info the
    # JSONRenderer wrote only reprs (``"ApiException()"``, ``"<traceback object …>"``) and lost
    # the status and reason. The console prints Python's plain traceback: the default, rich's
    # when rich is installed, printed every local of every frame (hundreds of lines each time
    # the leader election retried).
    renderers: list[structlog.types.Processor] = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
        if fmt == "json"
        else [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(),
                                            exception_formatter=structlog.dev.plain_traceback)])
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderers]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    _configured = True


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger named ``name`` (configure first, or stdlib defaults apply)."""
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
