#!/usr/bin/env bash
# Pins the reference allocator to another Kubernetes release: writes hack/allocator/go.1.<minor>.mod
# and .sum, the module file that hack/build-reference-allocators.sh builds dra-reference-allocator-1.<minor>
# from (`go build -modfile`, the sources stay those of hack/allocator). k8s.io/kubernetes and
# k8s.io/dynamic-resource-allocation at that release; every k8s.io staging module replaced by its
# v0.<minor>.<patch> tag, as k8s.io/kubernetes' own go.mod replaces them by ./staging.
# hack/allocator/go.mod (the default release) is not made here.
# Usage: hack/allocator/pin-minor.sh v1.36.3   (or GOTOOLCHAIN=go1.27.4 ... v1.38.0-beta.0)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${1:?usage: hack/allocator/pin-minor.sh vX.Y.Z}
[[ $version =~ ^v1\.([0-9]+)\.[0-9]+(-[a-z]+\.[0-9]+)?$ ]] \
  || { echo "pin-minor: '$version' is not vX.Y.Z[-pre.N]" >&2; exit 1; }
minor=1.${BASH_REMATCH[1]}
staging=v0.${version#v1.}
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[[ -f $gomod ]] || { echo "pin-minor: k8s.io/kubernetes@$version is not served by $(go env GOPROXY)" >&2; exit 1; }
cd "$here"
modfile=go.$minor.mod
{
  echo "// The reference allocator at Kubernetes $version (written by hack/allocator/pin-minor.sh)."
  echo "module kubedra.invalid/hack/allocator"
  echo
  echo "go $(sed -n 's/^go //p' go.mod)"
  echo
  echo "replace ("
  sed -n "s|^\s*\(k8s.io/[a-z0-9-]*\) => \./staging/src/.*|\t\1 => \1 $staging|p" "$gomod"
  echo ")"
  echo
  echo "require ("
  for m in api apimachinery apiserver dynamic-resource-allocation; do echo "	k8s.io/$m $staging"; done
  echo "	k8s.io/kubernetes $version"
  echo ")"
} > "$modfile"
rm -f "go.$minor.sum"
go mod tidy -modfile="$modfile"
# a release that needs a newer Go than the default minor's (1.38: go 1.27) names the toolchain
# that pinned it, which hack/build-reference-allocators.sh then builds it with
if [[ $(sed -n 's/^go //p' "$modfile") != "$(sed -n 's/^go //p' go.mod)" ]]; then
  go mod edit -modfile="$modfile" -toolchain="$(go env GOVERSION)"
fi
echo "pin-minor: hack/allocator/$modfile pinned to $version"
