#!/usr/bin/env bash
# Certificates and node replacement on one datacenter's cluster of the lab (docs/certificates.md, docs/node-replacement.md):
#   1. the kube double's clock 340 days ahead on the control planes (the certificates' age taken into account): certificates.yml
#      --check reports each certificate with 24 days left and would renew; certificates.yml renews while the API is polled every half second (how long it
#      did not answer is printed); every certificate has a year again, the API server serves its renewed certificate, the
#      controller's admin kubeconfig (0600) works; a second run renews nothing;
#   2. remove_node.yml refuses a run without --limit, a node without node_removal_reset, and the last control plane;
#   3. a GPU worker that an operator moved off its inventory MIG layout (mig_reconfigure.yml -e mig_layout=...) and
#      labelled by hand is removed (drained, kubeadm reset, Node deleted), comes back with new GPUs (a new board seed and
#      a reboot: an RMA), and site.yml --limit joins it again: its pool labels, taints and MIG layout are the inventory's,
#      the hand-made label is gone;
#   4. with two control planes in the datacenter: the second removed (kubeadm reset takes its etcd member out; then the
#      first is the last, refused) and joined again with site.yml --limit (its etcd member back); then the second as a dead
#      server (its container stopped) removed with node_removal_reachable=false: its etcd member removed through the first
#      with etcdctl; started again, kubeadm reset -f on it, and site.yml --limit joins it again (its member back).
# Usage: continuity_e2e.sh [INVENTORY [DATACENTER [WORKER]]]; defaults: inventories/lab, dc1, dc1-gpu2. A late step of the
# lab's e2e (after mig_reconfigure_e2e.sh, which leaves dc1-gpu2 in a layout of its choice); on a cluster of its own:
#   truncate --size 4G .build/continuity/crt-gpu1-nvme0n1.img
#   CONTINUITY_E2E_DISK_GPU1=$(losetup --find --show .build/continuity/crt-gpu1-nvme0n1.img) \
#   ansible-playbook -i localhost, lab/molecule/create.yml -e @tests/e2e/continuity/platforms.yml (+ prepare.yml, site.yml)
#   bash tests/e2e/continuity_e2e.sh tests/e2e/continuity/inventory.yml crt crt-gpu1
#   (afterwards: lab/molecule/destroy.yml with the same platforms file, then losetup --detach the device)
# CONTINUITY_E2E_STEPS (default "certificates removal") runs part of it: "certificates" is step 1, "removal" steps 2-4. The
# lab's e2e runs the certificates on dc2 beside the removal on dc1 (two clusters, nothing shared); each part and
# datacenter logs to a folder of its own, .build/e2e/continuity/<datacenter>-<steps>.
# Needs the real kubectl in .build/bin (make k8s-clients) and openssl on this machine. The lab's etcd runs on the first control
# plane (lab/doubles/kube/README.md, "etcd"): its member list is read there.
set -euo pipefail

inventory="${1:-inventories/lab}" dc="${2:-dc1}" worker="${3:-dc1-gpu2}"
read -r -a steps <<<"${CONTINUITY_E2E_STEPS:-certificates removal}"
for step in "${steps[@]}"; do
    [[ "$step" == certificates || "$step" == removal ]] || { echo "continuity e2e: unknown step $step (certificates, removal)" >&2; exit 2; }
done
wants() { [[ " ${steps[*]} " == *" $1 "* ]]; }
e2e_name="continuity e2e ($dc, ${steps[*]})"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/continuity/$dc-$(IFS=-; echo "${steps[*]}")"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
playbook=("$repo/.venv/bin/ansible-playbook" -i "$inventory")
fail() { echo "$e2e_name: $*" >&2; exit 1; }
said() { tr -s '[:space:]' ' ' <"$out/$1.log" | grep -qF -- "$2"; }
# The residual times (kubeadm's, in days) of the certificates in a run's report, each once.
residual_times() { grep -oE ' [0-9]+d +[0-9]+ days, until' "$out/$1.log" | awk '{print $1}' | sort -u | tr '\n' ' '; }

# What the inventory says: the datacenter's control planes (inventory order), their containers and addresses, the admin
# kubeconfig's path, and the worker's labels, taints, MIG layout and another layout of its node group to move it to.
"$repo/.venv/bin/ansible-inventory" -i "$inventory" --list >"$out/inventory.json"
facts() {
    python3 - "$out/inventory.json" "$dc" "$worker" "$repo" "$inventory" "$1" <<'EOF'
import json, os, sys
data, dc, worker, repo, inventory, what = json.load(open(sys.argv[1])), *sys.argv[2:]
hostvars = data["_meta"]["hostvars"]
def hosts(group):
    found = list(data.get(group, {}).get("hosts", []))
    for child in data.get(group, {}).get("children", []):
        found += [host for host in hosts(child) if host not in found]
    return found
control_planes = [host for host in hosts("control_plane") if host in hosts(dc)]
w = hostvars[worker]
if what == "control_planes":
    print(" ".join(control_planes))
elif what == "containers":
    print(" ".join(hostvars[host].get("ansible_host", host) for host in control_planes))
elif what == "worker_container":
    print(w.get("ansible_host", worker))
elif what == "kubeconfig":
    first = hostvars[control_planes[0]]
    base = first.get("kube_control_plane_kubeconfig_dir", os.path.join(os.path.dirname(os.path.abspath(inventory)) if inventory.endswith((".yml", ".yaml")) else inventory, "artifacts"))
    base = base.replace("{{ playbook_dir }}", os.path.join(repo, "playbooks")).replace("{{ inventory_dir }}", os.path.abspath(inventory))
    print(os.path.normpath(os.path.join(repo, base, first.get("kube_cluster_name", first["datacenter"]), "admin.conf")))
elif what == "expected":
    print(json.dumps({"labels": w.get("kube_node_labels", {}), "taints": w.get("kube_node_taints", []),
                      "layout": w["mig_layouts"][w["mig_layout"]], "gpus": w["node_gpu_count"]}))
elif what == "other_layout":
    print(next(name for name in w["mig_layouts"] if name != w["mig_layout"]))
EOF
}
read -r -a control_planes <<<"$(facts control_planes)"
read -r -a cp_containers <<<"$(facts containers)"
worker_container="$(facts worker_container)"
kubeconfig="$(facts kubeconfig)"
kubectl=("$repo/.build/bin/kubectl" --kubeconfig "$kubeconfig")
# The names of etcd's members, read with etcdctl on the first control plane as the etcd_backup role reads it (sorted).
etcd_members() {
    podman exec "${cp_containers[0]}" etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
        --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt --key=/etc/kubernetes/pki/etcd/healthcheck-client.key member list -w json \
        | python3 -c 'import json, sys; print(" ".join(sorted(member["name"] for member in json.load(sys.stdin)["members"])))'
}
is_member() { [[ " $(etcd_members) " == *" $1 "* ]]; }
[[ -f "$kubeconfig" ]] || fail "no admin kubeconfig at $kubeconfig: run site.yml on $inventory first"
"${kubectl[@]}" get node "$worker" >/dev/null || fail "$worker is not a node of $dc's cluster"

if wants certificates; then
    # 1. Certificates, 11 months into their year: each control plane's double clock moved so that its API server certificate has
    # 24 days and some hours left (340 days ahead on a cluster brought up today; less on one whose certificates are older).
    for container in "${cp_containers[@]}"; do
        ends=$(date -d "$(podman exec "$container" openssl x509 -noout -enddate -in /etc/kubernetes/pki/apiserver.crt | cut -d= -f2)" +%s)
        offset=$(( (ends - $(date +%s)) / 3600 - 599 ))
        podman exec "$container" bash -c "mkdir -p /etc/kube-double && echo ${offset}h >/etc/kube-double/clock-offset"
        echo "$container: the double's clock $(( offset / 24 )) days ahead" >>"$out/summary.txt"
    done
    run_step "certificates report ($dc, 24 days left)" certs-check pass playbooks/certificates.yml --check --limit "$dc,localhost"
    for host in "${control_planes[@]}"; do
        said certs-check "$host ($dc): would renew (check mode)" || fail "the report does not say that $host would renew"
    done
    days=$(residual_times certs-check)
    [[ "$days" == "24d " ]] || fail "the report does not show every certificate with 24 days left: $days"

    # The API, polled from the controller at the cluster's endpoint while the control planes restart: /readyz answers anyone
    # (system:public-info-viewer), so a refused client certificate is not taken for an API that is down.
    server=$("${kubectl[@]}" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
    poll="$out/api-poll.txt"
    : >"$poll"
    (while [[ ! -e "$out/api-poll.stop" ]]; do
         if curl -sk --max-time 3 "$server/readyz" | grep -qx ok; then echo "$(date +%s.%N) up"; else echo "$(date +%s.%N) down"; fi
         sleep 0.5
     done >>"$poll") &
    poller=$!
    run_step "certificates renewal ($dc)" certs-renew pass playbooks/certificates.yml --limit "$dc,localhost"
    touch "$out/api-poll.stop"
    wait "$poller"
    rm -f "$out/api-poll.stop"
    downtime=$(awk '$2 == "down" && !start {start = $1} $2 == "up" && start {gap = $1 - start; if (gap > worst) worst = gap; start = 0}
                    END {if (start) worst = -1; printf "%.1f", worst}' "$poll")
    echo "API unreachable from the controller during the renewal: ${downtime} s at most ($(grep -c ' down' "$poll") of $(wc -l <"$poll") polls)" \
        | tee -a "$out/summary.txt"
    [[ "$downtime" != "-1.0" ]] || fail "the API did not answer again after the renewal"
    for host in "${control_planes[@]}"; do
        said certs-renew "$host ($dc): renewed" || fail "the report does not say that $host was renewed"
    done
    days=$(residual_times certs-renew)
    [[ "$days" == "364d " ]] || fail "after the renewal, not every certificate has a year: $days"
    # The API server serves the renewed certificate (its static pod restarted), and the controller's kubeconfig works.
    address=$(podman exec "${cp_containers[0]}" grep -oE -- '--advertise-address=[0-9.]+' /etc/kubernetes/manifests/kube-apiserver.yaml | cut -d= -f2)
    served=$(openssl s_client -connect "$address:6443" </dev/null 2>/dev/null | openssl x509 -noout -enddate)
    on_disk=$(podman exec "${cp_containers[0]}" openssl x509 -noout -enddate -in /etc/kubernetes/pki/apiserver.crt)
    [[ "$served" == "$on_disk" ]] || fail "the API server serves a certificate ending $served, not the renewed one ($on_disk)"
    [[ "$(stat -c %a "$kubeconfig")" == 600 ]] || fail "the controller's admin kubeconfig is not 0600"
    "${kubectl[@]}" get nodes >/dev/null || fail "the controller's admin kubeconfig does not work after the renewal"
    run_step "certificates again ($dc, nothing due)" certs-again pass playbooks/certificates.yml --limit "$dc,localhost"
    said certs-again "nothing due" || fail "the second run did not find every control plane with nothing due"
    for host in "${control_planes[@]}"; do
        grep -qE "^$host +: .* changed=0 " "$out/certs-again.log" || fail "the second certificates run changed something on $host"
    done
    for container in "${cp_containers[@]}"; do
        podman exec "$container" rm -f /etc/kube-double/clock-offset
    done
fi

if wants removal; then
    # 2. Refusals, before any change.
    run_step "remove_node refused without --limit" rm-nolimit fail playbooks/remove_node.yml -e node_removal_reset=true
    said rm-nolimit "without --limit it would remove every node of the inventory: nothing was changed." || fail "no sentence for a run without --limit"
    run_step "remove_node refused without consent" rm-noconsent fail playbooks/remove_node.yml --limit "$worker"
    said rm-noconsent "run again with -e node_removal_reset=true to confirm" || fail "no sentence for a removal without consent"
    if (( ${#control_planes[@]} == 1 )); then
        run_step "remove_node refused on the last control plane" rm-lastcp fail playbooks/remove_node.yml --limit "${control_planes[0]}" -e node_removal_reset=true
        said rm-lastcp "${control_planes[0]} is the last control plane of cluster" || fail "the last control plane was not refused in a sentence"
    fi

    # 3. The worker replaced under the same name: first moved off its inventory layout and labelled by hand, as an operator might.
    # mig_reconfigure.yml puts the node back once it advertises its new MIG devices: on a cluster without the GPU Operator's
    # node components (not the lab after mig_reconfigure_e2e.sh), those of the MIG e2e, as it sets them up.
    if ! "${kubectl[@]}" get daemonset -n gpu-operator nvidia-device-plugin-daemonset >/dev/null 2>&1; then
        "${kubectl[@]}" apply -f tests/e2e/mig/gpu-operator/ >"$out/setup.log"
    fi
    "${kubectl[@]}" label node "$worker" --overwrite nvidia.com/gpu.deploy.device-plugin=true nvidia.com/gpu.deploy.gpu-feature-discovery=true \
        nvidia.com/gpu.deploy.dcgm-exporter=true nvidia.com/gpu.deploy.dcgm=true >>"$out/setup.log"
    other_layout="$(facts other_layout)"
    run_step "$worker to layout $other_layout (the old node's)" rm-mig-other pass playbooks/mig_reconfigure.yml --limit "$worker" -e mig_layout="$other_layout"
    "${kubectl[@]}" label node "$worker" --overwrite e2e.onprem.gpu/old-node=true >/dev/null
    uuids_before=$(podman exec "$worker_container" nvidia-smi -L | grep -oE 'GPU-[0-9a-f-]+' | sort)
    run_step "remove $worker" rm-worker pass playbooks/remove_node.yml --limit "$worker" -e node_removal_reset=true
    ! "${kubectl[@]}" get node "$worker" >/dev/null 2>&1 || fail "$worker is still a Node after its removal"
    [[ "$(podman exec "$worker_container" systemctl is-active kubelet || true)" != active ]] || fail "kubelet still runs on $worker"
    ! podman exec "$worker_container" test -e /etc/kubernetes/kubelet.conf || fail "kubeadm reset left /etc/kubernetes/kubelet.conf on $worker"
    # The RMA: the server boots again (its boot unit restores the layout it had), the lab makes its rails' netdevs again as the
    # NIC driver would at boot (a container's restart loses them), and its GPUs are new (a new board seed: new UUIDs).
    run_step "reboot of $worker" rm-reboot pass -e lab_reboot_hosts="$worker" lab/molecule/reboot.yml
    run_step "lab_node on $worker after its boot" rm-lab-node pass tests/e2e/continuity/prepare.yml --limit "$worker"
    podman exec "$worker_container" sed -i -E 's/"seed": "([^"]*)"/"seed": "\1-rma"/' /etc/onprem-gpu-lab/hardware.json
    run_step "site.yml --limit $worker (replacement)" rm-readd pass playbooks/site.yml --limit "$worker"
    [[ "$(podman exec "$worker_container" nvidia-smi -L | grep -oE 'GPU-[0-9a-f-]+' | sort)" != "$uuids_before" ]] || fail "$worker's GPUs are not new"
    "${kubectl[@]}" get node "$worker" -o json >"$out/worker.json"
    podman exec "$worker_container" nvidia-smi mig -lgi >"$out/worker-mig.txt" || true
    python3 - "$out/worker.json" "$out/worker-mig.txt" "$(facts expected)" <<'EOF' || fail "$worker does not carry what the inventory says (above)"
import collections, json, re, sys
node, mig, expected = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), json.loads(sys.argv[3])
labels, taints = node["metadata"].get("labels", {}), node["spec"].get("taints", [])
problems = [f"label {key}={value} missing" for key, value in expected["labels"].items() if labels.get(key) != str(value)]
if "e2e.onprem.gpu/old-node" in labels:
    problems.append("the old node's hand-made label came back")
def taint_set(items):
    return sorted(json.dumps({k: t[k] for k in ("key", "value", "effect") if k in t}, sort_keys=True) for t in items)
if taint_set(taints) != taint_set(expected["taints"]):
    problems.append(f"taints {taints} are not the inventory's {expected['taints']}")
found = collections.Counter((int(m.group(1)), m.group(2)) for m in re.finditer(r"^\|\s+(\d+)\s+MIG\s+(\S+)", mig, re.M))
wanted = collections.Counter()
for entry in expected["layout"]:
    devices = range(expected["gpus"]) if entry["devices"] == "all" else entry["devices"]
    for gpu in devices:
        for profile, count in (entry.get("mig-devices") or {}).items() if entry.get("mig-enabled") else ():
            wanted[(gpu, profile)] += count
if found != wanted:
    problems.append(f"MIG instances {dict(found)} are not the inventory layout's {dict(wanted)}")
print("\n".join(problems), file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

    # 4. The second control plane of an HA pair removed and joined again; then the first is the last, and is refused.
    if (( ${#control_planes[@]} >= 2 )); then
        second="${control_planes[1]}"
        second_container="${cp_containers[1]}"
        is_member "$second" || fail "$second is not an etcd member before its removal: $(etcd_members)"
        run_step "remove $second (control plane)" rm-cp pass playbooks/remove_node.yml --limit "$second" -e node_removal_reset=true
        ! "${kubectl[@]}" get node "$second" >/dev/null 2>&1 || fail "$second is still a Node after its removal"
        ! is_member "$second" || fail "$second is still an etcd member after its removal: $(etcd_members)"
        if (( ${#control_planes[@]} == 2 )); then
            run_step "remove_node refused on the last control plane" rm-lastcp fail playbooks/remove_node.yml --limit "${control_planes[0]}" -e node_removal_reset=true
            said rm-lastcp "${control_planes[0]} is the last control plane of cluster" || fail "the last control plane was not refused in a sentence"
        fi
        run_step "site.yml --limit $second (control plane joins again)" rm-cp-readd pass playbooks/site.yml --limit "$second"
        "${kubectl[@]}" get node "$second" -o jsonpath='{.metadata.labels}' | grep -q 'node-role.kubernetes.io/control-plane' \
            || fail "$second did not join again as a control plane"
        is_member "$second" || fail "$second did not become an etcd member again when it joined: $(etcd_members)"

        # The second as a dead server: its container stopped, it is removed without running anything on it, and its etcd member
        # (which no kubeadm reset can remove) is removed through the first control plane with etcdctl.
        podman stop -t 5 "$second_container" >/dev/null
        run_step "remove $second (dead control plane)" rm-cp-dead pass playbooks/remove_node.yml --limit "$second" -e node_removal_reachable=false
        said rm-cp-dead "its etcd member too" || fail "the dead control plane's removal does not say that its etcd member went"
        ! "${kubectl[@]}" get node "$second" >/dev/null 2>&1 || fail "$second is still a Node after its removal as a dead server"
        ! is_member "$second" || fail "$second is still an etcd member after its removal as a dead server: $(etcd_members)"
        run_step "remove $second again (dead, nothing left)" rm-cp-dead-again pass playbooks/remove_node.yml --limit "$second" -e node_removal_reachable=false
        grep -qE "^$second +: .* changed=0 " "$out/rm-cp-dead-again.log" || fail "removing the gone control plane again changed something"
        # It comes back with its old disk: kubeadm reset -f first (docs/node-replacement.md), the Node its kubelet may have
        # registered again as it booted deleted, then site.yml --limit joins it again.
        podman start "$second_container" >/dev/null
        # lab_node waits until systemd reports the system as up.
        run_step "lab_node on $second after its boot" rm-cp-lab-node pass tests/e2e/continuity/prepare.yml --limit "$second"
        podman exec "$second_container" kubeadm reset -f >"$out/rm-cp-returning-reset.log" 2>&1 || fail "kubeadm reset -f failed on the returning $second"
        "${kubectl[@]}" delete node "$second" --ignore-not-found >>"$out/rm-cp-returning-reset.log"
        run_step "site.yml --limit $second (dead control plane back)" rm-cp-dead-readd pass playbooks/site.yml --limit "$second"
        "${kubectl[@]}" get node "$second" -o jsonpath='{.metadata.labels}' | grep -q 'node-role.kubernetes.io/control-plane' \
            || fail "$second did not join again as a control plane after it came back"
        is_member "$second" || fail "$second did not become an etcd member again after it came back: $(etcd_members)"
        echo "etcd members after the dead control plane came back: $(etcd_members)" | tee -a "$out/summary.txt"
    fi
fi
echo "$e2e_name: passed ($inventory)"
