"""The ``kubedra`` and ``kubectl dra`` command lines load their subcommands lazily."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from kubedra.cli import LazyGroup, kubectl_dra, main

GROUPS = [main, kubectl_dra]


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.name)
def test_listed_short_help_is_the_commands_own(group: LazyGroup) -> None:
    for name, (_, short_help) in group.lazy.items():
        command = group.get_command(click.Context(group), name)
        assert command is not None
        assert command.name == name
        assert command.short_help == short_help


def test_help_lists_every_command_in_one_line_each() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert result.output.split("Commands:\n")[1] == """\
  agent     Run the node agent (discovery, kubelet DRA plugin).
  crd       Print the DeviceInventory CustomResourceDefinition (YAML).
  discover  Print the devices and counter sets a backend finds.
  dump      Write what explain needs from the cluster to a file.
  explain   Why a ResourceClaim is pending, or why its devices fit.
  operator  Run the operator (publish slices, reconcile claims).
  probe     Ask a kubedra process for /healthz over its Unix socket.
  simulate  Where a claim would fit now, and how many copies fit.
"""


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["explian"])
    assert result.exit_code == 2
    assert "No such command 'explian'" in result.output


@pytest.mark.parametrize("entry", ["main", "kubectl_plugin"])
def test_help_imports_no_subcommand(entry: str) -> None:
    """``--help`` of either entry point loads neither the Kubernetes client nor kopf nor the
    allocator (a fresh interpreter, so that other tests' imports do not count)."""
    code = (f"import sys; sys.argv = ['x', '--help']\nfrom kubedra import cli\n"
            f"try:\n    cli.{entry}()\nexcept SystemExit:\n    pass")
    assert _loaded(code, ("kubernetes_asyncio", "kopf", "kubedra.allocation", "kubedra.explain",
                          "pydantic")) == []


def test_explain_starts_kubectl_before_importing_the_allocator() -> None:
    """``kubectl dra explain``'s module loads only click and the kubectl reader, so that kubectl
    proxy starts while the allocator, pydantic and CEL are imported (bench/cli.py)."""
    assert _loaded("import kubedra.explain.command", (
        "kubernetes_asyncio", "kubedra.allocation", "kubedra.cel", "kubedra.explain.claims",
        "pydantic", "yaml")) == []


def _loaded(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` ``code`` imports, in a fresh interpreter (so that other tests'
    imports do not count)."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {modules!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded
