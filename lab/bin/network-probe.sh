#!/usr/bin/env bash
# Prove that podman can start a container on a network of its own before the lab builds anything:
# a throwaway network and a throwaway container (this machine's / as its read-only base, with a
# temporary overlay on top, so no image is needed), both removed at once. The lab's containers need
# exactly this; without iptables, for one, netavark fails here rather than half-way through `make lab`.
set -euo pipefail

network="onprem-gpu-lab-probe-$$"
errors="$(mktemp)"
cleanup() { podman network rm --force "$network" >/dev/null 2>&1 || true; rm -f "$errors"; }
trap cleanup EXIT

if ! podman network create "$network" >/dev/null 2>"$errors" \
   || ! podman run --rm --network "$network" --rootfs /:O /bin/true 2>>"$errors"; then
    echo "podman cannot start a container on a network on this machine ($(grep -v '^time=' "$errors" | tail -n 1)):" \
         "run \`make deps\` as root, which installs and checks what podman needs (iptables, netavark, aardvark-dns)," \
         "then run make again." >&2
    exit 1
fi
