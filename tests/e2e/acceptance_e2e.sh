#!/usr/bin/env bash
# playbooks/acceptance.yml on the simulated rack, after site.yml (lab_e2e.sh):
#   1. the healthy lab: every node passes, labelled onprem.gpu/acceptance=passed with the date, untainted; the report
#      (Markdown, HTML, JSON, JUnit XML, the rail chart) and its figures;
#   2. three faults: GPU 2 of dc1-gpu1 downtrained to PCIe Gen3 x8, Xid 79 on GPU 3 of dc1-gpu2, rail 5 of dc1-gpu1
#      trained at 100G (the fabric knob): --check fails naming them and writes no label; the run fails naming exactly
#      dc1-gpu1 and dc1-gpu2, the report names each GPU, Xid and rail with its action, exactly those two are tainted
#      onprem.gpu/unhealthy=<code>:NoSchedule and labelled failed, dc2-gpu1 stays passed;
#   3. the faults cleared (the Xid as the reboot it calls for would: the lab kernel log back to what it was), the run
#      passes and every node is back in service: labelled passed, no acceptance taint.
# The runs after the first skip the installs (tag acceptance_install, network_benchmark_install=false): the first
# installed DCGM, perftest and nccl-tests. At the end the labels and annotations acceptance wrote are removed.
# Needs the lab up with site.yml run (lab_e2e.sh) and the real kubectl in .build/bin (make k8s-clients).
set -euo pipefail

e2e_name="acceptance e2e"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/acceptance"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
playbook=("$repo/.venv/bin/ansible-playbook" -i inventories/lab)
nodes=(dc1-gpu1 dc1-gpu2 dc2-gpu1)
fault_tool=/usr/share/nvidia-smi-double/lab-gpu-fault
kernel_log=/var/log/onprem-gpu-lab/kernel.log
fail() { echo "acceptance e2e: $*" >&2; exit 1; }
kubectl_of() { echo "$repo/.build/bin/kubectl" --kubeconfig "$repo/inventories/lab/artifacts/${1%%-*}/admin.conf"; }
# "label taint owner" of a Node: its acceptance label, its onprem.gpu/unhealthy NoSchedule taint value, the taint's owner.
node_state() {
    $(kubectl_of "$1") get node "$1" -o json | python3 -c '
import json, sys
node = json.load(sys.stdin)
meta = node["metadata"]
taint = [t.get("value", "") for t in node["spec"].get("taints", []) if t["key"] == "onprem.gpu/unhealthy" and t["effect"] == "NoSchedule"]
print(meta.get("labels", {}).get("onprem.gpu/acceptance", "-"), (taint or ["-"])[0],
      meta.get("annotations", {}).get("onprem.gpu/unhealthy-owner", "-"))'
}
expect_state() {
    local got
    got="$(node_state "$1")"
    [[ "$got" == "$2" ]] || fail "$1 is '$got' (label taint owner), expected '$2'"
}
# The failure message must name exactly these nodes.
assert_named() {
    local log="$out/$1.log" message named
    shift
    message="$(grep -o '"msg": "[0-9]* node(s) failed acceptance: .*"' "$log" | head -n 1)"
    [[ -n "$message" ]] || fail "$log has no failure message naming nodes"
    named="$(grep -oE '(^|: |\. |\] )dc[0-9]-gpu[0-9]+ \(' <<<"${message#*acceptance: }" | grep -oE 'dc[0-9]-gpu[0-9]+' | sort -u | tr '\n' ' ')"
    [[ "$named" == "$* " ]] || fail "$log names '$named', expected '$* ': $message"
    echo "  named: $*"
}
# Check the report's files and print its figures; $2: the nodes that must have failed (space-separated).
check_report() {
    "$repo/.venv/bin/python" - "$out/$1" "$2" <<'PY'
import json, pathlib, sys, xml.etree.ElementTree as ElementTree
directory, failed = pathlib.Path(sys.argv[1]), sorted(sys.argv[2].split())
for name in ("acceptance.md", "acceptance.html", "acceptance.json", "junit.xml", "rails.svg"):
    assert (directory / name).stat().st_size > 0, f"{directory / name} is empty"
ElementTree.parse(directory / "junit.xml")
ElementTree.parse(directory / "rails.svg")
report = json.loads((directory / "acceptance.json").read_text())
nodes = report["nodes"]
got = sorted(node["host"] for node in nodes if node["verdict"] == "failed")
assert got == failed, f"failed nodes {got}, expected {failed}"
# Failing nodes first.
assert [node["verdict"] for node in nodes] == sorted((node["verdict"] for node in nodes), key=lambda verdict: verdict != "failed")
for node in nodes:
    nccl, nvme = node["nccl"] or {}, node["nvme"] or {}
    rails = [rail["average_gbps"] for rail in node["rails"]]
    print(f"  {node['host']}: {node['verdict']}; NCCL busbw {nccl.get('judged_busbw')} GB/s (threshold {nccl.get('threshold')}); "
          f"rails {rails} Gb/s{' against ' + node['peer'] if node['peer'] else ' (no peer)'}; NVMe read {nvme.get('mbps')} MB/s")
    for finding in node["findings"]:
        where = f"GPU {finding['gpu_index']} ({finding['pci_bus_id']})" if finding["gpu_index"] is not None else (finding["device"] or "node")
        print(f"    {finding['severity']} {finding['code']} {where} xid={finding['xid']} action={finding['action']}")
PY
}
finding_present() {
    "$repo/.venv/bin/python" - "$out/$1/acceptance.json" "$2" "$3" "$4" "$5" <<'PY'
import json, sys
path, host, code, where, action = sys.argv[1:]
node = next(node for node in json.load(open(path))["nodes"] if node["host"] == host)
match = [f for f in node["findings"] if f["code"] == code and f["severity"] == "fail" and f["action"] == action
         and where in (str(f["gpu_index"]), f["device"], str(f["xid"]))]
sys.exit(0 if match else f"{host} has no failing {code} finding for {where} with action {action}: {node['findings']}")
PY
}
acceptance() {
    local name="$1" expect="$2"
    shift 2
    run_step "acceptance.yml, $name" "$name" "$expect" playbooks/acceptance.yml -e "acceptance_report_dir=$out/$name" "$@"
}
quick=(--skip-tags acceptance_install -e network_benchmark_install=false)

kernel_log_size="$(podman exec onprem-gpu-lab-dc1-gpu2 stat -c %s "$kernel_log" 2>/dev/null || echo absent)"
clear_faults() {
    podman exec onprem-gpu-lab-dc1-gpu1 python3 "$fault_tool" pcie 2 --clear >/dev/null
    if [[ "$kernel_log_size" == absent ]]; then
        podman exec onprem-gpu-lab-dc1-gpu2 rm -f "$kernel_log"
    else
        podman exec onprem-gpu-lab-dc1-gpu2 truncate -s "$kernel_log_size" "$kernel_log"
    fi
}
# Leave the lab as it was: faults cleared, and the labels, annotations and taints acceptance owns removed.
restore() {
    local status="$1" node
    if [[ "$status" != 0 ]]; then
        clear_faults || true
        "${playbook[@]}" tests/e2e/acceptance/fabric_fault.yml --limit dc1-gpu1 >"$out/restore.log" 2>&1 || true
    fi
    for node in "${nodes[@]}"; do
        # Only a taint acceptance owns: another gate's (continuous health's) is its own to remove.
        if [[ "$(node_state "$node" 2>/dev/null)" == *" acceptance" ]]; then
            $(kubectl_of "$node") taint node "$node" onprem.gpu/unhealthy:NoSchedule- >/dev/null 2>&1 || true
            $(kubectl_of "$node") annotate node "$node" onprem.gpu/unhealthy-owner- >/dev/null 2>&1 || true
        fi
        $(kubectl_of "$node") label node "$node" onprem.gpu/acceptance- >/dev/null 2>&1 || true
        $(kubectl_of "$node") annotate node "$node" onprem.gpu/acceptance-date- >/dev/null 2>&1 || true
    done
}
trap 'restore $?' EXIT

# 1. The healthy lab.
acceptance healthy pass
check_report healthy ""
for node in "${nodes[@]}"; do expect_state "$node" "passed - -"; done
grep -q "Every node passed acceptance: " "$out/healthy.log" || fail "healthy.log does not say every node passed"

# 2. Three faults.
podman exec onprem-gpu-lab-dc1-gpu1 python3 "$fault_tool" pcie 2 --width 8 --gen 3 >/dev/null
podman exec onprem-gpu-lab-dc1-gpu2 python3 "$fault_tool" xid 3 79 >/dev/null
run_step "degrade rail 5 of dc1-gpu1" fault-rail pass tests/e2e/acceptance/fabric_fault.yml --limit dc1-gpu1 -e '{"lab_fabric_degraded_rails": [5]}'

acceptance check fail --check "${quick[@]}"
assert_named check dc1-gpu1 dc1-gpu2
for node in "${nodes[@]}"; do expect_state "$node" "passed - -"; done
echo "  --check wrote no label or taint"

acceptance faults fail "${quick[@]}"
assert_named faults dc1-gpu1 dc1-gpu2
check_report faults "dc1-gpu1 dc1-gpu2"
finding_present faults dc1-gpu1 pcie_degraded 2 drain
finding_present faults dc1-gpu1 rdma_bandwidth mlx5_5 drain
finding_present faults dc1-gpu2 xid 79 reboot
grep -q "## dc1-gpu1: failed" "$out/faults/acceptance.md" || fail "the report has no section for dc1-gpu1"
expect_state dc1-gpu1 "failed pcie_degraded acceptance"
expect_state dc1-gpu2 "failed xid acceptance"
expect_state dc2-gpu1 "passed - -"

# 3. The faults cleared: back in service.
clear_faults
run_step "restore rail 5 of dc1-gpu1" restore-rail pass tests/e2e/acceptance/fabric_fault.yml --limit dc1-gpu1
acceptance cleared pass "${quick[@]}"
check_report cleared ""
for node in "${nodes[@]}"; do expect_state "$node" "passed - -"; done
echo "acceptance e2e: the healthy lab passed; a PCIe downtrain, Xid 79 and a degraded rail failed exactly dc1-gpu1 and dc1-gpu2, tainted and labelled failed; cleared, they are back in service."
