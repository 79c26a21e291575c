#!/usr/bin/env bash
# `make kind-demo`: kubedra's demo on a kind cluster (hack/kind/cluster.yaml) in the engine of
# hack/kind/engine.sh, with the node image of hack/kind/node-image.sh:
#   kind create cluster; kind load image-archive of `make image`'s image and of the demo pods'
#   image; kubectl apply -k hack/kind; then the demo's pods and checks (python -m e2e.demo
#   --kubeconfig ... --node kubedra-worker): the trainer prints NVIDIA_VISIBLE_DEVICES=GPU-3f1c…
# The cluster keeps running: KUBECONFIG=.cache/kind/kubeconfig (API server forwarded to this
# machine's loopback). `make kind-down` removes it, and everything the engine started.
# The host's addresses and routes are recorded first (.cache/kind/host-network.before) and
# compared by kind-down.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cache="${KUBEDRA_CACHE:-$root/.cache}"
work="$cache/kind"
bin="$cache/bin"
name=kubedra
step() { printf '\n==> %s\n' "$*"; }
die() { echo "kind-demo: error: $*" >&2; exit 1; }
host_network() { ip -br addr; ip route; ip -6 route; }

mkdir -p "$work"
[[ -f "$work/host-network.before" ]] || host_network > "$work/host-network.before"
step "building kind, kubeadm, kube-proxy, CoreDNS, pause (hack/build-kind.sh) and kubedra's image"
hack/build-kind.sh
archive=$(hack/build-image.sh --print-archive)
step "starting the engine: dockerd in network namespace kubedra-kind (hack/kind/engine.sh)"
hack/kind/engine.sh up
eval "$(hack/kind/engine.sh env)"
step "node image (hack/kind/node-image.sh; cached)"
node_image=$(hack/kind/node-image.sh | tail -1)

if ! "$bin/kind" get clusters 2>/dev/null | grep -qx "$name"; then
  step "kind create cluster --name $name --config hack/kind/cluster.yaml --image $node_image"
  .venv/bin/python -c 'import sys
from pathlib import Path
from e2e.harness.realnode import stand_in_devices
from kubedra.node.edits import NVIDIA_CONTROL_NODES
stand_in_devices(Path(sys.argv[1]), ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])' "$work/devices"
  "$bin/kind" create cluster --name "$name" --config hack/kind/cluster.yaml --image "$node_image" \
    --kubeconfig "$work/kubeconfig.netns" --wait 5m
fi
# the API server is published on the namespace's loopback: forward a port of this machine's
forwarded=$(hack/kind/engine.sh forward "$(sed -n 's#^ *server: https://127.0.0.1:\([0-9]*\)$#\1#p' "$work/kubeconfig.netns")")
sed "s#server: https://127.0.0.1:[0-9]*#server: https://127.0.0.1:$forwarded#" "$work/kubeconfig.netns" > "$work/kubeconfig"
export KUBECONFIG="$work/kubeconfig"
kubectl=("$bin/kubectl")

step "kind load image-archive: kubedra's image and the demo pods' image"
.venv/bin/python -c 'import sys
from pathlib import Path
from e2e.harness.images import write_node_images
write_node_images(Path(sys.argv[1]))' "$work/demo-images.tar"
"$bin/kind" load image-archive --name "$name" "$archive"
"$bin/kind" load image-archive --name "$name" "$work/demo-images.tar"

step "installing kubedra: kubectl apply -k hack/kind"
"${kubectl[@]}" apply --server-side -k hack/kind >/dev/null
"${kubectl[@]}" -n kubedra-system rollout status deployment/kubedra-operator --timeout=5m
"${kubectl[@]}" -n kubedra-system rollout status daemonset/kubedra-agent --timeout=5m
"${kubectl[@]}" get nodes -o wide

step "the demo's pods and checks on node $name-worker"
.venv/bin/python -m e2e.demo --kubeconfig "$work/kubeconfig" --node "$name-worker"
printf '\nThe kind cluster keeps running: export KUBECONFIG=%s\nRemove it with: make kind-down\n' \
  "$work/kubeconfig"
