#!/usr/bin/env bash
# etcd backups and restore on one datacenter's cluster of the lab (docs/etcd-backup.md):
#   1. site.yml left onprem-etcd-backup.timer scheduled on the datacenter's first control plane; two rounds of its service
#      (started here rather than waited for) each leave a snapshot that etcdutl verifies, with its .json status, and the
#      node-exporter textfile metric says when the newest verified one was taken; etcd_backup.yml copies the newest to the
#      controller; the role with a copy to the site's S3 endpoint (the lab's mc stand-in) copies each verified snapshot and
#      its status there, a refused copy fails the round without losing its snapshot and is copied by the next round;
#   2. etcd_restore.yml is refused on the healthy cluster: without etcd_restore_confirm, and with it but without
#      etcd_restore_force; the API keeps serving;
#   3. a ConfigMap made before a snapshot and one made after it; the control plane then loses its etcd data (kubelet stopped,
#      /var/lib/etcd/member deleted, kubelet started: etcd has nothing to serve and the API does not come up);
#      etcd_restore.yml -e etcd_restore_confirm=true brings the API back with the first ConfigMap and without the second,
#      the controller's admin kubeconfig works, and the timer's next round snapshots the restored etcd. With several control
#      planes, the restore is first refused while the others run an etcd member; they are reset (kubeadm reset -f) before it
#      and joined again with site.yml --limit after it.
# Each operation's time goes to .build/timings.txt and the summary. Usage: etcd_e2e.sh [INVENTORY [DATACENTER]]; defaults:
# inventories/lab, dc2. On a cluster of its own (containers onprem-gpu-etc-*, tests/e2e/etcd):
#   ansible-playbook -i localhost, lab/molecule/create.yml -e @tests/e2e/etcd/platforms.yml (+ continuity/prepare.yml, site.yml)
#   bash tests/e2e/etcd_e2e.sh tests/e2e/etcd/inventory.yml etc
# (-e etcd_e2e_mirror_address=ADDR to create.yml points the containers at another mirror than the shared lab's 10.89.50.2;
# the mirror must serve this checkout's stand-in packages: the kube double and etcd-client with etcdutl.)
# Needs the real kubectl in .build/bin (make k8s-clients). Logs: .build/e2e/etcd/<datacenter>.
set -euo pipefail

inventory="${1:-inventories/lab}" dc="${2:-dc2}"
e2e_name="etcd e2e ($dc)"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/etcd/$dc"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
playbook=("$repo/.venv/bin/ansible-playbook" -i "$inventory")
fail() { echo "$e2e_name: $*" >&2; exit 1; }
said() { tr -s '[:space:]' ' ' <"$out/$1.log" | grep -qF -- "$2"; }
# Time a command on the node like run_step times a playbook.
timed() {
    local name="$1" start
    shift
    start=$(date +%s.%N)
    "$@" >"$out/$(echo "$name" | tr -c 'a-z0-9\n' '-').log" 2>&1 || { cat "$out/$(echo "$name" | tr -c 'a-z0-9\n' '-').log" >&2; fail "$name failed"; }
    printf '%s: %.1f s\n' "$name" "$(echo "$(date +%s.%N) - $start" | bc)" | tee -a "$timings" "$out/summary.txt"
}

# The datacenter's first control plane, its container, and the controller's admin kubeconfig, from the inventory.
"$repo/.venv/bin/ansible-inventory" -i "$inventory" --list >"$out/inventory.json"
read -r cp container kubeconfig others other_containers < <(python3 - "$out/inventory.json" "$dc" "$repo" "$inventory" <<'PY'
import json, os, sys
data, dc, repo, inventory = json.load(open(sys.argv[1])), *sys.argv[2:]
hostvars = data["_meta"]["hostvars"]
def hosts(group):
    found = list(data.get(group, {}).get("hosts", []))
    for child in data.get(group, {}).get("children", []):
        found += [host for host in hosts(child) if host not in found]
    return found
control_planes = [host for host in hosts("control_plane") if host in hosts(dc)]
first = control_planes[0]
v = hostvars[first]
base = v.get("kube_control_plane_kubeconfig_dir", os.path.join(os.path.dirname(os.path.abspath(inventory)) if inventory.endswith((".yml", ".yaml")) else inventory, "artifacts"))
base = base.replace("{{ playbook_dir }}", os.path.join(repo, "playbooks")).replace("{{ inventory_dir }}", os.path.abspath(inventory))
print(first, v.get("ansible_host", first), os.path.normpath(os.path.join(repo, base, v.get("kube_cluster_name", v["datacenter"]), "admin.conf")),
      ",".join(control_planes[1:]) or "-", ",".join(hostvars[host].get("ansible_host", host) for host in control_planes[1:]) or "-")
PY
)
kubectl=("$repo/.build/bin/kubectl" --kubeconfig "$kubeconfig" --request-timeout=10s)
on_cp() { podman exec "$container" "$@"; }
on_cp_stdin() { podman exec -i "$container" "$@"; }
[[ -f "$kubeconfig" ]] || fail "no admin kubeconfig at $kubeconfig: run site.yml on $inventory first"
"${kubectl[@]}" get --raw /readyz >/dev/null || fail "$dc's API does not answer: run site.yml on $inventory first"
newest() { on_cp python3 /usr/lib/onprem-etcd-backup/onprem-etcd-backup list /var/backups/etcd | python3 -c 'import json,sys; l=json.load(sys.stdin); print(len(l), l[0]["path"] if l else "", l[0]["status"]["revision"] if l else 0)'; }
metric() { on_cp cat /var/lib/node_exporter/textfile/onprem_etcd_backup.prom | awk -v m="$1" 'index($0, m "{") == 1 {print $2}'; }

# 1. The timer, and two rounds of its service.
on_cp systemctl is-enabled onprem-etcd-backup.timer >/dev/null || fail "onprem-etcd-backup.timer is not enabled on $cp"
on_cp systemctl is-active onprem-etcd-backup.timer >/dev/null || fail "onprem-etcd-backup.timer is not active on $cp"
on_cp systemctl list-timers onprem-etcd-backup.timer --no-pager | tee -a "$out/summary.txt"
on_cp systemctl show onprem-etcd-backup.timer -p NextElapseUSecMonotonic -p TimersMonotonic | tee -a "$out/summary.txt"
sleep 1  # snapshot names carry the second
timed "snapshot round ($dc, timer's service)" on_cp systemctl start onprem-etcd-backup.service
sleep 1
timed "snapshot round again ($dc)" on_cp systemctl start onprem-etcd-backup.service
read -r count path revision < <(newest)
(( count >= 2 )) || fail "$count verified snapshots on $cp after two rounds"
on_cp etcdutl snapshot status "$path" -w table | tee -a "$out/summary.txt"
on_cp test -f "$path.json" || fail "$path has no status file"
[[ "$(metric onprem_etcd_backup_last_run_success)" == 1 ]] || fail "the metric says the last round failed"
stamp=$(metric onprem_etcd_backup_last_success_timestamp_seconds)
(( $(date +%s) - ${stamp%.*} < 60 )) || fail "the newest snapshot's time in the metric ($stamp) is not recent"
echo "verified snapshots on $cp: $count, newest $path (revision $revision, metric time $stamp)" | tee -a "$out/summary.txt"

# The copy-off: the newest verified snapshot and its status on the controller.
run_step "etcd snapshot copied to the controller ($dc)" copy-off pass playbooks/etcd_backup.yml --limit "$dc" \
    -e etcd_backup_fetch_dir="$out/fetched" -e etcd_backup_fetch_now=false
fetched="$out/fetched/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["_meta"]["hostvars"][sys.argv[2]]["datacenter"])' \
    "$out/inventory.json" "$cp")/$(basename "$path")"
[[ -s "$fetched" && -s "$fetched.json" ]] || fail "the newest snapshot is not on the controller at $fetched"
cmp -s "$fetched" <(on_cp cat "$path") || fail "the controller's copy differs from $path"

# The copy to the site's S3 endpoint: the lab's mc stand-in on the control plane, serving a directory as the endpoint. The
# role's handler runs a round at once; the snapshot and its status land under the bucket, the node marks it copied. The
# endpoint then refuses the keys: the round keeps its snapshot but fails, the metric says so and the journal shows no key;
# once the endpoint takes them again, the next round copies what the failed one could not.
s3_root=/srv/lab-s3 s3_dir="/srv/lab-s3/etcd-snapshots/$dc"
s3_config() {
    printf '{"netloc": "s3.lab.invalid:9000", "root": "%s", "credentials_sha256": "%s"}\n' "$s3_root" \
        "$(printf '%s' "$1" | sha256sum | cut -d' ' -f1)" | on_cp_stdin tee /etc/onprem-gpu-lab/s3-stand-in.json >/dev/null
}
sed '1s|^#!/usr/bin/env python$|#!/usr/bin/python3|' "$repo/lab/doubles/mc/mc" | on_cp_stdin tee /usr/local/bin/mc >/dev/null
on_cp chmod 0755 /usr/local/bin/mc
on_cp mkdir -p /etc/onprem-gpu-lab "$s3_root/etcd-snapshots"
s3_config "LABACCESSKEY:lab/secret+key-4f9c2e"
# (The inventories find the mirror key's fingerprint relative to playbooks/; this playbook lives elsewhere.)
run_step "etcd snapshots copied to S3 ($dc, role and first round)" copy-s3 pass tests/e2e/etcd/copy_off.yml --limit "$dc" \
    -e etcd_backup_s3_path="etcd-snapshots/$dc" -e onprem_gpu_mirror_key_fingerprint="$(cat "$repo/.build/lab/mirror/onprem-gpu-lab.fingerprint")"
! grep -qE 'lab/secret|secret%2B|LABACCESSKEY' "$out/copy-s3.log" || fail "the S3 keys are in the playbook's output"
read -r count path revision < <(newest)
for file in "$path" "$path.json"; do
    cmp -s <(on_cp cat "$file") <(on_cp cat "$s3_dir/$(basename "$file")") || fail "$(basename "$file") is not in the S3 bucket ($s3_dir)"
done
on_cp test -f "$path.copied" || fail "$path is not marked as copied"
[[ "$(metric onprem_etcd_backup_last_copy_run_success)" == 1 ]] || fail "the metric says the last round's copies failed"
s3_config "LABACCESSKEY:another-secret"
sleep 1
if on_cp systemctl start onprem-etcd-backup.service 2>/dev/null; then fail "a round whose copy was refused did not fail"; fi
read -r refused_count refused _ < <(newest)
[[ "$refused" != "$path" ]] || fail "the round whose copy was refused made no snapshot"
if on_cp test -f "$refused.copied"; then fail "$refused is marked copied though its copy was refused"; fi
[[ "$(metric onprem_etcd_backup_last_copy_run_success)" == 0 ]] || fail "the metric does not say the copy failed"
on_cp journalctl -u onprem-etcd-backup.service --no-pager -n 20 >"$out/copy-refused-journal.log" 2>&1 || true
grep -q "Access Denied" "$out/copy-refused-journal.log" || fail "the journal does not say why the copy failed"
! grep -qE 'lab/secret|secret%2B|LABACCESSKEY' "$out/copy-refused-journal.log" || fail "the S3 keys are in the journal"
s3_config "LABACCESSKEY:lab/secret+key-4f9c2e"
sleep 1
timed "snapshot round ($dc, S3 back: copies what the failed round could not)" on_cp systemctl start onprem-etcd-backup.service
on_cp test -f "$s3_dir/$(basename "$refused")" -a -f "$refused.copied" || fail "the snapshot the refused round kept was not copied later"
[[ "$(metric onprem_etcd_backup_last_copy_run_success)" == 1 ]] || fail "the metric says the copies still fail"
echo "S3 copies ($s3_dir): $(on_cp ls "$s3_dir" | tr '\n' ' ')(of $refused_count kept)" | tee -a "$out/summary.txt"

# 2. Refusals on the healthy cluster, before any change.
run_step "etcd restore refused ($dc, no opt-in)" refused-no-confirm fail playbooks/etcd_restore.yml --limit "$dc"
said refused-no-confirm "set etcd_restore_confirm=true to run it" || fail "the refusal without the opt-in does not say how to opt in"
run_step "etcd restore refused ($dc, healthy)" refused-healthy fail playbooks/etcd_restore.yml --limit "$dc" -e etcd_restore_confirm=true
said refused-healthy "etcd answers and the API serves on this control plane: refusing to roll the cluster back" \
    || fail "the refusal on a healthy cluster does not say why"
"${kubectl[@]}" get --raw /readyz >/dev/null || fail "the API stopped after a refused restore"

# 3. Objects before and after a snapshot, the data lost, the restore.
suffix=$(date +%s)
"${kubectl[@]}" create configmap "etcd-e2e-before-$suffix" -n default >/dev/null
sleep 1
timed "snapshot round ($dc, before the fault)" on_cp systemctl start onprem-etcd-backup.service
"${kubectl[@]}" create configmap "etcd-e2e-after-$suffix" -n default >/dev/null
read -r _ path revision < <(newest)
echo "the restore's snapshot: $path (revision $revision)" | tee -a "$out/summary.txt"
timed "etcd data lost ($dc: kubelet stopped, /var/lib/etcd/member deleted, kubelet started)" \
    on_cp bash -c 'systemctl stop kubelet && rm -rf /var/lib/etcd/member && systemctl start kubelet'
sleep 3
if "${kubectl[@]}" --request-timeout=3s get --raw /readyz >/dev/null 2>&1; then fail "the API still answers without etcd's data"; fi
if on_cp etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
    --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt --key=/etc/kubernetes/pki/etcd/healthcheck-client.key endpoint health \
    >>"$out/summary.txt" 2>&1; then fail "etcd reports healthy without its data"; fi
if [[ "$others" != - ]]; then
    # Several control planes: the restore makes a one-member etcd, refused while another one still runs a member; kubeadm
    # reset there first, then the restore, then site.yml joins them again (docs/etcd-backup.md, "Several control planes").
    run_step "etcd restore refused ($dc, other members)" refused-members fail playbooks/etcd_restore.yml --limit "$dc" -e etcd_restore_confirm=true
    said refused-members "still run an etcd member of cluster" || fail "the refusal with other members does not say why"
    for other in ${other_containers//,/ }; do
        timed "kubeadm reset ($other)" podman exec "$other" kubeadm reset -f
    done
fi
run_step "etcd restore ($dc, newest snapshot)" restore pass playbooks/etcd_restore.yml --limit "$dc" -e etcd_restore_confirm=true
said restore "$path (revision $revision" || fail "the restore did not take the newest snapshot $path"
"${kubectl[@]}" get configmap "etcd-e2e-before-$suffix" -n default >/dev/null || fail "the ConfigMap made before the snapshot is not back"
if "${kubectl[@]}" get configmap "etcd-e2e-after-$suffix" -n default >/dev/null 2>&1; then
    fail "the ConfigMap made after the snapshot survived the restore"
fi
if [[ "$others" != - ]]; then
    run_step "other control planes joined again ($others, site.yml --limit)" rejoin pass playbooks/site.yml --limit "$others"
fi
"${kubectl[@]}" get nodes | tee -a "$out/summary.txt"
on_cp etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt \
    --key=/etc/kubernetes/pki/etcd/healthcheck-client.key member list -w table | tee -a "$out/summary.txt"
timed "snapshot round ($dc, after the restore)" on_cp systemctl start onprem-etcd-backup.service
[[ "$(metric onprem_etcd_backup_last_run_success)" == 1 ]] || fail "the first round after the restore failed"
"${kubectl[@]}" delete configmap "etcd-e2e-before-$suffix" -n default >/dev/null
# The old data directory the restore kept (docs/etcd-backup.md: deleted by hand once the cluster is back).
kept=$(grep -oE 'old data kept in [^" ]+' "$out/restore.log" | head -1 | awk '{print $NF}')
[[ "$kept" == /var/lib/etcd.before-restore-* ]] || fail "the restore does not say where it kept the old data directory"
on_cp rm -rf "$kept"
echo "$e2e_name: passed" | tee -a "$out/summary.txt"
