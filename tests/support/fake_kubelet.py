"""A test-side kubelet: finds the plugin's registration socket, registers it, and calls
NodePrepareResources / NodeUnprepareResources over the real unix sockets with kubedra's protos
(the same wire format as the kubelet's, see tests/unit/node/test_plugin_protos.py)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from kubedra.node.proto import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_v1_pb2,
    pluginregistration_v1_pb2_grpc,
)

CALL_TIMEOUT = 45.0
"""Seconds; the kubelet's ``defaultClientCallTimeout`` (pkg/kubelet/cm/dra/plugin)."""
API_MODULES: dict[str, tuple[ModuleType, ModuleType]] = {
    "v1": (dra_v1_pb2, dra_v1_pb2_grpc),
    "v1beta1": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc),
}


@dataclass
class Claim:
    """A claim as the kubelet names it."""

    namespace: str
    name: str
    uid: str


@dataclass
class FakeKubelet:
    """One plugin's kubelet. ``api`` picks the DRA API version to call (the real kubelet takes
    v1 when the plugin offers it)."""

    registry_dir: Path
    api: str = "v1"
    info: Any = None
    channels: list[grpc.aio.Channel] = field(default_factory=list)
    _stub: Any = None

    async def find_socket(self, wait: float = 10.0) -> Path:
        """The one registration socket in the registry directory (names starting with "." are
        ignored, as the kubelet's plugin watcher does); polls for up to ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while True:
            found = [p for p in self.registry_dir.glob("*") if not p.name.startswith(".")
                     and p.is_socket()]
            if len(found) == 1:
                return found[0]
            if time.monotonic() > deadline:
                raise TimeoutError(f"registration sockets in {self.registry_dir}: {found}")
            await asyncio.sleep(0.05)

    async def register(self, accept: bool = True, error: str = "",
                       socket: Path | None = None) -> Any:
        """GetInfo on the registration socket (``socket``, else the only one there), then
        NotifyRegistrationStatus(``accept``); connects to the DRA endpoint when accepted.
        Returns the PluginInfo."""
        socket = socket or await self.find_socket()
        channel = grpc.aio.insecure_channel(f"unix://{socket}")
        self.channels.append(channel)
        registration = pluginregistration_v1_pb2_grpc.RegistrationStub(channel)
        self.info = await registration.GetInfo(pluginregistration_v1_pb2.InfoRequest())
        await registration.NotifyRegistrationStatus(
            pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=accept, error=error))
        if accept:
            dra = grpc.aio.insecure_channel(f"unix://{self.info.endpoint}")
            self.channels.append(dra)
            self._stub = API_MODULES[self.api][1].DRAPluginStub(dra)
        return self.info

    def _claims(self, claims: list[Claim]) -> list[Any]:
        pb2 = API_MODULES[self.api][0]
        return [pb2.Claim(namespace=c.namespace, name=c.name, uid=c.uid) for c in claims]

    async def prepare(self, claims: list[Claim]) -> Any:
        """NodePrepareResources with the kubelet's call timeout; the response message."""
        pb2 = API_MODULES[self.api][0]
        return await self._stub.NodePrepareResources(
            pb2.NodePrepareResourcesRequest(claims=self._claims(claims)), timeout=CALL_TIMEOUT)

    async def unprepare(self, claims: list[Claim]) -> Any:
        """NodeUnprepareResources with the kubelet's call timeout; the response message."""
        pb2 = API_MODULES[self.api][0]
        return await self._stub.NodeUnprepareResources(
            pb2.NodeUnprepareResourcesRequest(claims=self._claims(claims)), timeout=CALL_TIMEOUT)

    async def close(self) -> None:
        """Close all channels."""
        for channel in self.channels:
            await channel.close()
        self.channels.clear()
