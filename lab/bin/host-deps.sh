#!/usr/bin/env bash
# Install the system packages that `make lab` and `make test` need on a Debian 12 or Ubuntu machine.
# As root it installs what is missing; otherwise it names exactly what to install and stops.
set -euo pipefail

readonly PACKAGES=(podman runc debootstrap apt-utils gnupg uidmap slirp4netns netavark aardvark-dns
                   python3-venv iproute2 xz-utils git make shellcheck)

missing=()
for package in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

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
