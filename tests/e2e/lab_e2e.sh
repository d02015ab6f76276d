#!/usr/bin/env bash
# End to end on the simulated rack, from nothing: start the lab (with the benchmark's two extra nodes), run site.yml in check
# mode (nothing installed), then twice (the second run must change nothing), check the summary it prints, run lab.yml again (nothing to change), run the
# network benchmark with its faults (network_benchmark_e2e.sh), accept the GPU nodes with three faults (acceptance_e2e.sh),
# reconfigure MIG on live nodes (mig_reconfigure_e2e.sh), apply the GPU platform to both clusters with its charts
# (cluster_addons_e2e.sh), deploy continuous GPU health and fail nodes under it (node_health_e2e.sh), then the day-2
# operations (certificates, node replacement, driver and Kubernetes upgrades), remove the lab.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
logs="$repo/.build/e2e"
timings="$repo/.build/timings.txt"
mkdir -p "$logs"
playbook=("$repo/.venv/bin/ansible-playbook" -i inventories/lab)
# lab.yml also starts the two extra nodes of the network benchmark (tests/e2e/network_benchmark/inventory) from the
# start, in the same run; site.yml knows only inventories/lab, so they stay bare servers until the benchmark's
# step brings them up with site.yml --limit.
lab_nodes=(-i tests/e2e/network_benchmark/inventory)

remove_lab() { "${playbook[@]}" "${lab_nodes[@]}" playbooks/lab.yml -e lab_host_state=absent >"$logs/lab-down.log" 2>&1; }

# Run a playbook, keep its output, record its wall time; fail loudly with the end of its log.
run_step() {
    local name="$1" log="$logs/$2.log"
    shift 2
    local start cpu
    start=$(date +%s)
    cpu=$(bash "$repo/tests/timing/cpu.sh")
    if ! "${playbook[@]}" "$@" >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "e2e: $name failed; full log in $log" >&2
        return 1
    fi
    echo "$name: $(( $(date +%s) - start )) s" | tee -a "$timings"
    # shellcheck disable=SC2086 # two counters
    bash "$repo/tests/timing/cpu.sh" "$name" $cpu >>"$timings"
}

# Every host of the PLAY RECAP must show changed=0.
assert_no_change() {
    local log="$logs/$1.log"
    if grep -E '^[^ ].* : ok=[0-9]+ +changed=[1-9]' "$log" >&2; then
        echo "e2e: $1 changed something on a second run; see $log" >&2
        return 1
    fi
}

assert_summary_line() {
    if ! grep -qF -- "$1" "$logs/site-1.log"; then
        echo "e2e: the site.yml summary lacks: $1" >&2
        return 1
    fi
}

remove_lab
trap remove_lab EXIT

run_step "lab up (lab.yml, 7 containers from scratch)" lab-1 "${lab_nodes[@]}" playbooks/lab.yml
# The documented first step on a new rack: check mode on bare servers passes and changes nothing (no Kubernetes or driver
# package on any node afterwards); the MIG node's layout is left to the real run, once its driver is there.
run_step "site.yml --check on the bare lab" site-check playbooks/site.yml --check
for node in dc1-cp1 dc1-gpu2 dc2-gpu1; do
    for package in kubelet containerd nvidia-driver-cuda; do
        if podman exec "onprem-gpu-lab-$node" dpkg-query -W "$package" >/dev/null 2>&1; then
            echo "e2e: site.yml --check installed $package on $node" >&2
            exit 1
        fi
    done
done
run_step "site.yml, first run" site-1 playbooks/site.yml
run_step "site.yml, second run" site-2 playbooks/site.yml
assert_no_change site-2
run_step "lab.yml, second run" lab-2 "${lab_nodes[@]}" playbooks/lab.yml
assert_no_change lab-2

# Two clusters, one per datacenter, each knowing only its own nodes, with separate CAs.
cluster_nodes() {
    podman exec "onprem-gpu-lab-$1" kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes --output json \
        | python3 -c 'import json, sys; print(" ".join(sorted(n["metadata"]["name"] for n in json.load(sys.stdin)["items"])))'
}
ca_hash() {
    podman exec "onprem-gpu-lab-$1" sh -c 'openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum'
}
[[ "$(cluster_nodes dc1-cp1)" == "dc1-cp1 dc1-gpu1 dc1-gpu2" ]] || { echo "e2e: dc1's cluster has the nodes: $(cluster_nodes dc1-cp1)" >&2; exit 1; }
[[ "$(cluster_nodes dc2-cp1)" == "dc2-cp1 dc2-gpu1" ]] || { echo "e2e: dc2's cluster has the nodes: $(cluster_nodes dc2-cp1)" >&2; exit 1; }
[[ "$(ca_hash dc1-cp1)" != "$(ca_hash dc2-cp1)" ]] || { echo "e2e: dc1 and dc2 share a CA" >&2; exit 1; }
run_step "a dc1 worker offered to dc2 is refused" kube-wrong-cluster tests/e2e/kube_wrong_cluster.yml
# How much a no-op re-run costs each worker: tasks run (ok) and skipped, from the second run's recap.
grep -E '^(dc[0-9]+-(gpu|cp)[0-9]+) +: ' "$logs/site-2.log" | awk '{split($3, ok, "="); split($7, skipped, "="); print "no-op site.yml, " $1 ": " $3 " " $7 ", " ok[2] + skipped[2] " tasks"}' | tee -a "$timings"

assert_summary_line '"  dc1-gpu1     8 x NVIDIA H100 80GB HBM3, driver 580.65.06, MIG capable"'
assert_summary_line '"  dc1-gpu2     8 x NVIDIA H100 80GB HBM3, driver 580.65.06, MIG capable"'
assert_summary_line '"  dc2-gpu1     8 x NVIDIA A100-SXM4-80GB, driver 580.65.06, MIG capable"'
assert_summary_line '"  dc1-cp1      control plane, no GPU; certificates: '
echo "e2e: lab up, site.yml converged, second runs of site.yml and lab.yml changed nothing."

NETWORK_BENCHMARK_E2E_LAB_UP=1 bash tests/e2e/network_benchmark_e2e.sh
# The rack's hand-over on whole GPUs, before the MIG steps change the layouts (nccl-tests is installed by then).
bash tests/e2e/acceptance_e2e.sh
# After the benchmark, which runs NCCL on whole GPUs: MIG reconfiguration of live nodes.
bash tests/e2e/mig_reconfigure_e2e.sh
# As it installs the charts' operators on both clusters: the platform applied directly, charts through helm.
bash tests/e2e/cluster_addons_e2e.sh
# After the faults above: the health agents it deploys keep running (every 30 s in the lab) and would judge them.
bash tests/e2e/node_health_e2e.sh
# Last, the day-2 operations nothing can be undone after, with the health agents running as on a site. The two clusters
# share nothing, so dc2's run beside dc1's (most of their time is spent waiting on drains and restarts, one core each).
# dc2: its certificates renewed 340 days ahead (continuity_e2e.sh, certificates), then its etcd snapshots and a restore
# after its data was lost (etcd_e2e.sh). dc1: dc1-gpu2 removed and replaced under its name (continuity_e2e.sh, removal),
# the driver upgraded on the GPU workers (upgrade_driver_e2e.sh), then Kubernetes one minor up (upgrade_kubernetes_e2e.sh).
dc2_day2() {
    CONTINUITY_E2E_STEPS=certificates bash tests/e2e/continuity_e2e.sh inventories/lab dc2 dc2-gpu1
    bash tests/e2e/etcd_e2e.sh inventories/lab dc2
}
dc2_day2 >"$logs/dc2-day2.log" 2>&1 &
dc2_track=$!
trap 'kill "$dc2_track" 2>/dev/null || true; remove_lab' EXIT
CONTINUITY_E2E_STEPS=removal bash tests/e2e/continuity_e2e.sh inventories/lab dc1 dc1-gpu2
bash tests/e2e/upgrade_driver_e2e.sh
bash tests/e2e/upgrade_kubernetes_e2e.sh
if ! wait "$dc2_track"; then
    tail -n 40 "$logs/dc2-day2.log" >&2
    echo "e2e: dc2's day-2 steps failed; full log in $logs/dc2-day2.log" >&2
    exit 1
fi
sed 's/^/dc2: /' "$logs/dc2-day2.log"
