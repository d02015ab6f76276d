#!/usr/bin/env bash
# playbooks/upgrade_kubernetes.yml on the simulated rack: the lab's dc1 cluster from 1.35.4 to 1.36.2, as the last step of
# lab_e2e.sh (an upgrade cannot be undone: nothing may run on dc1 after it). With a serving workload (a Deployment of
# two replicas on two workers and a PodDisruptionBudget minAvailable 1, tests/e2e/upgrade_kubernetes/) and the nodes made
# Ready by a CNI configuration (the lab's stand-in for a CNI: the kubelet double is Ready once one exists):
#   1. kube_version two minors ahead: refused before any change, in one sentence;
#   2. --check: the plan (which nodes, in which order, from which version to which); nothing changes;
#   3. the rolling upgrade with the last worker's `kubeadm upgrade node` failing midway (the kube double's fault knob):
#      the first control plane (etcd snapshot, kubeadm upgrade apply) and the first worker are upgraded, the run stops
#      naming the last worker, which stays cordoned and labelled failed with the reason;
#   4. the fault cleared, a re-run finishes: the control plane is not applied again, the upgraded worker not drained again;
#   5. a third run changes nothing and drains nothing.
# Before the upgrade, site.yml with the new kube_version is refused (only the procedure moves a member); after it,
# site.yml with the inventory's old kube_version is refused (kubeadm does not downgrade), naming the version to set.
# A node agent runs on every node (a DaemonSet, 5-daemonset.yaml), and a machine that is down stays in the cluster
# (6-node-down.yaml): each run's last check wants the agent ready on the upgraded nodes, leaves the down node out, and
# names it.
# Throughout, the workload's Ready pods are sampled every second (the budget is never violated) and each node's
# cordon-to-uncordon time is recorded. The settings below default to the lab's dc1; set them to run it on another
# cluster of lab containers (one control plane and two or more workers built with the lab's roles), such as the one of
# tests/e2e/upgrade_kubernetes/ (see its inventory.yml and platforms.yml):
#   UPGRADE_E2E_DISK_GPU1=$(losetup --find --show A.img) UPGRADE_E2E_DISK_GPU2=$(losetup --find --show B.img) \
#   ansible-playbook -i localhost, lab/molecule/create.yml -e @tests/e2e/upgrade_kubernetes/platforms.yml
#   (then tests/e2e/continuity/prepare.yml and playbooks/site.yml on tests/e2e/upgrade_kubernetes/inventory.yml)
#   UPGRADE_E2E_INVENTORY=tests/e2e/upgrade_kubernetes/inventory.yml UPGRADE_E2E_LIMIT=upg UPGRADE_E2E_CONTAINER_PREFIX=onprem-gpu-upg- \
#   UPGRADE_E2E_KUBECONFIG=.build/upgrade_kubernetes/artifacts/upg/admin.conf bash tests/e2e/upgrade_kubernetes_e2e.sh
# Needs the lab up with site.yml run (lab_e2e.sh) and the real kubectl in .build/bin (make k8s-clients).
set -euo pipefail

e2e_name="kubernetes upgrade e2e"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/upgrade_kubernetes"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
inventory="${UPGRADE_E2E_INVENTORY:-inventories/lab}"
limit="${UPGRADE_E2E_LIMIT:-dc1}"
container_prefix="${UPGRADE_E2E_CONTAINER_PREFIX:-onprem-gpu-lab-}"
kubeconfig="${UPGRADE_E2E_KUBECONFIG:-$repo/inventories/lab/artifacts/dc1/admin.conf}"
from="${UPGRADE_E2E_FROM:-1.35.4}"
to="${UPGRADE_E2E_TO:-1.36.2}"
too_far="${UPGRADE_E2E_TOO_FAR:-1.37.0}"
read -r -a extra <<<"${UPGRADE_E2E_EXTRA_ARGS:-}"
playbook=("$repo/.venv/bin/ansible-playbook" -i "$inventory" "${extra[@]}")
upgrade=(playbooks/upgrade_kubernetes.yml --limit "$limit")
kubectl=("$repo/.build/bin/kubectl" --kubeconfig "$kubeconfig")
fail() { echo "$e2e_name: $*" >&2; exit 1; }
said() { tr -s '[:space:]' ' ' <"$out/$1.log" | grep -qF -- "$2"; }
hosts() { "$repo/.venv/bin/ansible" -i "$inventory" "${extra[@]}" --list-hosts "$1" | tail -n +2 | tr -d ' '; }
node_field() { "${kubectl[@]}" get node "$1" -o json | python3 -c "import json, sys; n = json.load(sys.stdin); print($2)"; }
kubelet_version() { node_field "$1" "n['status']['nodeInfo']['kubeletVersion']"; }
cordoned() { node_field "$1" "bool(n['spec'].get('unschedulable'))"; }
label() { node_field "$1" "n['metadata'].get('labels', {}).get('$2', '')"; }
cluster_version() {
    "${kubectl[@]}" get configmap -n kube-system kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' | python3 -c \
        'import sys, yaml; print(yaml.safe_load(sys.stdin)["kubernetesVersion"])'
}
on_node() { local name="$1"; shift; podman exec "$container_prefix$name" "$@"; }

mapfile -t run_hosts < <(hosts "$limit")
mapfile -t control_planes < <(hosts "$limit:&control_plane")
mapfile -t workers < <(hosts "$limit:!control_plane")
(( ${#control_planes[@]} >= 1 && ${#workers[@]} >= 2 )) || fail "$limit needs a control plane and two workers: ${run_hosts[*]}"
first_cp="${control_planes[0]}" first_worker="${workers[0]}" faulty="${workers[-1]}"
[[ "$(cluster_version)" == "v$from" || "$(cluster_version)" == "$from" ]] || fail "the cluster runs $(cluster_version), not $from"

# The nodes Ready (a CNI configuration, as a CNI's DaemonSet writes it), and the serving workload on two workers.
for host in "${run_hosts[@]}"; do
    on_node "$host" sh -c 'mkdir -p /etc/cni/net.d && cat >/etc/cni/net.d/10-lab.conflist' <<'JSON'
{"cniVersion": "1.0.0", "name": "lab", "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
 "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.32.0.0/24"}]]}}]}
JSON
done
"${kubectl[@]}" apply -f tests/e2e/upgrade_kubernetes/1-namespace.yaml -f tests/e2e/upgrade_kubernetes/2-deployment.yaml \
    -f tests/e2e/upgrade_kubernetes/3-replicaset.yaml -f tests/e2e/upgrade_kubernetes/4-pdb.yaml >"$out/setup.log"
python3 tests/e2e/upgrade_kubernetes/serving.py start "${kubectl[@]}" -- upgrade-e2e web-7d9c5 >>"$out/setup.log"
deadline=$(( $(date +%s) + 60 ))
until [[ "$("${kubectl[@]}" get pdb -n upgrade-e2e web -o jsonpath='{.status.currentHealthy}')" == 2 ]] \
      && [[ "$(node_field "$first_worker" "[c['status'] for c in n['status']['conditions'] if c['type'] == 'Ready'][0]")" == True ]]; do
    (( $(date +%s) < deadline )) || fail "the workload's two pods or the nodes did not become Ready"
    sleep 1
done
# A node agent on every node, and a machine that is down (its Node left in the cluster, no kubelet): the last check of
# each run wants the agent ready on the upgraded nodes and must not wait for the down one.
"${kubectl[@]}" apply -f tests/e2e/upgrade_kubernetes/5-daemonset.yaml >>"$out/setup.log"
sed "s/kubeletVersion: v1.35.4/kubeletVersion: v$from/" tests/e2e/upgrade_kubernetes/6-node-down.yaml | "${kubectl[@]}" apply -f - >>"$out/setup.log"
trap '"${kubectl[@]}" delete node upgrade-e2e-down --ignore-not-found >/dev/null 2>&1 || true' EXIT
python3 tests/e2e/upgrade_kubernetes/serving.py watch "$out/serving.json" "${kubectl[@]}" -- upgrade-e2e web-7d9c5 2>>"$out/setup.log" &
watcher=$!
trap 'kill "$watcher" 2>/dev/null || true; "${kubectl[@]}" delete node upgrade-e2e-down --ignore-not-found >/dev/null 2>&1 || true' EXIT

# 1. Two minors ahead: one sentence, nothing changed.
run_step "upgrade_kubernetes.yml to $too_far (two minors ahead: refused)" too_far fail "${upgrade[@]}" -e "kube_version=$too_far"
said too_far "kube_version $too_far skips a minor: the cluster runs $from and kubeadm upgrades one minor at a time" \
    || fail "the refusal of $too_far is not the one sentence expected (see $out/too_far.log)"
! grep -qE 'changed: \[' "$out/too_far.log" || fail "the refused run changed something"

# 2. The plan only.
run_step "upgrade_kubernetes.yml --check to $to (the plan)" check pass "${upgrade[@]}" -e "kube_version=$to" --check
said check "1. $first_cp (first control plane): kubelet $from -> $to: etcd snapshot, drain, kubeadm package, kubeadm upgrade apply" \
    || fail "the plan does not start with the first control plane (see $out/check.log)"
said check "(worker): kubelet $from -> $to: drain, kubeadm package, kubeadm upgrade node" || fail "the plan lacks the workers"
[[ "$(cluster_version)" == "v$from" && "$(kubelet_version "$first_worker")" == "v$from" && "$(cordoned "$first_worker")" == False ]] \
    || fail "check mode changed the cluster"

# site.yml with the new version: refused on every member, which only the upgrade's procedure moves.
run_step "site.yml -e kube_version=$to before the upgrade (refused: the upgrade's work)" site_ahead fail playbooks/site.yml --limit "$limit" \
    -e "kube_version=$to"
said site_ahead "$first_worker is a node of its cluster at Kubernetes $from, older than kube_version $to: a cluster moves to a new version through kubeadm's upgrade procedure" \
    || fail "site.yml with kube_version $to was not refused as the upgrade's work (see $out/site_ahead.log)"
! grep -qE 'changed: \[' "$out/site_ahead.log" || fail "the refused site.yml changed something"

# The workers in the order the plan takes them (the play's host order, which need not be --list-hosts' order): the fault
# goes on the last, so that the first is upgraded before the run stops.
mapfile -t planned < <(tr -s '[:space:]' ' ' <"$out/check.log" | grep -oE '[0-9]+\. [^ ]+ \(worker\)' | awk '!seen[$2]++ {print $2}')
(( ${#planned[@]} == ${#workers[@]} )) || fail "the plan does not list the workers ${workers[*]} (see $out/check.log)"
first_worker="${planned[0]}" faulty="${planned[-1]}"

# 3. The rolling upgrade, the last worker's kubeadm upgrade node failing midway.
on_node "$faulty" sh -c 'mkdir -p /etc/kube-double/faults && : >/etc/kube-double/faults/kubeadm-upgrade-node'
run_step "upgrade_kubernetes.yml to $to, $faulty's kubeadm upgrade node failing" fault fail "${upgrade[@]}" -e "kube_version=$to"
said fault "$faulty: the upgrade of Kubernetes to $to failed at \"Upgrade the node's configuration (kubeadm upgrade node)\"" \
    || fail "the failed run does not name $faulty and its failed step (see $out/fault.log)"
[[ "$(cordoned "$faulty")" == True && "$(label "$faulty" onprem.gpu/maintenance)" == failed ]] || fail "$faulty is not cordoned and marked failed"
node_field "$faulty" "n['metadata']['annotations']['onprem.gpu/maintenance-reason']" | grep -q "error execution phase kubelet-config" \
    || fail "$faulty's reason annotation does not carry kubeadm's error"
[[ "$(cluster_version)" == "v$to" && "$(kubelet_version "$first_cp")" == "v$to" && "$(kubelet_version "$first_worker")" == "v$to" ]] \
    || fail "the control plane and $first_worker are not at $to after the first run"
[[ "$(kubelet_version "$faulty")" == "v$from" ]] || fail "$faulty's kubelet moved although its upgrade failed"
on_node "$first_cp" sh -c "ls /var/backups/onprem-gpu/etcd/etcd-$from-before-$to-*.db" >/dev/null || fail "no etcd snapshot on $first_cp"

# 4. The cause cleared: the re-run continues where the first stopped.
on_node "$faulty" rm /etc/kube-double/faults/kubeadm-upgrade-node
run_step "upgrade_kubernetes.yml to $to again (continues at $faulty)" resume pass "${upgrade[@]}" -e "kube_version=$to"
grep -A3 'TASK \[onprem.gpu.kube_upgrade : Upgrade the control plane (kubeadm upgrade apply)\]' "$out/resume.log" | grep -q 'changed:' \
    && fail "the re-run applied the control plane again"
tr -s '[:space:]' ' ' <"$out/resume.log" | grep -qE 'not counted against the DaemonSets: ([a-z0-9.-]+, )*upgrade-e2e-down[,.]' \
    || fail "the last check does not name the node that is down (see $out/resume.log)"
[[ "$(grep -c 'TASK \[onprem.gpu.maintenance : Drain the node\]' "$out/resume.log")" == 1 ]] || fail "the re-run drained other nodes than $faulty"
for host in "${run_hosts[@]}"; do
    [[ "$(kubelet_version "$host")" == "v$to" && "$(cordoned "$host")" == False && -z "$(label "$host" onprem.gpu/maintenance)" ]] \
        || fail "$host is not back in service at $to"
    [[ "$(on_node "$host" grep -c "^Pin: version $to-\*" /etc/apt/preferences.d/onprem-gpu-kube_node.pref)" == 3 ]] \
        || fail "$host's kubeadm, kubelet and kubectl are not pinned at $to as kube_node pins them"
done

# 5. Nothing left to do.
run_step "upgrade_kubernetes.yml to $to a third time (no change)" again pass "${upgrade[@]}" -e "kube_version=$to"
! grep -qE '^[^ ]+ +: ok=[0-9]+ +changed=[1-9]' "$out/again.log" || fail "the third run changed something (see $out/again.log)"
! grep -q 'TASK \[onprem.gpu.maintenance : Drain the node\]' "$out/again.log" || fail "the third run drained a node"

# site.yml with the inventory's version, now behind the cluster: refused, naming the version to set.
run_step "site.yml with kube_version $from after the upgrade (refused: no downgrade)" site_behind fail playbooks/site.yml --limit "$limit"
if ! said site_behind "$first_worker has kubelet $to-" || ! said site_behind "newer than kube_version $from, and kubeadm does not downgrade a node"; then
    fail "site.yml with the old kube_version was not refused as a downgrade (see $out/site_behind.log)"
fi
! grep -qE 'changed: \[' "$out/site_behind.log" || fail "the refused site.yml changed something"

# The workload through it all, and each node's time out of service.
sleep 2
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
python3 - "$out/serving.json" <<'PY' | tee -a "$timings"
import json, sys
record = json.load(open(sys.argv[1]))
assert record["min_ready"] is not None and record["min_ready"] >= 1, f"the PodDisruptionBudget was violated: {record}"
print(f"kubernetes upgrade e2e, workload: {record['samples']} samples, fewest Ready pods {record['min_ready']} (minAvailable 1)")
for node, seconds in sorted(record["cordon_seconds"].items()):
    print(f"kubernetes upgrade e2e, {node} cordoned to uncordoned: {seconds} s")
PY
