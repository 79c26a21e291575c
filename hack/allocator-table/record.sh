#!/usr/bin/env bash
# Records upstream's own allocator test table (k8s.io/dynamic-resource-allocation
# structured/internal/allocatortesting, at the version hack/allocator pins, or at the version
# another minor's module file pins, $ALLOCATOR_MINOR=1.36: hack/allocator/go.1.36.mod) as
# differential-corpus scenarios: tests/allocation_corpus/upstream-table.jsonl, or the file
# given as $1.
#
# The table is internal to its module, so the module is taken from the Go module proxy, copied
# to a writable build directory under .cache (or $KUBEDRA_CACHE), and record_test.go with the
# files that differ by minor (record_minor*_test.go, beside this script; the minor's build tag
# kube_1_<minor> picks one) is added to it as structured/internal/kubedrarecord; `go test` there
# writes one scenario per Allocate call, with the Go toolchain the module file names (1.38:
# go1.27.4). Nothing of upstream's code enters the repository.
#
# Usage: hack/allocator-table/record.sh [output.jsonl]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prog=record-allocator-table
die() { echo "$prog: error: $*" >&2; exit 1; }
command -v go >/dev/null || die "the 'go' tool is not on PATH; install Go >= 1.26 (https://go.dev/dl/)"
out=$(realpath -m "${1:-$root/tests/allocation_corpus/upstream-table.jsonl}")
module=k8s.io/dynamic-resource-allocation
pins="$root/hack/allocator"
modfile="$pins/go${ALLOCATOR_MINOR:+.$ALLOCATOR_MINOR}.mod"
[[ -f $modfile ]] || die "no $modfile (hack/allocator/pin-minor.sh writes one per minor)"
# the toolchain the module file names (pin-minor.sh: 1.38 needs Go 1.27), else the one on PATH
toolchain=$(sed -n 's/^toolchain //p' "$modfile")
[[ -z $toolchain ]] || export GOTOOLCHAIN=$toolchain
tags=${ALLOCATOR_MINOR:+kube_${ALLOCATOR_MINOR/./_}}
version=$(cd "$pins" && go list -modfile="$modfile" -m -f '{{.Version}}' "$module") \
  || die "no version of $module pinned in $modfile"
source_dir=$(cd "$pins" && go mod download -json "$module@$version" \
  | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d "$source_dir" ]] || die "'go mod download $module@$version' gave no module directory"
work="${KUBEDRA_CACHE:-$root/.cache}/allocator-table/dynamic-resource-allocation@$version"
rm -rf "$work" && mkdir -p "$(dirname "$work")"
cp -r "$source_dir" "$work" && chmod -R u+w "$work"
mkdir -p "$work/structured/internal/kubedrarecord"
cp "$root"/hack/allocator-table/record*_test.go "$work/structured/internal/kubedrarecord/"
echo "$prog: running $module@$version's allocator table (a cold build takes minutes)..."
start=$SECONDS
( cd "$work" && KUBEDRA_TABLE_OUT="$out" nice -n 15 go test -count=1 ${tags:+-tags "$tags"} -run '^TestRecord$' \
    ./structured/internal/kubedrarecord/ ) >"$work/go-test.log" 2>&1 \
  || { tail -40 "$work/go-test.log" >&2; die "the table's run failed (log: $work/go-test.log)"; }
echo "$prog: $(wc -l <"$out") scenarios in $out ($((SECONDS - start)) s)"
