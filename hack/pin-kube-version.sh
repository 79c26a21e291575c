#!/usr/bin/env bash
# Pins another Kubernetes release for the version matrix (KUBE_VERSION, see README "Versions"):
# writes hack/k8s-versions/<version>/go.mod and go.sum, one tool module from which
# hack/build-binaries.sh builds that release's kube-apiserver, kube-scheduler and
# kube-controller-manager and hack/build-node-binaries.sh its kubelet. Every k8s.io staging
# module is replaced by its v0.<minor>.<patch> tag, as k8s.io/kubernetes' own go.mod replaces
# them by ./staging, so the build uses exactly that release's dependency versions.
# The default release (hack/k8s, hack/kubelet) is not made here.
# Usage: hack/pin-kube-version.sh v1.34.4
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ $# == 1 ]] || { echo "usage: hack/pin-kube-version.sh vX.Y.Z (e.g. v1.38.0)" >&2; exit 2; }
version=v${1#v}
[[ $version =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "pin-kube-version: error: '$1' is not vX.Y.Z (e.g. v1.38.0)" >&2; exit 1; }
staging=v0.${version#v1.}
dir="$root/hack/k8s-versions/$version"
mkdir -p "$dir"
cd "$dir"
rm -f go.mod go.sum
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[[ -f $gomod ]] || { echo "pin-kube-version: k8s.io/kubernetes@$version is not served by $(go env GOPROXY)" >&2; exit 1; }
{
  echo "// Kubernetes $version for the version matrix (written by hack/pin-kube-version.sh)."
  echo "module kubedra.invalid/hack/k8s-versions/$version"
  echo
  echo "go $(sed -n 's/^go //p' "$gomod")"
  echo
  echo "replace ("
  sed -n "s|^\s*\(k8s.io/[a-z0-9-]*\) => \./staging/src/.*|\t\1 => \1 $staging|p" "$gomod"
  echo ")"
} > go.mod
go get "k8s.io/kubernetes/cmd/kube-apiserver@$version" "k8s.io/kubernetes/cmd/kube-scheduler@$version" \
  "k8s.io/kubernetes/cmd/kube-controller-manager@$version" "k8s.io/kubernetes/cmd/kubelet@$version"
echo "pin-kube-version: hack/k8s-versions/$version pinned"
