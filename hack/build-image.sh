#!/usr/bin/env bash
# Builds kubedra's image from the project's unchanged Dockerfile without a registry or a Docker
# engine, for the real node of the tests (e2e/test_install.py) and for `make image`:
#   1. the base (the Dockerfile's PYTHON_IMAGE): a Debian bookworm root made by mmdebstrap with
#      Python 3.11 and pip, plus what the Dockerfile's steps expect of python:*-slim images (a
#      `python` command; no EXTERNALLY-MANAGED marker, so pip installs into the system);
#   2. `buildah bud` of the Dockerfile on that base (vfs storage, chroot isolation, host
#      network for pip; the machine's CA bundle mounted over the image's for the build only);
#   3. the image as an OCI archive, ready for `ctr images import`.
# Outputs under .cache/image/ (git-ignored): base-<stamp>/, kubedra-<stamp>.tar, and the
# buildah storage. The base is rebuilt only when its settings below change; the image only when
# the files the Dockerfile copies (or the Dockerfile, or the base) change.
# Installs mmdebstrap and buildah with apt-get when missing (needs root).
# Usage: hack/build-image.sh [--print-archive] [--next TAG] [--force]
#   --print-archive  print only the archive's path on stdout (progress goes to stderr)
#   --next TAG       also the "next version" of the image for upgrade tests: the same image
#                    with org.opencontainers.image.version=TAG, tagged TAG (its archive's
#                    path is printed second)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="${KUBEDRA_CACHE:-$root/.cache}/image"
IMAGE="${KUBEDRA_IMAGE:-kubedra.invalid/kubedra:0.1.0}"
BASE_IMAGE=kubedra.invalid/python-base:bookworm
BASE_PACKAGES=python3,python3-pip,python3-venv,passwd
print_archive=0
force=0
next=""
while (( $# )); do
  case "$1" in
    --print-archive) print_archive=1 ;;
    --force) force=1 ;;
    --next) [[ -n ${2:-} ]] || { echo "usage: hack/build-image.sh [--print-archive] [--next TAG] [--force] (--next needs a tag)" >&2; exit 2; }
            next=$2; shift ;;
    *) echo "usage: hack/build-image.sh [--print-archive] [--next TAG] [--force]" >&2; exit 2 ;;
  esac
  shift
done
log() { echo "build-image: $*" >&2; }
die() { echo "build-image: error: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "building the image needs root (mmdebstrap, buildah's chroot isolation)"
packages=(mmdebstrap buildah)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install them by hand"
  log "installing Debian packages: ${missing[*]}"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } \
    || die "'apt-get install ${missing[*]}' failed (is the Debian mirror reachable?)"
fi

mkdir -p "$cache"
storage=(--root "$cache/storage" --runroot "$cache/run" --storage-driver vfs)
# pip inside the build trusts what this machine trusts (an extra CA may be configured here)
ca_bundle="${SSL_CERT_FILE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}"

# --- 1. the base ----------------------------------------------------------------------------
base_stamp=$(echo "bookworm minbase $BASE_PACKAGES python-link no-externally-managed v1" \
             | sha256sum | cut -c1-16)
base_dir="$cache/base-$base_stamp"  # the root file system, as a directory
if [[ $force == 1 || ! -d "$base_dir" ]]; then
  log "base: mmdebstrap bookworm ($BASE_PACKAGES)..."
  start=$SECONDS
  mmdebstrap --quiet --variant=minbase --include="$BASE_PACKAGES" \
    --customize-hook='ln -sf python3 "$1/usr/bin/python"' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    --format=directory bookworm "$base_dir.part" >&2 \
    || die "mmdebstrap failed (is the Debian mirror reachable?)"
  find "$cache" -maxdepth 1 -name 'base-*' ! -name "base-$base_stamp.part" -exec rm -rf {} +
  mv "$base_dir.part" "$base_dir"
  log "base: built in $((SECONDS - start)) s ($(du -sm "$base_dir" | cut -f1) MB)"
fi
imported="$cache/base-$base_stamp.imported"  # the image ID of the imported base
if [[ ! -f "$imported" || $(buildah "${storage[@]}" images -q --no-trunc "$BASE_IMAGE" 2>/dev/null) \
      != "$(cat "$imported")" ]]; then
  log "base: importing into buildah as $BASE_IMAGE"
  ctr=$(buildah "${storage[@]}" from scratch)
  buildah "${storage[@]}" add --quiet "$ctr" "$base_dir" / >/dev/null
  buildah "${storage[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd python3 "$ctr"
  buildah "${storage[@]}" commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
  buildah "${storage[@]}" images -q --no-trunc "$BASE_IMAGE" > "$imported"
fi

# --- 2. the image ---------------------------------------------------------------------------
# what the Dockerfile copies: pyproject.toml setup.py README.md operator/ (tracked and new
# files, not ignored ones such as generated stubs)
image_stamp=$( { echo "$base_stamp $IMAGE"; cat "$root/Dockerfile";
                 cd "$root" && git ls-files -co --exclude-standard -- pyproject.toml setup.py README.md operator \
                   | LC_ALL=C sort | while read -r f; do [[ -f $f ]] && { echo "$f"; cat "$f"; }; done; } \
               | sha256sum | cut -c1-16)
archive="$cache/kubedra-$image_stamp.tar"
if [[ $force == 1 || ! -f "$archive" ]]; then
  log "image: buildah bud Dockerfile -> $IMAGE..."
  start=$SECONDS
  buildah "${storage[@]}" bud --quiet --isolation chroot --network host --pull=never \
    --layers=false -v "$ca_bundle:/etc/ssl/certs/ca-certificates.crt:ro" \
    --build-arg "PYTHON_IMAGE=$BASE_IMAGE" -t "$IMAGE" -f "$root/Dockerfile" "$root" >&2 \
    || die "buildah bud failed"
  rm -f "$cache"/kubedra-*.tar
  buildah "${storage[@]}" push --quiet "$IMAGE" "oci-archive:$archive.part:$IMAGE" >&2
  mv "$archive.part" "$archive"
  # keep the storage small: only the base and the newest image
  buildah "${storage[@]}" rmi --prune >/dev/null 2>&1 || true
  log "image: built in $((SECONDS - start)) s ($(du -m "$archive" | cut -f1) MB archive)"
else
  log "image: up to date ($archive)"
fi
next_archive="${archive%.tar}-$next.tar"
if [[ -n $next && ( $force == 1 || ! -f "$next_archive" ) ]]; then
  log "image: next version ${IMAGE%:*}:$next"
  ctr=$(buildah "${storage[@]}" from --pull=never "$IMAGE")
  buildah "${storage[@]}" config --label "org.opencontainers.image.version=$next" "$ctr"
  buildah "${storage[@]}" commit --quiet --rm "$ctr" "${IMAGE%:*}:$next" >/dev/null
  buildah "${storage[@]}" push --quiet "${IMAGE%:*}:$next" "oci-archive:$next_archive.part:${IMAGE%:*}:$next" >&2
  mv "$next_archive.part" "$next_archive"
  buildah "${storage[@]}" rmi "${IMAGE%:*}:$next" >/dev/null
fi
if [[ $print_archive == 1 ]]; then
  echo "$archive"
  if [[ -n $next ]]; then echo "$next_archive"; fi
fi
