#!/usr/bin/env bash
# Make Docker ready for benchflow: a daemon that answers, and the base image the
# example tasks build FROM. Safe to run repeatedly; does nothing that is already done.
#
#  - no daemon answering: as root, install docker.io (apt) if needed and start dockerd;
#    otherwise print what to do and exit 1.
#  - no debian:bookworm-slim locally: pull it; if the pull fails (no registry reachable),
#    build it with debootstrap from the machine's configured apt mirror and import it.
set -euo pipefail

BASE_IMAGE="${BENCHFLOW_BASE_IMAGE:-debian:bookworm-slim}"
SUITE="bookworm"

log() { printf '[ensure-docker] %s\n' "$*" >&2; }

daemon_up() { docker info >/dev/null 2>&1; }

start_daemon() {
    if daemon_up; then return 0; fi
    if [ "$(id -u)" != 0 ]; then
        log "no Docker daemon answers. Start Docker (e.g. 'sudo systemctl start docker')"
        log "or add your user to the 'docker' group, then run this again."
        exit 1
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
        log "installing docker.io from apt"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq docker.io >/dev/null
    fi
    clear_stale_pid_files
    log "starting dockerd"
    nohup dockerd >/var/log/benchflow-dockerd.log 2>&1 &
    local pid=$!
    for _ in $(seq 1 240); do
        if daemon_up; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.5
    done
    log "dockerd did not answer within 120 s; the end of /var/log/benchflow-dockerd.log:"
    tail -n 20 /var/log/benchflow-dockerd.log >&2 || true
    exit 1
}

clear_stale_pid_files() {
    # A machine image snapshotted while dockerd ran keeps its pid files, and dockerd
    # refuses to start ("pid file found"); remove them when that process is gone.
    local f pid
    for f in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null || true)
        if [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] \
            && grep -qE '^(dockerd|containerd)$' "/proc/$pid/comm"; then
            continue
        fi
        log "removing stale $f (process ${pid:-?} is gone)"
        rm -f "$f"
    done
}

apt_mirror() {
    # The first deb URI of the machine's apt configuration (deb822 or one-line format).
    local uri=""
    if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
        uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' \
              | grep -v security | head -n1 || true)
    fi
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(grep -E '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security \
              | head -n1 || true)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

ensure_base_image() {
    if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then return 0; fi
    log "pulling $BASE_IMAGE"
    if timeout 120 docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then return 0; fi
    log "pull failed; building $BASE_IMAGE with debootstrap"
    if [ "$(id -u)" != 0 ]; then
        log "building the base image needs root (debootstrap). Run this script as root."
        exit 1
    fi
    if ! command -v debootstrap >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    local mirror
    ROOTFS=$(mktemp -d /tmp/benchflow-rootfs.XXXXXX)
    trap 'rm -rf "${ROOTFS:-}"' EXIT
    local root=$ROOTFS
    mirror=$(apt_mirror)
    log "debootstrap --variant=minbase $SUITE from $mirror"
    debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >/tmp/benchflow-debootstrap.log 2>&1 \
        || { log "debootstrap failed; see /tmp/benchflow-debootstrap.log"; exit 1; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
    log "imported $BASE_IMAGE"
}

start_daemon
ensure_base_image
