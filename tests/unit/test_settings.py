"""Settings: flags over environment over defaults; the driver follows the backend."""

from pathlib import Path

import click
import pytest

from kubedra.settings import Settings, settings_from_flags


@pytest.mark.parametrize(("backend", "driver"), [
    ("pci", "pci.kubedra.io"), ("static", "pci.kubedra.io"), ("nvml", "gpu.kubedra.io"),
    ("snapshot:hardware/nvidia-h200", "gpu.kubedra.io")])
def test_default_driver_follows_the_backend(backend: str, driver: str) -> None:
    assert Settings(backend=backend).driver == driver


def test_flags_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEDRA_NAMESPACE", "from-env")
    monkeypatch.setenv("KUBEDRA_DRIVER", "env.example.com")
    settings = settings_from_flags(namespace="from-flag", driver=None)
    assert (settings.namespace, settings.driver) == ("from-flag", "env.example.com")


def test_relative_node_paths_become_absolute_against_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = settings_from_flags(kubelet_registry_dir=Path(".cache/node-1/registry"),
                                   kubelet_plugins_dir=Path(".cache/node-1/plugins"),
                                   cdi_dir=Path(".cache/node-1/cdi"), device_root=Path("host"))
    assert settings.kubelet_registry_dir == tmp_path / ".cache/node-1/registry"
    assert settings.kubelet_plugins_dir == tmp_path / ".cache/node-1/plugins"
    assert settings.cdi_dir == tmp_path / ".cache/node-1/cdi"
    assert settings.device_root == tmp_path / "host"
    assert settings.sysfs_root == Path("/sys")


def test_metrics_are_secure_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Settings().metrics_secure, Settings().metrics_cert_dir) == (True, None)
    monkeypatch.setenv("KUBEDRA_METRICS_SECURE", "false")
    assert settings_from_flags().metrics_secure is False
    assert settings_from_flags(metrics_secure=True).metrics_secure is True
    monkeypatch.setenv("KUBEDRA_METRICS_SECURE", "maybe")
    with pytest.raises(click.ClickException, match="invalid KUBEDRA_METRICS_SECURE='maybe': "
                                                   "Input should be a valid boolean"):
        settings_from_flags()


@pytest.mark.parametrize(("variable", "value", "error"), [
    ("KUBEDRA_DRAIN_GRACE", "inf", "Input should be a finite number"),
    ("KUBEDRA_DRAIN_GRACE", "nan", "Input should be a finite number"),
    ("KUBEDRA_DRAIN_GRACE", "1e12", "Input should be less than or equal to 31536000"),
    ("KUBEDRA_DRAIN_GRACE", "-1", "Input should be greater than or equal to 0"),
    ("KUBEDRA_HEALTH_HOLD_DOWN", "inf", "Input should be a finite number"),
    ("KUBEDRA_HEALTH_HOLD_DOWN", "-1", "Input should be greater than or equal to 0"),
    ("KUBEDRA_EXPLAIN_EVENT_INTERVAL", "-1", "Input should be greater than or equal to 0"),
    ("KUBEDRA_LEASE_CHECK_INTERVAL", "0", "Input should be greater than 0"),
    ("KUBEDRA_RESCAN_INTERVAL", "0", "Input should be greater than 0"),
    ("KUBEDRA_RESCAN_INTERVAL", "-5", "Input should be greater than 0"),
    ("KUBEDRA_CDI_CHECK_INTERVAL", "nan", "Input should be a finite number"),
    ("KUBEDRA_LEASE_DURATION", "0", "Input should be greater than or equal to 1"),
    ("KUBEDRA_METRICS_PORT", "70000", "Input should be less than or equal to 65535"),
    ("KUBEDRA_METRICS_PORT", "-1", "Input should be greater than or equal to 0"),
    ("KUBEDRA_FEATURE_DETECTION_INTERVAL", "0.001", "Value error, must be 0 (off) or at least "
     "1 s: a loop that calls the API server more often would load it for nothing"),
    ("KUBEDRA_FEATURE_DETECTION_INTERVAL", "-1", "Input should be greater than or equal to 0"),
])
def test_a_duration_or_port_out_of_range_is_refused_naming_the_variable(
        variable: str, value: str, error: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every duration is finite and at most a year, every loop interval above 0, every port
    0-65535: an infinite or huge drain grace or hold-down made each reconcile that adds it to
    a time fail (OverflowError) while the disabled device stayed untainted; a 0 Lease duration
    or rescan interval spun its loop; a port above 65535 ended in a traceback; a feature
    detection every millisecond made 90 dry-run probes a second."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(click.ClickException) as refused:
        settings_from_flags()
    assert refused.value.message == f"invalid {variable}={value!r}: {error}"



@pytest.mark.parametrize(("value", "hosts"), [
    (None, ["127.0.0.1"]), ("0.0.0.0", ["0.0.0.0"]),
    ("127.0.0.1,10.1.2.3", ["127.0.0.1", "10.1.2.3"]),
    ("127.0.0.1,", ["127.0.0.1"]), (" ::1 , 127.0.0.1", ["::1", "127.0.0.1"])],
    ids=["loopback by default", "every interface", "loopback and the pod's address",
         "the pod's address not known yet", "IPv6 and spaces"])
def test_metrics_listen_where_the_setting_says(value: str | None, hosts: list[str]) -> None:
    assert settings_from_flags(metrics_address=value).metrics_hosts == hosts


@pytest.mark.parametrize(("value", "error"), [
    ("", "invalid --metrics-address='': Value error, at least one IP address is needed"),
    ("localhost", "invalid --metrics-address='localhost': Value error, 'localhost' does not "
     "appear to be an IPv4 or IPv6 address (give IP addresses, comma-separated)")])
def test_metrics_address_must_be_ip_addresses(value: str, error: str) -> None:
    with pytest.raises(click.ClickException) as raised:
        settings_from_flags(metrics_address=value)
    assert raised.value.message == error


@pytest.mark.parametrize(("variable", "value", "error"), [
    ("KUBEDRA_LOG_LEVEL", "banana", "Value error, not a log level: give DEBUG, INFO, WARNING, "
     "ERROR or CRITICAL"),
    ("KUBEDRA_NAMESPACE", "Bad_NS", "Value error, not a namespace name: at most 63 lower-case "
     "letters, digits or '-', starting and ending with a letter or digit"),
    ("KUBEDRA_BACKEND", "banana", "Value error, not a discovery backend: give pci, nvml, "
     "snapshot:<folder> or static"),
    ("KUBEDRA_BACKEND", "snapshot:", "Value error, not a discovery backend: give pci, nvml, "
     "snapshot:<folder> or static"),
    ("KUBEDRA_DRIVER", "Bad_Driver", "Value error, not a driver name: a DNS subdomain of at "
     "most 63 characters (lower-case letters, digits, '-' and '.'), e.g. gpu.kubedra.io"),
    ("KUBEDRA_NODE_NAME", "BAD_NODE", "Value error, not a node name: a DNS subdomain of at "
     "most 253 characters (lower-case letters, digits, '-' and '.')"),
])
def test_a_log_level_or_namespace_that_cannot_be_is_refused_naming_the_variable(
        variable: str, value: str, error: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``KUBEDRA_LOG_LEVEL=banana`` was a traceback (``ValueError: Unknown level: 'BANANA'``
    from logging, after the settings were taken); a namespace that is no DNS label failed only
    at the first API call; an agent with backend ``banana``, a driver or a node name that
    cannot be ran on, retrying against the API server, its discovery failing later."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(click.ClickException) as refused:
        settings_from_flags()
    assert refused.value.message == f"invalid {variable}={value!r}: {error}"


def test_a_log_level_is_taken_in_any_case() -> None:
    assert settings_from_flags(log_level="debug").log_level == "DEBUG"
