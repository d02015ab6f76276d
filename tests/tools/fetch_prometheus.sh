#!/usr/bin/env bash
# Install Debian's real prometheus and promtool into .build/bin for the tests (the lab's Prometheus month, the
# rendered alert rules), without installing the package on the machine: the package's service would start and
# listen on :9090 wherever systemd runs. `apt-get download` fetches Debian's own package, `dpkg-deb -x` unpacks
# it into .build/prometheus; both binaries need only the C library. Idempotent: nothing to do once they answer.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN_DIR=${PROMETHEUS_BIN_DIR:-$ROOT/.build/bin}
CACHE_DIR=${PROMETHEUS_CACHE_DIR:-$ROOT/.build/prometheus}

if "$BIN_DIR/promtool" --version >/dev/null 2>&1 && "$BIN_DIR/prometheus" --version >/dev/null 2>&1; then
    exit 0
fi
command -v apt-get >/dev/null || { echo "No apt-get here: put prometheus and promtool (2.42 or later) into $BIN_DIR yourself." >&2; exit 1; }
mkdir -p "$BIN_DIR" "$CACHE_DIR"
cd "$CACHE_DIR"
rm -f prometheus_*.deb
if ! apt-get download prometheus >/dev/null 2>&1; then
    # The package lists of a fresh machine may be missing or stale.
    apt-get update -q >/dev/null
    apt-get download prometheus >/dev/null
fi
rm -rf root && dpkg-deb -x prometheus_*.deb root
install -m 0755 root/usr/bin/prometheus root/usr/bin/promtool "$BIN_DIR/"
"$BIN_DIR/promtool" --version | head -n 1
