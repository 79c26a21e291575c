"""kubedra's own .proto files are wire-compatible with the kubelet's (k8s.io/kubelet v0.37.2):
same packages, services, methods, messages, field names, numbers, types, labels, map entries.

Upstream's api.proto files come from the Go module cache (``go mod download`` fetches the
module when the cache lacks it, e.g. on a fresh CI machine before hack/build-binaries.sh ran).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from kubedra.node.proto import (
    dra_health_v1_pb2,
    dra_health_v1alpha1_pb2,
    dra_v1_pb2,
    dra_v1beta1_pb2,
    pluginregistration_v1_pb2,
)

KUBELET_MODULE = "k8s.io/kubelet@v0.37.2"


@pytest.fixture(scope="module")
def kubelet_module() -> Path:
    """The k8s.io/kubelet module directory in the Go module cache (downloaded if missing)."""
    if shutil.which("go") is None:
        pytest.skip("the go tool is not installed: cannot locate k8s.io/kubelet's protos")
    out = subprocess.run(["go", "mod", "download", "-json", KUBELET_MODULE], check=True,
                         capture_output=True, text=True, timeout=600, cwd="/")
    return Path(json.loads(out.stdout)["Dir"])


def upstream_descriptor(module_dir: Path, relative: str, tmp_path: Path) -> Any:
    """Compile upstream's ``relative`` api.proto into a FileDescriptorProto."""
    out = tmp_path / "upstream.pb"
    source = module_dir / relative
    assert protoc.main(["protoc", f"-I{source.parent}", f"--descriptor_set_out={out}",
                        str(source)]) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    assert len(files) == 1
    return files[0]


def ours(module: ModuleType) -> Any:
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    return proto


def shape(message: Any) -> dict[str, Any]:
    """Everything about a message that matters on the wire or to generated code."""
    return {
        "fields": {f.name: {"number": f.number, "type": f.type, "label": f.label,
                            "type_name": f.type_name,
                            "proto3_optional": f.proto3_optional,
                            "oneof": (message.oneof_decl[f.oneof_index].name
                                      if f.HasField("oneof_index") else None)}
                   for f in message.field},
        "map_entry": message.options.map_entry,
        "nested": {n.name: shape(n) for n in message.nested_type},
        "enums": {e.name: [(v.name, v.number) for v in e.value] for e in message.enum_type},
    }


def file_shape(proto: Any) -> dict[str, Any]:
    return {
        "package": proto.package,
        "syntax": proto.syntax,
        "services": {s.name: {m.name: (m.input_type, m.output_type, m.client_streaming,
                                       m.server_streaming) for m in s.method}
                     for s in proto.service},
        "messages": {m.name: shape(m) for m in proto.message_type},
        "enums": {e.name: [(v.name, v.number) for v in e.value] for e in proto.enum_type},
        "dependencies": list(proto.dependency),
    }


@pytest.mark.parametrize(("relative", "module", "package", "messages"), [
    ("pkg/apis/dra/v1/api.proto", dra_v1_pb2, "k8s.io.kubelet.pkg.apis.dra.v1",
     {"NodePrepareResourcesRequest", "NodePrepareResourcesResponse",
      "NodePrepareResourceResponse", "Device", "NodeUnprepareResourcesRequest",
      "NodeUnprepareResourcesResponse", "NodeUnprepareResourceResponse", "Claim"}),
    ("pkg/apis/dra/v1beta1/api.proto", dra_v1beta1_pb2, "k8s.io.kubelet.pkg.apis.dra.v1beta1",
     {"NodePrepareResourcesRequest", "NodePrepareResourcesResponse",
      "NodePrepareResourceResponse", "Device", "NodeUnprepareResourcesRequest",
      "NodeUnprepareResourcesResponse", "NodeUnprepareResourceResponse", "Claim"}),
    ("pkg/apis/pluginregistration/v1/api.proto", pluginregistration_v1_pb2,
     "pluginregistration",
     {"PluginInfo", "RegistrationStatus", "RegistrationStatusResponse", "InfoRequest"}),
    ("pkg/apis/dra-health/v1/api.proto", dra_health_v1_pb2, "v1",
     {"NodeWatchResourcesRequest", "DeviceIdentifier", "DeviceHealth",
      "NodeWatchResourcesResponse"}),
    ("pkg/apis/dra-health/v1alpha1/api.proto", dra_health_v1alpha1_pb2, "v1alpha1",
     {"NodeWatchResourcesRequest", "DeviceIdentifier", "DeviceHealth",
      "NodeWatchResourcesResponse"}),
])
def test_descriptor_matches_upstream(kubelet_module: Path, tmp_path: Path, relative: str,
                                     module: ModuleType, package: str,
                                     messages: set[str]) -> None:
    upstream = file_shape(upstream_descriptor(kubelet_module, relative, tmp_path))
    mine = file_shape(ours(module))
    assert mine["package"] == upstream["package"] == package
    assert set(mine["messages"]) == set(upstream["messages"]) == messages
    assert mine == upstream


def test_v1_device_has_optional_share_id_and_v1beta1_not() -> None:
    v1 = {f.name: f for f in ours(dra_v1_pb2).message_type if f.name == "Device"}["Device"]
    beta = {f.name: f for f in ours(dra_v1beta1_pb2).message_type
            if f.name == "Device"}["Device"]
    assert [(f.name, f.number) for f in v1.field] == [
        ("request_names", 1), ("pool_name", 2), ("device_name", 3), ("cdi_device_ids", 4),
        ("share_id", 5)]
    assert v1.field[4].proto3_optional
    assert [f.name for f in beta.field] == [
        "request_names", "pool_name", "device_name", "cdi_device_ids"]


def test_map_of_claims_is_keyed_by_string() -> None:
    response = {m.name: m for m in ours(dra_v1_pb2).message_type}["NodePrepareResourcesResponse"]
    entry = response.nested_type[0]
    assert entry.options.map_entry
    assert [(f.name, f.type) for f in entry.field] == [
        ("key", descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
        ("value", descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE)]
