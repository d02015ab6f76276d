#!/usr/bin/env bash
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# What a no-op playbooks/site.yml costs the controller as the fleet grows (docs/fleet-scale.md).
#
# Starts one datacenter of N+1 lab nodes on the lab's network (a control plane and N light GPU workers: an H100 board in
# the nvidia-smi double, one loop disk as the NVMe cache, no RDMA rails), with the lab's own playbooks/lab.yml on a
# generated inventory; converges them with site.yml once (bounded by --converge-timeout), then runs site.yml again,
# unchanged, once per --config and --runs times, and measures each of those no-op runs:
#   wall             seconds from start to end of ansible-playbook
#   controller CPU   user+sys seconds of ansible-playbook and its workers only: they run in a cpuacct cgroup of their
#                    own; the lab's connection (lab/plugins/connection/lab_podman.py) moves each command it runs on a
#                    node into that node's container cgroups, so the nodes' side is not counted
#   node CPU         user+sys of everything ansible-playbook waited for (/usr/bin/time) minus the controller's: the
#                    modules that ran on the nodes
#   host-tasks       sum over the hosts of ok+skipped in the PLAY RECAP; changed, failed and unreachable must be 0
# then removes its containers and disks (also on failure or Ctrl-C).
#
# The lab mirror must be up (make lab, or make mirror and playbooks/lab.yml): the nodes install from it. Needs root.
# Usage: benchmarks/fleet_noop.sh N [--config SETTINGS]... [--runs R] [--converge-timeout S] [--address-base IP]
#   --config SETTINGS   a comma-separated list of ANSIBLE_* settings for one series of no-op runs, e.g.
#                       ANSIBLE_FORKS=33,ANSIBLE_STRATEGY=free; default: one series with ansible.cfg as it is
#   --runs R            no-op runs per series (default 1)
#   --converge-timeout  seconds the converging site.yml may take (default 2400)
#   --address-base IP   the control plane's address; the workers take the next N (default 10.89.50.64: the lab's
#                       hosts, molecule and the dynamic range are elsewhere in 10.89.50.0/24)
#   --keep              leave the fleet running at the end, for more series with --reuse
#   --reuse             measure a fleet of N that an earlier --keep run started and converged (nothing is created)
# Each measured run is printed and appended to .build/fleet/results.tsv; benchmarks/fleet/fit.py fits and projects them.
set -euo pipefail
export LC_ALL=C.UTF-8

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix=onprem-gpu-
configs=()
runs=1
converge_timeout=2400
address_base=10.89.50.64
keep=false
reuse=false

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }

[[ $# -ge 1 && "$1" =~ ^[0-9]+$ && "$1" -ge 1 ]] || { usage >&2; exit 2; }
nodes="$1"
shift
while (($#)); do
    case "$1" in
        --config) configs+=("$2"); shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --converge-timeout) converge_timeout="$2"; shift 2 ;;
        --address-base) address_base="$2"; shift 2 ;;
        --keep) keep=true; shift ;;
        --reuse) reuse=true; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "Unknown option $1; see --help." >&2; exit 2 ;;
    esac
done
((${#configs[@]})) || configs=("")

export CONTAINERS_CONF="$repo/lab/podman/containers.conf" ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_NOCOLOR=1
export PATH="$repo/.venv/bin:$repo/.build/bin:$PATH"

[[ "$(id -u)" == 0 ]] || { echo "Run as root: the lab's containers, loop disks and cgroups need it." >&2; exit 1; }
[[ "$(podman container inspect --format '{{.State.Running}}' onprem-gpu-lab-mirror 2>/dev/null)" == true ]] ||
    { echo "The lab mirror (onprem-gpu-lab-mirror) is not running: bring the lab up first (make lab)." >&2; exit 1; }
cpuacct=/sys/fs/cgroup/cpuacct
[[ -w "$cpuacct" ]] || { echo "$cpuacct (cgroup v1 cpuacct) is not writable here: the controller's CPU cannot be told apart." >&2; exit 1; }
# Every systemd container holds inotify instances of root (systemd, logind, dbus; containerd once converged: 7 to 11
# measured a node; counted here for all users, an upper bound); past fs.inotify.max_user_instances a container's
# systemd exits at boot (status 255, no log) or never reports the system up.
inotify_used="$({ find /proc/[0-9]*/fd -lname 'anon_inode:inotify' 2>/dev/null || true; } | wc -l)"
inotify_max="$(cat /proc/sys/fs/inotify/max_user_instances)"
if ((inotify_used + 12 * (nodes + 1) > inotify_max)); then
    echo "root holds $inotify_used inotify instances and $((nodes + 1)) more nodes need about $((12 * (nodes + 1))):" \
        "raise the limit first, e.g. sysctl -w fs.inotify.max_user_instances=$(((inotify_used + 12 * (nodes + 1)) * 2))." >&2
    exit 1
fi
IFS=. read -r a b c d <<<"$address_base"
((d + nodes <= 254)) || { echo "--address-base $address_base leaves no room for $nodes more hosts in its /24." >&2; exit 2; }

work="$repo/.build/fleet/n$nodes"
inventory="$work/inventory"
logs="$work/logs"
results="$repo/.build/fleet/results.tsv"
if ! $reuse; then
    rm -rf "$inventory"
    mkdir -p "$inventory/group_vars"
fi
mkdir -p "$logs"

# The inventory: one datacenter, the lab's group settings (linked, not copied), the fleet's own from benchmarks/fleet.
# Host names carry N, so that fleets of different sizes (on different --address-base) can run side by side; a reused
# fleet's are read back from its inventory.
if $reuse; then
    mapfile -t hosts < <(sed -n 's/^ *\([^ :]*\): {ansible_host: .*/\1/p' "$inventory/hosts.yml" 2>/dev/null)
    ((${#hosts[@]} == nodes + 1)) || { echo "--reuse: no inventory of a fleet of $nodes in $inventory." >&2; exit 1; }
else
    hosts=("fleet$nodes-cp1")
    for ((i = 1; i <= nodes; i++)); do hosts+=("$(printf 'fleet%d-gpu%03d' "$nodes" "$i")"); done
fi
host_line() { printf '%s%s: {ansible_host: %s%s, lab_address: %s}\n' "$1" "$2" "$prefix" "$2" "$a.$b.$c.$((d + $3))"; }
$reuse || {
    echo "# Written by benchmarks/fleet_noop.sh $nodes: one datacenter of $nodes light GPU workers."
    echo "all:"
    echo "  children:"
    echo "    fleet:"
    echo "      vars: {kube_api_endpoint: '$a.$b.$c.$d:6443'}"
    echo "      children:"
    echo "        fleet_control_plane:"
    echo "          hosts:"
    host_line "            " "${hosts[0]}" 0
    echo "        fleet_gpu_workers:"
    echo "          children:"
    echo "            fleet_training:"
    echo "              hosts:"
    for ((i = 1; i <= nodes; i++)); do host_line "                " "${hosts[i]}" "$i"; done
    echo "    control_plane: {children: {fleet_control_plane: }}"
    echo "    gpu_nodes: {children: {fleet_gpu_workers: }}"
    echo "    training_pool: {children: {fleet_training: }}"
} >"$inventory/hosts.yml"
$reuse || for vars in all gpu_nodes training_pool; do ln -s "$repo/inventories/lab/group_vars/$vars.yml" "$inventory/group_vars/$vars.yml"; done
$reuse || for vars in fleet fleet_gpu_workers; do ln -s "$repo/benchmarks/fleet/group_vars/$vars.yml" "$inventory/group_vars/$vars.yml"; done

containers=("${hosts[@]/#/$prefix}")
disks="$work/disks"
cgroups=()
cleanup() {
    local rc=$? loop file
    if $keep; then
        echo "The fleet is left running (--keep): measure it again with --reuse; a run without --keep removes it."
        for group in "${cgroups[@]}"; do rmdir "$group" 2>/dev/null || true; done
        exit "$rc"
    fi
    echo "Removing the fleet's ${#containers[@]} containers and their disks"
    podman rm --force --ignore --time 0 "${containers[@]}" >/dev/null || rc=1
    while read -r loop file; do
        [[ "${file% (deleted)}" == "$disks"/* ]] && { losetup --detach "$loop" || rc=1; }
    done < <(losetup --list --noheadings --output NAME,BACK-FILE 2>/dev/null)
    rm -rf "$disks"
    for group in "${cgroups[@]}"; do rmdir "$group" 2>/dev/null || true; done
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
elapsed() { awk -v s="$1" -v e="$(now)" 'BEGIN {printf "%.1f", e - s}'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# The commit, and a digest of any uncommitted change to what site.yml runs (the code measured is then no commit's).
commit() {
    local id
    id="$(git -C "$repo" rev-parse --short HEAD)"
    git -C "$repo" diff --quiet HEAD -- roles playbooks plugins ansible.cfg ||
        id+="+dirty-$(git -C "$repo" diff HEAD -- roles playbooks plugins ansible.cfg | sha256sum | cut -c1-8)"
    echo "$id"
}

echo "fleet of $nodes GPU workers + 1 control plane (${containers[0]}, ${containers[1]} .. ${containers[-1]}), commit $(commit)"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), load $(load)"

if $reuse; then
    for container in "${containers[@]}"; do
        [[ "$(podman container inspect --format '{{.State.Running}}' "$container" 2>/dev/null)" == true ]] ||
            { echo "--reuse: $container is not running; start the fleet with --keep first." >&2; exit 1; }
    done
    echo "reusing the converged fleet (--reuse)"
else
    # The lab's own code makes the containers: lab_host (network and mirror untouched: those belong to the lab) and lab_node.
    start=$(now)
    timeout 900 ansible-playbook -i "$inventory" "$repo/playbooks/lab.yml" --skip-tags lab_host_mirror --forks "$((nodes + 1))" \
        -e "__lab_host_container_prefix=$prefix" -e "lab_host_disks_dir=$disks" -e "lab_host_fabric_dir=$work/fabric" \
        >"$logs/lab.log" 2>&1 || { tail -30 "$logs/lab.log"; echo "playbooks/lab.yml failed or ran over 900 s: $logs/lab.log" >&2; exit 1; }
    echo "containers started and prepared (playbooks/lab.yml): $(elapsed "$start") s, load $(load)"

    start=$(now)
    timeout "$converge_timeout" ansible-playbook -i "$inventory" "$repo/playbooks/site.yml" >"$logs/converge.log" 2>&1 ||
        { tail -30 "$logs/converge.log"; echo "the converging site.yml failed or ran over ${converge_timeout} s: $logs/converge.log" >&2; exit 1; }
    echo "converged (site.yml, first run): $(elapsed "$start") s, load $(load)"
fi

# Memory of the converged nodes, from their memory cgroups: resident (rss) and all they hold with the page cache.
memory() {
    local path rss=0 usage=0 r u
    for container in "${containers[@]}"; do
        path="$(podman container inspect --format '{{.State.CgroupPath}}' "$container")"
        r="$(awk '$1 == "total_rss" {print $2}' "/sys/fs/cgroup/memory$path/memory.stat" 2>/dev/null || echo 0)"
        u="$(cat "/sys/fs/cgroup/memory$path/memory.usage_in_bytes" 2>/dev/null || echo 0)"
        rss=$((rss + ${r:-0})) usage=$((usage + ${u:-0}))
    done
    awk -v r="$rss" -v u="$usage" -v n="${#containers[@]}" \
        'BEGIN {printf "nodes'"'"' memory: %.0f MiB resident (%.0f MiB a node), %.0f MiB with page cache (%.0f MiB a node)\n", r / 1048576, r / n / 1048576, u / 1048576, u / n / 1048576}'
}
memory

# CPU seconds (user+sys) the process $2, child of $1, has used itself, sampled every 0.2 s until $1 exits: the main
# ansible-playbook process, which runs the strategy and the callbacks for every host alone (its workers are its children).
main_cpu() {
    local runner="$1" pid="" ticks=0 stat
    while kill -0 "$runner" 2>/dev/null; do
        [[ -n "$pid" ]] || pid="$(pgrep -o -P "$runner" || true)"
        if [[ -n "$pid" ]] && read -r stat 2>/dev/null <"/proc/$pid/stat"; then
            stat="${stat##*) }"
            read -r -a fields <<<"$stat"
            # After "pid (comm) ": field 3 is the state, 14 and 15 (utime, stime) are at 11 and 12.
            ticks=$((fields[11] + fields[12]))
        fi
        sleep 0.2
    done
    awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t / hz}'
}

# One no-op run of site.yml under the settings in $1; prints one row and appends it to results.tsv.
noop() {
    local config="$1" run="$2" log group time_file start wall load_before load_after controller main node
    local run_commit total_user total_sys max_rss_kib hosts_seen ok skipped changed failed host_tasks per_task runner
    log="$logs/noop-$(date +%H%M%S)-$(echo "${config:-ansible.cfg}" | tr -c 'A-Za-z0-9=_\n' '-')-$run.log"
    group="$cpuacct/onprem-gpu-fleet-$$-${#cgroups[@]}"
    mkdir "$group"
    cgroups+=("$group")
    time_file="$(mktemp)"
    load_before="$(load)"
    run_commit="$(commit)"
    start=$(now)
    (
        echo "$BASHPID" >"$group/cgroup.procs"
        IFS=, read -r -a settings <<<"$config"
        for setting in "${settings[@]}"; do export "${setting?}"; done
        exec /usr/bin/time -f '%U %S %M' -o "$time_file" ansible-playbook -i "$inventory" "$repo/playbooks/site.yml"
    ) >"$log" 2>&1 &
    runner=$!
    main="$(main_cpu "$runner")"
    wait "$runner" || { tail -30 "$log"; echo "the no-op site.yml failed: $log" >&2; return 1; }
    wall="$(elapsed "$start")"
    load_after="$(load)"
    controller="$(awk '{s += $1} END {printf "%.1f", s / 1e9}' "$group/cpuacct.usage_user" "$group/cpuacct.usage_sys")"
    read -r total_user total_sys max_rss_kib <"$time_file"
    rm -f "$time_file"
    node="$(awk -v u="$total_user" -v s="$total_sys" -v c="$controller" 'BEGIN {printf "%.1f", u + s - c}')"
    # PLAY RECAP lines: "<host> : ok=N changed=N unreachable=N failed=N skipped=N rescued=N ignored=N"
    read -r hosts_seen ok skipped changed failed <<<"$(awk '
        /^PLAY RECAP/ {recap = 1; next}
        recap && / : ok=/ {
            n++
            for (i = 1; i <= NF; i++) {split($i, kv, "="); sum[kv[1]] += kv[2]}
        }
        END {print n + 0, sum["ok"] + 0, sum["skipped"] + 0, sum["changed"] + 0, sum["failed"] + sum["unreachable"] + 0}' "$log")"
    # A run that changed something measured no no-op: it is reported, not recorded, and the next run measures again
    # (this happens once when the roles change between the converging run and this one).
    if ((changed != 0 || failed != 0 || hosts_seen != nodes + 2)); then
        echo "not a clean no-op, not recorded: $hosts_seen hosts in the recap (want $((nodes + 2)) with localhost)," \
            "changed=$changed, failed+unreachable=$failed ($log)" >&2
        unclean=$((unclean + 1))
        return 0
    fi
    host_tasks=$((ok + skipped))
    per_task="$(awk -v c="$controller" -v t="$host_tasks" 'BEGIN {printf "%.1f", c * 1000 / t}')"
    printf '%-40s %3s %7s %8s %7s %6s %8s %8s %7s  %s -> %s\n' "${config:-ansible.cfg}" "$nodes" "$wall" "$controller" "$main" \
        "$host_tasks" "$per_task" "$node" "$((max_rss_kib / 1024))" "$load_before" "$load_after"
    [[ -s "$results" ]] || printf '%s\n' "$(IFS=$'\t'; echo "${columns[*]}")" >"$results"
    printf '%s\t' "$(date -u +%FT%TZ)" "$run_commit" "$(nproc)" "$nodes" "${config:-ansible.cfg}" "$run" "$wall" "$controller" "$main" \
        "$host_tasks" "$per_task" "$node" "$((max_rss_kib / 1024))" "$load_before" >>"$results"
    printf '%s\n' "$load_after" >>"$results"
}

columns=(date commit cores nodes config run wall_s controller_cpu_s main_cpu_s host_tasks controller_ms_per_host_task
    node_cpu_s max_rss_mib load_before load_after)
mkdir -p "$(dirname "$results")"

printf '%-40s %3s %7s %8s %7s %6s %8s %8s %7s  %s\n' "no-op site.yml, settings" N wall_s ctl_cpu main_cpu tasks ms/task node_cpu ctl_MiB \
    "load before -> after"
unclean=0
for config in "${configs[@]}"; do
    for ((run = 1; run <= runs; run++)); do noop "$config" "$run"; done
done
((unclean == 0)) || { echo "$unclean run(s) were not clean no-ops: see above." >&2; exit 1; }
