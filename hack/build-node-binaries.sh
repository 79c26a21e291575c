#!/usr/bin/env bash
# Builds the pinned binaries of a real node from the Go module proxy into
# .cache/kubernetes/<module>-<stamp>/ (git-ignored) and links them into .cache/bin:
#   kubelet                                 k8s.io/kubernetes v1.37.2 (hack/kubelet)
#   containerd, containerd-shim-runc-v2, ctr github.com/containerd/containerd/v2 (hack/containerd)
#   runc (cgo, seccomp)                     github.com/opencontainers/runc (hack/runc)
#   loopback (CNI plugin)                   github.com/containernetworking/plugins (hack/cni-plugins)
#   crictl (for humans)                     sigs.k8s.io/cri-tools (hack/crictl)
# and installs the Debian packages a real node needs: libseccomp-dev (runc's seccomp) and
# busybox-static (the shell of the node's images, see e2e/harness/images.py).
# A module is rebuilt only when its go.mod, go.sum or its build settings below change (this
# script's other lines are not part of the stamp), so editing comments rebuilds nothing.
# Usage: hack/build-node-binaries.sh [--force]
set -euo pipefail

prog=build-node-binaries
root=$(cd "$(dirname "$0")/.." && pwd)
# build, version, die, $cache, $force: one cached, stamped go build per tool module
# shellcheck source=hack/go-build.sh
source "$root/hack/go-build.sh" "$@"

# Debian packages: installed with apt-get when missing (needs root and the package mirror).
packages=(libseccomp-dev busybox-static)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
  command -v apt-get >/dev/null \
    || die "missing packages ${missing[*]} and no apt-get: install them (libseccomp headers, a static busybox) by hand"
  [[ $(id -u) == 0 ]] || die "missing Debian packages ${missing[*]}: run 'sudo apt-get install ${missing[*]}' (installing needs root)"
  echo "build-node-binaries: installing Debian packages: ${missing[*]}"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } \
    || die "'apt-get install ${missing[*]}' failed (is the Debian mirror reachable?)"
fi

LDFLAGS=$K8S_LDFLAGS build "kubelet $K8S_VERSION" kubelet k8s.io/kubernetes/cmd/kubelet

v=$(version containerd github.com/containerd/containerd/v2)
TAGS="no_btrfs no_devmapper no_zfs" \
LDFLAGS="-s -w -X github.com/containerd/containerd/v2/version.Version=$v" \
  build "containerd $v" containerd github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr

v=$(version runc github.com/opencontainers/runc)
CGO=1 TAGS="seccomp urfave_cli_no_docs" LDFLAGS="-s -w -X main.version=${v#v}" \
  build "runc $v" runc github.com/opencontainers/runc

v=$(version cni-plugins github.com/containernetworking/plugins)
LDFLAGS="-s -w" build "CNI plugins $v" cni-plugins \
  github.com/containernetworking/plugins/plugins/main/loopback

v=$(version crictl sigs.k8s.io/cri-tools)
LDFLAGS="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$v" \
  build "crictl $v" crictl sigs.k8s.io/cri-tools/cmd/crictl

"$cache/bin/kubelet" --version
"$cache/bin/containerd" --version
"$cache/bin/runc" --version | sed -n 1p  # sed reads to the end: no SIGPIPE
echo "build-node-binaries: binaries in $cache/bin"
