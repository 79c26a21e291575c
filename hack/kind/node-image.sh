#!/usr/bin/env bash
# Builds kind's node image for Kubernetes v1.37.2 without a registry, into the engine of
# hack/kind/engine.sh (DOCKER_HOST must point at a running Docker; `make kind-demo` does this):
#   1. the base OS: `mmdebstrap` of Debian bookworm with the packages kind's images/base
#      Dockerfile installs (its `clean-install` step; the NFS and iSCSI clients left out);
#   2. kind's base image: the rest of sigs.k8s.io/kind v0.33.0's images/base/Dockerfile
#      (its files/, systemd set-up, cri-base.json) built by `docker build` on that OS, with the
#      project's source-built containerd, runc, crictl and CNI plugins (.cache/bin) in place of
#      the downloads;
#   3. a Kubernetes "release tarball" (kubernetes/server/bin/{kubeadm,kubelet,kubectl} and
#      {kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy}.tar, kubernetes/version)
#      from the project's v1.37.2 binaries; the images are `docker import`s of those binaries.
#      kind pulls every other image the node needs (pause, etcd, CoreDNS, kindnetd,
#      local-path-provisioner and -helper) unless an archive of the tarball already holds it, so
#      these are saved into the same archives, built from source too (hack/build-kind.sh);
#   4. `kind build node-image --type file <tarball> --base-image <2>`.
# Each step is skipped when its inputs are unchanged (stamps under .cache/kind/). Prints the
# node image's name last. Needs root (mmdebstrap) and the binaries of `make binaries` and
# hack/build-kind.sh.
# Usage: hack/kind/node-image.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cache="${KUBEDRA_CACHE:-$root/.cache}"
bin="$cache/bin"
work="$cache/kind"
K8S_VERSION=v1.37.2
NODE_IMAGE=kubedra.invalid/kind-node:$K8S_VERSION
BASE_PACKAGES=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps
log() { echo "kind-node-image: $*" >&2; }
die() { echo "kind-node-image: error: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root (mmdebstrap)"
[[ -n ${DOCKER_HOST:-} ]] || die "DOCKER_HOST is not set: start the engine (hack/kind/engine.sh up; eval \"\$(hack/kind/engine.sh env)\")"
command -v mmdebstrap >/dev/null || die "mmdebstrap missing (apt-get install mmdebstrap)"
# need <binaries...>: each is in .cache/bin
need() { local b; for b in "$@"; do [[ -x "$bin/$b" ]] || die "$bin/$b missing: run make binaries and hack/build-kind.sh"; done; }
kind_dir=$(cd "$root/hack/kind" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
kind_src="$kind_dir/images/base"
[[ -f "$kind_src/Dockerfile" ]] || die "kind's images/base missing from the module cache ($kind_src)"
# image names kind's node-image build looks for (sigs.k8s.io/kind pkg/build/nodeimage)
kindnetd_image=$(sed -n 's/^const kindnetdImage = "\(.*\)"$/\1/p' "$kind_dir/pkg/build/nodeimage/const_cni.go")
provisioner_image=$(sed -n 's/^const storageProvisionerImage = "\(.*\)"$/\1/p' "$kind_dir/pkg/build/nodeimage/const_storage.go")
helper_image=$(sed -n 's/^const storageHelperImage = "\(.*\)"$/\1/p' "$kind_dir/pkg/build/nodeimage/const_storage.go")
sandbox_image=$(sed -n 's/^ *sandbox_image = "\(.*\)"$/\1/p' "$kind_src/files/etc/containerd/config.toml")
mkdir -p "$work"

# stamp <files or strings...>: 16 hex digits naming the inputs
stamp() { { for x in "$@"; do if [[ -e $x ]]; then cat "$(readlink -f "$x")"; else echo "$x"; fi; done; } \
          | sha256sum | cut -c1-16; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }

# --- 1. the base OS -------------------------------------------------------------------------
os_stamp=$(stamp "bookworm minbase $BASE_PACKAGES v1")
os_tar="$work/os-$os_stamp.tar"
if [[ ! -f $os_tar ]]; then
  log "base OS: mmdebstrap bookworm ($BASE_PACKAGES)..."
  start=$SECONDS
  mmdebstrap --quiet --variant=minbase --include="$BASE_PACKAGES" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
    --format=tar bookworm "$os_tar.part" >&2 || die "mmdebstrap failed (is the Debian mirror reachable?)"
  find "$work" -maxdepth 1 -name 'os-*.tar' -exec rm -f {} +
  mv "$os_tar.part" "$os_tar"
  log "base OS: built in $((SECONDS - start)) s ($(du -m "$os_tar" | cut -f1) MB)"
fi
os_image=kubedra.invalid/kind-os:$os_stamp
has_image "$os_image" || docker import "$os_tar" "$os_image" >/dev/null

# --- 2. kind's base image -------------------------------------------------------------------
runtime_bins=(containerd containerd-shim-runc-v2 ctr runc crictl loopback ptp host-local portmap)
need "${runtime_bins[@]}"
base_stamp=$(stamp "$os_stamp" "$0" $(find "$kind_src/files" -type f | sort) \
             "${runtime_bins[@]/#/$bin/}")
base_image=kubedra.invalid/kind-base:$base_stamp
if ! has_image "$base_image"; then
  log "base image: kind $(basename "$kind_dir") images/base on the base OS..."
  start=$SECONDS
  ctx="$work/base-context"
  rm -rf "$ctx" && mkdir -p "$ctx/bin"
  cp -r "$kind_src/files" "$ctx/files"
  for b in "${runtime_bins[@]}"; do cp -L "$bin/$b" "$ctx/bin/"; done
  # upstream's Dockerfile, less what needs the network: its packages came with step 1, and
  # containerd, runc, crictl and the CNI plugins are ours (containerd-fuse-overlayfs, for
  # rootless nodes only, is left out)
  cat > "$ctx/Dockerfile" <<EOF
FROM $os_image
COPY files/ /kind-files/
RUN cd /kind-files && cp usr/local/bin/* /usr/local/bin/ && chmod 0755 /usr/local/bin/* \\
    && mkdir -p /kind /LICENSES && cp -r kind/. /kind/ && chmod -R u=rwX,go=rX /kind \\
    && chmod 0755 /kind/bin/* && cp LICENSES/* /LICENSES/ \\
    && mkdir -p /etc/containerd /etc/default /etc/sysctl.d /etc/systemd/system/kubelet.service.d \\
    && cp etc/*.yaml /etc/ && cp etc/containerd/* /etc/containerd/ && cp etc/default/* /etc/default/ \\
    && cp etc/sysctl.d/* /etc/sysctl.d/ && find etc/systemd/system -maxdepth 1 -type f -exec cp {} /etc/systemd/system/ \\; \\
    && cp etc/systemd/system/kubelet.service.d/* /etc/systemd/system/kubelet.service.d/ \\
    && rm -rf /kind-files \\
    && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \\
    && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
       /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
       /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
    && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
    && ln -sf /usr/lib/systemd/systemd /sbin/init \\
    && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
    && systemctl mask systemd-binfmt.service \\
    && mkdir -p /etc/kubernetes/manifests /opt/cni/bin
COPY bin/containerd bin/containerd-shim-runc-v2 bin/ctr bin/crictl /usr/local/bin/
COPY bin/runc /usr/local/sbin/runc
COPY bin/loopback bin/ptp bin/host-local bin/portmap /opt/cni/bin/
RUN ctr oci spec \\
      | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \\
      | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \\
    && containerd --version && runc --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
EOF
  docker build --quiet -t "$base_image" "$ctx" >&2 || die "docker build of kind's base image failed"
  rm -rf "$ctx"
  log "base image: built in $((SECONDS - start)) s"
fi

# --- 3. the release tarball -----------------------------------------------------------------
need kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd \
     coredns local-path-provisioner pause
images_stamp=$(stamp "$0" kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd \
               coredns local-path-provisioner pause "$os_stamp" \
               $(for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd \
                          coredns local-path-provisioner pause; do echo "$bin/$b"; done) \
               /bin/busybox "$root/hack/kind/kindnetd" "$root/hack/kind/qualify-archive.py" "$kindnetd_image" "$provisioner_image" "$helper_image")
tarball="$work/kubernetes-server-$K8S_VERSION-$images_stamp.tar.gz"
if [[ ! -f $tarball ]]; then
  log "release tarball: $K8S_VERSION binaries and images..."
  start=$SECONDS
  stage="$work/release"
  rm -rf "$stage" && mkdir -p "$stage/kubernetes/server/bin"
  echo "$K8S_VERSION" > "$stage/kubernetes/version"
  for b in kubeadm kubelet kubectl; do cp -L "$bin/$b" "$stage/kubernetes/server/bin/"; done
  # kind counts as built only the tags of the first image of each archive (GetArchiveTags
  # reads manifest.json's first entry), so each archive holds one image with several tags:
  # one image per archive, with the binaries of all its tags (their pods name the command,
  # except the one whose entrypoint it is).
  # archive <file> <entrypoint> <tags> <files...>: an image of static binaries in
  # /usr/local/bin (and busybox's sh, rm, mkdir in /bin, for local-path-helper), saved to file
  archive() {
    local file=$1 entry=$2 tags=$3; shift 3
    local r; r=$(mktemp -d "$work/rootfs.XXXX")
    mkdir -p "$r/usr/local/bin" "$r/bin" "$r/tmp" "$r/etc"
    local f; for f in "$@"; do cp -L "$f" "$r/usr/local/bin/"; done
    cp /bin/busybox "$r/bin/"; for f in sh rm mkdir ls; do ln -s busybox "$r/bin/$f"; done
    local first=${tags%% *} t
    tar -C "$r" -c . | docker import --change "ENTRYPOINT [\"/usr/local/bin/$entry\"]" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$first" >/dev/null
    rm -rf "$r"
    for t in $tags; do docker tag "$first" "$t"; done
    # shellcheck disable=SC2086
    docker save -o "$file" $tags
  }
  registry=registry.k8s.io
  out="$stage/kubernetes/server/bin"
  # the other images kubeadm names for this version (pause: the one kind's containerd uses)
  mapfile -t wanted < <("$bin/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
  etcd_image=$(printf '%s\n' "${wanted[@]}" | grep /etcd:)
  coredns_image=$(printf '%s\n' "${wanted[@]}" | grep /coredns:)
  archive "$out/kube-apiserver.tar" kube-apiserver \
    "$registry/kube-apiserver:$K8S_VERSION $etcd_image $provisioner_image $helper_image" \
    "$bin/kube-apiserver" "$bin/etcd" "$bin/local-path-provisioner"
  archive "$out/kube-controller-manager.tar" pause \
    "$registry/kube-controller-manager:$K8S_VERSION $sandbox_image" \
    "$bin/kube-controller-manager" "$bin/pause"
  archive "$out/kube-scheduler.tar" coredns "$registry/kube-scheduler:$K8S_VERSION $coredns_image" \
    "$bin/kube-scheduler" "$bin/coredns"
  # kube-proxy and kindnetd need iptables, nft, ip: the base OS of step 1
  r=$(mktemp -d "$work/ctx.XXXX"); cp -L "$bin/kube-proxy" "$r/"; cp "$root/hack/kind/kindnetd" "$r/"
  printf 'FROM %s\nCOPY kube-proxy kindnetd /usr/local/bin/\nENTRYPOINT ["/usr/local/bin/kindnetd"]\n' \
    "$os_image" > "$r/Dockerfile"
  docker build --quiet -t "$registry/kube-proxy:$K8S_VERSION" "$r" >/dev/null
  rm -rf "$r"
  docker tag "$registry/kube-proxy:$K8S_VERSION" "$kindnetd_image"
  docker save -o "$out/kube-proxy.tar" "$registry/kube-proxy:$K8S_VERSION" "$kindnetd_image"
  for f in "$out"/*.tar; do python3 "$root/hack/kind/qualify-archive.py" "$f"; done
  find "$work" -maxdepth 1 -name 'kubernetes-server-*.tar.gz' -exec rm -f {} +
  tar -C "$stage" -c kubernetes | pigz -1 > "$tarball.part" 2>/dev/null \
    || tar -C "$stage" -cz kubernetes > "$tarball.part"
  mv "$tarball.part" "$tarball"
  rm -rf "$stage"
  log "release tarball: built in $((SECONDS - start)) s ($(du -m "$tarball" | cut -f1) MB)"
fi

# --- 4. the node image ----------------------------------------------------------------------
need kind
node_stamp=$(stamp "$base_image" "$tarball")
if [[ $(docker image inspect -f '{{index .Config.Labels "io.kubedra.stamp"}}' "$NODE_IMAGE" 2>/dev/null) != "$node_stamp" ]]; then
  log "node image: kind build node-image --type file ($NODE_IMAGE)..."
  start=$SECONDS
  "$bin/kind" build node-image --type file --base-image "$base_image" --image "$NODE_IMAGE.build" \
    "$tarball" >&2 || die "kind build node-image failed"
  printf 'FROM %s\nLABEL io.kubedra.stamp=%s\n' "$NODE_IMAGE.build" "$node_stamp" \
    | docker build --quiet -t "$NODE_IMAGE" - >/dev/null
  docker rmi "$NODE_IMAGE.build" >/dev/null
  log "node image: built in $((SECONDS - start)) s"
fi
echo "$NODE_IMAGE"
