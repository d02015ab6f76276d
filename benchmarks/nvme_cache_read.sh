#!/usr/bin/env bash
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Sequential read of the mounted NVMe cache against the raw device under it: how much the filesystem costs.
#
# Writes a test file of random data on the cache, then reads it with O_DIRECT through XFS, and reads the very
# same blocks (the file's extents, from xfs_io fiemap) from the raw device, also with O_DIRECT; prints both
# throughputs (median of the runs) and their ratio. Before every read it drops the page cache
# (sync; echo 3 > /proc/sys/vm/drop_caches) where it may; where it may not (inside a container) it says so and
# relies on O_DIRECT, which bypasses the node's page cache but not that of a lab loop device's backing file.
# The tools are dd (coreutils) and xfs_io (xfsprogs, which the nvme_cache role installs).
#
# On a node:   benchmarks/nvme_cache_read.sh --mount /raid --device /dev/md/nvme_cache
# In the lab:  benchmarks/nvme_cache_read.sh --container onprem-gpu-lab-dc1-gpu1 --device /dev/nvme0n1
#              (run as root on the lab machine: commands run in the container through podman exec, and the page
#              cache, which the kernel shares with the containers, is dropped from the machine itself)
set -euo pipefail
export LC_ALL=C

container=""
mount_point=/raid
device=""
size_mib=1024
runs=5

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
    echo "Options: --container NAME  --mount DIR (default /raid)  --device PATH (the cache's block device)"
    echo "         --size-mib N (test file, default 1024)  --runs N (default 5)"
}

while (($#)); do
    case "$1" in
        --container) container="$2"; shift 2 ;;
        --mount) mount_point="$2"; shift 2 ;;
        --device) device="$2"; shift 2 ;;
        --size-mib) size_mib="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "Unknown option $1; see --help." >&2; exit 2 ;;
    esac
done
[[ -n "$device" ]] || { echo "--device is required: the block device the cache is mounted from." >&2; exit 2; }

on_node() {
    if [[ -n "$container" ]]; then podman exec "$container" "$@"; else "$@"; fi
}

drop_caches() {
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then
        echo 3 >/proc/sys/vm/drop_caches
        return 0
    fi
    return 1
}

# dd's summary line: "<bytes> bytes (...) copied, <seconds> s, ..." -> "<bytes> <seconds>"
dd_read() {
    on_node dd "$@" of=/dev/null bs=4M 2>&1 >/dev/null | awk '/copied/ {print $1, $(NF-3)}'
}

test_file="$mount_point/.nvme-cache-read-benchmark"
cleanup() { on_node rm -f "$test_file" || true; }
trap cleanup EXIT

mounted="$(on_node findmnt --noheadings --output MAJ:MIN,FSTYPE --mountpoint "$mount_point" || true)"
read -r mounted_devno mounted_type <<<"$mounted"
read -r major minor <<<"$(on_node stat --dereference --format '%t %T' "$device")"
device_devno="$((16#$major)):$((16#$minor))"
if [[ "$mounted_devno" != "$device_devno" || "$mounted_type" != xfs ]]; then
    echo "$mount_point is not the XFS on $device ($device_devno): findmnt says '${mounted:-nothing mounted}'." >&2
    exit 1
fi

echo "Writing a ${size_mib} MiB test file of random data to $test_file"
on_node dd if=/dev/urandom of="$test_file" bs=1M count="$size_mib" iflag=fullblock oflag=direct conv=fsync status=none
# fiemap lines: "<n>: [<file start>..<file end>]: <disk start>..<disk end>" in 512-byte sectors.
mapfile -t extents < <(on_node xfs_io -r -c fiemap "$test_file" | sed -nE 's/^[[:space:]]*[0-9]+: \[[0-9]+\.\.[0-9]+\]: ([0-9]+)\.\.([0-9]+).*/\1 \2/p')
((${#extents[@]} > 0)) || { echo "xfs_io found no extents in $test_file." >&2; exit 1; }

if drop_caches; then
    cache_note="page cache dropped before every read (echo 3 > /proc/sys/vm/drop_caches)"
else
    cache_note="page cache NOT dropped (no write access to /proc/sys/vm/drop_caches here): O_DIRECT reads only"
fi

read_cache() {
    drop_caches || true
    local bytes seconds
    read -r bytes seconds <<<"$(dd_read if="$test_file" iflag=direct)"
    awk -v b="$bytes" -v s="$seconds" 'BEGIN {printf "%.1f", b / s / 1048576}'
}

read_raw() {
    drop_caches || true
    local bytes seconds first last total_bytes=0 total_seconds=0
    for extent in "${extents[@]}"; do
        read -r first last <<<"$extent"
        read -r bytes seconds <<<"$(dd_read if="$device" iflag=direct,skip_bytes,count_bytes skip=$((first * 512)) count=$(((last - first + 1) * 512)))"
        total_bytes=$((total_bytes + bytes))
        total_seconds="$(awk -v a="$total_seconds" -v b="$seconds" 'BEGIN {print a + b}')"
    done
    awk -v b="$total_bytes" -v s="$total_seconds" 'BEGIN {printf "%.1f", b / s / 1048576}'
}

# Alternate which read goes first, so that neither always follows the other.
cache_rates=()
raw_rates=()
for ((run = 1; run <= runs; run++)); do
    if ((run % 2)); then
        cache_rates+=("$(read_cache)")
        raw_rates+=("$(read_raw)")
    else
        raw_rates+=("$(read_raw)")
        cache_rates+=("$(read_cache)")
    fi
    echo "run $run: cache ${cache_rates[-1]} MiB/s, raw device ${raw_rates[-1]} MiB/s"
done

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
cache_median="$(median "${cache_rates[@]}")"
raw_median="$(median "${raw_rates[@]}")"
echo "sequential read of ${size_mib} MiB, ${#extents[@]} extent(s), median of $runs run(s); $cache_note"
echo "cache ($mount_point, XFS):   $cache_median MiB/s"
echo "raw device ($device): $raw_median MiB/s"
awk -v c="$cache_median" -v r="$raw_median" 'BEGIN {printf "ratio cache/raw: %.2f\n", c / r}'
