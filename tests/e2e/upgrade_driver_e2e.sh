#!/usr/bin/env bash
# playbooks/upgrade_driver.yml on one datacenter of the simulated rack, after site.yml (driver 580.65.06 from the lab
# mirror, which also publishes 580.95.05): by default the lab's dc1, whose dc1-gpu2 keeps MIG layout lab-inference
# (GPU 7 in seven 1g.10gb instances), with the GPU Operator's node components as DaemonSets the lab's kubelet runs
# (tests/e2e/mig/gpu-operator/) and a host process holding one GPU of each node (the lab's GPU job, a systemd unit):
#   1. --check: the plan of each node; nothing changes (no cordon, no package, the old driver runs);
#   2. the rolling upgrade to 580.95.05, one node at a time: each drained (a training pod bound to the first node is
#      evicted), its GPU job stopped as a host GPU client so that the modules can reload, packages held at the new
#      version, Fabric Manager running at exactly the driver's version, the MIG node's GPU instances back at the same
#      placements, every node advertising what it did before, uncordoned, its GPU job running again;
#   3. the same again: every node untouched (no drain, changed=0);
#   4. a driver version the mirror does not publish: refused before any change, Fabric Manager named.
# Settings (environment): UPGRADE_E2E_INVENTORY (inventories/lab), UPGRADE_E2E_LIMIT (dc1_gpu_workers),
# UPGRADE_E2E_NODES (the limit's hosts, first the one the training pod is bound to: "dc1-gpu1 dc1-gpu2"),
# UPGRADE_E2E_MIG_NODE (dc1-gpu2), UPGRADE_E2E_CONTAINER_PREFIX (onprem-gpu-lab-), UPGRADE_E2E_KUBECONFIG
# (<inventory>/artifacts/dc1/admin.conf). Needs the lab up with site.yml run and the real kubectl in .build/bin.
# Run after the MIG steps (mig_reconfigure_e2e.sh): it changes the nodes' driver; a node those steps left failed is
# put back in service first, as an operator does after fixing one (kubectl uncordon; the mark removed).
set -euo pipefail

e2e_name="upgrade_driver e2e"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/upgrade_driver"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
inventory="${UPGRADE_E2E_INVENTORY:-inventories/lab}"
limit="${UPGRADE_E2E_LIMIT:-dc1_gpu_workers}"
read -r -a nodes <<<"${UPGRADE_E2E_NODES:-dc1-gpu1 dc1-gpu2}"
mig_node="${UPGRADE_E2E_MIG_NODE:-dc1-gpu2}"
prefix="${UPGRADE_E2E_CONTAINER_PREFIX:-onprem-gpu-lab-}"
kubectl=("$repo/.build/bin/kubectl" --kubeconfig "${UPGRADE_E2E_KUBECONFIG:-$inventory/artifacts/dc1/admin.conf}")
playbook=("$repo/.venv/bin/ansible-playbook" -i "$inventory")
upgrade=playbooks/upgrade_driver.yml
old=580.65.06
new=580.95.05
fail() { echo "$e2e_name: $*" >&2; exit 1; }

on() { local node="$1"; shift; podman exec "$prefix$node" "$@"; }
node_field() { "${kubectl[@]}" get node "$1" -o json | python3 -c "import json, sys; n = json.load(sys.stdin); print($2)"; }
allocatable() { node_field "$1" "json.dumps({k: v for k, v in sorted(n['status'].get('allocatable', {}).items()) if k.startswith('nvidia.com/')})"; }
cordoned() { node_field "$1" "bool(n['spec'].get('unschedulable'))"; }
mark() { node_field "$1" "n['metadata'].get('labels', {}).get('onprem.gpu/maintenance', '')"; }
running_driver() { on "$1" nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u; }
# shellcheck disable=SC2016 # dpkg-query's own format, not the shell's
package_version() { on "$1" dpkg-query -W -f '${Version}' "$2"; }
gpu_instances() { on "$1" nvidia-smi mig -lgi | awk '$2 ~ /^[0-9]+$/ && $3 == "MIG" {print $2, $5, $7}'; }
compute_pids() { on "$1" nvidia-smi --query-compute-apps=pid --format=csv,noheader | sort; }
said() { grep -qF -- "$2" < <(tr -s '[:space:]' ' ' <"$out/$1.log"); }
# Wait up to $2 seconds until node $1 advertises exactly the GPU resources $3 (as allocatable prints them).
wait_for_resources() {
    local deadline=$(( $(date +%s) + $2 ))
    until [[ "$(allocatable "$1")" == "$3" ]]; do
        (( $(date +%s) < deadline )) || fail "$1 advertises $(allocatable "$1"), not $3"
        sleep 1
    done
}

# The GPU Operator's components on the nodes (as the MIG e2e applies them), a training pod bound to the first node,
# and on every node a host process that holds one GPU: the lab's GPU job, a systemd unit, as DCGM or a host job would be.
"${kubectl[@]}" apply -f tests/e2e/mig/gpu-operator/ -f tests/e2e/upgrade_driver/ >"$out/setup.log"
for node in "${nodes[@]}"; do
    if [[ "$(mark "$node")" == failed ]]; then
        "${kubectl[@]}" uncordon "$node" >>"$out/setup.log"
        "${kubectl[@]}" label node "$node" onprem.gpu/maintenance- nvidia.com/mig.config.state- >>"$out/setup.log"
    fi
    "${kubectl[@]}" label node "$node" --overwrite nvidia.com/gpu.deploy.device-plugin=true nvidia.com/gpu.deploy.gpu-feature-discovery=true \
        nvidia.com/gpu.deploy.dcgm-exporter=true nvidia.com/gpu.deploy.dcgm=true >>"$out/setup.log"
    [[ "$(running_driver "$node")" == "$old" ]] || fail "$node does not run driver $old to begin with"
    # A unit file, not a transient unit: the upgrade stops it and starts it again.
    podman exec -i "$prefix$node" sh -c 'cat >/etc/systemd/system/lab-gpu-job.service' <<'UNIT'
[Unit]
Description=A lab GPU job holding GPU 0 (tests/e2e/upgrade_driver_e2e.sh)

[Service]
ExecStart=/usr/bin/python3 /usr/share/nvidia-smi-double/lab-gpu-job --gpu 0
UNIT
    on "$node" systemctl daemon-reload
    on "$node" systemctl start lab-gpu-job.service
done
"${kubectl[@]}" get replicaset -n upgrade-e2e trainer -o json | python3 -c '
import json, sys
rs = json.load(sys.stdin)
template = rs["spec"]["template"]
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "trainer-0", "namespace": "upgrade-e2e", "labels": template["metadata"]["labels"],
                               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
                                                    "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
                  "spec": dict(template["spec"], nodeName=sys.argv[1])}))' "${nodes[0]}" \
    | "${kubectl[@]}" apply -f - >>"$out/setup.log"
# A node whose MIG instances another owner made (the MIG e2e's GPU Operator step) has no record of the mig role, and the
# upgrade refuses it (a module reload would lose them): mig_reconfigure.yml with the layout it is in records it,
# without draining it (its GPUs already match).
for node in "${nodes[@]}"; do
    # Whole outputs, not grep -q in a pipe: under pipefail, a writer cut short by grep's early exit fails the pipe.
    if [[ $'\n'"$(on "$node" nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader)"$'\n' == *$'\n'Enabled$'\n'* ]] \
        && ! on "$node" test -e /etc/onprem-gpu/mig/instances.json; then
        layout="$(node_field "$node" "n['metadata'].get('labels', {}).get('nvidia.com/mig.config', '')")"
        [[ -n "$layout" ]] || fail "$node has GPUs in MIG mode, but neither a MIG record nor a nvidia.com/mig.config label"
        run_step "mig_reconfigure.yml records $node's layout $layout" "record-$node" pass playbooks/mig_reconfigure.yml --limit "$node" \
            -e mig_layout="$layout"
    fi
done
declare -A resources_before
for node in "${nodes[@]}"; do
    deadline=$(( $(date +%s) + 60 ))
    until [[ "$(allocatable "$node")" == *nvidia.com/* && -n "$(compute_pids "$node")" ]]; do
        (( $(date +%s) < deadline )) || fail "$node does not advertise GPUs or its GPU job does not hold a GPU"
        sleep 1
    done
    resources_before[$node]="$(allocatable "$node")"
done
layout_before="$(gpu_instances "$mig_node")"
[[ -n "$layout_before" ]] || fail "$mig_node has no GPU instances to keep"

# 1. The plan only.
run_step "upgrade_driver.yml --check, $limit to $new" check pass "$upgrade" --limit "$limit" -e nvidia_driver_version="$new" --check
for node in "${nodes[@]}"; do
    said check "$node: to driver $new (check mode: nothing is changed)" || fail "the check-mode plan does not show $node (see $out/check.log)"
    [[ "$(cordoned "$node")/$(running_driver "$node")/$(package_version "$node" nvidia-driver-cuda)" == "False/$old/$old-1" ]] \
        || fail "check mode changed $node"
done
said check "the kernel runs driver $old" || fail "the plan does not say why the nodes need the upgrade"
said check "nvidia-fabricmanager, libnvidia-nscq at $new; hold" || fail "the plan does not show Fabric Manager going to $new with the driver"

# 2. The rolling upgrade, the GPU jobs stopped as host GPU clients while the modules reload.
run_step "upgrade_driver.yml, $limit from $old to $new (drain, reload, back in service)" upgrade pass "$upgrade" --limit "$limit" \
    -e nvidia_driver_version="$new" -e '{"nvidia_driver_host_gpu_clients": ["lab-gpu-job"]}'
# Rolling: each node is back in service before the next one is taken out.
python3 - "$out/upgrade.log" "${nodes[@]}" <<'EOF' || fail "the nodes were not upgraded one after the other (see $out/upgrade.log)"
import re, sys
# The log as (task, host) in order: each TASK header, then the hosts its result lines name.
events, task = [], None
for line in open(sys.argv[1]):
    header = re.match(r"TASK \[(?:[^\]]*: )?(.*?)\] \**$", line.rstrip("\n"))
    if header:
        task = header.group(1)
        continue
    result = re.match(r"(?:ok|changed|included|skipping): (?:\[([^\]]+)\]|\S+ for (.+))", line)
    if result:
        events += [(task, host.strip()) for host in (result.group(1) or result.group(2)).split(",")]
spans = [(events.index(("Take the node out of service", node)), events.index(("Put the node back in service", node))) for node in sys.argv[2:]]
assert all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1)), spans
EOF
! "${kubectl[@]}" get pod -n upgrade-e2e trainer-0 >/dev/null 2>&1 || fail "trainer-0 was not evicted from ${nodes[0]}"
for node in "${nodes[@]}"; do
    [[ "$(running_driver "$node")" == "$new" ]] || fail "$node does not run driver $new"
    held=" $(on "$node" apt-mark showhold | tr '\n' ' ') "
    for package in nvidia-driver-cuda nvidia-kernel-open-dkms nvidia-fabricmanager libnvidia-nscq nvidia-persistenced nvidia-modprobe; do
        [[ "$(package_version "$node" "$package")" == "$new-1" ]] || fail "$node has $package $(package_version "$node" "$package"), not $new-1"
        [[ "$held" == *" $package "* ]] || fail "$node does not hold $package"
    done
    [[ "$(on "$node" nv-fabricmanager --version)" == "Fabric Manager version is : $new" ]] || fail "$node's Fabric Manager is not at $new"
    on "$node" systemctl is-active --quiet nvidia-fabricmanager.service || fail "Fabric Manager does not run on $node at the new driver"
    on "$node" systemctl is-active --quiet nvidia-persistenced.service || fail "nvidia-persistenced does not run on $node"
    [[ "$(cordoned "$node")/$(mark "$node")" == False/ ]] || fail "$node is not back in service"
    wait_for_resources "$node" 60 "${resources_before[$node]}"
    on "$node" systemctl is-active --quiet lab-gpu-job.service || fail "$node's GPU job was not started again"
done
[[ "$(gpu_instances "$mig_node")" == "$layout_before" ]] || fail "$mig_node does not have the same GPU instances at the same placements"
said upgrade "Stop nvidia-persistenced, and Fabric Manager on NVSwitch boards" || fail "the services were not stopped"
grep -E "^($(IFS='|'; echo "${nodes[*]}")) +: " "$out/upgrade.log" | sed "s/^/$e2e_name, upgrade recap: /" | tee -a "$timings"

# 3. Nothing to do: no drain, nothing written.
run_step "upgrade_driver.yml again at $new (no change)" again pass "$upgrade" --limit "$limit" -e nvidia_driver_version="$new"
for node in "${nodes[@]}"; do
    grep -qE "^$node +: ok=[0-9]+ +changed=0 " "$out/again.log" || fail "the second run changed $node (see $out/again.log)"
done
! grep -q 'TASK \[onprem.gpu.maintenance : ' "$out/again.log" || fail "the second run took a node out of service"

# 4. A version the mirror does not publish (no driver, no Fabric Manager at it): refused before any change.
run_step "upgrade_driver.yml to a version the mirror lacks (refused)" missing fail "$upgrade" --limit "$limit" -e nvidia_driver_version=580.99.99
said missing "Fabric Manager is not offered at driver version 580.99.99 ($old, $new of branch 580 on the mirror)" \
    || fail "the refusal does not name Fabric Manager's versions (see $out/missing.log)"
said missing "Nothing was changed." || fail "the refusal does not say that nothing changed"
! grep -q 'TASK \[onprem.gpu.maintenance : ' "$out/missing.log" || fail "a node was taken out of service before the refusal"
for node in "${nodes[@]}"; do
    [[ "$(running_driver "$node")/$(cordoned "$node")" == "$new/False" ]] || fail "the refused run changed $node"
done
# The GPU jobs and the training workload go: later steps find the GPUs free.
for node in "${nodes[@]}"; do
    on "$node" systemctl stop lab-gpu-job.service
    on "$node" rm -f /etc/systemd/system/lab-gpu-job.service
    on "$node" systemctl daemon-reload
done
"${kubectl[@]}" delete -f tests/e2e/upgrade_driver/ --ignore-not-found >>"$out/setup.log"
echo "$e2e_name: check mode, the rolling upgrade with held GPUs freed and the MIG layout kept, the no-op, and the refusal as expected."
