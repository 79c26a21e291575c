#!/usr/bin/env bash
# Builds what a kind cluster of kubedra needs beyond `make binaries`, from the Go module proxy
# into .cache/kubernetes/<module>-<stamp>/ (git-ignored), linked into .cache/bin:
#   kind                          sigs.k8s.io/kind v0.33.0 (hack/kind)
#   kubeadm, kubectl, kube-proxy  k8s.io/kubernetes v1.37.2 (hack/node-tools)
#   ptp, host-local, portmap      github.com/containernetworking/plugins (hack/cni-plugins)
#   coredns                       github.com/coredns/coredns (hack/coredns)
#   local-path-provisioner        github.com/rancher/local-path-provisioner (hack/local-path)
#   pause                         kubernetes' build/pause/linux/pause.c of the same module,
#                                 compiled static with the host's gcc
# Each is rebuilt only when its module or build settings change (hack/go-build.sh).
# Usage: hack/build-kind.sh [--force]
set -euo pipefail

prog=build-kind
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/go-build.sh
source "$root/hack/go-build.sh" "$@"

v=$(version kind sigs.k8s.io/kind)
LDFLAGS="-s -w" build "kind $v" kind sigs.k8s.io/kind

LDFLAGS="$K8S_LDFLAGS \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$minor" \
  build "kubeadm, kubectl, kube-proxy $K8S_VERSION" node-tools k8s.io/kubernetes/cmd/kubeadm \
  k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kube-proxy

v=$(version cni-plugins github.com/containernetworking/plugins)
LDFLAGS="-s -w" build "CNI plugins ptp, host-local, portmap $v" cni-plugins \
  github.com/containernetworking/plugins/plugins/main/ptp \
  github.com/containernetworking/plugins/plugins/ipam/host-local \
  github.com/containernetworking/plugins/plugins/meta/portmap

v=$(version coredns github.com/coredns/coredns)
LDFLAGS="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$v" \
  build "coredns $v" coredns github.com/coredns/coredns

v=$(version local-path github.com/rancher/local-path-provisioner)
LDFLAGS="-s -w -X main.VERSION=$v" \
  build "local-path-provisioner $v" local-path github.com/rancher/local-path-provisioner

# pause: PID 1 of every pod sandbox (the image kubeadm names registry.k8s.io/pause)
k8s_dir=$(cd "$root/hack/node-tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
src="$k8s_dir/build/pause/linux/pause.c"
[[ -f $src ]] || die "pause.c missing from the module cache ($src)"
out="$cache/kubernetes/pause-$(cat "$src" | sha256sum | cut -c1-16)"
if [[ $force == 1 || ! -f "$out/.complete" ]]; then
  command -v gcc >/dev/null || die "gcc is needed for the pause binary (apt-get install gcc libc6-dev)"
  rm -rf "$out" && mkdir -p "$out"
  gcc -Os -Wall -Werror -static -DVERSION="$K8S_VERSION" -o "$out/pause" "$src" \
    || die "gcc failed to build $src"
  strip "$out/pause"
  touch "$out/.complete"
fi
ln -sf "$out/pause" "$cache/bin/pause"

"$cache/bin/kind" version
echo "build-kind: binaries in $cache/bin"
