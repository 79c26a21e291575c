"""The ``kubedra`` and ``kubectl dra`` command lines load their subcommands lazily."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
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
  status    What is free where: devices and pending claims.
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


@pytest.mark.parametrize("command", ["explain", "simulate", "status"])
def test_parsing_the_command_line_imports_no_allocator(command: str) -> None:
    """Without ``--kube-version`` parsing the command line imports nothing of the allocator,
    so that kubectl proxy starts before the imports (its check imported the allocator for
    every command, before kubectl started: 0.8 s of a live explain at load 7)."""
    args = {"explain": ["resourceclaim", "c"], "simulate": ["-f", "-"], "status": []}[command]
    assert _loaded(f"from kubedra.cli import kubectl_dra\n"
                   f"kubectl_dra.get_command(None, {command!r}).make_context("
                   f"{command!r}, {args!r})", (
                       "kubedra.allocation", "kubedra.cel", "pydantic")) == []


def _loaded(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` ``code`` imports (the module or one of its submodules), in a fresh
    interpreter (so that other tests' imports do not count; the Kubernetes client's package
    modules whose names are imported on use, :mod:`kubedra.client_imports`, are not its
    import)."""
    probe = (f"{code}\nimport json, sys\nfrom kubedra.client_imports import LazyPackage\n"
             f"print(json.dumps([m for m in {modules!r} if any(\n"
             f"    (k == m or k.startswith(m + '.')) and not isinstance(v, LazyPackage)\n"
             f"    for k, v in list(sys.modules.items()))]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


@pytest.mark.parametrize(("args", "env", "error"), [
    (["dump", "-o", "{tmp}/missing/cluster.yaml"], {},
     "cannot write {tmp}/missing/cluster.yaml: no such directory {tmp}/missing"),
    (["agent", "--node-name", "n"], {"KUBEDRA_METRICS_PORT": "abc"},
     "invalid KUBEDRA_METRICS_PORT='abc': Input should be a valid integer, unable to parse "
     "string as an integer"),
    (["agent", "--node-name", "n", "--metrics-port", "0", "--kubeconfig", "{tmp}/none"], {},
     "no kubeconfig found: {tmp}/none does not exist (give --kubeconfig, KUBEDRA_KUBECONFIG or "
     "KUBECONFIG, or run in a pod)"),
    (["operator", "--liveness-port", "0"], {"KUBECONFIG": "{tmp}/none"},
     "no kubeconfig found: {tmp}/none does not exist (give --kubeconfig, KUBEDRA_KUBECONFIG or "
     "KUBECONFIG, or run in a pod)"),
    (["operator", "--liveness-port", "0"], {"KUBECONFIG": "{tmp}/empty.kubeconfig"},
     "kubeconfig {tmp}/empty.kubeconfig cannot be used: Invalid kube-config file. Expected key "
     "current-context in {tmp}/empty.kubeconfig"),
    (["operator", "--liveness-port", "0", "--health-socket", "{tmp}/h.sock",
      "--metrics-cert-dir", "{tmp}/certs", "--kubeconfig", "{tmp}/valid.kubeconfig"], {},
     "metrics certificate directory {tmp}/certs (tls.crt, tls.key) cannot be used: [Errno 2] "
     "No such file or directory: '{tmp}/certs/tls.crt'"),
    (["operator", "--liveness-port", "0", "--kubeconfig", "{tmp}/bad-ca.kubeconfig"], {},
     "kubeconfig {tmp}/bad-ca.kubeconfig cannot be used: its TLS files (certificate authority "
     "{tmp}/ca.crt) cannot be loaded: X509: NO_CERTIFICATE_OR_CRL_FOUND"),
    (["agent", "--node-name", "n", "--metrics-port", "0",
      "--kubeconfig", "{tmp}/bad-ca.kubeconfig"], {},
     "kubeconfig {tmp}/bad-ca.kubeconfig cannot be used: its TLS files (certificate authority "
     "{tmp}/ca.crt) cannot be loaded: X509: NO_CERTIFICATE_OR_CRL_FOUND"),
    (["explain", "resourceclaim", "x"], {"KUBECONFIG": "{tmp}/none"},
     'resourceclaim "x" in namespace "default": no kubeconfig found: {tmp}/none does not exist '
     "(give --kubeconfig, KUBEDRA_KUBECONFIG or KUBECONFIG, or run in a pod)"),
    (["status"], {"KUBECONFIG": "{tmp}/none:{tmp}/none2"},
     "reading the cluster: no kubeconfig found: {tmp}/none:{tmp}/none2 does not exist (give "
     "--kubeconfig, KUBEDRA_KUBECONFIG or KUBECONFIG, or run in a pod)"),
], ids=["dump to a missing directory", "a bad environment value", "no kubeconfig for the agent",
        "no kubeconfig for the operator", "an empty kubeconfig",
        "no metrics certificate", "a certificate authority that is no certificate",
        "the agent's certificate authority that is no certificate",
        "no kubeconfig for explain (kubectl tried localhost:8080)",
        "no kubeconfig for status"])
def test_bad_input_is_a_one_line_error_not_a_traceback(
        args: list[str], env: dict[str, str], error: str, tmp_path: Path) -> None:
    tmp = str(tmp_path)
    (tmp_path / "empty.kubeconfig").write_text("{}\n")
    (tmp_path / "valid.kubeconfig").write_text(yaml.safe_dump({  # nothing listens there
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    (tmp_path / "ca.crt").write_text("")  # as a failed copy of a CA leaves it
    (tmp_path / "bad-ca.kubeconfig").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9",
                                               "certificate-authority": f"{tmp}/ca.crt"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("KUBEDRA_") and k != "KUBERNETES_SERVICE_HOST"}
    environment.update({k: v.format(tmp=tmp) for k, v in env.items()})
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
    done = subprocess.run([sys.executable, "-m", "kubedra", *(a.format(tmp=tmp) for a in args)],
                          capture_output=True, text=True, timeout=60, env=environment)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"Error: {error.format(tmp=tmp)}\n")


@pytest.mark.parametrize(("args", "error"), [
    (["operator", "--liveness-port", "70000"],
     "Invalid value for '--liveness-port': 70000 is not in the range 0<=x<=65535."),
    (["operator", "--liveness-port", "0", "--drain-grace", "inf"],
     "invalid --drain-grace=inf: Input should be a finite number"),
    (["agent", "--node-name", "n", "--rescan-interval", "0"],
     "invalid --rescan-interval=0.0: Input should be greater than 0"),
    (["agent", "--node-name", "n", "--metrics-port", "70000"],
     "invalid --metrics-port=70000: Input should be less than or equal to 65535"),
    (["probe", "--socket", "/nonexistent.sock", "--timeout", "-1"],
     "Invalid value for '--timeout': -1.0 is not in the range 0<x<=3600 (seconds)"),
    (["probe", "--socket", "/nonexistent.sock", "--timeout", "nan"],
     "Invalid value for '--timeout': nan is not in the range 0<x<=3600 (seconds)"),
], ids=["liveness port", "infinite drain grace", "zero rescan interval", "metrics port",
        "negative probe timeout", "NaN probe timeout"])
def test_a_flag_out_of_range_is_a_one_line_error_not_a_traceback(
        args: list[str], error: str) -> None:
    """Ports above 65535 and socket timeouts that are 0, negative or NaN ended in a traceback
    from ``bind``/``settimeout``; an infinite drain grace was taken and failed each reconcile."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KUBEDRA_")}
    done = subprocess.run([sys.executable, "-m", "kubedra", *args], capture_output=True,
                          text=True, timeout=60, env=environment)
    assert "Traceback" not in done.stderr
    assert (done.returncode, done.stderr.splitlines()[-1]) == (
        2 if error.startswith("Invalid value") else 1, f"Error: {error}")
