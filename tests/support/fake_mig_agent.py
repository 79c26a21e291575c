"""``python -m tests.support.fake_mig_agent agent <options>``: ``kubedra agent`` with
:class:`tests.support.plugin_node.FakeMigPartitioner` as its MIG partitioner, so that MIG
claims are prepared on a real node without a GPU (e2e/test_real_node.py). Everything else is
the agent as shipped."""

from __future__ import annotations

from typing import Any

from kubedra.cli import main
from kubedra.node import agent
from kubedra.node.plugin import KubeletPlugin
from tests.support.plugin_node import FakeMigPartitioner

_shipped = agent.kubelet_plugin


def _with_fake_mig(*args: Any, **kwargs: Any) -> KubeletPlugin:
    kwargs["mig"] = FakeMigPartitioner()
    return _shipped(*args, **kwargs)


if __name__ == "__main__":
    agent.kubelet_plugin = _with_fake_mig
    main()
