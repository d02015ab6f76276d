#!/usr/bin/env bash
# The network benchmark on the simulated rack, with two more H100 nodes in dc1
# (tests/e2e/network_benchmark/inventory) so that pairs can localise a bad node:
#   0. new nodes without an RDMA stack are refused by name, then brought up with site.yml --limit;
#   1. the healthy lab passes, and the report, the charts and the JUnit XML are written;
#   2. a node with a degraded rail (a 400G link trained at 100G) fails the play, which names it alone; that run
#      installs again, and must change nothing on any GPU node;
#   3. NCCL's RDMA traffic outside the fabric's lossless priority (NCCL_IB_TC=0 where dc1's PFC protects priority 3
#      only) fails it, where the healthy run, with the class the rdma role wrote to /etc/nccl.conf, passed;
#   4. a node without RDMA fails it, named alone: with NCCL_NET=IB (the default) NCCL refuses to start,
#      and without it the silent fall-back to TCP sockets is caught.
# Faults are the lab's inventory knobs (lab_fabric_*), applied to one node by re-running lab.yml on it.
# Needs the lab image and mirror (`make mirror-up`); starts any missing lab container (not when lab_e2e.sh, which
# started them all, says so with NETWORK_BENCHMARK_E2E_LAB_UP=1); removes the two
# extra nodes at the end (KEEP_EXTRA_NODES=1 keeps them) and leaves the rest of the lab running.
set -euo pipefail

e2e_name="network benchmark e2e"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/network-benchmark"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
playbook=("$repo/.venv/bin/ansible-playbook" -i inventories/lab -i tests/e2e/network_benchmark/inventory)
extra_nodes=(dc1-gpu3 dc1-gpu4)

# The play's final message must name exactly these nodes.
assert_named() {
    local log="$out/$1.log"
    shift
    local message
    message="$(grep -o '"msg": "[0-9]* node(s) failed the network benchmark: .*"' "$log" | head -n 1)"
    if [[ -z "$message" ]]; then
        echo "network benchmark e2e: $log has no failure message naming nodes" >&2
        return 1
    fi
    local named
    named="$(grep -oE '(^|: |\. )dc[0-9]-gpu[0-9]+: ' <<<"${message#*benchmark: }" | grep -oE 'dc[0-9]-gpu[0-9]+' | sort -u | tr '\n' ' ')"
    if [[ "$named" != "$* " ]]; then
        echo "network benchmark e2e: $log names '$named', expected '$* '" >&2
        echo "$message" >&2
        return 1
    fi
    echo "  named: $*"
}

assert_report() {
    local dir="$out/$1" verdict="$2"
    for file in report.md junit.xml charts/stage-single.svg charts/stage-pair.svg; do
        [[ -s "$dir/$file" ]] || { echo "network benchmark e2e: $dir/$file is missing" >&2; return 1; }
    done
    head -n 1 "$dir/report.md" | grep -qx "# Network benchmark: $verdict" || { echo "network benchmark e2e: $dir/report.md is not $verdict" >&2; return 1; }
    "$repo/.venv/bin/python" - "$dir" <<'PY'
import pathlib, sys, xml.etree.ElementTree as ElementTree
directory = pathlib.Path(sys.argv[1])
ElementTree.parse(directory / "junit.xml")
for chart in sorted((directory / "charts").glob("*.svg")):
    ElementTree.parse(chart)
runs = len(list((directory / "logs").glob("*.log")))
print(f"  report: {directory}/report.md ({runs} runs, {len(list((directory / 'charts').glob('*.svg')))} charts)")
PY
}

set_fault() {
    local node="$1" name="$2"
    shift 2
    run_step "lab.yml on $node ($name)" "fault-$name-$node" pass playbooks/lab.yml --limit "$node" "$@"
}

# On success every fault was already undone by its own step; after a failure, lab.yml puts the faulted nodes back.
restore() {
    local status="$1"
    if [[ "$status" != 0 ]]; then
        "${playbook[@]}" playbooks/lab.yml --limit dc1-gpu2,dc1-gpu3 >"$out/restore.log" 2>&1 || true
    fi
    if [[ "${KEEP_EXTRA_NODES:-0}" != 1 ]]; then
        local node image loop
        for node in "${extra_nodes[@]}"; do
            podman rm -f "onprem-gpu-lab-$node" >/dev/null 2>&1 || true
            # Their cache disks: loop devices over .build/lab/disks/<node>/*.img (lab_host), which make lab-down
            # does not know about, since inventories/lab does not list these nodes.
            for image in "$repo/.build/lab/disks/$node"/*.img; do
                [[ -e "$image" ]] || continue
                for loop in $(losetup --associated "$image" | cut -d: -f1); do losetup --detach "$loop" || true; done
            done
            rm -rf "$repo/.build/lab/disks/$node"
        done
    fi
}
trap 'restore $?' EXIT

benchmark() {
    local name="$1" expect="$2"
    shift 2
    run_step "network_benchmark.yml, $name" "$name" "$expect" playbooks/network_benchmark.yml -e "network_benchmark_report_dir=$out/$name" "$@"
}

# lab_e2e.sh started every container already, the extra nodes included.
if [[ "${NETWORK_BENCHMARK_E2E_LAB_UP:-0}" != 1 ]]; then
    run_step "lab.yml (the lab plus dc1-gpu3 and dc1-gpu4)" lab pass playbooks/lab.yml
fi
# The new nodes have no RDMA stack yet: the benchmark refuses them with a sentence naming each.
benchmark before-site fail -e network_benchmark_install=false --limit dc1-gpu3,localhost
grep -q 'dc1-gpu3 declares 8 RoCE rails but its RDMA stack cannot be read' "$out/before-site.log"
# New servers join the rack the way an operator adds them: site.yml limited to them, with no fact cache. They
# join dc1's cluster in the training pool, and the nodes already there keep their identity, labels and taints.
dc1_nodes() {
    podman exec onprem-gpu-lab-dc1-cp1 kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes --output json \
        | "$repo/.venv/bin/python" -c '
import json, sys
for node in sorted(json.load(sys.stdin)["items"], key=lambda node: node["metadata"]["name"]):
    metadata = node["metadata"]
    print(metadata["name"], metadata["uid"], json.dumps(metadata.get("labels", {}), sort_keys=True),
          json.dumps(node.get("spec", {}).get("taints", []), sort_keys=True))'
}
before="$(dc1_nodes)"
# As from a fresh checkout of the inventory: the controller lacks dc1's admin kubeconfig (kube_control_plane, which
# fetches it, is not in the limit), so kube_node fetches it from dc1-cp1 before it reconciles the pools through the API.
kubeconfig="$repo/inventories/lab/artifacts/dc1/admin.conf"
rm -f "$kubeconfig"
run_step "site.yml on the new nodes (--limit dc1-gpu3,dc1-gpu4)" site-new-nodes pass playbooks/site.yml --limit "$(IFS=,; echo "${extra_nodes[*]}")"
after="$(dc1_nodes)"
if [[ "$(stat -c %a "$kubeconfig" 2>/dev/null)" != 600 ]] \
    || ! cmp -s "$kubeconfig" <(podman exec onprem-gpu-lab-dc1-cp1 cat /etc/kubernetes/admin.conf); then
    echo "network benchmark e2e: site.yml --limit did not fetch dc1's admin kubeconfig to $kubeconfig, mode 0600" >&2
    exit 1
fi
if [[ "$(grep -vE '^dc1-gpu[34] ' <<<"$after")" != "$before" ]]; then
    echo "network benchmark e2e: site.yml --limit changed nodes it was not limited to:" >&2
    diff <(echo "$before") <(echo "$after") >&2 || true
    exit 1
fi
for node in "${extra_nodes[@]}"; do
    grep -E "^$node .*\"onprem.gpu/pool\": \"training\".*\"effect\": \"NoSchedule\"" <<<"$after" >/dev/null \
        || { echo "network benchmark e2e: $node is not in dc1's cluster with the training pool's label and taint: $after" >&2; exit 1; }
done
echo "  dc1's cluster: $(cut -d' ' -f1 <<<"$after" | tr '\n' ' ')"

benchmark healthy pass
assert_report healthy PASS
grep -q '"msg": "10 runs (5 of single nodes, 4 of pairs, 1 of whole fabrics)' "$out/healthy.log"
# The next run is the second install: it must find the tools installed and the mesh in place (no GPU node changes),
# and still catch the rail that lab.yml degraded on dc1-gpu3 in between.
set_fault dc1-gpu3 degraded-rail -e '{"lab_fabric_degraded_rails": [5]}'
benchmark degraded-rail fail -e network_benchmark_install=true --diff
if grep -E '^dc[0-9]-gpu[0-9]+ +: ok=[0-9]+ +changed=[1-9]' "$out/degraded-rail.log" >&2; then
    echo "network benchmark e2e: the second run changed a GPU node; what changed (see $out/degraded-rail.log):" >&2
    # Each changed result of a GPU node, under its task, with the diff that --diff printed for it.
    awk '/^TASK \[/ { task = $0; diff = ""; next }
         /^(---|\+\+\+|@@|[-+])/ { diff = diff $0 "\n"; next }
         /^changed: \[dc[0-9]-gpu/ { print task; printf "%s", diff; print; diff = "" }' "$out/degraded-rail.log" >&2
    exit 1
fi
assert_named degraded-rail dc1-gpu3
assert_report degraded-rail FAIL
set_fault dc1-gpu3 restored

# dc1's fabric is lossless on priority 3 only (lab_fabric_lossless_priorities): the healthy run passed with the traffic
# class the rdma role wrote to /etc/nccl.conf; a job that sends NCCL's RDMA traffic in class 0 is halved under load.
benchmark wrong-traffic-class fail -e network_benchmark_install=false -e network_benchmark_nccl_ib_tc=0 --limit dc1-gpu1,dc1-gpu2,localhost
assert_named wrong-traffic-class dc1-gpu1 dc1-gpu2
grep -q 'The pair dc1-gpu1 + dc1-gpu2 failed .*: The peak busbw at 1 GiB and above is .* below the required' "$out/wrong-traffic-class.log"

set_fault dc1-gpu2 no-rdma -e lab_fabric_rdma=false
benchmark no-rdma fail -e network_benchmark_install=false
assert_named no-rdma dc1-gpu2
grep -q 'Failed to initialize any NET plugin' "$out/no-rdma.log"
benchmark no-rdma-socket-fallback fail -e network_benchmark_install=false -e network_benchmark_nccl_net=
assert_named no-rdma-socket-fallback dc1-gpu2
grep -q 'NCCL fell back to TCP sockets instead of RDMA over RoCE' "$out/no-rdma-socket-fallback.log"
set_fault dc1-gpu2 restored

echo "network benchmark e2e: healthy lab passed; a degraded rail, NCCL traffic outside the lossless priority and a node without RDMA each failed the play naming the nodes."
