# Sourced by hack/build-node-binaries.sh and hack/build-kind.sh: one cached, stamped `go build`
# per tool module under hack/. Needs $root, $cache, $force and a die() that prints its argument
# as an error and exits; $prog names the script in progress lines.
#
# build <name> <module dir> <packages...>: builds the packages of hack/<module dir> into
# $cache/kubernetes/<module dir>-<stamp>/ and links each binary into $cache/bin. Skipped when
# the stamp (hash of go.mod, go.sum and the settings CGO, TAGS, LDFLAGS, packages) matches a
# finished build; this file's other lines are not part of the stamp.
build() {
  local name=$1 dir=$2; shift 2
  local settings="cgo=${CGO:-0} tags=${TAGS:-} ldflags=${LDFLAGS:-} packages=$*"
  local stamp out
  stamp=$( { cat "$root/hack/$dir/go.mod" "$root/hack/$dir/go.sum"; echo "$settings"; } \
           | sha256sum | cut -c1-16)
  out="$cache/kubernetes/$dir-$stamp"
  if [[ $force == 0 && -f "$out/.complete" ]]; then
    echo "$prog: $name: up to date ($out)"
  else
    echo "$prog: $name: building (cold builds take minutes)..."
    local start=$SECONDS
    rm -rf "$out" && mkdir -p "$out"
    ( cd "$root/hack/$dir" && go mod download ) \
      || die "$name: 'go mod download' failed in hack/$dir (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
    ( cd "$root/hack/$dir" && CGO_ENABLED=${CGO:-0} go build -trimpath -tags "${TAGS:-}" \
        -ldflags "${LDFLAGS:-}" -o "$out/" "$@" ) \
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
