#!/usr/bin/env bash
# A Docker engine for kind that lives in a network namespace of its own, so that a kind
# cluster's addresses (the nodes' 172.18.0.0/16 bridge, pods' 10.244.0.0/16, services'
# 10.96.0.0/16) exist only inside it and nothing can leave the machine. Used by `make kind-demo`
# on machines without a Docker of their own; with a working Docker, kind needs none of this.
#
#   up     create netns kubedra-kind (loopback only) and start Debian's dockerd in it
#          (`nsenter --net`, not `ip netns exec`: that remounts /sys and hides the cgroup
#          mounts, and dockerd refuses with "Devices cgroup isn't mounted"), with its own
#          data-root, exec-root, pidfile and socket under .cache/kind/engine/, containers in
#          cgroup parent kubedra-kind, and hack/kind/runc-no-sys-resource as default runtime
#   down   stop every container and dockerd (by PID), unmount what is left under the engine's
#          directory, remove the containers' cgroups and the netns; prints what it removed
#          and fails if anything is left behind
#   env    print `export DOCKER_HOST=...` for the engine's socket
#   forward PORT  forward a free loopback port of this machine to 127.0.0.1:PORT in the
#          namespace (hack/kind/forward.py; kind publishes the API server there); prints it
#   exec   run a command in the namespace (e.g. `hack/kind/engine.sh exec kubectl get nodes`)
# Installs docker.io with apt-get when missing (needs root). Everything is stopped by PID.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dir="${KUBEDRA_KIND_ENGINE:-${KUBEDRA_CACHE:-$root/.cache}/kind/engine}"
netns=kubedra-kind
cgroup_parent=kubedra-kind
sock="$dir/docker.sock"
log() { echo "kind-engine: $*" >&2; }
die() { echo "kind-engine: error: $*" >&2; exit 1; }
in_ns() { nsenter --net="/run/netns/$netns" -- "$@"; }
running() { [[ -f "$dir/dockerd.pid" ]] && kill -0 "$(cat "$dir/dockerd.pid")" 2>/dev/null; }

up() {
  [[ $(id -u) == 0 ]] || die "the engine needs root (network namespace, dockerd)"
  if ! command -v dockerd >/dev/null; then
    command -v apt-get >/dev/null || die "dockerd missing and no apt-get: install docker.io by hand"
    log "installing Debian's docker.io (its service is not started: policy-rc.d)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends docker.io jq >/dev/null; } \
      || die "'apt-get install docker.io' failed (is the Debian mirror reachable?)"
  fi
  if running; then log "dockerd already running (pid $(cat "$dir/dockerd.pid"))"; return; fi
  mkdir -p "$dir"
  # `ip netns add` makes /run/netns a mount point the first time: remembered, to undo it
  mountpoint -q /run/netns || touch "$dir/made-run-netns"
  [[ -e /run/netns/$netns ]] || ip netns add "$netns"
  in_ns ip link set lo up
  log "dockerd in netns $netns (log $dir/dockerd.log)"
  # setsid: the daemon outlives this script; its PID is written to the pidfile
  setsid nsenter --net="/run/netns/$netns" -- dockerd \
    --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
    --host "unix://$sock" --exec-opt native.cgroupdriver=cgroupfs \
    --cgroup-parent "$cgroup_parent" \
    --add-runtime "kubedra-runc=$root/hack/kind/runc-no-sys-resource" \
    --default-runtime kubedra-runc --userland-proxy=true \
    > "$dir/dockerd.log" 2>&1 < /dev/null &
  local deadline=$((SECONDS + 60))
  until DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1; do
    (( SECONDS < deadline )) || { tail -20 "$dir/dockerd.log" >&2; die "dockerd did not answer in 60 s"; }
    sleep 0.5
  done
  log "dockerd ready: export DOCKER_HOST=unix://$sock"
}

# wait_gone <pid>: up to 30 s for a process to exit
wait_gone() {
  local deadline=$((SECONDS + 30))
  while kill -0 "$1" 2>/dev/null; do (( SECONDS < deadline )) || return 1; sleep 0.2; done
}

forward() {
  local target=$1 port
  if [[ -f "$dir/forward.pid" ]] && kill -0 "$(cat "$dir/forward.pid")" 2>/dev/null \
     && [[ $(cat "$dir/forward.target") == "$target" ]]; then
    cat "$dir/forward.port"; return
  fi
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  setsid python3 "$root/hack/kind/forward.py" "/run/netns/$netns" "$port" "$target" \
    > "$dir/forward.log" 2>&1 < /dev/null &
  echo $! > "$dir/forward.pid"; echo "$target" > "$dir/forward.target"; echo "$port" > "$dir/forward.port"
  local deadline=$((SECONDS + 10))
  until python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null; do
    (( SECONDS < deadline )) || die "the forwarder did not listen on 127.0.0.1:$port: $(cat "$dir/forward.log")"
    sleep 0.2
  done
  echo "$port"
}

down() {
  local left=()
  if [[ -f "$dir/forward.pid" ]]; then
    local fpid; fpid=$(cat "$dir/forward.pid")
    if kill -0 "$fpid" 2>/dev/null; then log "stopping the forwarder (pid $fpid)"; kill -TERM "$fpid"; wait_gone "$fpid" || left+=("process $fpid"); fi
    rm -f "$dir/forward.pid" "$dir/forward.target" "$dir/forward.port"
  fi
  if running; then
    local ids
    ids=$(DOCKER_HOST="unix://$sock" docker ps -aq 2>/dev/null || true)
    if [[ -n $ids ]]; then
      log "removing containers: $(echo $ids)"
      # shellcheck disable=SC2086
      DOCKER_HOST="unix://$sock" docker rm -f -v $ids >/dev/null || true
    fi
    local pid; pid=$(cat "$dir/dockerd.pid")
    log "stopping dockerd (pid $pid)"
    kill -TERM "$pid"; wait_gone "$pid" || { kill -KILL "$pid"; wait_gone "$pid" || true; }
  fi
  # processes still in the namespace (containerd, shims, container processes), by PID
  local pid
  if [[ -e /run/netns/$netns ]]; then
    for pid in $(ip netns pids "$netns" 2>/dev/null); do
      log "ending process $pid left in netns $netns: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)"
      kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in $(ip netns pids "$netns" 2>/dev/null); do wait_gone "$pid" || left+=("process $pid"); done
  fi
  # mounts under the engine's directory (overlays, netns bind mounts), deepest first
  local m
  while read -r m; do
    umount -l "$m" 2>/dev/null || left+=("mount $m")
  done < <(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  # the containers' cgroups (every controller hierarchy), deepest first
  local c
  while read -r c; do rmdir "$c" 2>/dev/null || left+=("cgroup $c"); done \
    < <(find /sys/fs/cgroup/*/"$cgroup_parent" -depth -type d 2>/dev/null)
  if [[ -e /run/netns/$netns ]]; then ip netns del "$netns" || left+=("netns $netns"); fi
  if [[ -f "$dir/made-run-netns" ]] && [[ -z $(ls -A /run/netns 2>/dev/null) ]]; then
    umount /run/netns 2>/dev/null && rm -f "$dir/made-run-netns" || left+=("mount /run/netns")
  fi
  rm -f "$dir/dockerd.pid" "$sock"
  if (( ${#left[@]} )); then die "left behind: ${left[*]}"; fi
  log "down: no container, process, mount, cgroup or netns left"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) echo "export DOCKER_HOST=unix://$sock" ;;
  forward) forward "${2:?forward needs the port in the namespace}" ;;
  exec) shift; in_ns "$@" ;;
  *) echo "usage: $0 up|down|env|forward PORT|exec COMMAND..." >&2; exit 2 ;;
esac
