#!/usr/bin/env bash
# Builds the pinned Kubernetes control-plane binaries from the Go module proxy into
# .cache/kubernetes/<stamp>/bin (git-ignored) and links .cache/bin to it:
#   kube-apiserver, kube-scheduler, kube-controller-manager  k8s.io/kubernetes v1.37.2 (hack/k8s)
#   etcd                                                    go.etcd.io/etcd/server/v3 (hack/etcd)
#   kwok                                                    sigs.k8s.io/kwok (hack/kwok)
#   dra-reference-allocator (when hack/allocator exists)     k8s.io/dynamic-resource-allocation
# A binary is rebuilt only when its tool module (go.mod, go.sum, its Go sources) or this script
# changes.
# Usage: hack/build-binaries.sh [--force]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="${KUBEDRA_CACHE:-$root/.cache}"
K8S_VERSION=v1.37.2
force=0
for arg in "$@"; do
  [[ $arg == --force ]] || { echo "usage: hack/build-binaries.sh [--force]" >&2; exit 2; }
  force=1
done

die() { echo "build-binaries: error: $*" >&2; exit 1; }
command -v go >/dev/null || die "the 'go' tool is not on PATH; install Go >= 1.26 (https://go.dev/dl/)"
gov=$(go env GOVERSION | sed 's/^go//')
[[ "$(printf '%s\n1.26\n' "$gov" | sort -V | head -1)" == "1.26" ]] \
  || die "Go $gov is too old: the pinned modules need Go >= 1.26"

# build <name> <module dir> <packages...>: one go build per tool module (binary names from
# the packages, or $OUTNAME for a single package), skipped when its
# stamp (hash of go.mod, go.sum, the module's own Go sources, this script) matches what was
# built before.
build() {
  local name=$1 dir=$2; shift 2
  local stamp out
  stamp=$(cat "$root/hack/$dir/go.mod" "$root/hack/$dir/go.sum" \
            $(find "$root/hack/$dir" -maxdepth 1 -name '*.go' | sort) "$0" | sha256sum | cut -c1-16)
  out="$cache/kubernetes/$dir-$stamp"
  if [[ $force == 0 && -f "$out/.complete" ]]; then
    echo "build-binaries: $name: up to date ($out)"
  else
    echo "build-binaries: $name: building (cold builds take minutes)..."
    local start=$SECONDS
    rm -rf "$out" && mkdir -p "$out"
    ( cd "$root/hack/$dir" && go mod download ) \
      || die "$name: 'go mod download' failed in hack/$dir (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
    ( cd "$root/hack/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "${LDFLAGS:-}" -o "$out/${OUTNAME:-}" "$@" ) \
      || die "$name: 'go build' failed in hack/$dir for: $*"
    touch "$out/.complete"
    echo "build-binaries: $name: built in $((SECONDS - start)) s"
  fi
  mkdir -p "$cache/bin"
  local f
  for f in "$out"/*; do ln -sf "$f" "$cache/bin/$(basename "$f")"; done
}

minor=$(echo "$K8S_VERSION" | cut -d. -f2)
LDFLAGS="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$minor" \
  build "kube-apiserver, kube-scheduler, kube-controller-manager $K8S_VERSION" k8s \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager
OUTNAME=etcd LDFLAGS="-s -w" build etcd etcd go.etcd.io/etcd/server/v3
LDFLAGS="-s -w" build kwok kwok sigs.k8s.io/kwok/cmd/kwok
# kwok's default stages (node initialise and heartbeat; pod ready, complete, delete) come from
# the same module version, copied next to the binary for the control-plane harness.
kwok_version=$(cd "$root/hack/kwok" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
kwok_dir=$(cd "$root/hack/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
[[ -d "$kwok_dir/kustomize/stage" ]] || die "kwok $kwok_version stages missing from the module cache ($kwok_dir)"
mkdir -p "$cache/kwok-stages"
for stage in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready \
             pod/fast/pod-complete pod/fast/pod-delete; do
  install -m 0644 "$kwok_dir/kustomize/stage/$stage.yaml" "$cache/kwok-stages/"
done
if [[ -f "$root/hack/allocator/go.mod" ]]; then
  OUTNAME=dra-reference-allocator LDFLAGS="-s -w" build dra-reference-allocator allocator .
fi

"$cache/bin/kube-apiserver" --version
echo "build-binaries: binaries in $cache/bin"
