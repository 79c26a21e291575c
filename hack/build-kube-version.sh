#!/usr/bin/env bash
# Builds one Kubernetes release of the version matrix (KUBE_VERSION other than the default
# v1.37.2, which hack/build-binaries.sh and hack/build-node-binaries.sh build) from its pinned
# tool module hack/k8s-versions/v<version> (made by hack/pin-kube-version.sh) into
# .cache/versions/v<version>-<stamp>/ and links .cache/bin-v<version>/ to it:
# kube-apiserver, kube-scheduler, kube-controller-manager and kubelet. etcd, kwok, containerd
# and runc stay the default build's (.cache/bin). Rebuilt only when the module's go.mod or
# go.sum changes. A cold build takes 10-30 minutes of CPU.
# Usage: hack/build-kube-version.sh 1.34.4 [--force]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${KUBEDRA_CACHE:-$root/.cache}"
die() { echo "build-kube-version: error: $*" >&2; exit 1; }
pinned=$(cd "$root/hack/k8s-versions" && ls -d v*/ | sed 's|^v||; s|/$||' | sort -V | paste -sd, | sed 's/,/, /g')
if [[ $# -lt 1 || $# -gt 2 || ( $# == 2 && ${2:-} != --force ) ]]; then
  echo "usage: hack/build-kube-version.sh X.Y.Z [--force] (a release pinned in hack/k8s-versions/: $pinned)" >&2
  exit 2
fi
version=v${1#v}
force=0
[[ "${2:-}" == "--force" ]] && force=1
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] \
  || die "'$1' is not a Kubernetes release X.Y.Z (e.g. 1.35.4); pinned in hack/k8s-versions/: $pinned"
if [[ $version == v1.37.2 ]]; then
  echo "build-kube-version: Kubernetes $version is the default release, which hack/build-binaries.sh and hack/build-node-binaries.sh build (make binaries)"
  exit 0
fi
dir="$root/hack/k8s-versions/$version"
[[ -f $dir/go.mod ]] || die "Kubernetes $version is not pinned: run hack/pin-kube-version.sh $version (pinned in hack/k8s-versions/: $pinned)"
command -v go >/dev/null || die "the 'go' tool is not on PATH; install Go >= 1.26 (https://go.dev/dl/)"
stamp=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)
out="$cache/versions/$version-$stamp"
if [[ $force == 0 && -f "$out/.complete" ]]; then
  echo "build-kube-version: Kubernetes $version: up to date ($out)"
else
  echo "build-kube-version: Kubernetes $version: building (cold builds take 10-30 minutes)..."
  start=$SECONDS
  rm -rf "$out" && mkdir -p "$out"
  minor=$(echo "$version" | cut -d. -f2)
  ( cd "$dir" && go mod download ) || die "'go mod download' failed in $dir (GOPROXY=$(go env GOPROXY))"
  ( cd "$dir" && CGO_ENABLED=0 go build -trimpath -o "$out/" -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=$version \
      -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=$minor \
      -X k8s.io/component-base/version.gitTreeState=clean \
      -X k8s.io/client-go/pkg/version.gitVersion=$version \
      -X k8s.io/client-go/pkg/version.gitMajor=1 \
      -X k8s.io/client-go/pkg/version.gitMinor=$minor" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubelet ) \
    || die "'go build' failed in $dir"
  touch "$out/.complete"
  echo "build-kube-version: Kubernetes $version: built in $((SECONDS - start)) s"
fi
mkdir -p "$cache/bin-$version"
for f in "$out"/*; do ln -sf "$f" "$cache/bin-$version/$(basename "$f")"; done
"$cache/bin-$version/kube-apiserver" --version
echo "build-kube-version: binaries in $cache/bin-$version"
