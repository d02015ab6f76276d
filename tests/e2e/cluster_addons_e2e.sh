#!/usr/bin/env bash
# playbooks/cluster_addons.yml in direct mode on the simulated rack's two clusters, after site.yml, with the charts
# installed from the controller (cluster_addons_chart_installer: helm, the charts' archives as an offline site keeps them):
#   1. --check: what would be created, in both datacenters; nothing is written;
#   2. the apply: every chart's objects (CRDs until Established, the operators' Deployments until Available) and the
#      platform's objects (teams, queues, flavors, networks, storage class, alerts), each in its own datacenter's cluster;
#   3. the same again: nothing changes;
#   4. team beta leaves dc1's inventory: its objects are pruned, an object of the same kind the collection did not make
#      is left alone, and dc2 is not touched.
# The Prometheus Operator's CRDs are installed first, as a site's monitoring stack brings them (the render's
# PrometheusRule and the Kueue chart's ServiceMonitor need them). Needs the lab up with site.yml run (lab_e2e.sh), and
# the real helm and kubectl in .build/bin (make k8s-clients).
set -euo pipefail

e2e_name="cluster_addons e2e"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/cluster_addons"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
inventory="$out/inventory"
playbook=("$repo/.venv/bin/ansible-playbook" -i "$inventory")
data="$repo/tests/integration/data/cluster_addons"
apply=(playbooks/cluster_addons.yml -e cluster_addons_apply=true -e cluster_addons_chart_installer=helm
       -e "cluster_addons_helm=$repo/.build/bin/helm" -e "cluster_addons_chart_archives=$data/charts")
fail() { echo "$e2e_name: $*" >&2; exit 1; }
kubectl() { local dc="$1"; shift; "$repo/.build/bin/kubectl" --kubeconfig "$inventory/artifacts/$dc/admin.conf" "$@"; }
# 'Kind namespace/name' of each object labelled as the collection's for datacenter $1, in its cluster, of the kinds listed.
labelled() {
    kubectl "$1" get "$2" -A -l "app.kubernetes.io/managed-by=onprem.gpu,onprem.gpu/datacenter=$1" -o json | python3 -c '
import json, sys
for item in json.load(sys.stdin)["items"]:
    namespace = item["metadata"].get("namespace")
    print(item["kind"], (namespace + "/" if namespace else "") + item["metadata"]["name"])' | sort
}
kinds="namespaces,deployments,daemonsets,clusterroles,customresourcedefinitions,clusterqueues,localqueues,resourceflavors,resourcequotas,storageclasses,network-attachment-definitions,prometheusrules"
# The report task's message of a run's log: one JSON list of {name, created, changed, pruned}.
report() { python3 -c '
import json, sys
text = open(sys.argv[1]).read()
text = text[text.index("TASK [onprem.gpu.cluster_addons : Report what was created"):]
print(json.dumps(json.loads(text[text.index("{"):text.index("\nPLAY RECAP")])["msg"]))' "$1"; }
count() { python3 -c 'import json, sys; print({r["name"]: len(r[sys.argv[2]]) for r in json.load(open(sys.argv[1]))})' "$1" "$2"; }

# A copy of the lab inventory (its kubeconfigs included) that step 4 can change.
cp -r "$repo/inventories/lab" "$inventory"
for dc in dc1 dc2; do
    {
        kubectl "$dc" apply --server-side -f "$data/crds/monitoring.coreos.com_prometheusrules.yaml" \
            -f "$data/crds/monitoring.coreos.com_servicemonitors.yaml"
        kubectl "$dc" create namespace monitoring --dry-run=client -o yaml | kubectl "$dc" apply --server-side -f -
        kubectl "$dc" wait --for=condition=Established crd/prometheusrules.monitoring.coreos.com crd/servicemonitors.monitoring.coreos.com \
            --timeout=30s
    } >>"$out/setup.log"
done

# 1. What would be done, and nothing done.
run_step "cluster_addons.yml direct apply --check, dc1 and dc2" check pass "${apply[@]}" --check
report "$out/check.log" >"$out/check.json"
python3 -c 'import json, sys; r = {x["name"]: x for x in json.load(open(sys.argv[1]))}; assert "Namespace alpha" in r["dc1"]["created"] and "Namespace gamma" in r["dc2"]["created"], r' \
    "$out/check.json" || fail "check mode does not report the teams' namespaces as to be created"
! kubectl dc1 get namespace alpha >/dev/null 2>&1 || fail "check mode created namespace alpha"

# 2. The apply, charts included.
run_step "cluster_addons.yml direct apply with helm charts, dc1 and dc2" apply pass "${apply[@]}"
report "$out/apply.log" >"$out/apply.json"
for dc in dc1 dc2; do
    labelled "$dc" "$kinds" >"$out/$dc-objects.txt"
    [[ "$dc" == dc1 ]] && other=dc2 || other=dc1
    kubectl "$dc" get deployment -n kueue-system kueue-controller-manager >/dev/null || fail "$dc has no Kueue controller"
    kubectl "$dc" get deployment -n gpu-operator gpu-operator >/dev/null || fail "$dc has no GPU Operator"
    kubectl "$dc" get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.enabled}/{.spec.mig.strategy}' | grep -qx 'false/mixed' \
        || fail "$dc's ClusterPolicy does not leave the driver to the host with the mixed MIG strategy"
    kubectl "$dc" get crd clusterqueues.kueue.x-k8s.io -o jsonpath='{.metadata.labels.onprem\.gpu/chart}' | grep -qx kueue \
        || fail "$dc's Kueue CRDs are not the chart's"
    [[ "$(kubectl "$dc" get namespaces -l "onprem.gpu/datacenter=$other" -o name)" == "" ]] || fail "$dc holds objects of $other"
done
grep -qx "ClusterQueue alpha" "$out/dc1-objects.txt" || fail "team alpha's ClusterQueue is missing in dc1"
grep -qx "ClusterQueue gamma" "$out/dc2-objects.txt" || fail "team gamma's ClusterQueue is missing in dc2"
echo "cluster_addons e2e, objects created: $(count "$out/apply.json" created)" | tee -a "$timings"

# 3. The same again.
run_step "cluster_addons.yml direct apply again (no change)" again pass "${apply[@]}"
grep -qE "^localhost +: ok=[0-9]+ +changed=0 " "$out/again.log" || fail "the second run changed something (see $out/again.log)"
report "$out/again.log" | python3 -c 'import json, sys; r = json.load(sys.stdin); assert not any(x["created"] or x["changed"] or x["pruned"] for x in r), r' \
    || fail "the second run reports changes: $(report "$out/again.log")"

# 4. Team beta leaves dc1: its objects go; a ClusterQueue the collection did not make stays; dc2 is left as it was.
kubectl dc1 create -f - >>"$out/setup.log" <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: ops}
spec: {cohortName: gpu}
EOF
python3 - "$inventory/group_vars/dc1.yml" <<'EOF'
import sys, yaml
path = sys.argv[1]
settings = yaml.safe_load(open(path))
settings["cluster_addons_teams"] = [team for team in settings["cluster_addons_teams"] if team["name"] != "beta"]
yaml.safe_dump(settings, open(path, "w"), sort_keys=False)
EOF
labelled dc2 "$kinds" >"$out/dc2-before-prune.txt"
run_step "cluster_addons.yml direct apply, team beta removed from dc1" prune pass "${apply[@]}"
report "$out/prune.log" >"$out/prune.json"
python3 -c '
import json, sys
r = {x["name"]: x for x in json.load(open(sys.argv[1]))}
assert {"Namespace beta", "Namespace beta-dev", "ClusterQueue beta", "LocalQueue beta/default"} <= set(r["dc1"]["pruned"]), r["dc1"]
assert r["dc2"] == {"name": "dc2", "created": [], "changed": [], "pruned": []}, r["dc2"]' "$out/prune.json" \
    || fail "the prune did not take exactly team beta's objects: $(cat "$out/prune.json")"
! kubectl dc1 get clusterqueue beta >/dev/null 2>&1 || fail "ClusterQueue beta is still there"
kubectl dc1 get clusterqueue ops -o jsonpath='{.spec.cohortName}' | grep -qx gpu || fail "ClusterQueue ops, not the collection's, was touched"
kubectl dc1 get clusterqueue alpha >/dev/null || fail "team alpha's ClusterQueue was pruned"
[[ "$(labelled dc2 "$kinds")" == "$(cat "$out/dc2-before-prune.txt")" ]] || fail "dc2 changed while dc1's team was removed"
echo "cluster_addons e2e, objects pruned: $(count "$out/prune.json" pruned)" | tee -a "$timings"
echo "$e2e_name: check mode, apply with charts in both datacenters, no-op and prune as expected."
