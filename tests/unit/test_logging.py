"""Logging: an exception logged by a library (kubernetes-asyncio's leader election logs its
failed Lease writes with ``exc_info``) keeps its message in both formats."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from kubedra.logging import configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Give the root logger and structlog back as they were: the handler writes to this test's
    captured stderr, which is closed afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _log_a_library_exception() -> None:
    try:
        raise RuntimeError('(404)\nReason: Not Found\nnamespaces "nosuch" not found')
    except RuntimeError:
        logging.getLogger("kubernetes_asyncio.leaderelection").exception("Failed to create lock")


def test_json_puts_the_exception_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json")
    _log_a_library_exception()
    [line] = capsys.readouterr().err.splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"]) == ("Failed to create lock", "error")
    assert event["exception"].startswith("Traceback (most recent call last):")
    assert event["exception"].endswith(
        'RuntimeError: (404)\nReason: Not Found\nnamespaces "nosuch" not found')


def test_console_prints_the_plain_traceback_without_locals(
        capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("console")
    _log_a_library_exception()
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "Failed to create lock" in lines[0]
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-3:] == ["RuntimeError: (404)", "Reason: Not Found",
                          'namespaces "nosuch" not found']
    assert "locals" not in err
    assert len(lines) < 15
