#!/usr/bin/env bash
# Install the system packages that `make lab` and `make test` need on Debian 12 or Ubuntu 22.04/24.04.
# As root it installs what is missing; otherwise it names exactly what to install and stops.
# Then it checks the programs podman really executes (OCI runtime, conmon, network backend and the
# firewall tool that backend calls), so a package that is installed but broken or beside the point
# is named too.
#
#   host-deps.sh              install what is missing, then check podman's programs
#   host-deps.sh --missing    print the missing packages, one per line, and change nothing
#                             (tests run it inside a fresh Debian container to read that dpkg state)
set -euo pipefail

mode=install
case "${1:-}" in
    --missing) mode=missing ;;
    "") ;;
    *) echo "usage: host-deps.sh [--missing]" >&2; exit 2 ;;
esac

# Common to every supported distribution: podman and the runtime the lab's containers.conf selects
# (runc), image building (debootstrap, apt-utils, gnupg), the venv and shellcheck for sanity.
packages=(podman runc conmon debootstrap apt-utils gnupg uidmap slirp4netns python3-venv iproute2
          xz-utils git make shellcheck)

# The container network. podman 4 (Debian 12, Ubuntu 24.04) uses netavark + aardvark-dns, and
# netavark writes its rules with iptables: without it no container starts on a network
# ("netavark: No such file or directory"). podman 3.4 (Ubuntu 22.04) uses the CNI plugins, which call
# iptables as well.
. /etc/os-release 2>/dev/null || true
case "${ID:-}:${VERSION_ID:-}" in
    ubuntu:22.04) packages+=(containernetworking-plugins golang-github-containernetworking-plugin-dnsname iptables) ;;
    *) packages+=(netavark aardvark-dns iptables) ;;
esac

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done

if [ "$mode" = missing ]; then
    printf '%s\n' "${missing[@]}"
    exit 0
fi

if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
        echo "This machine has no apt-get: install the equivalents of ${missing[*]} and run make again." >&2
        exit 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "Missing system packages; run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "Installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# What podman will execute, asked of podman itself (with the lab's containers.conf when make passes it).
problems=()
podman_errors="$(mktemp)"
trap 'rm -f "$podman_errors"' EXIT
info="$(podman info --format '{{.Host.OCIRuntime.Path}} {{.Host.Conmon.Path}} {{.Host.NetworkBackend}}' 2>"$podman_errors")" || {
    echo "podman does not answer 'podman info': $(tail -n 3 "$podman_errors")" >&2
    exit 1
}
read -r runtime_path conmon_path network_backend <<<"$info"
[ -x "$runtime_path" ] || problems+=("the OCI runtime $runtime_path")
[ -x "$conmon_path" ] || problems+=("conmon ($conmon_path)")
case "$network_backend" in
    netavark)
        netavark_found=""
        for dir in /usr/local/libexec/podman /usr/local/lib/podman /usr/libexec/podman /usr/lib/podman; do
            [ -x "$dir/netavark" ] && netavark_found="$dir/netavark" && break
        done
        [ -n "$netavark_found" ] || problems+=("netavark (podman's network backend)")
        ;;
    cni)
        [ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || problems+=("the CNI bridge plugin")
        ;;
esac
PATH="$PATH:/usr/sbin:/sbin" command -v iptables >/dev/null || problems+=("iptables (the container network writes its rules with it)")
if [ "${#problems[@]}" -gt 0 ]; then
    echo "podman cannot run the lab's containers on this machine: missing ${problems[*]}." >&2
    exit 1
fi

# Every lab container runs systemd, which with journald and its .path units takes several inotify instances of root's;
# the kernel's default of 128 per user ran out with about twenty containers up (the fleet benchmark, molecule beside the
# lab): a container then died at boot without a log, or nvidia-cdi-refresh.path failed with "Too many open files".
inotify_instances="$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 0)"
if [ "$inotify_instances" -lt 1024 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "Raising fs.inotify.max_user_instances from $inotify_instances to 1024 (the lab's systemd containers use many)."
        sysctl -q -w fs.inotify.max_user_instances=1024
    else
        echo "fs.inotify.max_user_instances is $inotify_instances; the lab's containers need 1024: run as root: sysctl -w fs.inotify.max_user_instances=1024" >&2
    fi
fi
