#!/usr/bin/env bash
# playbooks/mig_reconfigure.yml on the simulated rack, after site.yml (dc1-gpu2 in layout lab-inference: GPUs 0-6
# whole, GPU 7 in seven 1g.10gb instances), with the GPU Operator's node components as DaemonSets the lab's kubelet runs
# (tests/e2e/mig/gpu-operator/) and its device plugin advertising what the node's nvidia-smi shows:
#   1. --check: the plan and the pod a drain would evict; nothing changes, not even a label;
#   2. dc1-gpu2 to all-1g.10gb with a serving pod evicted: back in service advertising 56 nvidia.com/mig-1g.10gb;
#   3. the same again: no drain, no write; then a reboot: the same instances restored before kubelet, advertised again;
#   4. a PodDisruptionBudget blocks the drain: the run fails naming the pod, GPUs unchanged, node cordoned, state failed;
#   5. a GPU instance creation fails halfway (the nvidia-smi double's fault knob): that GPU rolled back, node cordoned,
#      state failed, components back;
#   5b. the device plugin kept off the node (its deploy label at false, which the change keeps): the wait for the new
#      resources runs out with a message that says nothing was advertised, and why;
#   6. dc2-gpu1 (A100) to all-1g.10gb without mig_allow_gpu_reset/mig_allow_reboot: refused before draining;
#   7. the same with mig_allow_gpu_reset and Fabric Manager and nvidia-persistenced (they keep the GPUs held) as host GPU
#      clients: stopped, the mode changed, started again, the node back in service with 56 MIG devices;
#   8. dc1-gpu1 with mig_owner gpu_operator: drained, labelled nvidia.com/mig.config, changed by the operator's
#      mig-manager (the lab's stand-in), back in service on its success; a second run writes nothing.
# Needs the lab up with site.yml run (lab_e2e.sh) and the real kubectl in .build/bin (make k8s-clients).
set -euo pipefail

e2e_name="mig e2e"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/mig"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
playbook=("$repo/.venv/bin/ansible-playbook" -i inventories/lab)
reconfigure=playbooks/mig_reconfigure.yml
node=dc1-gpu2
kubectl=("$repo/.build/bin/kubectl" --kubeconfig "$repo/inventories/lab/artifacts/dc1/admin.conf")
kubectl_dc2=("$repo/.build/bin/kubectl" --kubeconfig "$repo/inventories/lab/artifacts/dc2/admin.conf")
fail() { echo "mig e2e: $*" >&2; exit 1; }

# A Node of either datacenter (the name says which: dc1-gpu2, dc2-gpu1).
node_json() { if [[ "$1" == dc2-* ]]; then "${kubectl_dc2[@]}" get node "$1" -o json; else "${kubectl[@]}" get node "$1" -o json; fi; }
# One field of a Node, through a small Python expression on the object `n`.
node_field() { node_json "$1" | python3 -c "import json, sys; n = json.load(sys.stdin); print($2)"; }
allocatable() { node_field "$1" "n['status'].get('allocatable', {}).get('$2', '0')"; }
label() { node_field "$1" "n['metadata'].get('labels', {}).get('$2', '')"; }
cordoned() { node_field "$1" "bool(n['spec'].get('unschedulable'))"; }
# Wait up to $3 seconds for node $1's allocatable to satisfy "resource=count ...".
wait_for_resources() {
    local name="$1" wanted="$2" deadline=$(( $(date +%s) + $3 )) pair ok
    while :; do
        ok=1
        for pair in $wanted; do
            [[ "$(allocatable "$name" "${pair%=*}")" == "${pair#*=}" ]] || ok=0
        done
        (( ok )) && return 0
        (( $(date +%s) < deadline )) || fail "$name does not advertise $wanted: $(node_field "$name" "n['status'].get('allocatable')")"
        sleep 1
    done
}
# The GPU instances of dc1-gpu2 as (GPU, profile id, placement), from nvidia-smi on the node.
gpu_instances() { podman exec "onprem-gpu-lab-$node" nvidia-smi mig -lgi | awk '$2 ~ /^[0-9]+$/ && $3 == "MIG" {print $2, $5, $7}'; }
# Whether a run's log holds a phrase, whatever line breaks ansible-core's output put in it (YAML results fold long lines).
said() { tr -s '[:space:]' ' ' <"$out/$1.log" | grep -qF -- "$2"; }
pod_exists() { "${kubectl[@]}" get pod -n mig-e2e "$1" >/dev/null 2>&1; }
# The pod $2 of ReplicaSet $1 on dc1-gpu2, as the ReplicaSet controller and the scheduler would make and bind it.
replica_pod() {
    "${kubectl[@]}" get replicaset -n mig-e2e "$1" -o json | python3 -c '
import json, sys
rs, pod = json.load(sys.stdin), sys.argv[1]
template = rs["spec"]["template"]
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": pod, "namespace": "mig-e2e", "labels": template["metadata"]["labels"],
                               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
                                                    "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
                  "spec": dict(template["spec"], nodeName=sys.argv[2])}))' "$2" "$node" | "${kubectl[@]}" create -f - >>"$out/setup.log"
}

# The GPU Operator's components on every GPU node, as the operator labels GPU nodes for them; a serving pod on dc1-gpu2.
"${kubectl[@]}" apply -f tests/e2e/mig/gpu-operator/ >"$out/setup.log"
"${kubectl_dc2[@]}" apply -f tests/e2e/mig/gpu-operator/ >>"$out/setup.log"
components=(nvidia.com/gpu.deploy.device-plugin=true nvidia.com/gpu.deploy.gpu-feature-discovery=true nvidia.com/gpu.deploy.dcgm-exporter=true
            nvidia.com/gpu.deploy.dcgm=true)
for gpu_node in dc1-gpu1 dc1-gpu2; do
    "${kubectl[@]}" label node "$gpu_node" --overwrite "${components[@]}" >>"$out/setup.log"
done
"${kubectl_dc2[@]}" label node dc2-gpu1 --overwrite "${components[@]}" >>"$out/setup.log"
"${kubectl[@]}" apply -f tests/e2e/mig/workloads/ >>"$out/setup.log"
replica_pod inference inference-0
wait_for_resources "$node" "nvidia.com/gpu=7 nvidia.com/mig-1g.10gb=7" 60
layout_before="$(gpu_instances)"

# 1. The plan only.
run_step "mig_reconfigure.yml --check, $node to all-1g.10gb" check pass "$reconfigure" --limit "$node" -e mig_layout=all-1g.10gb --check
grep -q 'Pods to evict: mig-e2e/inference-0' "$out/check.log" || fail "the check-mode plan does not name the pod to evict (see $out/check.log)"
[[ "$(cordoned "$node")" == False && -z "$(label "$node" nvidia.com/mig.config.state)" && "$(gpu_instances)" == "$layout_before" ]] \
    || fail "check mode changed $node"

# 2. The change, with the serving pod evicted.
run_step "mig_reconfigure.yml, $node to all-1g.10gb (drain, apply, back in service)" reconfigure pass "$reconfigure" --limit "$node" -e mig_layout=all-1g.10gb
! pod_exists inference-0 || fail "inference-0 was not evicted"
[[ "$(allocatable "$node" nvidia.com/mig-1g.10gb)/$(allocatable "$node" nvidia.com/gpu)" == 56/0 ]] || fail "$node does not advertise 56 MIG devices and no whole GPU"
[[ "$(cordoned "$node")" == False ]] || fail "$node is still cordoned"
[[ "$(label "$node" nvidia.com/mig.config)/$(label "$node" nvidia.com/mig.config.state)" == all-1g.10gb/success ]] || fail "$node's MIG labels are wrong"
[[ "$(label "$node" nvidia.com/gpu.deploy.device-plugin)" == true ]] || fail "$node's device plugin label was not restored"
[[ -z "$(label "$node" onprem.gpu/maintenance)" ]] || fail "$node still carries the maintenance mark"
podman exec "onprem-gpu-lab-$node" python3 -c 'import json; d = json.load(open("/etc/onprem-gpu/mig/instances.json")); assert d["layout"] == "all-1g.10gb" and len(d["gpus"]) == 8' \
    || fail "the boot record of $node is not all-1g.10gb"
grep -E "^$node +: " "$out/reconfigure.log" | sed "s/^/mig e2e, reconfigure recap: /" | tee -a "$timings"

# 3. Nothing to do: not drained, nothing written.
run_step "mig_reconfigure.yml again (no change)" again pass "$reconfigure" --limit "$node" -e mig_layout=all-1g.10gb
grep -qE "^$node +: ok=[0-9]+ +changed=0 " "$out/again.log" || fail "the second run changed something (see $out/again.log)"
! grep -q 'TASK \[onprem.gpu.maintenance : Drain the node\]' "$out/again.log" || fail "the second run drained $node"

# 3b. A reboot: onprem-mig.service creates the same instances before kubelet starts, and the node advertises them again.
layout_before="$(gpu_instances)"
run_step "reboot of $node in layout all-1g.10gb" reboot pass -e lab_reboot_hosts="$node" lab/molecule/reboot.yml
[[ "$(gpu_instances)" == "$layout_before" ]] || fail "the reboot did not restore the same GPU instances at the same placements"
podman exec "onprem-gpu-lab-$node" sh -c 'test "$(systemctl show -P ActiveEnterTimestampMonotonic onprem-mig.service)" -le \
    "$(systemctl show -P ActiveEnterTimestampMonotonic kubelet.service)"' || fail "onprem-mig.service did not finish before kubelet started"
wait_for_resources "$node" "nvidia.com/gpu=0 nvidia.com/mig-1g.10gb=56" 60

# 4. A budget that allows no disruption stops the drain; the GPUs stay as they are.
"${kubectl[@]}" apply -f tests/e2e/mig/blocking-budget/ >>"$out/setup.log"
replica_pod solo solo-0
deadline=$(( $(date +%s) + 30 ))
until [[ "$("${kubectl[@]}" get pdb -n mig-e2e solo -o jsonpath='{.status.currentHealthy}')" == 1 ]]; do
    (( $(date +%s) < deadline )) || fail "solo-0 did not become healthy"
    sleep 1
done
layout_before="$(gpu_instances)"
run_step "mig_reconfigure.yml held by a PodDisruptionBudget" budget fail "$reconfigure" --limit "$node" -e mig_layout=lab-inference
grep -q "solo-0" "$out/budget.log" || fail "the failure does not name the pod its budget protects"
grep -q "its GPUs were not changed" "$out/budget.log" || fail "the failure does not say the GPUs are unchanged"
said budget "Failed to delete pod mig-e2e/solo-0 due to: Cannot evict pod as it would violate" \
    || fail "the final message does not name the PodDisruptionBudget as the cause (see $out/budget.log)"
[[ "$(gpu_instances)" == "$layout_before" ]] || fail "the GPUs changed although the drain failed"
[[ "$(cordoned "$node")/$(label "$node" nvidia.com/mig.config.state)" == True/failed ]] || fail "$node should stay cordoned with state failed"
[[ "$(label "$node" onprem.gpu/maintenance)" == failed ]] || fail "$node should be marked onprem.gpu/maintenance=failed"
"${kubectl[@]}" delete -f tests/e2e/mig/blocking-budget/ >>"$out/setup.log"
"${kubectl[@]}" delete pod -n mig-e2e solo-0 --ignore-not-found >>"$out/setup.log"

# 5. GPU 3's next GPU instance creation fails: the module puts GPU 3 back, the run fails, the node stays out of service.
podman exec "onprem-gpu-lab-$node" python3 -c '
import fcntl, json
path = "/var/lib/onprem-gpu-lab/nvidia-smi-state.json"
with open(path + ".lock", "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    state = json.load(open(path))
    state["gpus"][3]["failing_gpu_instance_creations"] = 1
    json.dump(state, open(path, "w"))
'
gpu3_before="$(gpu_instances | awk '$1 == 3')"
run_step "mig_reconfigure.yml with a GPU instance creation failing" fault fail "$reconfigure" --limit "$node" -e mig_layout=all-3g.40gb
grep -q "Unknown Error" "$out/fault.log" || fail "the failure does not carry nvidia-smi's error"
said fault "The node stays cordoned with nvidia.com/mig.config.state=failed; each GPU is at its previous layout or the new one" \
    || fail "the final message does not say where the GPUs are after the fault (see $out/fault.log)"
[[ "$(gpu_instances | awk '$1 == 3')" == "$gpu3_before" ]] || fail "GPU 3 was not rolled back to its instances"
[[ "$(gpu_instances | awk '$1 == 2 {print $2}' | sort -u)" == 9 ]] || fail "GPU 2 should be in the new layout (3g.40gb, profile 9)"
[[ "$(cordoned "$node")/$(label "$node" nvidia.com/mig.config.state)" == True/failed ]] || fail "$node should stay cordoned with state failed"
[[ "$(label "$node" nvidia.com/gpu.deploy.device-plugin)" == true ]] || fail "the device plugin label was not restored after the failure"

# 5b. The device plugin kept off dc1-gpu2: its deploy label at false stays false across the change (as mig-manager keeps
#     it), the lab's kubelet runs no plugin there, and the wait for the new resources runs out and says why.
"${kubectl[@]}" label node "$node" --overwrite nvidia.com/gpu.deploy.device-plugin=false >>"$out/setup.log"
run_step "mig_reconfigure.yml with the device plugin kept off the node" plugin fail "$reconfigure" --limit "$node" \
    -e mig_layout=all-1g.10gb -e mig_resources_timeout=20
said plugin "$node did not advertise its new MIG resources within 20 s (mig_resources_timeout): no nvidia.com/gpu or nvidia.com/mig-* resource was advertised; expected nvidia.com/mig-1g.10gb: 56." \
    || fail "the timeout does not say that nothing was advertised (see $out/plugin.log)"
said plugin "The device plugin does not run on the node: nvidia.com/gpu.deploy.device-plugin is" \
    || fail "the timeout does not name the device plugin's label as the cause (see $out/plugin.log)"
! grep -q "Unknown error" "$out/plugin.log" || fail "the timeout still reads as ansible-core's Unknown error"
[[ "$(cordoned "$node")/$(label "$node" nvidia.com/mig.config.state)" == True/failed ]] || fail "$node should stay cordoned with state failed"
"${kubectl[@]}" label node "$node" --overwrite nvidia.com/gpu.deploy.device-plugin=true >>"$out/setup.log"

# 6. An Ampere MIG mode change needs a GPU reset or a reboot: without either opt-in, nothing is touched.
run_step "mig_reconfigure.yml, an A100 mode change without opt-ins" ampere fail "$reconfigure" --limit dc2-gpu1 -e mig_layout=all-1g.10gb
grep -q "mig_allow_gpu_reset=true" "$out/ampere.log" || fail "the refusal does not name the opt-ins"
! grep -q 'TASK \[onprem.gpu.maintenance : ' "$out/ampere.log" || fail "dc2-gpu1 was touched before the refusal"

# 7. The same A100 change with the reset allowed, and Fabric Manager and nvidia-persistenced (each keeps the GPUs of an
#    HGX A100 held, so that they cannot be reset) as the host's GPU clients: stopped, the mode applied, started again.
wait_for_resources dc2-gpu1 "nvidia.com/gpu=8" 60
# The persistence daemon as systemd stops it (KillMode=control-group signals its children too): no stop may leave
# persistence mode on, or the reset below finds the GPUs held (the double once did, in about one stop in nine).
for stop in $(seq 20); do
    podman exec onprem-gpu-lab-dc2-gpu1 systemctl stop nvidia-persistenced.service
    modes="$(podman exec onprem-gpu-lab-dc2-gpu1 nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | sort -u)"
    [[ "$modes" == Disabled ]] || fail "persistence mode is still on ($modes) after stop $stop of nvidia-persistenced"
    # systemd allows 5 starts in 10 s (StartLimitBurst): reset-failed clears the counter, as an operator would.
    podman exec onprem-gpu-lab-dc2-gpu1 systemctl reset-failed nvidia-persistenced.service
    podman exec onprem-gpu-lab-dc2-gpu1 systemctl start nvidia-persistenced.service
done
persistenced_since() { podman exec onprem-gpu-lab-dc2-gpu1 systemctl show -P ActiveEnterTimestampMonotonic nvidia-persistenced.service; }
since_before="$(persistenced_since)"
run_step "mig_reconfigure.yml, an A100 mode change with mig_allow_gpu_reset, Fabric Manager and nvidia-persistenced stopped meanwhile" ampere-reset pass \
    "$reconfigure" --limit dc2-gpu1 -e mig_layout=all-1g.10gb -e mig_allow_gpu_reset=true -e '{"mig_host_gpu_clients": ["nvidia-fabricmanager", "nvidia-persistenced"]}'
[[ "$(allocatable dc2-gpu1 nvidia.com/mig-1g.10gb)/$(allocatable dc2-gpu1 nvidia.com/gpu)" == 56/0 ]] || fail "dc2-gpu1 does not advertise 56 MIG devices"
[[ "$(cordoned dc2-gpu1)/$(label dc2-gpu1 nvidia.com/mig.config.state)" == False/success ]] || fail "dc2-gpu1 is not back in service"
podman exec onprem-gpu-lab-dc2-gpu1 systemctl is-active --quiet nvidia-persistenced.service || fail "nvidia-persistenced was not started again"
(( $(persistenced_since) > since_before )) || fail "nvidia-persistenced was not stopped during the change"
podman exec onprem-gpu-lab-dc2-gpu1 nvidia-smi --query-gpu=mig.mode.current,mig.mode.pending --format=csv,noheader | sort -u | grep -qx 'Enabled, Enabled' \
    || fail "dc2-gpu1's GPUs are not all in MIG mode"

# 8. dc1-gpu1, whose MIG the GPU Operator's mig-manager owns (mig_owner: gpu_operator): drained, labelled, changed by the
#    mig-manager, back in service once it reports success; the second run writes nothing.
"${kubectl[@]}" apply -f tests/e2e/mig/mig-manager/ >>"$out/setup.log"
"${kubectl[@]}" label node dc1-gpu1 --overwrite nvidia.com/gpu.deploy.mig-manager=true >>"$out/setup.log"
wait_for_resources dc1-gpu1 "nvidia.com/gpu=8" 60
run_step "mig_reconfigure.yml, dc1-gpu1 to all-1g.10gb through the GPU Operator's mig-manager" operator pass \
    "$reconfigure" --limit dc1-gpu1 -e mig_layout=all-1g.10gb -e mig_owner=gpu_operator
[[ "$(label dc1-gpu1 nvidia.com/mig.config)/$(label dc1-gpu1 nvidia.com/mig.config.state)/$(cordoned dc1-gpu1)" == all-1g.10gb/success/False ]] \
    || fail "dc1-gpu1 is not back in service in layout all-1g.10gb"
wait_for_resources dc1-gpu1 "nvidia.com/gpu=0 nvidia.com/mig-1g.10gb=56" 60
[[ "$(podman exec onprem-gpu-lab-dc1-gpu1 nvidia-smi mig -lgi | grep -c ' MIG 1g.10gb ')" == 56 ]] || fail "the mig-manager did not make 56 GPU instances"
run_step "mig_reconfigure.yml again through the mig-manager (no change)" operator-again pass \
    "$reconfigure" --limit dc1-gpu1 -e mig_layout=all-1g.10gb -e mig_owner=gpu_operator
grep -qE "^dc1-gpu1 +: ok=[0-9]+ +changed=0 " "$out/operator-again.log" || fail "the second run through the mig-manager changed something"
! grep -q 'TASK \[onprem.gpu.maintenance : Cordon the node\]' "$out/operator-again.log" || fail "the second run cordoned dc1-gpu1"
echo "mig e2e: check mode, reconfiguration, no-op, PodDisruptionBudget, mid-apply fault, device plugin away, Ampere refusal" \
     "and reset, and the GPU Operator's mig-manager as expected."
