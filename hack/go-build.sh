# Sourced by hack/build-node-binaries.sh and hack/build-kind.sh (`source go-build.sh "$@"`, after
# setting $root, the repository, and $prog, the script's name in messages): one cached, stamped
# `go build` per tool module under hack/. Sets $cache (.cache or $KUBEDRA_CACHE), $force (1 with
# --force, the only argument: any other is a usage line, exit 2) and die(), and checks that Go
# is there.
cache="${KUBEDRA_CACHE:-$root/.cache}"
force=0
for arg in "$@"; do
  [[ $arg == --force ]] || { echo "usage: hack/$prog.sh [--force]" >&2; exit 2; }
  force=1
done
die() { echo "$prog: error: $*" >&2; exit 1; }
command -v go >/dev/null || die "the 'go' tool is not on PATH; install Go >= 1.26 (https://go.dev/dl/)"
# the Kubernetes version of the node's binaries, and the -ldflags that stamp it into them
K8S_VERSION=v1.37.2
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
K8S_LDFLAGS="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean"
#
# build <name> <module dir> <packages...>: builds the packages of hack/<module dir> into
# $cache/kubernetes/<module dir>-<stamp>/ and links each binary into $cache/bin. Skipped when
# the stamp (hash of go.mod, go.sum and the settings CGO, TAGS, LDFLAGS, packages) matches a
# finished build; this file's other lines are not part of the stamp. With MODFILE=go.1.36.mod
# the module is built from that module file instead (`go build -modfile`, its go.1.36.sum),
# into $cache/kubernetes/<module dir>-1.36-<stamp>/, the module's own Go sources in the stamp,
# and with OUTNAME=<binary> a single package is built as that binary.
build() {
  local name=$1 dir=$2; shift 2
  local settings="cgo=${CGO:-0} tags=${TAGS:-} ldflags=${LDFLAGS:-} packages=$*${OUTNAME:+ out=$OUTNAME}"
  local modfile=${MODFILE:-go.mod} stamp out tag
  local -a sources=()
  if [[ -n ${MODFILE:-} ]]; then
    mapfile -t sources < <(find "$root/hack/$dir" -maxdepth 1 -name '*.go' | sort)
    tag=${MODFILE#go.}; tag=-${tag%.mod}
  fi
  stamp=$( { cat "$root/hack/$dir/$modfile" "$root/hack/$dir/${modfile%.mod}.sum" \
             ${sources[@]+"${sources[@]}"}; echo "$settings"; } | sha256sum | cut -c1-16)
  out="$cache/kubernetes/$dir${tag:-}-$stamp"
  if [[ $force == 0 && -f "$out/.complete" ]]; then
    echo "$prog: $name: up to date ($out)"
  else
    echo "$prog: $name: building (cold builds take minutes)..."
    local start=$SECONDS
    rm -rf "$out" && mkdir -p "$out"
    ( cd "$root/hack/$dir" && go mod download -modfile="$modfile" ) \
      || die "$name: 'go mod download' failed in hack/$dir (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
    ( cd "$root/hack/$dir" && CGO_ENABLED=${CGO:-0} go build -modfile="$modfile" -trimpath \
        -tags "${TAGS:-}" -ldflags "${LDFLAGS:-}" -o "$out/${OUTNAME:-}" "$@" ) \
      || die "$name: 'go build' failed in hack/$dir for: $*"
    touch "$out/.complete"
    echo "$prog: $name: built in $((SECONDS - start)) s"
  fi
  mkdir -p "$cache/bin"
  local f
  for f in "$out"/*; do ln -sf "$f" "$cache/bin/$(basename "$f")"; done
}

# version <module dir> <module>: the version of <module> that hack/<module dir> pins
version() { (cd "$root/hack/$1" && go list -m -f '{{.Version}}' "$2"); }
