#!/usr/bin/env bash
# Builds the reference allocator (hack/allocator) against every other Kubernetes minor that
# hack/allocator/pin-minor.sh pinned (hack/allocator/go.1.<minor>.mod) as
# .cache/bin/dra-reference-allocator-1.<minor>, beside the default minor's
# dra-reference-allocator (hack/build-binaries.sh). Each is a cached, stamped build
# (hack/go-build.sh: module file, its go.sum, the allocator's Go sources, build tags) at
# nice 15; Go's build cache is shared, so a minor whose control plane is built
# (hack/build-kube-version.sh) takes seconds. The tag kube_1_<minor> selects the files written
# for that minor's API (gates_1_34.go, taint_rules_1_36.go, slices_1_38.go).
# Usage: hack/build-reference-allocators.sh [--force]   (ALLOCATOR_MINORS="1.35 1.36" for some)
set -euo pipefail
prog=build-reference-allocators
root=$(cd "$(dirname "$0")/.." && pwd)
# build, die, $cache, $force: one cached, stamped go build per tool module
# shellcheck source=hack/go-build.sh
source "$root/hack/go-build.sh" "$@"
renice -n 15 $$ >/dev/null  # Go builds of k8s.io/kubernetes: low priority (children inherit)
minors=${ALLOCATOR_MINORS:-$(cd "$root/hack/allocator" && ls go.1.*.mod | sed 's/^go\.\(.*\)\.mod$/\1/' | sort -V)}
for minor in $minors; do
  [[ -f "$root/hack/allocator/go.$minor.mod" ]] || die "no hack/allocator/go.$minor.mod (hack/allocator/pin-minor.sh)"
  # the toolchain the module file names (pin-minor.sh: 1.38 needs Go 1.27), else the one on PATH
  toolchain=$(sed -n 's/^toolchain //p' "$root/hack/allocator/go.$minor.mod")
  GOTOOLCHAIN=${toolchain:-${GOTOOLCHAIN:-}} MODFILE=go.$minor.mod TAGS=kube_${minor/./_} \
    OUTNAME=dra-reference-allocator-$minor LDFLAGS="-s -w" build "dra-reference-allocator $minor" allocator .
done
